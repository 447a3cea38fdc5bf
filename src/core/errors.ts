/**
 * The project's error vocabulary. Every error that can reach a client is an AppError with a stable
 * snake_case `code` (listed in docs/api.md, Error codes, and docs/realtime.md, Errors), an
 * OpenAI-style `type`, an HTTP `status` for the REST edge, and the offending field in `param` when
 * there is one. Each edge translates AppError in one
 * place: REST in errorMiddleware (server/middleware.ts), realtime connections as `error` events
 * (realtime/protocol.ts).
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error';

export interface AppErrorOptions {
  status?: number;
  type?: ErrorType;
  param?: string | null;
  cause?: unknown;
  /** Extra HTTP response headers (e.g. Retry-After). */
  headers?: Record<string, string>;
}

export class AppError extends Error {
  readonly code: string;
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(code: string, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = options.status ?? 400;
    this.type = options.type ?? typeForStatus(this.status);
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  /** Whether the message may be shown to a client: 4xx messages are written for clients, 5xx are not. */
  get expose(): boolean {
    return this.status < 500 || this.status === 503;
  }

  toBody(): ErrorBody {
    return {
      error: {
        message: this.expose ? this.message : 'The server had an error while processing your request.',
        type: this.type,
        code: this.code,
        param: this.param,
      },
    };
  }
}

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string; param: string | null };
}

function typeForStatus(status: number): ErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** 400 for a field that is missing, of the wrong type, or out of range. */
export function invalidParam(param: string, message: string, code = 'invalid_value'): AppError {
  return new AppError(code, message, { status: 400, param });
}

export function notFound(what: string, id: string, param: string | null = null): AppError {
  return new AppError(`${what}_not_found`, `No ${what.replace(/_/g, ' ')} found with id '${id}'.`, {
    status: 404,
    param,
  });
}

/**
 * An error from the native media addon (native/media-node), rewrapped by src/media/ with the
 * addon's own code in the project's snake_case (Rust's INVALID_ARGUMENT is invalid_argument here).
 * The binding's: invalid_argument (400), session_closed (409), rig_error, motion_error,
 * native_panic, native_unavailable (addon not built), aborted; media-core's: invalid_state (409),
 * encoder_unavailable, pipeline_not_found, pipeline_invalid, pipeline_start_failed,
 * drain_timeout, session_failed, renderer_failed, thread_failed, gst_init_failed; speech and
 * recognition: tts_engine_unavailable, tts_synthesis_failed, model_not_found, model_load_failed,
 * transcription_failed (500 unless noted). The native error is the `cause`.
 */
export class NativeError extends AppError {
  constructor(nativeCode: string, message: string, options: AppErrorOptions = {}) {
    const code = nativeCode.toLowerCase();
    const status = code === 'invalid_argument' ? 400 : code === 'session_closed' || code === 'invalid_state' ? 409 : 500;
    super(code, message, { status, ...options });
    this.name = 'NativeError';
  }
}

/**
 * A configuration variable with a bad value: the process stops with this message (exit code 2).
 * Here, not in config.ts, so that provider config modules, which config.ts imports, can use it.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

/** The dependencies whose outage a request can meet: the fleet's Redis and the PostgreSQL store. */
export type Dependency = 'redis' | 'postgres' | 'language_model';

/** Seconds a client is told to wait before retrying a request that met a dependency outage. */
export const DEPENDENCY_RETRY_AFTER_S = 2;

/**
 * 503 for a request that needs a dependency that is down or did not answer in time: code
 * `redis_unavailable` or `postgres_unavailable`, with Retry-After. The request did nothing (or
 * nothing the client can see); retrying it later is safe.
 */
export function dependencyUnavailable(dependency: Dependency, cause?: unknown): AppError {
  const name = dependency === 'redis' ? 'The fleet coordinator (Redis)' : 'The database (PostgreSQL)';
  return new AppError(`${dependency}_unavailable`, `${name} is unavailable; retry in a few seconds.`, {
    status: 503,
    cause,
    headers: { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_S) },
  });
}

/** Whether `err` is dependencyUnavailable(dependency): the request met that outage, not a bug. */
export function isDependencyOutage(err: unknown, dependency: Dependency): boolean {
  return err instanceof AppError && err.code === `${dependency}_unavailable`;
}
