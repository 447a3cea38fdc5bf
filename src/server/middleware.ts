/**
 * The HTTP middleware chain, outermost first:
 *   errors      every thrown error becomes {"error":{message,type,code,param}}; 5xx are logged
 *   observe     request id, structured access log, latency histogram
 *   auth        (per route) bearer key -> ctx.state.principal; ephemeral keys only where allowed;
 *               an address past its failed-authentication budget gets 429 (auth/throttle.ts)
 *   rateLimit   (per route, after auth) token bucket per API key -> 429 with Retry-After
 *   jsonBody    (per route) bounded JSON body parsing -> 400 invalid_json / 413 / 415
 */
import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { bearerToken, type KeyService, type Principal } from '../auth/keys.js';
import type { AuthThrottle } from '../auth/throttle.js';
import type { AppContext, AppState } from './context.js';
import type { HttpMetrics } from './metrics.js';
import type { RateLimiter } from '../core/rate-limiter.js';

type Middleware = Koa.Middleware<AppState, AppContext>;

export function errorMiddleware(log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined && ctx.status === 404) {
        throw new AppError('not_found', `No route for ${ctx.method} ${ctx.path}.`, { status: 404 });
      }
      if (ctx.body === undefined && (ctx.status === 405 || ctx.status === 501)) {
        // Set by router.allowedMethods(), with the Allow header already in place.
        const code = ctx.status === 405 ? 'method_not_allowed' : 'not_implemented';
        throw new AppError(code, `${ctx.method} is not supported on ${ctx.path}.`, { status: ctx.status, type: 'invalid_request_error' });
      }
    } catch (err) {
      const appError = toAppError(err);
      if (appError.status >= 500 && appError.status !== 503) {
        log.error('request failed', { requestId: ctx.state.requestId, method: ctx.method, path: ctx.path, err });
      }
      ctx.status = appError.status;
      ctx.set(appError.headers);
      ctx.body = appError.toBody();
    }
  };
}

/** Errors from Koa itself (http-errors with status/expose) and our own become AppErrors; the rest are 500. */
function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as { status?: unknown; expose?: unknown; message?: unknown };
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && e.expose) {
    return new AppError('invalid_request', String(e.message), { status: e.status, cause: err });
  }
  return new AppError('internal_error', 'internal error', { status: 500, cause: err });
}

export function observeMiddleware(log: Logger, metrics: HttpMetrics): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[\w.-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    try {
      await next();
    } finally {
      const seconds = (performance.now() - started) / 1000;
      // The route template (not the raw path) keeps label cardinality bounded.
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      metrics.observe(ctx.method, String(route), ctx.status, seconds);
      log.info('request', {
        requestId: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path,
        status: ctx.status,
        ms: Math.round(seconds * 100000) / 100,
        userId: ctx.state.principal?.userId,
      });
    }
  };
}

export interface AuthOptions {
  /** Accept ephemeral keys (realtime calls and connections only). */
  ephemeral?: boolean;
  /** No key needed; a valid key, when sent, still identifies the caller. */
  optional?: boolean;
}

export function authMiddleware(keys: KeyService, throttle: AuthThrottle, options: AuthOptions = {}): Middleware {
  return async (ctx, next) => {
    const token = bearerToken(ctx.get('authorization') || undefined);
    if (options.optional && !token) return next();
    const principal: Principal = await throttle.guard(ctx.ip, () => keys.authenticate(token));
    if (principal.kind === 'ephemeral' && !options.ephemeral) {
      throw new AppError(
        'ephemeral_key_not_allowed',
        'Ephemeral keys are only accepted for realtime calls and connections; use an API key.',
        { status: 401 },
      );
    }
    ctx.state.principal = principal;
    return next();
  };
}

/** The authenticated caller; only on routes behind authMiddleware without `optional`. */
export function principalOf(ctx: AppContext): Principal {
  const principal = ctx.state.principal;
  if (!principal) throw new AppError('missing_api_key', 'You did not provide an API key.', { status: 401 });
  return principal;
}

export function rateLimitMiddleware(limiter: RateLimiter | null): Middleware {
  return async (ctx, next) => {
    const principal = ctx.state.principal;
    if (!limiter || !principal) return next();
    const key = principal.kind === 'api_key' ? principal.keyId : `user:${principal.userId}`;
    const result = limiter.take(key, Date.now());
    ctx.set('X-RateLimit-Limit-Requests', String(limiter.perMinute));
    ctx.set('X-RateLimit-Remaining-Requests', String(result.remaining));
    if (!result.allowed) {
      throw new AppError('rate_limit_exceeded', `Rate limit of ${limiter.perMinute} requests per minute reached for this key.`, {
        status: 429,
        headers: { 'Retry-After': String(result.retryAfterS) },
      });
    }
    return next();
  };
}

const JSON_TYPES = ['application/json'];
/** Types under which curl and hand-written clients send JSON without saying so. */
const LENIENT_TYPES = ['', 'text/plain', 'application/x-www-form-urlencoded'];

export function jsonBodyMiddleware(maxBytes: number): Middleware {
  return async (ctx, next) => {
    const type = (ctx.get('content-type').split(';')[0] ?? '').trim().toLowerCase();
    const length = Number(ctx.get('content-length') || 0);
    if (length > maxBytes) throw tooLarge(maxBytes);
    if (!JSON_TYPES.includes(type) && !type.endsWith('+json') && !LENIENT_TYPES.includes(type)) {
      throw new AppError('unsupported_media_type', `Expected a JSON body (Content-Type: application/json), got '${type}'.`, {
        status: 415,
      });
    }
    const text = await readBody(ctx.req, maxBytes);
    if (text.trim() === '') {
      ctx.state.body = undefined;
      return next();
    }
    try {
      ctx.state.body = JSON.parse(text) as unknown;
    } catch (err) {
      throw new AppError('invalid_json', `The request body is not valid JSON: ${(err as Error).message}`, {
        status: 400,
        cause: err,
      });
    }
    return next();
  };
}

async function readBody(req: NodeJS.ReadableStream, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += buf.length;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function tooLarge(maxBytes: number): AppError {
  return new AppError('request_too_large', `The request body exceeds the limit of ${maxBytes} bytes.`, { status: 413 });
}
