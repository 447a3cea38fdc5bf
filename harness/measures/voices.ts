/**
 * Natural-sounding test speech for turn-taking tests and benchmarks: the server's own offline
 * voices (flite's four speakers, deterministic; Piper's joe when its model is fetched, whose
 * timing varies a little run to run) speaking a text, resampled to the rate a caller needs and
 * trimmed to its audible edges. pausedSpeech() makes a person who stops mid-sentence: the whole
 * sentence is spoken (so the words before the pause carry a mid-sentence melody, not a final
 * one) and silence is put in at the word boundary after `prefix`. For speakers beyond those
 * (benchmarks of voices the turn-taking was not tuned to): every Piper voice whose model lies in
 * the weights folder (piperTestVoices) and espeak-ng's variants (espeakTestVoices, formant
 * speech with other pitches and timbres); any of them at another speaking rate through `speed`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EspeakVoice } from '../../src/providers/tts/espeak.js';
import { FliteVoice } from '../../src/providers/tts/flite.js';
import { piperVoice } from '../../src/providers/tts/piper.js';
import type { Voice } from '../../src/providers/tts/base.js';
import { Resampler } from '../../src/audio/resample.js';
import { REPO_MODELS_DIR, weightsDir } from '../../src/models/manifest.js';
import { concatSamples, silence, speechEdges } from './speech.js';

export const FLITE_SPEAKERS = ['slt', 'rms', 'awb', 'kal16'] as const;

/** The offline speakers: flite's four, and Piper's joe when it is fetched. */
export async function testVoices(): Promise<Voice[]> {
  const voices: Voice[] = FLITE_SPEAKERS.map((v) => new FliteVoice(`flite-${v}`, { voice: v }));
  const model = path.join(weightsDir(REPO_MODELS_DIR), 'tts/en_US-joe-medium.onnx');
  if (fs.existsSync(model) && fs.existsSync(`${model}.json`)) voices.unshift(await piperVoice('piper-joe', { model, config: `${model}.json` }, 1));
  return voices;
}

/**
 * espeak-ng voices and variants for test speakers: US male, US female (+f3), British male (+m3),
 * US male (+m7). British English is the voice named 'en' (espeak-ng's gmw/en): the addon selects
 * voices by name, and 'en-gb' is only that voice's language tag.
 */
export const ESPEAK_TEST_VARIANTS = ['en-us', 'en-us+f3', 'en+m3', 'en-us+m7'] as const;

/** espeak-ng speaking each of ESPEAK_TEST_VARIANTS (ids 'espeak-en-us+f3' and so on). */
export function espeakTestVoices(): Voice[] {
  return ESPEAK_TEST_VARIANTS.map((v) => new EspeakVoice(`espeak-${v}`, { voice: v }));
}

/**
 * Every Piper voice fetched into the weights folder (tts/*.onnx with its .onnx.json config), ids
 * 'piper-<speaker>' from Piper's '<lang>-<speaker>-<quality>' file names: none when none is fetched.
 */
export async function piperTestVoices(): Promise<Voice[]> {
  const dir = path.join(weightsDir(REPO_MODELS_DIR), 'tts');
  const models = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.onnx') && fs.existsSync(path.join(dir, `${f}.json`))).sort() : [];
  const voices: Voice[] = [];
  for (const file of models) {
    const model = path.join(dir, file);
    const speaker = file.replace(/\.onnx$/, '').split('-')[1] ?? file;
    voices.push(await piperVoice(`piper-${speaker}`, { model, config: `${model}.json` }, 1));
  }
  return voices;
}

/** `text` spoken by `voice` at `speed` (1: its normal rate), as mono floats at `rateHz`, trimmed to its audible edges. */
export async function voiceSpeech(voice: Voice, text: string, rateHz: number, speed = 1): Promise<Float32Array> {
  return (await timedSpeech(voice, text, rateHz, speed)).audio;
}

/** A phoneme of timedSpeech's audio: [start, end) in its samples. */
export interface SpokenPhoneme {
  phoneme: string;
  start: number;
  end: number;
}

/** voiceSpeech's audio and the voice's own phoneme timings in its samples (silence marks left out; none when the voice times none). */
export async function timedSpeech(voice: Voice, text: string, rateHz: number, speed = 1): Promise<{ audio: Float32Array; phonemes: SpokenPhoneme[] }> {
  const parts: Float32Array[] = [];
  const phonemes: SpokenPhoneme[] = [];
  let at = 0;
  for await (const chunk of voice.speak(text, { speed })) {
    const floats = Float32Array.from(chunk.pcm, (s) => s / 32768);
    const scaled: Float32Array[] = [];
    if (chunk.sampleRateHz === rateHz) scaled.push(floats);
    else {
      const r = new Resampler(chunk.sampleRateHz, rateHz);
      scaled.push(r.push(floats), r.push(new Float32Array(Math.ceil(chunk.sampleRateHz / 100))));
    }
    for (const p of chunk.phonemes) {
      if (/^[_\s]*$/.test(p.phoneme)) continue;
      phonemes.push({ phoneme: p.phoneme, start: at + Math.round((p.startNs * rateHz) / 1e9), end: at + Math.round((p.endNs * rateHz) / 1e9) });
    }
    for (const x of scaled) {
      parts.push(x);
      at += x.length;
    }
  }
  const x = concatSamples(parts);
  const { first, last } = speechEdges(x);
  return { audio: x.slice(first, last + 1), phonemes: phonemes.map((p) => ({ ...p, start: p.start - first, end: p.end - first })) };
}

