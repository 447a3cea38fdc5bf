/**
 * Every REST operation of the server, one row each ('METHOD /path' → what the OpenAPI document
 * says about it). Request bodies and queries are the very schemas the routes parse with
 * (requests.ts, sessions/session-config.ts, signaling/realtime-calls.ts); responses name the
 * schemas of responses.ts. openapi.ts walks this table; test/server/openapi.test.ts checks that
 * its (method, path) pairs are exactly the router's.
 *
 * Left out on purpose: the fleet-internal routes (/internal/..., registered only with REDIS_URL,
 * called by peer nodes with the fleet secret, not by clients); they are not part of the public
 * API, and the router-parity test runs without a fleet, so it never sees them.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import { LegacySessionCreateRequest, SessionCreateRequest } from '../../sessions/session-config.js';
import { CallOffer, LiveSessionOffer } from '../../signaling/realtime-calls.js';
import { UsageRecord } from '../../usage/usage-view.js';
import { FILE_FIELDS } from '../upload.js';
import { ClientSecretRequest, SessionListQuery, UploadQuery, UsageQuery } from './requests.js';
import * as R from './responses.js';

type Json = Record<string, unknown>;

/** The component schemas of the document, by the names it has always used. */
export const COMPONENTS: Record<string, TSchema> = {
  Error: R.ErrorBody,
  Health: R.Health,
  Ready: R.Ready,
  SessionCreateRequest,
  LegacySessionCreateRequest,
  Session: R.Session,
  LegacySession: R.LegacySession,
  SessionList: R.SessionList,
  Chat: R.Chat,
  AssetEntry: R.AssetEntry,
  Asset: R.Asset,
  StandardAsset: R.StandardAsset,
  AssetDeleted: R.AssetDeleted,
  ClientSecretRequest,
  AvatarSession: R.AvatarSession,
  TranscriptionSession: R.TranscriptionSession,
  CallOffer,
  CallHangup: R.CallHangup,
  LiveSessionOffer,
  LiveSessionCreated: R.LiveSessionCreated,
  ClientSecret: R.ClientSecret,
  UsageRecord,
  UsageList: R.UsageList,
};
type Component = keyof typeof COMPONENTS & string;

export interface Operation {
  tags: string[];
  summary: string;
  description?: string;
  security?: Json[];
  /** Path parameters, in order. */
  params?: Json[];
  /** The query the route parses with (each property a parameter), or extra parameters described only. */
  query?: TObject;
  body?: { required: boolean; content: Record<string, Component | Json> };
  responses: Record<string, Json>;
}

export const ref = (name: Component): Json => ({ $ref: `#/components/schemas/${name}` });
const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: ref('Error') } } });
const json = (schema: Json, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
const ERRORS = {
  '400': errorResponse('Invalid request: a field is missing, of the wrong type or out of range (see error.param)'),
  '401': errorResponse('Missing, invalid, revoked or expired key'),
  '404': errorResponse('No such resource for this user'),
  '429': errorResponse('Per-key rate limit reached; see Retry-After'),
};
const JSON_BODY_ERRORS = { '413': errorResponse('Body larger than MAX_JSON_BYTES'), '415': errorResponse('Body is not JSON') };
const authed = [{ bearer: [] }];
const publicOrKey = [{}, { bearer: [] }];
const pathParam = (name: string, schema: Json = { type: 'string' }, description?: string): Json => ({ name, in: 'path', required: true, schema, ...(description ? { description } : {}) });
const assetIdOrStandard = pathParam('id', { type: 'string' }, 'A standard id or the UUID of your upload');

const FILE_ALIASES = FILE_FIELDS.filter((f) => f !== 'file').join(', ');

function assetOperations(plural: string, kind: string, types: string[], legacy: boolean): Record<string, Operation> {
  const files = Object.fromEntries(types.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }]));
  const upload: Operation = {
    tags: ['assets'],
    summary: `Upload a custom ${kind}`,
    security: authed,
    query: UploadQuery,
    body: {
      required: true,
      content: {
        'multipart/form-data': {
          schema: {
            type: 'object',
            required: ['file'],
            properties: {
              file: { type: 'string', contentMediaType: types[0], description: `The ${kind} file (also accepted under the part names ${FILE_ALIASES})` },
              name: { type: 'string' },
              description: { type: 'string' },
            },
          },
        },
        ...files,
      },
    },
    responses: {
      '201': json(ref('Asset'), 'Stored; use the id in sessions'),
      ...ERRORS,
      '413': errorResponse('File larger than MAX_UPLOAD_BYTES'),
      '415': errorResponse('Not an accepted file type'),
    },
  };
  return {
    [`GET /v1/${plural}`]: {
      tags: ['assets'],
      summary: `List standard ${plural} (public); with a key, the caller's uploads too`,
      security: publicOrKey,
      responses: {
        '200': json({ type: 'object', required: [plural], properties: { [plural]: { type: 'array', items: ref('AssetEntry') } } }),
        '401': ERRORS['401'],
        '429': ERRORS['429'],
      },
    },
    [`POST /v1/${plural}`]: upload,
    [`GET /v1/${plural}/{id}/content`]: {
      tags: ['assets'],
      summary: `The ${kind} file itself: public for a standard ${kind}, your key for one you uploaded`,
      security: publicOrKey,
      params: [assetIdOrStandard],
      responses: { '200': { description: 'The file', content: files }, ...ERRORS },
    },
    [`GET /v1/${plural}/{id}`]: {
      tags: ['assets'],
      summary: `A standard ${kind} (public) or one you uploaded (your key), with what inspecting its file measured`,
      security: publicOrKey,
      params: [assetIdOrStandard],
      responses: { '200': json({ oneOf: [ref('Asset'), ref('StandardAsset')] }), ...ERRORS },
    },
    [`DELETE /v1/${plural}/{id}`]: {
      tags: ['assets'],
      summary: `Delete a custom ${kind}`,
      security: authed,
      params: [pathParam('id', { type: 'string', format: 'uuid' })],
      responses: { '200': json(ref('AssetDeleted')), ...ERRORS },
    },
    [`POST /${plural}`]: { ...upload, summary: `${upload.summary} (older form${legacy ? '' : ', by analogy'})` },
  };
}

