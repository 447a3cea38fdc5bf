/**
 * Offline speech recognition with Whisper (whisper.cpp in the native addon, through
 * src/media/speech-recognition.ts). The model (ASR_WHISPER_MODEL: Whisper base, ~150 MB of float16
 * weights, or tiny.en, ~78 MB; or the file ASR_WHISPER_MODEL_PATH names) is loaded on the first
 * transcription and then shared by every session in the process: loads of the same file share one
 * promise. Each call takes the request's 16 kHz audio (`pcm16k`: a voice turn's, which the VAD's
 * stream already made) or resamples the 24 kHz input to Whisper's 16 kHz (the VAD's polyphase
 * Resampler), then transcribes it with settings for short turns (greedy, no timestamps, one
 * segment per 30 s window, encoder context cut to the utterance; see native/asr). An English-only
 * model (tiny.en) is asked for English when the request names no language: whisper.cpp's language
 * detection on such a model answers at random (Urdu, Welsh for espeak-ng's English) and costs
 * ~0.1 s; a request naming another language fails with asr_failed.
 *
 * At most `concurrency` transcriptions run at once (default 1: on a 2-core machine two at once
 * each take about twice as long, so a queue answers the first speaker sooner); the rest wait,
 * confirmed turns before speculative ones (a pause's transcript whose turn may go on), each in
 * arrival order, and a waiting request whose signal fires leaves the queue at once. Each call
 * uses up to `threads` threads, one per idle core when it starts (core/idle-cores.ts): ggml's
 * threads spin while they wait for each other, so two threads on a 2-core machine whose other core
 * is busy (other sessions' avatars, the language model, another process) took 0.4-5 s for a 2 s
 * clip where one thread took ~0.63 s, and ~0.35 s on an idle machine. Deltas are
 * the finished segments, delivered when the call completes (a turn shorter than 30 s is one
 * segment). A missing or unloadable model is `asr_unavailable`; a failed call is `asr_failed`.
 */
import type { Logger } from '../../core/log.js';
import { idleCores, threadsForIdleCores } from '../../core/idle-cores.js';
import { takeNext } from '../../core/confirmed-first.js';
import { WhisperRecognizer } from '../../media/speech-recognition.js';
import { WHISPER_SAMPLE_RATE_HZ } from '../../audio/whisper-mel.js';
import { Resampler } from '../../audio/resample.js';
import { PCM_RATE_HZ } from '../../audio/pcm.js';
import {
  abortReason,
  asrFailed,
  asrUnavailable,
  audioSeconds,
  checkRequest,
  throwIfAborted,
  type TranscriptionRequest,
  type TranscriptionResult,
  type Transcriber,
} from './base.js';

export interface WhisperCppOptions {
  /** The ggml model file. */
  modelPath: string;
  /** Threads a call uses at most (one per idle core, see the header). */
  threads: number;
  concurrency: number;
  log: Logger;
  /** Transcriber id suffix, the model's name: 'base' → 'whisper-cpp:base', 'tiny.en', 'custom' (ASR_WHISPER_MODEL_PATH). */
  name: string;
}

/** One load per model file per process, shared by every transcriber and session. */
const loads = new Map<string, Promise<WhisperRecognizer>>();

function loadShared(path: string, log: Logger): Promise<WhisperRecognizer> {
  let load = loads.get(path);
  if (!load) {
    const started = performance.now();
    load = WhisperRecognizer.load(path).then(
      (model) => {
        log.info('whisper model loaded', { file: path, ms: Math.round(performance.now() - started) });
        return model;
      },
      (err: unknown) => {
        loads.delete(path); // a later call may try again (e.g. after the file is fixed)
        throw err;
      },
    );
    loads.set(path, load);
  }
  return load;
}

/** Runs at most `limit` tasks at once: confirmed before speculative ones, each in arrival order; a waiter whose signal fires leaves. */
class Gate {
  private running = 0;
  private readonly waiting: Array<{ start: () => void; cancel: (reason: unknown) => void; speculative: () => boolean }> = [];

  constructor(private readonly limit: number) {}

