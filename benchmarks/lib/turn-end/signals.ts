/**
 * The turn-end benchmark's measurements (turn-end.bench.ts): for every utterance of the corpus,
 * every silence the server's own voice activity detection finds in it, and what each source of
 * evidence says about that silence and how long it takes to say it, measured once here so any
 * judge can be replayed on them (replay.ts) and the judge's weights fitted (fit.ts).
 *
 * Per utterance, the real SpeechSegmenter with the real Silero VAD hears the audio (PCM16 at
 * 24 kHz, as a client sends it) with a recording judge that never ends the turn: every silence of
 * the turn is a `SilenceSignals` with its start (the first silent frame), its end (the frame that
 * heard speech again, or the end of the audio) in stream ms, and its label (the pause it lies in,
 * or 'end' after the last word). For each silence of at least MIN_SILENCE_MS:
 *  - the audio model (Smart Turn v3.2) at each of AUDIO_PROBES_MS of silence heard, with its time;
 *  - each recogniser's transcript of the turn up to the silence's start plus PAUSE_AUDIO_MS (what
 *    the pause's speculative transcription hears: the rest is silence), with its time;
 *  - the local language model's probability that the message ends after the transcript's last
 *    word (the session's default instructions before it, as a first turn), with its time.
 * Times are wall-clock ms of one call at a time on this machine (nothing else of the benchmark
 * running), which is what a judge waits for in a quiet server; the realtime bench measures the
 * same path under load.
 *
 * The result is a plain JSON file (`target/turn-end/signals-<plan hash>.json`, reused while the
 * corpus's plan, the recognisers present and this code's version are the same: the corpus is then
 * not even spoken), so a replay or a fit takes seconds.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SileroVad } from '../../../src/providers/vad/silero.js';
import { SmartTurn } from '../../../src/providers/turn/smart-turn.js';
import { WhisperCppTranscriber } from '../../../src/providers/asr/whisper-cpp.js';
import { LlamaCppModel } from '../../../src/providers/llm/llama-cpp.js';
import { DEFAULT_LLM_MODEL_NAME } from '../../../src/providers/llm/index.js';
import { modelPath, REPO_MODELS_DIR, weightsDir } from '../../../src/models/manifest.js';
import { SpeechSegmenter, type TurnEndJudge } from '../../../src/realtime/speech-segmenter.js';
import { spokenWords } from '../../../src/realtime/turn-judge.js';
import { replyRequest } from '../../../src/realtime/reply-request.js';
import { DEFAULT_INSTRUCTIONS } from '../../../src/sessions/session-config.js';
import { Logger } from '../../../src/core/log.js';
import { toPcm16 } from '../../../harness/measures/speech.js';
import { RATE_HZ, speakCorpus, type PlannedUtterance, type Utterance, type UtteranceInfo } from './corpus.js';

/** Bump when what is measured changes: a signals file of another version is measured again. */
const SIGNALS_VERSION = 2;
/** Silences shorter than this are recorded but not measured: no judge decides within them. */
export const MIN_SILENCE_MS = 96;
/** Silence heard by the audio model at each probe. */
export const AUDIO_PROBES_MS = [96, 128, 160, 224, 320] as const;
/** The pause's transcription hears the turn up to the silence's start plus this (the rest is silence). */
const PAUSE_AUDIO_MS = 64;
/** The recognisers measured: the Whisper ggml files of models/weights/asr, where present. */
export const RECOGNISERS = [
  { name: 'base', file: 'asr/ggml-base.bin' },
  { name: 'tiny.en', file: 'asr/ggml-tiny.en.bin' },
] as const;
export type RecogniserName = (typeof RECOGNISERS)[number]['name'];

export interface Transcript {
  text: string;
  ms: number;
  /** The language model's reading of it: null when it gave none (no words). */
  wordsEnd: number | null;
  wordsEndMs: number | null;
}

export interface SilenceSignals {
  /** Stream ms (from the utterance's start) of the silence's first frame and of the frame that ended it (or the audio's end). */
  startMs: number;
  endMs: number;
  /** Stream ms at which the turn began for the segmenter (its prefix padding included). */
  turnStartMs: number;
  /** 'end': the silence that runs to the audio's end (after the last word); 'continue' / 'sentence-end': in a pause of the utterance (corpus.ts); 'gap': any other silence inside the speech. */
  label: 'end' | 'continue' | 'sentence-end' | 'gap';
  /** Measured only for silences of MIN_SILENCE_MS or more. */
  audio: Array<{ heardMs: number; p: number; ms: number }>;
  transcripts: Partial<Record<RecogniserName, Transcript>>;
}