const sessionId = pathParam('session_id');
const legacyId = pathParam('id');

export const OPERATIONS: Record<string, Operation> = {
  'GET /healthz': { tags: ['operations'], summary: 'Liveness', responses: { '200': json(ref('Health')) } },
  'GET /readyz': {
    tags: ['operations'],
    summary: 'Readiness: store reachable, standard assets present, accepting work',
    responses: { '200': json(ref('Ready')), '503': json(ref('Ready'), 'Not ready') },
  },
  'GET /metrics': {
    tags: ['operations'],
    summary: 'Prometheus metrics (sessions by status, worker slots, request latency)',
    responses: { '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } },
  },
  'GET /v1/openapi.json': { tags: ['operations'], summary: 'This document', responses: { '200': json({ type: 'object' }) } },
  'POST /v1/sessions': {
    tags: ['sessions'],
    summary: 'Create a session (takes a worker slot; status active)',
    security: authed,
    body: { required: false, content: { 'application/json': 'SessionCreateRequest' } },
    responses: { '200': json(ref('Session')), ...ERRORS, ...JSON_BODY_ERRORS, '503': errorResponse('No worker slot free; see Retry-After') },
  },
  'GET /v1/sessions': {
    tags: ['sessions'],
    summary: "List the caller's sessions, newest first",
    security: authed,
    query: SessionListQuery,
    responses: { '200': json(ref('SessionList')), ...ERRORS },
  },
  'GET /v1/sessions/{session_id}': { tags: ['sessions'], summary: 'Get a session', security: authed, params: [sessionId], responses: { '200': json(ref('Session')), ...ERRORS } },
  'DELETE /v1/sessions/{session_id}': {
    tags: ['sessions'],
    summary: 'End a session: releases its worker, records usage. Idempotent.',
    security: authed,
    params: [sessionId],
    responses: { '200': json(ref('Session')), ...ERRORS },
  },
  'GET /v1/sessions/{session_id}/chat': {
    tags: ['sessions'],
    summary: 'Chat history of a session',
    security: authed,
    params: [sessionId],
    responses: { '200': json(ref('Chat')), ...ERRORS },
  },
  'POST /sessions': {
    tags: ['sessions (older form)'],
    summary: 'Create a session (older form)',
    security: authed,
    body: { required: true, content: { 'application/json': 'LegacySessionCreateRequest' } },
    responses: { '200': json(ref('LegacySession')), ...ERRORS, ...JSON_BODY_ERRORS, '503': errorResponse('No worker slot free') },
  },
  'GET /sessions/{id}': {
    tags: ['sessions (older form)'],
    summary: 'Get a session (older form)',
    security: authed,
    params: [legacyId],
    responses: { '200': json(ref('LegacySession')), ...ERRORS },
  },
  'POST /sessions/{id}/end': {
    tags: ['sessions (older form)'],
    summary: 'End a session (older form). Idempotent.',
    security: authed,
    params: [legacyId],
    responses: { '200': json(ref('LegacySession')), ...ERRORS },
  },
  ...assetOperations('faces', 'face', ['image/jpeg', 'image/png', 'image/webp'], true),
  ...assetOperations('voices', 'voice', ['audio/wav', 'audio/mpeg'], true),
  ...assetOperations('driving', 'driving motion', ['application/x-pickle', 'application/octet-stream'], false),
  'POST /v1/realtime/client_secrets': {
    tags: ['realtime'],
    summary: 'Mint an ephemeral key bound to a session config',
    security: authed,
    body: { required: false, content: { 'application/json': 'ClientSecretRequest' } },
    responses: { '200': json(ref('ClientSecret')), ...ERRORS, ...JSON_BODY_ERRORS },
  },
  'POST /v1/realtime/calls': {
    tags: ['realtime'],
    summary: 'Start a WebRTC call: answer an SDP offer (API key or ephemeral key)',
    description:
      'Audio (Opus) and video (H.264 or VP8, as the offer allows and session video_codec prefers) travel as RTP; events on the data channel the client opens (any label). ' +
      'The session is created pending with its worker slot, starts when the media connects, and ends with the call. CORS: any origin.',
    security: authed,
    body: {
      required: true,
      content: {
        'multipart/form-data': 'CallOffer',
        'application/sdp': { schema: { type: 'string', description: 'The SDP offer; the session config then comes from the ephemeral key, or defaults' } },
        'application/json': 'CallOffer',
      },
    },
    responses: {
      '201': {
        description: 'The SDP answer',
        headers: {
          Location: { schema: { type: 'string' }, description: '/v1/realtime/calls/{call_id}' },
          'X-Session-Id': { schema: { type: 'string' }, description: 'The session of the call' },
        },
        content: { 'application/sdp': { schema: { type: 'string' } } },
      },
      ...ERRORS,
      '400': errorResponse('Invalid SDP offer (invalid_offer), no usable codec (no_usable_codec), or invalid session config (param names the field)'),
      '408': errorResponse('The offer body did not arrive within 10 s (request_timeout); the connection is closed'),
      '413': errorResponse('Body larger than MAX_JSON_BYTES, or an SDP offer over 64 KiB (param sdp)'),
      '415': errorResponse('Not multipart/form-data, application/sdp or application/json'),
      '503': errorResponse('No worker slot free (no_worker_available), or in fleet mode Redis or PostgreSQL unavailable (redis_unavailable, postgres_unavailable); see Retry-After'),
    },
  },
  'POST /v1/live/sessions': {
    tags: ['realtime'],
    summary: 'Start a GPT-Live session over WebRTC (API key): answer an SDP offer',
    description:
      "OpenAI's GPT-Live protocol (docs/realtime.md#gpt-live): the session config is session.start's, the session starts when the media connects (do not send session.start on the data channel), " +
      'audio and the avatar video travel as RTP, Live events on the data channel. The WebSocket form is GET /v1/live/sessions. CORS: any origin.',
    security: authed,
    body: { required: true, content: { 'application/json': 'LiveSessionOffer' } },
    responses: {
      '201': json(ref('LiveSessionCreated')),
      ...ERRORS,
      '400': errorResponse('Invalid SDP offer, no usable codec, or an invalid Live session config (param names the field: session.model, session.audio.format, session.delegation)'),
      '401': errorResponse('No or invalid API key, or an ephemeral key (Live takes API keys)'),
      '413': errorResponse('Body larger than MAX_JSON_BYTES, or an SDP offer over 64 KiB (param transport.sdp)'),
      '415': errorResponse('Not application/json'),
      '503': errorResponse('No worker slot free (no_worker_available); see Retry-After'),
    },
  },
  'POST /v1/live/sessions/{session_id}/hangup': {
    tags: ['realtime'],
    summary: 'End a GPT-Live session (API key), of either transport',
    description: 'Its connection and sidebands hear session.closed (reason close_requested) and close. openai-python: client.live.sessions.hangup.',
    security: authed,
    params: [pathParam('session_id')],
    responses: { '204': { description: 'Ended' }, ...ERRORS, '401': errorResponse('No or invalid API key, or an ephemeral key (Live takes API keys)') },
  },
  'POST /v1/live/sessions/{session_id}/accept': liveRefusal('Accept a SIP call (refused: sip_not_supported)', '400', 'sip_not_supported: Live sessions here come over WebSocket and WebRTC'),
  'POST /v1/live/sessions/{session_id}/reject': liveRefusal('Reject a SIP call (refused: sip_not_supported)', '400', 'sip_not_supported: Live sessions here come over WebSocket and WebRTC'),
  'POST /v1/live/sessions/{session_id}/refer': liveRefusal('Transfer a SIP call (refused: sip_not_supported)', '400', 'sip_not_supported: Live sessions here come over WebSocket and WebRTC'),
  'POST /v1/live/sessions/{session_id}/fork': liveRefusal('Fork a Live session (refused: fork_not_supported)', '400', 'fork_not_supported: start a new session with the conversation as session.input'),
  'GET /v1/live/sessions/{session_id}/content': liveRefusal("A Live session's recording (refused: recording_not_found)", '404', 'recording_not_found (no audio is recorded; the transcript is GET /v1/sessions/{session_id}/chat), or no such session'),
  'POST /v1/realtime/calls/{call_id}/hangup': {
    tags: ['realtime'],
    summary: 'End a call (its session ends, usage recorded)',
    security: authed,
    params: [pathParam('call_id')],
    responses: { '200': json(ref('CallHangup')), ...ERRORS },
  },
  'GET /v1/usage': {
    tags: ['usage'],
    summary: "The caller's usage records whose session started in [start_time, end_time)",
    security: authed,
    query: UsageQuery,
    responses: { '200': json(ref('UsageList')), ...ERRORS },
  },
};

/** A GPT-Live control this server answers with an error only (after a 404 for an unknown session). */
function liveRefusal(summary: string, status: '400' | '404', why: string): Operation {
  return { tags: ['realtime'], summary, security: authed, params: [pathParam('session_id')], responses: { ...ERRORS, [status]: errorResponse(why) } };
}
