/**
 * Typed facade over the native speech functions of the media addon (espeak-ng and flite through
 * native/speech, exported by native/media-node/src/speech.rs), for the TTS providers in
 * src/providers/tts/ (only src/media/ loads the binding). Every call runs on the libuv thread pool,
 * one per engine at a time (EngineLane), and resolves with mono PCM16, its rate, and phoneme spans
 * (IPA, `_` for silence) in ns from the start of that audio; failures reject with a NativeError carrying the addon's code (in snake_case)
 * (invalid_argument, tts_engine_unavailable, tts_synthesis_failed, native_unavailable, aborted).
 */
import { awaitNative, loadBinding, type EspeakSynthOptions, type FliteSynthOptions, type SynthesizedSpeech } from './native.js';

export type { EspeakSynthOptions, FliteSynthOptions, SynthesizedSpeech, SynthPhoneme } from './native.js';

/**
 * One native call per engine at a time, the rest queued here. Each engine serialises its calls
 * behind a lock, and a call waiting on that lock would park one of the libuv pool's four threads,
 * which image decoding, Whisper and file I/O share with it: queued in native code, a few slow
 * syntheses starved every other session (a data-channel fuzz case). A call whose signal aborted
 * while it waited is refused without running.
 */
class EngineLane {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(call: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const start = (): Promise<T> => (signal?.aborted ? Promise.reject(abortedError()) : call());
    const result = this.tail.then(start, start);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

function abortedError(): Error {
  return Object.assign(new Error('the synthesis was aborted before it started'), { code: 'aborted' });
}

/** espeak-ng's lane: synthesis and phonemizing share its one engine. */
const espeak = new EngineLane();
const flite = new EngineLane();

/** espeak-ng speaks at 22.05 kHz; 80..450 words per minute, 175 normal. */
export function synthesizeEspeak(text: string, options: EspeakSynthOptions = {}, signal?: AbortSignal): Promise<SynthesizedSpeech> {
  return espeak.run(() => awaitNative(Promise.resolve().then(() => loadBinding().synthesizeEspeak(text, options, signal))), signal);
}

/** flite voices slt, rms, awb, kal16 speak at 16 kHz. */
export function synthesizeFlite(text: string, options: FliteSynthOptions = {}, signal?: AbortSignal): Promise<SynthesizedSpeech> {
  return flite.run(() => awaitNative(Promise.resolve().then(() => loadBinding().synthesizeFlite(text, options, signal))), signal);
}

/** espeak-ng IPA per clause (with its closing punctuation), the phoneme input of Piper voices. */
export function phonemizeIpa(text: string, voice: string, signal?: AbortSignal): Promise<string[]> {
  return espeak.run(() => awaitNative(Promise.resolve().then(() => loadBinding().phonemizeIpa(text, voice, signal))), signal);
}

/** Whether the loaded addon has the speech functions (false when it is missing or predates them). */
export function speechSynthAvailable(): boolean {
  try {
    const binding = loadBinding();
    return typeof binding.synthesizeEspeak === 'function' && typeof binding.synthesizeFlite === 'function';
  } catch {
    return false; // native_unavailable: the caller falls back to another engine or reports it
  }
}
