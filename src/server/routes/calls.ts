/**
 * WebRTC calls (spec 4.5): POST /v1/realtime/calls answers an SDP offer, POST
 * /v1/realtime/calls/{call_id}/hangup ends a call. Thin: the body is read here (bounded, in its
 * three forms), the rest is the call gateway's (src/signaling/realtime-calls.ts).
 *
 * Browsers call these directly with ephemeral keys, from their own origins: callsCors() answers
 * the preflight and lets any origin read the answer and its Location / X-Session-Id headers (the
 * key in Authorization is the credential; no cookies are involved).
 */
import type Koa from 'koa';
import { OFFER_BODY_DEADLINE_MS, parseCallBody, parseLiveBody } from '../../signaling/realtime-calls.js';
import { FLEET_TOKEN_HEADER, INTERNAL_CALLS_PATH, hasFleetToken, type ForwardedCall } from '../../signaling/worker-relay.js';
import { AppError } from '../../core/errors.js';
import type { AppContext, AppRouter, AppState } from '../context.js';
import { principalOf, tooLarge } from '../middleware.js';
import type { Services } from '../services.js';
import { discardRest, readBody, readMultipart } from '../upload.js';
import type { RouteGuards } from './guards.js';
import type { Static } from '@sinclair/typebox';
import type { CallHangup, LiveSessionCreated } from '../api/responses.js';

const CALLS_PATH = /^\/v1\/(realtime\/calls(\/[^/]+\/hangup)?|live\/sessions(\/[^/]+\/(hangup|accept|reject|refer|fork|content))?)$/;
/** The form parts of an offer. */
const CALL_PARTS = ['sdp', 'session'];

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

  // GPT-Live over WebRTC: the offer in JSON with the Live session config; the session starts when the media connects.
  router.post('/v1/live/sessions', ...g.realtime, async (ctx) => {
    const principal = liveCaller(ctx);
    if (!ctx.get('content-type').toLowerCase().startsWith('application/json')) {
      discardRest(ctx.req);
      throw new AppError('unsupported_media_type', 'Send {"session": {...}, "transport": {"type": "webrtc", "sdp": ...}} as application/json.', { status: 415 });
    }
    if (Number(ctx.get('content-length') || 0) > s.config.maxJsonBytes) {
      discardRest(ctx.req);
      throw tooLarge(s.config.maxJsonBytes);
    }
    const request = parseLiveBody(await readBody(ctx.req, s.config.maxJsonBytes, OFFER_BODY_DEADLINE_MS));
    const answer = await s.calls.create(principal, request);
    ctx.status = 201;
    ctx.set('X-Session-Id', answer.sessionId);
    ctx.body = { session: { id: answer.sessionId }, transport: { type: 'webrtc', sdp: answer.sdp } } satisfies Static<typeof LiveSessionCreated>;
  });

  // GPT-Live session controls (openai-python client.live.sessions), for a session of either transport.
  router.post('/v1/live/sessions/:session_id/hangup', ...g.realtime, async (ctx) => {
    discardRest(ctx.req);
    await s.sessions.endForUser(liveCaller(ctx).userId, ctx.params.session_id ?? '');
    ctx.status = 204; // the session ends; its connection hears session.closed (close_requested)
  });
  for (const control of ['accept', 'reject', 'refer'] as const) {
    router.post(`/v1/live/sessions/:session_id/${control}`, ...g.realtime, async (ctx) => {
      discardRest(ctx.req);
      await s.sessions.get(liveCaller(ctx).userId, ctx.params.session_id ?? ''); // an unknown session is a 404 first
      throw new AppError('sip_not_supported', `${control} answers a SIP call; this server's Live sessions come over WebSocket and WebRTC, already accepted.`, { status: 400 });
    });
  }
  router.post('/v1/live/sessions/:session_id/fork', ...g.realtime, async (ctx) => {
    discardRest(ctx.req);
    await s.sessions.get(liveCaller(ctx).userId, ctx.params.session_id ?? '');
    throw new AppError('fork_not_supported', 'Forking a Live session is not available on this server: start a new session (POST /v1/live/sessions) and give it the conversation as session.input.', { status: 400 });
  });
  router.get('/v1/live/sessions/:session_id/content', ...g.realtime, async (ctx) => {
    await s.sessions.get(liveCaller(ctx).userId, ctx.params.session_id ?? '');
    throw new AppError('recording_not_found', "This server does not record a session's audio; its transcript is at GET /v1/sessions/{session_id}/chat.", { status: 404 });
  });

  router.post('/v1/realtime/calls/:call_id/hangup', ...g.realtime, async (ctx) => {
    const callId = ctx.params.call_id ?? '';
    const { sessionId } = await s.calls.hangup(principalOf(ctx).userId, callId);
    ctx.body = { id: callId, object: 'realtime.call', status: 'ended', session_id: sessionId } satisfies Static<typeof CallHangup>;
  });

  // Fleet mode, on a worker: offers and hangups forwarded by the API node (signaling/worker-relay.ts).
  const fleet = s.config.fleet;
  if (fleet) {
    const internal: Koa.Middleware<AppState, AppContext> = async (ctx, next) => {
      if (!hasFleetToken(fleet.token, ctx.get(FLEET_TOKEN_HEADER) || undefined)) throw new AppError('invalid_fleet_token', 'Internal route: the fleet token is missing or wrong.', { status: 401 });
      if (!s.isAccepting()) throw new AppError('shutting_down', 'This worker is shutting down.', { status: 503, headers: { 'Retry-After': '1' } });
      await next();
    };
    router.post(INTERNAL_CALLS_PATH, internal, g.json, async (ctx) => {
      ctx.body = await s.calls.answerForwarded(ctx.state.body as ForwardedCall);
    });
    router.post(`${INTERNAL_CALLS_PATH}/:call_id/hangup`, internal, g.json, async (ctx) => {
      const { userId } = ctx.state.body as { userId: string };
      ctx.body = await s.calls.hangup(userId, ctx.params.call_id ?? '');
    });
  }
}