/** `text` spoken by one of flite's speakers. */
export function fliteSpeech(text: string, speaker: (typeof FLITE_SPEAKERS)[number], rateHz: number): Promise<Float32Array> {
  return voiceSpeech(new FliteVoice(`flite-${speaker}`, { voice: speaker }), text, rateHz);
}

/**
 * `sentence` spoken by `voice` (at `speed`) with `pauseMs` of silence after the words of `prefix`
 * (which must begin the sentence): speechWithPauses with one cut. Returns the audio and where the
 * pause begins (sample index).
 */
export async function pausedSpeech(
  voice: Voice,
  prefix: string,
  sentence: string,
  pauseMs: number,
  rateHz: number,
  speed = 1,
): Promise<{ audio: Float32Array; pauseAt: number }> {
  const { audio, pauses } = await speechWithPauses(voice, sentence, [{ after: prefix, ms: pauseMs }], rateHz, speed);
  return { audio, pauseAt: pauses[0]![0] };
}

/**
 * `sentence` spoken by `voice` (at `speed`) with silences put in after the words of each cut's
 * `after` (each must begin the sentence; in order, each longer than the last). The whole sentence
 * is spoken once, so the words before a pause carry a mid-sentence melody. Each cut is where the
 * last phoneme of its words ends in the whole sentence (their phonemes counted as the voice speaks
 * them alone), moved to the quietest 10 ms within 20 ms of it, so a short last word ("and", "to")
 * is before the pause and not after it (a word may sound a little different in the sentence: the
 * words' end is where their last phonemes match best, within 3 of their count). A voice that times no phonemes is cut at the quietest
 * 20 ms where its words, spoken alone, end. Returns the audio and each pause's [start, end) in its
 * samples.
 */
export async function speechWithPauses(
  voice: Voice,
  sentence: string,
  cuts: Array<{ after: string; ms: number }>,
  rateHz: number,
  speed = 1,
): Promise<{ audio: Float32Array; pauses: Array<[number, number]> }> {
  const { audio: whole, phonemes } = await timedSpeech(voice, sentence, rateHz, speed);
  const at: number[] = [];
  for (const { after } of cuts) {
    if (!sentence.startsWith(after)) throw new Error(`speechWithPauses: '${sentence}' does not begin with '${after}'`);
    const alone = await timedSpeech(voice, after, rateHz, speed);
    const n = alignedEnd(alone.phonemes, phonemes);
    const last = n > 0 && n < phonemes.length ? phonemes[n - 1]! : null;
    const cut = last
      ? quietest(whole, last.end - Math.round(rateHz * 0.02), last.end + Math.round(rateHz * 0.02), Math.round(rateHz * 0.01))
      : quietest(whole, Math.floor(alone.audio.length * 0.6), Math.min(whole.length, Math.round(alone.audio.length * 1.05)), Math.round(rateHz * 0.02));
    if (cut < 0 || cut <= (at.at(-1) ?? 0)) throw new Error(`speechWithPauses: no cut found after '${after}'`);
    at.push(cut);
  }
  const parts: Float32Array[] = [];
  const pauses: Array<[number, number]> = [];
  let from = 0;
  let length = 0;
  cuts.forEach(({ ms }, k) => {
    const cut = at[k]!;
    parts.push(whole.subarray(from, cut));
    length += cut - from;
    const gap = silence(ms, rateHz);
    pauses.push([length, length + gap.length]);
    parts.push(gap);
    length += gap.length;
    from = cut;
  });
  parts.push(whole.subarray(from));
  return { audio: concatSamples(parts), pauses };
}

/** How many of `whole`'s phonemes `prefix` spans: its count, moved by up to 3 to where its last three phonemes match best. */
function alignedEnd(prefix: SpokenPhoneme[], whole: SpokenPhoneme[]): number {
  const n = prefix.length;
  let best = n;
  let bestScore = -1;
  for (let j = Math.max(1, n - 3); j <= Math.min(whole.length - 1, n + 3); j++) {
    let score = 0;
    for (let k = 1; k <= 3 && k <= n && k <= j; k++) if (prefix[n - k]!.phoneme === whole[j - k]!.phoneme) score++;
    if (score > bestScore || (score === bestScore && Math.abs(j - n) < Math.abs(best - n))) {
      best = j;
      bestScore = score;
    }
  }
  return best;
}

/** The middle of the quietest `window` samples starting in [from, to) of `x`, or -1 when none fits. */
function quietest(x: Float32Array, from: number, to: number, window: number): number {
  let cut = -1;
  let least = Infinity;
  for (let i = Math.max(0, from); i < to && i + window <= x.length; i += Math.max(1, Math.round(window / 4))) {
    let energy = 0;
    for (let k = i; k < i + window; k++) energy += (x[k] ?? 0) ** 2;
    if (energy < least) {
      least = energy;
      cut = i + Math.round(window / 2);
    }
  }
  return cut;
}
