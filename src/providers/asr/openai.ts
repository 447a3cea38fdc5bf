/**
 * Transcription by an OpenAI-compatible server: `POST {base}/audio/transcriptions` with the
 * utterance as a 24 kHz mono WAV file (multipart: file, model, response_format json, and language
 * and prompt when given). Enabled by ASR_OPENAI_BASE_URL + ASR_OPENAI_API_KEY. One delta, the
 * whole text, when the answer arrives (the non-streaming form works with every server and model,
 * whisper-1 included).
 *
 * Failures are `asr_failed` ProviderErrors carrying the upstream status and request id (none for
 * a timeout or a network error). Aborting the signal cancels the request and
 * rejects with the abort reason.
 */
import { PCM_RATE_HZ } from '../../audio/pcm.js';
import {
  abortReason,
  asrFailed,
  audioSeconds,
  checkRequest,
  pcm16ToWav,
  throwIfAborted,
  type TranscriptionRequest,
  type TranscriptionResult,
  type Transcriber,
} from './base.js';
import type { OpenAiAsrConfig } from './config.js';

/** The longest upstream error message quoted in ours. */
const MAX_ERROR_TEXT_CHARS = 300;

export class OpenAiTranscriber implements Transcriber {
  readonly local = false;
  readonly id: string;

  constructor(
    private readonly config: OpenAiAsrConfig,
    /** The upstream model name, e.g. 'gpt-4o-transcribe'. */
    readonly model: string,
  ) {
    this.id = `openai:${model}`;
  }

  async transcribe(request: TranscriptionRequest, onDelta?: (delta: string) => void): Promise<TranscriptionResult> {
    checkRequest(request);
    const { signal } = request;
    throwIfAborted(signal);
    const form = new FormData();
    form.append('file', new Blob([pcm16ToWav(request.pcm, PCM_RATE_HZ)], { type: 'audio/wav' }), 'audio.wav');
    form.append('model', this.model);
    form.append('response_format', 'json');
    if (request.language) form.append('language', request.language);
    if (request.prompt) form.append('prompt', request.prompt);

    const timeout = AbortSignal.timeout(this.config.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const url = `${this.config.baseUrl}/audio/transcriptions`;
    let response: Response;
    let body: string;
    try {
      response = await fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${this.config.apiKey}` }, body: form, signal: combined });
      body = await response.text();
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (timeout.aborted) throw asrFailed(`The transcription server did not answer within ${this.config.timeoutMs} ms (${url}).`, { cause: err });
      throw asrFailed(`The transcription server could not be reached (${url}): ${(err as Error).message}`, { cause: err });
    }
    const requestId = response.headers.get('x-request-id');
    if (!response.ok) {
      let detail = body;
      try {
        detail = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body;
      } catch {
        // not JSON: quote the raw body
      }
      throw asrFailed(`The transcription server answered ${response.status}: ${detail.slice(0, MAX_ERROR_TEXT_CHARS)}`, {
        statusCode: response.status,
        requestId,
      });
    }
    let text: unknown;
    try {
      text = (JSON.parse(body) as { text?: unknown }).text;
    } catch (err) {
      throw asrFailed(`The transcription server's answer is not JSON: ${body.slice(0, MAX_ERROR_TEXT_CHARS)}`, { cause: err, requestId });
    }
    if (typeof text !== 'string') throw asrFailed('The transcription server answered without a text field.', { requestId });
    throwIfAborted(signal);
    const trimmed = text.trim();
    if (trimmed && onDelta) onDelta(trimmed);
    return { text: trimmed, language: request.language, audioSeconds: audioSeconds(request.pcm) };
  }

  async close(): Promise<void> {
    // Nothing held: each request is its own fetch.
  }
}