/** The caller of a Live route: an API key (GPT-Live has no ephemeral client keys). */
function liveCaller(ctx: AppContext): ReturnType<typeof principalOf> {
  const principal = principalOf(ctx);
  if (principal.kind === 'ephemeral') throw new AppError('invalid_api_key', 'GPT-Live sessions are opened with an API key; ephemeral client keys are for /v1/realtime.', { status: 401 });
  return principal;
}

/** CORS for the call endpoints: any origin may post an offer with a key and read the answer. */
export function callsCors(): Koa.Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    if (!CALLS_PATH.test(ctx.path)) return next();
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Access-Control-Expose-Headers', 'Location, X-Session-Id, X-Request-Id, Retry-After');
    if (ctx.method === 'OPTIONS') {
      ctx.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
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
  return parseCallBody(type, await readBody(ctx.req, maxBytes, OFFER_BODY_DEADLINE_MS), null);
}

/**
 * The `sdp` and `session` parts of a form, whether sent as plain fields (form-data, aiohttp) or as
 * parts with a filename and content type (httpx `files=`); other parts are skipped.
 */
async function readFormFields(ctx: AppContext, maxBytes: number): Promise<Record<string, string>> {
  const { fields, files } = await readMultipart(ctx.req, {
    fileFields: CALL_PARTS,
    maxFiles: 4,
    maxFileBytes: maxBytes,
    maxFields: 10,
    maxFieldBytes: maxBytes,
    refuseLongFields: true,
    param: null,
    deadlineMs: OFFER_BODY_DEADLINE_MS,
  });
  const parts: Record<string, string> = {};
  for (const name of CALL_PARTS) {
    const value = files.get(name)?.data.toString('utf8') ?? fields[name];
    if (value !== undefined) parts[name] = value;
  }
  return parts;
}
