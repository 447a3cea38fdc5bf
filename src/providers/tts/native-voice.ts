/**
 * The one voice class of the two native engines (espeak.ts, flite.ts say how their settings map to
 * the engine's options): text cleaning, one native call per sentence, or per piece of a long one
 * (text.ts speechPieces: so a long text starts sounding after its first sentence, and no call runs
 * long), abort between and during calls, leading silence trimmed to 50 ms, and the addon's error
 * codes as ProviderErrors. A native engine returns a sentence's audio and phoneme spans in one
 * piece: one chunk each. A synthesis goes from here straight to the addon's facade.
 */
import { synthesizeEspeak, synthesizeFlite, type EspeakSynthOptions, type FliteSynthOptions } from '../../media/speech-synth.js';
import { checkSpeed, isAbort, samplesToNs, ttsFailed, ttsUnavailable, type ProviderError, type SpeakOptions, type SpeechChunk, type Voice } from './base.js';
import { normalizeSpeechText, speechPieces, splitSentences, toAsciiSpeech } from './text.js';

/** Leading silence kept before a sentence. flite starts every utterance with a 200 ms pause,
 * which would only delay the first sound (the previous sentence's tail already separates them). */
const MAX_LEAD_SILENCE_NS = 50_000_000;

/** The addon's codes that mean "this engine is not here" rather than "this call failed". */
const UNAVAILABLE_CODES = new Set(['native_unavailable', 'tts_engine_unavailable']);

export function nativeTtsError(engine: string, err: unknown): ProviderError {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) {
    return ttsUnavailable(`${engine} is not available on this server: ${message}`, err);
  }
  return ttsFailed(`${engine} could not speak: ${message}`, err);
}

/** What one native engine is asked, at one request's speed. */
export type NativeSynthesis = { engine: 'flite'; options: FliteSynthOptions } | { engine: 'espeak-ng'; options: EspeakSynthOptions };

/** A voice of a native engine; its subclass maps its settings to the engine's options (`synthesis`). */
export abstract class NativeVoice implements Voice {
  abstract readonly engine: NativeSynthesis['engine'];

  constructor(readonly id: string) {}

  /** The engine's options at `speed` (already checked). */
  protected abstract synthesis(speed: number): NativeSynthesis;

  speak(text: string, options: SpeakOptions): AsyncIterable<SpeechChunk> {
    return speakNative(text, options, this.synthesis(checkSpeed(options.speed)));
  }
}

/** Speaks `text` sentence by sentence (piece by piece), one native call each; flite reads ASCII only. */
async function* speakNative(text: string, options: SpeakOptions, synthesis: NativeSynthesis): AsyncGenerator<SpeechChunk> {
  const { signal } = options;
  for (const piece of splitSentences(normalizeSpeechText(text)).flatMap(speechPieces)) {
    const input = synthesis.engine === 'flite' ? toAsciiSpeech(piece) : piece;
    if (!/[\p{L}\p{N}]/u.test(input)) continue; // punctuation alone: nothing to say
    if (signal?.aborted) return;
    let chunk: SpeechChunk;
    try {
      chunk = await (synthesis.engine === 'flite' ? synthesizeFlite(input, synthesis.options, signal) : synthesizeEspeak(input, synthesis.options, signal));
    } catch (err) {
      if (isAbort(err, signal)) return;
      throw nativeTtsError(synthesis.engine, err);
    }
    if (signal?.aborted) return;
    if (chunk.pcm.length > 0) yield trimLeadingSilence(chunk);
  }
}

/** Cuts a leading `_` span down to MAX_LEAD_SILENCE_NS, shifting the timeline with the audio. */
export function trimLeadingSilence(chunk: SpeechChunk): SpeechChunk {
  const first = chunk.phonemes[0];
  if (!first || first.phoneme !== '_' || first.endNs <= MAX_LEAD_SILENCE_NS || chunk.phonemes.length < 2) return chunk;
  const cut = Math.ceil(((first.endNs - MAX_LEAD_SILENCE_NS) * chunk.sampleRateHz) / 1e9);
  const shiftNs = samplesToNs(cut, chunk.sampleRateHz);
  const phonemes = chunk.phonemes.map((p, i) => ({
    phoneme: p.phoneme,
    startNs: i === 0 ? 0 : p.startNs - shiftNs,
    endNs: p.endNs - shiftNs,
  }));
  return { pcm: chunk.pcm.slice(cut), sampleRateHz: chunk.sampleRateHz, phonemes };
}
