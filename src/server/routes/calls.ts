/**
 * WebRTC calls (spec 4.5): POST /v1/realtime/calls answers an SDP offer, POST
 * /v1/realtime/calls/{call_id}/hangup ends a call. Thin: the body is read here (bounded, in its
 * three forms), the rest is the call gateway's (src/signaling/realtime-calls.ts).
 *
 * Browsers call these directly with ephemeral keys, from their own origins: callsCors() answers
 * the preflight and lets any origin read the answer and its Location / X-Session-Id headers (the
 * key in Authorization is the credential; no cookies are involved).
 */
import busboy from 'busboy';
import type Koa from 'koa';
import { AppError } from '../../core/errors.js';
import { parseCallBody } from '../../signaling/realtime-calls.js';
import type { AppContext, AppRouter, AppState } from '../context.js';
import { principalOf, tooLarge } from '../middleware.js';
import type { Services } from '../services.js';
import { discardRest, readBody } from '../upload.js';
import type { RouteGuards } from './guards.js';

const CALLS_PATH = /^\/v1\/realtime\/calls(\/[^/]+\/hangup)?$/;

export function callRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
  router.post('/v1/realtime/calls', ...g.realtime, async (ctx) => {
    const principal = principalOf(ctx);
    const request = await readCallRequest(ctx, s.config.maxJsonBytes);
    const answer = await s.calls.create(principal, request);
    ctx.status = 201;
    ctx.type = 'application/sdp';
    ctx.set('Location', `/v1/realtime/calls/${answer.callId}`);
    ctx.set('X-Session-Id', answer.sessionId);
    ctx.body = answer.sdp;
  });

  router.post('/v1/realtime/calls/:call_id/hangup', ...g.realtime, async (ctx) => {
    const { sessionId } = await s.calls.hangup(principalOf(ctx).userId, ctx.params.call_id ?? '');
    ctx.body = { id: ctx.params.call_id, object: 'realtime.call', status: 'ended', session_id: sessionId };
  });
}

/** CORS for the call endpoints: any origin may post an offer with a key and read the answer. */
export function callsCors(): Koa.Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    if (!CALLS_PATH.test(ctx.path)) return next();
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Access-Control-Expose-Headers', 'Location, X-Session-Id, X-Request-Id, Retry-After');
    if (ctx.method === 'OPTIONS') {
      ctx.set('Access-Control-Allow-Methods', 'POST, OPTIONS');
      ctx.set('Access-Control-Allow-Headers', 'Authorization, Content-Type, OpenAI-Beta, X-Request-Id');
      ctx.set('Access-Control-Max-Age', '600');
      ctx.status = 204;
      return;
    }
    return next();
  };
}

/** The offer and session config, from multipart, raw SDP or JSON, at most `maxBytes`. */
async function readCallRequest(ctx: AppContext, maxBytes: number): Promise<ReturnType<typeof parseCallBody>> {
  const type = ctx.get('content-type');
  if (Number(ctx.get('content-length') || 0) > maxBytes) {
    discardRest(ctx.req);
    throw tooLarge(maxBytes);
  }
  if (type.toLowerCase().startsWith('multipart/form-data')) return parseCallBody(type, Buffer.alloc(0), await readFormFields(ctx, maxBytes));
  return parseCallBody(type, await readBody(ctx.req, maxBytes), null);
}

/**
 * The `sdp` and `session` parts of a form, whether sent as plain fields (form-data, aiohttp) or as
 * parts with a filename and content type (httpx `files=`); other parts are skipped.
 */
function readFormFields(ctx: AppContext, maxBytes: number): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: ctx.req.headers, limits: { fieldSize: maxBytes, fileSize: maxBytes, fields: 10, files: 4 } });
    } catch (err) {
      reject(new AppError('invalid_multipart', `Malformed multipart request: ${(err as Error).message}`, { status: 400 }));
      return;
    }
    const fields: Record<string, string> = {};
    let failed = false;
    const fail = (err: AppError) => {
      if (failed) return;
      failed = true;
      ctx.req.unpipe(parser);
      parser.on('error', () => undefined); // later complaints of the detached parser change nothing
      discardRest(ctx.req);
      reject(err);
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) fail(tooLarge(maxBytes));
      else if (name === 'sdp' || name === 'session') fields[name] = value;
    });
    parser.on('file', (name, stream) => {
      stream.on('error', (err: Error) => fail(new AppError('invalid_multipart', `Malformed multipart request: ${err.message}`, { status: 400 })));
      if (name !== 'sdp' && name !== 'session') return void stream.resume();
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('limit', () => fail(tooLarge(maxBytes)));
      stream.on('end', () => (fields[name] = Buffer.concat(chunks).toString('utf8')));
    });
    parser.on('error', (err: Error) => fail(new AppError('invalid_multipart', `Malformed multipart request: ${err.message}`, { status: 400 })));
    parser.on('close', () => {
      if (!failed) resolve(fields);
    });
    ctx.req.on('error', () => fail(new AppError('incomplete_body', 'The request body ended before it was complete.', { status: 400 })));
    ctx.req.pipe(parser);
  });
}