  async run<T>(signal: AbortSignal | undefined, speculative: () => boolean, task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const entry = {
          speculative,
          start: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
          cancel: reject,
        };
        const onAbort = (): void => {
          const at = this.waiting.indexOf(entry);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(abortReason(signal as AbortSignal));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(entry);
      });
    } else {
      this.running++;
    }
    try {
      return await task();
    } finally {
      const next = takeNext(this.waiting);
      if (next) next.start(); // the slot passes straight to the next waiter
      else this.running--;
    }
  }

  /** Rejects every waiter (on close). */
  drain(reason: unknown): void {
    for (const w of this.waiting.splice(0)) w.cancel(reason);
  }
}

/** 24 kHz PCM16 → 16 kHz float, with the filter's ~1 ms delay flushed by trailing zeros. */
export function toWhisperInput(pcm: Int16Array): Float32Array {
  const resampler = new Resampler(PCM_RATE_HZ, WHISPER_SAMPLE_RATE_HZ);
  const flush = Math.ceil((resampler.delayMs * PCM_RATE_HZ) / 1000);
  const input = new Float32Array(pcm.length + flush);
  for (let i = 0; i < pcm.length; i++) input[i] = (pcm[i] ?? 0) / 32768;
  const out = resampler.push(input);
  const want = Math.floor((pcm.length * WHISPER_SAMPLE_RATE_HZ) / PCM_RATE_HZ);
  // Drop the filter's delay from the front so the output lines up with the input.
  const delay = Math.round((resampler.delayMs * WHISPER_SAMPLE_RATE_HZ) / 1000);
  return out.subarray(Math.min(delay, out.length), Math.min(delay + want, out.length));
}

export class WhisperCppTranscriber implements Transcriber {
  readonly local = true;
  readonly id: string;
  private readonly gate: Gate;
  private closed = false;
  /** Keeps the idle-core sampler running while this transcriber is open. */
  private readonly releaseIdleCores = idleCores.hold();

  constructor(private readonly options: WhisperCppOptions) {
    this.id = `whisper-cpp:${options.name}`;
    this.gate = new Gate(options.concurrency);
  }

  async transcribe(request: TranscriptionRequest, onDelta?: (delta: string) => void): Promise<TranscriptionResult> {
    checkRequest(request);
    const { signal } = request;
    throwIfAborted(signal);
    if (this.closed) throw asrUnavailable('The Whisper recogniser is closed.');
    let model: WhisperRecognizer;
    try {
      model = await loadShared(this.options.modelPath, this.options.log);
    } catch (err) {
      throw asrUnavailable(`The Whisper model ${this.options.modelPath} could not be loaded: ${(err as Error).message}`, err);
    }
    // The VAD's 16 kHz stream when the caller has it (a voice turn); else resampled here, once.
    const pcm = request.pcm16k ?? toWhisperInput(request.pcm);
    const language = request.language ?? (model.multilingual ? 'auto' : 'en');
    const transcript = await this.gate.run(signal, request.speculative ?? (() => false), async () => {
      throwIfAborted(signal);
      try {
        return await model.transcribe(
          pcm,
          { language, prompt: request.prompt ?? undefined, threads: threadsForIdleCores(this.options.threads, idleCores.now) },
          signal,
        );
      } catch (err) {
        if (signal?.aborted) throw abortReason(signal);
        throw asrFailed(`Whisper could not transcribe the audio: ${(err as Error).message}`, { cause: err });
      }
    });
    throwIfAborted(signal);
    // Deltas are the segments' texts, cut so that they concatenate to exactly `text` (the
    // segments joined and trimmed: the first loses its leading space, the last its trailing one).
    const raw = transcript.segments.map((s) => s.text).join('');
    const start = raw.length - raw.trimStart().length;
    const end = raw.trimEnd().length;
    const text = raw.slice(start, end);
    if (onDelta) {
      let at = 0;
      for (const segment of transcript.segments) {
        const from = Math.max(at, start);
        const to = Math.min(at + segment.text.length, end);
        if (to > from) onDelta(raw.slice(from, to));
        at += segment.text.length;
      }
    }
    return { text, language: transcript.language ?? request.language, audioSeconds: audioSeconds(request.pcm) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.releaseIdleCores();
    this.gate.drain(asrUnavailable('The Whisper recogniser was closed.'));
  }
}