export interface UtteranceSignals extends UtteranceInfo {
  /** Stream ms of the speech's start and end (the corpus's samples). */
  speechStartMs: number;
  speechEndMs: number;
  silences: SilenceSignals[];
}

export interface SignalsFile {
  version: number;
  planHash: string;
  date: string;
  recognisers: RecogniserName[];
  audioModel: string;
  languageModel: string | null;
  utterances: UtteranceSignals[];
}

const ms = (samples: number) => Math.round((samples * 1000) / RATE_HZ);

/** The recognisers whose models are present. */
function presentRecognisers(): Array<(typeof RECOGNISERS)[number]> {
  return RECOGNISERS.filter((r) => fs.existsSync(path.join(weightsDir(REPO_MODELS_DIR), r.file)));
}

/** A hash of the plan, the recognisers present and SIGNALS_VERSION: the signals file's key. */
export function planHash(plan: PlannedUtterance[]): string {
  const h = createHash('sha256');
  h.update(`v${SIGNALS_VERSION}|${presentRecognisers().map((r) => r.name).join(',')}`);
  for (const p of plan) h.update(`${p.n}|${p.text.kind}|${p.text.sentence}|${JSON.stringify(p.text.cuts)}|${p.voice.id}|${p.speed}|${p.noiseDbfs}\n`);
  return h.digest('hex').slice(0, 16);
}

/** The signals of the planned corpus, from its file when one was measured already, else spoken and measured now, and written. */
export async function corpusSignals(plan: PlannedUtterance[], dir: string, log: (line: string) => void): Promise<SignalsFile> {
  const hash = planHash(plan);
  const file = path.join(dir, `signals-${hash}.json`);
  if (fs.existsSync(file)) {
    const read = JSON.parse(fs.readFileSync(file, 'utf8')) as SignalsFile;
    if (read.version === SIGNALS_VERSION && read.planHash === hash) {
      log(`turn-end signals: ${path.relative(process.cwd(), file)} (measured ${read.date})`);
      return read;
    }
  }
  const corpus = await speakCorpus(plan, log);
  const measured = await measure(corpus, hash, log);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(file, JSON.stringify(measured));
  log(`turn-end signals: wrote ${path.relative(process.cwd(), file)}`);
  return measured;
}

/** A silence as the segmenter heard it, with the turn's audio at each probe (16 kHz, the last 8 s). */
interface HeardSilence {
  startMs: number;
  endMs: number;
  turnStartMs: number;
  probes: Map<number, Float32Array>;
}

/** The silences of one utterance as the segmenter hears them (see the header). */
async function silencesOf(u: Utterance, window: { ms: number; rateHz: number }): Promise<HeardSilence[]> {
  const found: HeardSilence[] = [];
  const open = new Map<number, HeardSilence>();
  const judge: TurnEndJudge = {
    onSilence(frame) {
      let s = open.get(frame.run);
      if (!s) {
        s = { startMs: frame.silenceStartMs, endMs: frame.endMs, turnStartMs: frame.turnStartMs, probes: new Map() };
        open.set(frame.run, s);
        found.push(s);
      }
      s.endMs = frame.endMs;
      for (const heard of AUDIO_PROBES_MS) {
        if (!s.probes.has(heard) && frame.silentMs >= heard) s.probes.set(heard, frame.audio(window.ms, window.rateHz));
      }
      return null;
    },
    onSilenceEnd(run) {
      open.delete(run);
    },
  };
  const never = 600_000;
  const seg = new SpeechSegmenter(await SileroVad.create(), { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: never, endOfTurn: { pauseMs: never, confidence: 0.5, fallbackSilenceMs: never } }, judge);
  seg.push(toPcm16(u.audio));
  await seg.idle();
  await seg.close();
  return found;
}

