/**
 * The speech-recognition seam: a `Transcriber` turns one committed utterance (the realtime input
 * format, mono PCM16 at 24 kHz) into text, and `SpeechRecognizers` picks the transcriber for a
 * session's `audio.input.transcription.model`.
 *
 * A recogniser that hears a turn as it is spoken may also offer `stream` (TranscriptionStream):
 * the recognition stage then feeds it the turn's audio as the VAD hears it and asks it for the
 * transcript so far at each pause, instead of transcribing the turn again from its start.
 *
 * Engines: whisper-cpp.ts (offline Whisper base or tiny.en through the native addon), openai.ts
 * (OpenAI-compatible `POST /audio/transcriptions`), fake-asr.ts (deterministic, for engine tests).
 * index.ts routes model names to them.
 *
 * Contract of `transcribe`: `onDelta` receives the text in final pieces, in order, whose
 * concatenation is the result's text, all before the promise resolves; failures reject with a
 * ProviderError (`asr_unavailable`: nothing can transcribe; `asr_failed`: this request failed,
 * with the upstream's status when it answered). Aborting the signal rejects with the
 * signal's reason (an `AbortError` DOMException by default), like fetch: an abort is the
 * caller's decision, not a failure, and no delta follows it.
 */
import { ProviderError } from '../provider-error.js';
import { PCM_RATE_HZ } from '../../audio/pcm.js';
import { WHISPER_SAMPLE_RATE_HZ } from '../../audio/whisper-mel.js';

export { ProviderError, type ProviderErrorOptions } from '../provider-error.js';

export interface TranscriptionRequest {
  /** The committed user audio: mono PCM16 at 24 kHz (the realtime input format). */
  pcm: Int16Array;
  /**
   * The same audio at 16 kHz as floats (-1..1), when the caller has it already (the VAD's
   * resampled stream, speech-segmenter.ts): exactly floor(pcm.length × 2/3) samples. A recogniser
   * that hears 16 kHz uses it instead of resampling `pcm`; others ignore it.
   */
  pcm16k?: Float32Array;
  /** ISO-639-1 language, null = detect. */
  language: string | null;
  /** Optional prompt (vocabulary hints) from the session's transcription config. */
  prompt: string | null;
  signal?: AbortSignal;
  /**
   * Whether the transcription is still speculative (read whenever it matters): a pause's
   * transcript, until the turn is known to end in that pause. A local recogniser that queues
   * serves confirmed transcriptions first. Unset: confirmed.
   */
  speculative?: () => boolean;
}
export interface TranscriptionResult { text: string; language: string | null; audioSeconds: number }
export interface Transcriber {
  /** e.g. 'whisper-cpp:base', 'openai:gpt-4o-transcribe', 'fake' */
  readonly id: string;
  /** Runs on this machine, so work started early and thrown away costs only CPU (the engine transcribes speculatively only then). */
  readonly local: boolean;
  /** Transcribes one utterance; `onDelta` receives text pieces as they become final (segments), in order, whose concatenation is the final text. Throws ProviderError (code 'asr_unavailable' | 'asr_failed'). */
  transcribe(request: TranscriptionRequest, onDelta?: (delta: string) => void): Promise<TranscriptionResult>;
  /** A stream for one turn, where the recogniser can hear a turn as it is spoken (see TranscriptionStream); absent: batch only. */
  stream?(request: { language: string | null; prompt: string | null }): TranscriptionStream;
  close(): Promise<void>;
}

/**
 * One turn heard as it is spoken (Transcriber.stream). The recognition stage opens it when the
 * turn starts, pushes the turn's audio in order (PCM16 24 kHz, from the turn's start with its
 * prefix padding), asks for the transcript of everything pushed so far at each pause, and closes it
 * when the turn ends or is dropped. The contract of `transcript` is transcribe's: deltas in final
 * pieces, ProviderError on failure, the signal's reason on an abort (which leaves the stream open
 * for more audio).
 */
export interface TranscriptionStream {
  push(pcm: Int16Array): void;
  transcript(onDelta?: (delta: string) => void, signal?: AbortSignal): Promise<TranscriptionResult>;
  close(): void;
}
export interface SpeechRecognizers {
  /**
   * The recogniser for a session's `audio.input.transcription` model (e.g. 'whisper-1',
   * 'gpt-4o-transcribe', 'gpt-4o-mini-transcribe', null = default) and language (null = English or
   * unknown: an English-only local model beside a multilingual one gets English). Unknown names
   * fall back to the default route; never throws.
   */
  forModel(model: string | null, language?: string | null): Transcriber;
  close(): Promise<void>;
}

/** Seconds of realtime input audio (PCM_RATE_HZ, the rate every TranscriptionRequest's pcm has). */
export function audioSeconds(pcm: Int16Array): number {
  return pcm.length / PCM_RATE_HZ;
}

/** Nothing can transcribe (no model, nothing configured, closed). */
export function asrUnavailable(message: string, cause?: unknown): ProviderError {
  return new ProviderError('asr_unavailable', message, { status: 503, cause });
}

/** This transcription failed; `statusCode` (an upstream HTTP status) decides whether a retry may help. */
export function asrFailed(message: string, options: { cause?: unknown; statusCode?: number | null; requestId?: string | null } = {}): ProviderError {
  return new ProviderError('asr_failed', message, options);
}

/** What an aborted transcription rejects with: the signal's reason, or an AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The transcription was aborted.', 'AbortError');
}

/** Throws the abort reason when the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortReason(signal);
}

/** Checks a request's audio: an Int16Array (the realtime format). A caller bug otherwise. */
export function checkRequest(request: TranscriptionRequest): void {
  if (!(request.pcm instanceof Int16Array)) throw new TypeError('TranscriptionRequest.pcm must be an Int16Array of 24 kHz PCM16');
  const { pcm16k } = request;
  if (pcm16k !== undefined && (!(pcm16k instanceof Float32Array) || pcm16k.length !== Math.floor((request.pcm.length * WHISPER_SAMPLE_RATE_HZ) / PCM_RATE_HZ))) {
    throw new TypeError('TranscriptionRequest.pcm16k must be a Float32Array of the same audio at 16 kHz (floor(pcm.length × 2/3) samples)');
  }
}

/** Mono PCM16 as a WAV file (RIFF, 44-byte header). */
export function pcm16ToWav(pcm: Int16Array, sampleRateHz: number): Buffer {
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRateHz, 24);
  header.writeUInt32LE(sampleRateHz * 2, 28); // bytes per second
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}
