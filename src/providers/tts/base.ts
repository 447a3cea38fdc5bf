/**
 * The text-to-speech seam. A `SpeechService` resolves a session's voice (standard id, uploaded
 * voice, or OpenAI voice name) under its `tts_source` to a `Voice`; a `Voice` speaks one sentence
 * or clause as PCM chunks with phoneme timings, which the media session turns into lip shapes.
 *
 * Engines: espeak.ts and flite.ts (native, through src/media/speech-synth.ts), piper.ts (a neural
 * VITS voice on onnxruntime-node), openai.ts (OpenAI-compatible `/audio/speech`), fake-tts.ts
 * (deterministic, for engine tests). index.ts picks one per request; text.ts cleans LLM output
 * (markdown, emoji) before any engine sees it; voice-analysis.ts measures uploaded samples.
 *
 * Contract of `speak`: chunks come in order; phoneme times are relative to their chunk's start,
 * ordered, and cover the chunk (an engine that cannot time phonemes sends none, and the media
 * session then shapes the lips from the audio alone); an aborted signal ends the iteration early
 * without an error; a failure throws ProviderError.
 */
import type { PhonemeTiming } from '../../audio/pcm.js';
import { ProviderError } from '../provider-error.js';

export type { PhonemeTiming } from '../../audio/pcm.js';
export { ProviderError, type ProviderErrorOptions } from '../provider-error.js';

export interface SpeechChunk { pcm: Int16Array; sampleRateHz: number; phonemes: PhonemeTiming[] }
export interface SpeakOptions { /** 0.25..1.5, 1 = the voice's normal rate */ speed: number; signal?: AbortSignal }
export interface Voice {
  readonly id: string;        // the voice id asked for
  readonly engine: string;    // 'piper' | 'flite' | 'espeak-ng' | 'openai' | 'fake'
  /** Speaks one sentence or clause: chunks in order, ending when it is done; stops early (no throw) when aborted; throws ProviderError on failure. */
  speak(text: string, options: SpeakOptions): AsyncIterable<SpeechChunk>;
}
export interface SpeechService {
  /** Resolves a voice: a standard id ('default', 'alice', 'anthony'), an uploaded voice asset's id (owned by userId; its sample is analysed once — pitch and speaking rate — to choose the closest offline voice settings, cached), or an OpenAI voice name (alloy, ash, ballad, coral, echo, sage, shimmer, verse, marin, cedar → mapped to a fitting offline voice, documented). `source` is the session's tts_source: 'auto' | 'offline' | 'piper' | 'flite' | 'espeak-ng' | 'openai'. Throws ProviderError (code 'voice_not_found' / 'tts_unavailable') with a clear message. */
  voice(request: { voiceId: string; userId: string; source: string }): Promise<Voice>;
  close(): Promise<void>;
}

/** The session `tts_source` values (a media option: core/media-options.ts). */
export { TTS_SOURCES, type TtsSource } from '../../core/media-options.js';

export const MIN_SPEED = 0.25;
export const MAX_SPEED = 1.5;

/** Checks `speed` (a caller bug when wrong, hence TypeError/RangeError rather than ProviderError). */
export function checkSpeed(speed: number): number {
  if (typeof speed !== 'number' || !Number.isFinite(speed)) throw new TypeError(`speed must be a finite number, got ${String(speed)}`);
  if (speed < MIN_SPEED || speed > MAX_SPEED) throw new RangeError(`speed must be from ${MIN_SPEED} to ${MAX_SPEED}, got ${speed}`);
  return speed;
}

/** A voice that could not be found for this user (404-like). */
export function voiceNotFound(message: string, cause?: unknown): ProviderError {
  return new ProviderError('voice_not_found', message, { status: 404, type: 'not_found_error', cause });
}

/** The engine asked for is not installed or not configured here. */
export function ttsUnavailable(message: string, cause?: unknown): ProviderError {
  return new ProviderError('tts_unavailable', message, { status: 503, cause });
}

/** The engine failed while speaking. */
export function ttsFailed(message: string, cause?: unknown): ProviderError {
  return new ProviderError('tts_failed', message, { cause });
}

/** Whether an error is the rejection of an aborted native task or fetch (not a failure). */
export function isAbort(err: unknown, signal?: AbortSignal): boolean {
  if (signal?.aborted) return true;
  const e = err as { name?: unknown; code?: unknown } | null;
  return e?.name === 'AbortError' || e?.code === 'aborted';
}

/** -1..1 floats to PCM16, clipped, scaled by `gain`. */
export function floatToPcm16(samples: Float32Array, gain = 1): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.round((samples[i] ?? 0) * gain * 32767);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return out;
}

/** Nanoseconds of `samples` at `rateHz`, rounded to an integer. */
export function samplesToNs(samples: number, rateHz: number): number {
  return Math.round((samples * 1e9) / rateHz);
}
