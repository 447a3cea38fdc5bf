/**
 * Typed facade over the native Whisper recogniser of the media addon (whisper.cpp through
 * native/asr, exported by native/media-node/src/asr.rs), for the ASR providers in
 * src/providers/asr/ (only src/media/ loads the binding). Loading a model and every transcription
 * run on the libuv thread pool; one loaded model serves any number of concurrent calls, each with
 * its own whisper.cpp state. Failures reject with a NativeError carrying the addon's code (in snake_case):
 * model_not_found, model_load_failed, invalid_argument, aborted, transcription_failed,
 * native_unavailable (addon not built, or built before it had these functions).
 *
 * Audio is mono float32 (-1..1) at 16 kHz; resampling is the caller's (audio/whisper-mel.ts WHISPER_SAMPLE_RATE_HZ).
 */
import { NativeError } from '../core/errors.js';
import { awaitNative, loadBinding, type NativeWhisperModel, type WhisperTranscribeOptions, type WhisperTranscript } from './native.js';

export type { WhisperSegment, WhisperTranscribeOptions, WhisperTranscript } from './native.js';


/** Whether the loaded addon has the Whisper functions (false when it is missing or predates them). */
export function speechRecognitionAvailable(): boolean {
  try {
    return typeof loadBinding().loadWhisperModel === 'function';
  } catch {
    return false; // native_unavailable: the caller reports it or uses another recogniser
  }
}

/** A loaded whisper.cpp model. */
export class WhisperRecognizer {
  private constructor(
    private readonly model: NativeWhisperModel,
    /** The model file it was loaded from. */
    readonly path: string,
  ) {}

  /** Loads a ggml model file (~0.3 s for Whisper base) without blocking the event loop. */
  static async load(path: string, options: { flashAttn?: boolean } = {}, signal?: AbortSignal): Promise<WhisperRecognizer> {
    const binding = await awaitNative(Promise.resolve().then(() => loadBinding()));
    if (typeof binding.loadWhisperModel !== 'function') {
      throw new NativeError('native_unavailable', 'The native addon was built without speech recognition; rebuild it with `npm run build:native`.');
    }
    const model = await awaitNative(Promise.resolve().then(() => binding.loadWhisperModel(path, options, signal)));
    return new WhisperRecognizer(model, path);
  }

  /** Whether the model knows languages other than English. */
  get multilingual(): boolean {
    return this.model.multilingual;
  }

  /**
   * Transcribes one utterance. `options.language`: ISO-639-1 (default 'en') or 'auto';
   * `options.threads` default 2; `options.audioContext` absent = cut to the utterance. An abort
   * (already aborted, or during the call) rejects with aborted.
   */
  transcribe(pcm: Float32Array, options: WhisperTranscribeOptions = {}, signal?: AbortSignal): Promise<WhisperTranscript> {
    if (signal?.aborted) return Promise.reject(new NativeError('aborted', 'The transcription was aborted before it started.'));
    return awaitNative(Promise.resolve().then(() => this.model.transcribe(pcm, options, signal)));
  }
}
