/**
 * The one error type of every provider kind (language models, voices, recognisers, VAD): what
 * failed upstream of this server, and the upstream's status and request id when there was one
 * (what a caller decides a retry on: 408, 429 and 5xx are worth one). Each kind's seam (`<kind>/base.ts`) re-exports it with its own
 * constructors (llmUnavailable, ttsFailed, asrFailed, ...), so no kind imports another.
 */
import { AppError, type AppErrorOptions } from '../core/errors.js';

export interface ProviderErrorOptions extends AppErrorOptions {
  /** HTTP status the upstream answered with, when the failure was an HTTP answer. */
  statusCode?: number | null;
  /** Upstream request id (x-request-id), for the operator's bug reports. */
  requestId?: string | null;
}

/**
 * A model, voice or recognizer failed (unreachable, refused, broke mid-stream, not installed).
 * HTTP status defaults to 502 (bad gateway): the failure is upstream of this server, not the
 * client's request.
 */
export class ProviderError extends AppError {
  readonly statusCode: number | null;
  readonly requestId: string | null;

  constructor(code: string, message: string, options: ProviderErrorOptions = {}) {
    const statusCode = options.statusCode ?? null;
    super(code, message, { status: 502, type: 'server_error', ...options });
    this.name = 'ProviderError';
    this.statusCode = statusCode;
    this.requestId = options.requestId ?? null;
  }
}
