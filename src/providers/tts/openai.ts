/**
 * OpenAI text-to-speech (or any server with the same API): `POST {base}/audio/speech` with
 * `response_format: "pcm"`, which streams raw 16-bit little-endian mono PCM at 24 kHz. Chunks of
 * 100 ms are yielded as the body arrives, so speech starts before the answer is complete.
 * The API gives no phoneme timings: chunks carry none, and the media session shapes the lips from
 * the audio itself. Used only when TTS_OPENAI_BASE_URL and TTS_OPENAI_API_KEY are configured.
 *
 * Failures: an HTTP error answer → ProviderError `tts_request_failed` with the upstream status;
 * no answer within the timeout → `tts_timeout`; a network error → `tts_request_failed` without a
 * status. Aborting the signal ends the stream quietly.
 */
import { checkSpeed, isAbort, ProviderError, type SpeakOptions, type SpeechChunk, type Voice } from './base.js';
import type { OpenAiTtsConfig } from './config.js';
import { normalizeSpeechText } from './text.js';

/** `response_format: pcm` is 24 kHz, 16-bit signed little-endian, mono. */
export const OPENAI_PCM_RATE_HZ = 24000;
/** Yield about every 100 ms of audio: small enough for a quick start, large enough to be cheap. */
const CHUNK_BYTES = (OPENAI_PCM_RATE_HZ / 10) * 2;
/** How much of an error body goes into the message. */
const MAX_ERROR_BODY_CHARS = 500;

/** The voice names the OpenAI speech API knows. */

export class OpenAiVoice implements Voice {
  readonly engine = 'openai';

  constructor(
    readonly id: string,
    /** The OpenAI voice name sent upstream. */
    readonly openaiVoice: string,
    private readonly config: OpenAiTtsConfig,
    private readonly rate = 1,
  ) {}

  async *speak(text: string, options: SpeakOptions): AsyncGenerator<SpeechChunk> {
    const speed = checkSpeed(options.speed);
    const input = normalizeSpeechText(text);
    const { signal } = options;
    if (!/[\p{L}\p{N}]/u.test(input) || signal?.aborted) return;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.config.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal;
    let response: Response;
    try {
      response = await fetch(`${this.config.baseUrl}/audio/speech`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${this.config.apiKey}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: this.config.model, voice: this.openaiVoice, input, response_format: 'pcm', speed: speed * this.rate }),
        signal: combined,
      });
    } catch (err) {
      clearTimeout(timer);
      if (signal?.aborted) return;
      if (timeout.signal.aborted) {
        throw new ProviderError('tts_timeout', `OpenAI TTS did not answer within ${this.config.timeoutMs} ms`, { cause: err });
      }
      throw new ProviderError('tts_request_failed', `OpenAI TTS request failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    clearTimeout(timer);
    if (!response.ok) {
      const body = (await response.text().catch(() => '')).slice(0, MAX_ERROR_BODY_CHARS);
      throw new ProviderError('tts_request_failed', `OpenAI TTS answered ${response.status}: ${body || response.statusText}`, {
        statusCode: response.status,
        requestId: response.headers.get('x-request-id'),
      });
    }
    if (!response.body) return;
    const reader = response.body.getReader();
    let pending: Uint8Array = new Uint8Array(0);
    try {
      for (;;) {
        let next: { done: boolean; value?: Uint8Array };
        try {
          next = await reader.read();
        } catch (err) {
          if (isAbort(err, signal)) return;
          throw new ProviderError('tts_request_failed', `OpenAI TTS stream broke: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
        }
        if (signal?.aborted) return;
        if (next.value) pending = concat(pending, next.value);
        // Whole 100 ms chunks however the body was split in transit; the rest at the end.
        while (pending.length >= CHUNK_BYTES || (next.done && pending.length >= 2)) {
          const size = Math.min(CHUNK_BYTES, pending.length - (pending.length % 2));
          yield { pcm: toPcm16(pending.subarray(0, size)), sampleRateHz: OPENAI_PCM_RATE_HZ, phonemes: [] };
          pending = pending.slice(size);
          if (signal?.aborted) return;
        }
        if (next.done) return;
      }
    } finally {
      // Stops the download when the consumer stops early (abort, or a break in for-await).
      reader.cancel().catch(() => undefined);
    }
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** Little-endian bytes (even length) to samples, independent of the host's byte order. */
function toPcm16(bytes: Uint8Array): Int16Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int16Array(bytes.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true);
  return out;
}