async function measure(corpus: Utterance[], hash: string, log: (line: string) => void): Promise<SignalsFile> {
  const quiet = new Logger('silent');
  const models = REPO_MODELS_DIR;
  const audioModel = await SmartTurn.load(models);
  if (!audioModel) throw new Error('the turn-end benchmark needs Smart Turn (npm run setup:models)');
  const recognisers = presentRecognisers().map((r) => ({
    name: r.name,
    asr: new WhisperCppTranscriber({ modelPath: path.join(weightsDir(models), r.file), threads: 2, concurrency: 1, log: quiet, name: r.name }),
  }));
  if (recognisers.length === 0) throw new Error('the turn-end benchmark needs a Whisper model (npm run setup)');
  const gguf = modelPath(models, DEFAULT_LLM_MODEL_NAME);
  const lm = gguf ? new LlamaCppModel({ modelFile: gguf, threads: 1, contextTokens: 4096, parallel: 1, maxOutputTokens: 256, log: quiet }) : null;
  if (lm) await lm.load();
  const system = replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [], 'inf').messages;
  const out: UtteranceSignals[] = [];
  const started = performance.now();
  try {
    for (const u of corpus) {
      const silences = await silencesOf(u, { ms: audioModel.windowMs, rateHz: audioModel.sampleRateHz });
      const signals: SilenceSignals[] = [];
      for (const s of silences) {
        const sig: SilenceSignals = { startMs: s.startMs, endMs: s.endMs, turnStartMs: s.turnStartMs, label: labelOf(u, s, ms(u.audio.length)), audio: [], transcripts: {} };
        signals.push(sig);
        if (s.endMs - s.startMs < MIN_SILENCE_MS) continue;
        for (const [heardMs, audio] of s.probes) {
          const t0 = performance.now();
          const p = await audioModel.completeProbability(audio);
          sig.audio.push({ heardMs, p, ms: Math.round(performance.now() - t0) });
        }
        const from = Math.round((s.turnStartMs * RATE_HZ) / 1000);
        const to = Math.min(u.audio.length, Math.round(((s.startMs + PAUSE_AUDIO_MS) * RATE_HZ) / 1000));
        const pcm = toPcm16(u.audio.subarray(from, to));
        for (const r of recognisers) {
          const t0 = performance.now();
          const result = await r.asr.transcribe({ pcm, language: 'en', prompt: null });
          const transcript: Transcript = { text: result.text.trim(), ms: Math.round(performance.now() - t0), wordsEnd: null, wordsEndMs: null };
          const words = spokenWords(transcript.text);
          if (lm && words !== null) {
            const t1 = performance.now();
            transcript.wordsEnd = await lm.endOfTurnProbability({ messages: [...system, { role: 'user', content: words }], maxOutputTokens: null, signal: new AbortController().signal });
            transcript.wordsEndMs = Math.round(performance.now() - t1);
          }
          sig.transcripts[r.name] = transcript;
        }
      }
      out.push({
        id: u.id,
        kind: u.kind,
        text: u.text,
        voice: u.voice,
        speed: u.speed,
        noiseDbfs: u.noiseDbfs,
        speechStartMs: ms(u.speechStart),
        speechEndMs: ms(u.speechEnd),
        silences: signals,
      });
      if (out.length % 25 === 0) log(`turn-end signals: ${out.length} of ${corpus.length} utterances measured (${Math.round((performance.now() - started) / 1000)} s)`);
    }
  } finally {
    await audioModel.close();
    await Promise.all(recognisers.map((r) => r.asr.close()));
    await lm?.close();
  }
  return {
    version: SIGNALS_VERSION,
    planHash: hash,
    date: new Date().toISOString(),
    recognisers: recognisers.map((r) => r.name),
    audioModel: audioModel.name,
    languageModel: lm?.id ?? null,
    utterances: out,
  };
}

/**
 * What a silence lies in (see SilenceSignals.label): the one that no speech breaks before the
 * audio's end is the end, wherever the VAD heard it begin (a weak last consonant may end the
 * speech for it a little early); a silence that begins within a pause (or in the fade of the word
 * before it) is that pause's.
 */
function labelOf(u: Utterance, s: { startMs: number; endMs: number }, audioMs: number): SilenceSignals['label'] {
  if (s.endMs >= audioMs - 2 * FRAME_MS) return 'end';
  const at = (s.startMs * RATE_HZ) / 1000;
  const pause = u.pauses.find((p) => at >= p.start - RATE_HZ * 0.15 && at < p.end);
  return pause ? pause.label : 'gap';
}

/** A silence frame: the segmenter's 32 ms. */
const FRAME_MS = 32;
