/**
 * OpenAPI 3.1 description of every REST route, served at /v1/openapi.json. test/server/openapi.test.ts
 * checks that its paths and methods are exactly the router's, and that real responses validate
 * against the schemas here, so this document cannot drift from the code.
 */
import { CONFIG_VARS } from '../config.js';
import { TTS_SOURCES } from '../providers/tts/base.js';
import { OUTPUT_SIZES } from '../core/video-size.js';
import { VIDEO_CODECS, TARGET_FPS_RANGE, UPSAMPLE_FACTOR_RANGE } from '../sessions/session-config.js';

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (type: string, extra: Schema = {}): Schema => ({ type: [type, 'null'], ...extra });
const TIMESTAMP: Schema = {
  type: 'string',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{6}$',
  description: 'UTC, ISO 8601 without zone, with microseconds',
  examples: ['2026-01-01T00:00:00.000000'],
};
const NULLABLE_TIMESTAMP: Schema = { anyOf: [TIMESTAMP, { type: 'null' }] };
const STATUS: Schema = { type: 'string', enum: ['pending', 'active', 'ended', 'failed', 'cancelled'] };

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});
const json = (schema: Schema, description = 'OK') => ({ description, content: { 'application/json': { schema } } });

const ERRORS = {
  '400': errorResponse('Invalid request: a field is missing, of the wrong type or out of range (see error.param)'),
  '401': errorResponse('Missing, invalid, revoked or expired key'),
  '404': errorResponse('No such resource for this user'),
  '429': errorResponse('Per-key rate limit reached; see Retry-After'),
};
const JSON_BODY_ERRORS = {
  '413': errorResponse('Body larger than MAX_JSON_BYTES'),
  '415': errorResponse('Body is not JSON'),
};
const authed = [{ bearer: [] }];
const sessionIdParam = { name: 'session_id', in: 'path', required: true, schema: { type: 'string' } };
const legacyIdParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
/** What an upload and a standard asset are both described with (besides their ids and created_at). */
const ASSET_FIELDS = ['object', 'name', 'filename', 'description', 'content_type', 'bytes', 'sha256', 'metadata', 'created_at'];
const ASSET_PROPERTIES: Record<string, Schema> = {
  object: { enum: ['face', 'voice', 'driving'] },
  name: { type: 'string' },
  filename: { type: 'string' },
  description: { type: 'string' },
  content_type: { type: 'string' },
  bytes: { type: 'integer' },
  sha256: { type: 'string' },
  metadata: {
    type: 'object',
    description:
      'What validation measured: width/height, duration/sample rate, frames/fps; faces also face_box, face_pose and face_frame (the head-and-shoulders crop the avatar shows, {x, y, width, height} in photo pixels)',
  },
};
const assetIdParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } };

const uploadBody = (kind: string, types: string[]) => ({
  required: true,
  content: {
    'multipart/form-data': {
      schema: {
        type: 'object',
        required: ['file'],
        properties: {
          file: { type: 'string', contentMediaType: types[0], description: `The ${kind} file` },
          name: { type: 'string' },
          description: { type: 'string' },
        },
      },
    },
    ...Object.fromEntries(types.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }])),
  },
});

function assetPaths(plural: string, kind: string, types: string[], legacy: boolean) {
  const upload = {
    tags: ['assets'],
    summary: `Upload a custom ${kind}`,
    security: authed,
    requestBody: uploadBody(kind, types),
    responses: {
      '201': json(ref('Asset'), 'Stored; use the id in sessions'),
      ...ERRORS,
      '413': errorResponse('File larger than MAX_UPLOAD_BYTES'),
      '415': errorResponse('Not an accepted file type'),
    },
  };
  const paths: Record<string, unknown> = {
    [`/v1/${plural}`]: {
      get: {
        tags: ['assets'],
        summary: `List standard ${plural} (public); with a key, the caller's uploads too`,
        security: [{}, { bearer: [] }],
        responses: {
          '200': json({
            type: 'object',
            required: [plural],
            properties: { [plural]: { type: 'array', items: ref('AssetEntry') } },
          }),
          '401': ERRORS['401'],
          '429': ERRORS['429'],
        },
      },
      post: upload,
    },
    [`/v1/${plural}/{id}/content`]: {
      get: {
        tags: ['assets'],
        summary: `The ${kind} file itself: public for a standard ${kind}, your key for one you uploaded`,
        security: [{}, { bearer: [] }],
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'A standard id or the UUID of your upload' }],
        responses: {
          '200': { description: 'The file', content: Object.fromEntries(types.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }])) },
          ...ERRORS,
        },
      },
    },
    [`/v1/${plural}/{id}`]: {
      get: {
        tags: ['assets'],
        summary: `A standard ${kind} (public) or one you uploaded (your key), with what inspecting its file measured`,
        security: [{}, { bearer: [] }],
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'A standard id or the UUID of your upload' }],
        responses: { '200': json({ oneOf: [ref('Asset'), ref('StandardAsset')] }), ...ERRORS },
      },
      delete: {
        tags: ['assets'],
        summary: `Delete a custom ${kind}`,
        security: authed,
        parameters: [assetIdParam],
        responses: { '200': json(ref('AssetDeleted')), ...ERRORS },
      },
    },
  };
  paths[`/${plural}`] = { post: { ...upload, summary: `${upload.summary} (older form${legacy ? '' : ', by analogy'})` } };
  return paths;
}

export function openApiDocument(serverUrl: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Realtime avatar server',
      version: '0.1.0',
      description:
        'OpenAI-Realtime-compatible conversational avatar server: REST control plane. Errors are ' +
        '{"error":{"message","type","code","param"}}. Configuration variables: ' +
        CONFIG_VARS.map((v) => v.name).join(', ') +
        '. Realtime over WebSocket (not a REST route, so not a path here): GET /v1/realtime upgrades to a session of OpenAI Realtime GA events ' +
        '(query: model, session_id, call_id for a call\'s sideband); with intent=avatar (and video_format=jpeg|i420), or an ephemeral key minted with ' +
        "session.type 'avatar', the session is avatar-only (schema AvatarSession; events in docs/avatar-mode.md).",
    },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API key (avs_...) or, where stated, an ephemeral key (ek_...)' },
      },
      schemas: SCHEMAS,
    },
    paths: {
      '/healthz': {
        get: { tags: ['operations'], summary: 'Liveness', responses: { '200': json(ref('Health')) } },
      },
      '/readyz': {
        get: {
          tags: ['operations'],
          summary: 'Readiness: store reachable, standard assets present, accepting work',
          responses: { '200': json(ref('Ready')), '503': json(ref('Ready'), 'Not ready') },
        },
      },
      '/metrics': {
        get: {
          tags: ['operations'],
          summary: 'Prometheus metrics (sessions by status, worker slots, request latency)',
          responses: { '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      '/v1/openapi.json': {
        get: { tags: ['operations'], summary: 'This document', responses: { '200': json({ type: 'object' }) } },
      },
      '/v1/sessions': {
        post: {
          tags: ['sessions'],
          summary: 'Create a session (takes a worker slot; status active)',
          security: authed,
          requestBody: { required: false, content: { 'application/json': { schema: ref('SessionCreateRequest') } } },
          responses: {
            '200': json(ref('Session')),
            ...ERRORS,
            ...JSON_BODY_ERRORS,
            '503': errorResponse('No worker slot free; see Retry-After'),
          },
        },
        get: {
          tags: ['sessions'],
          summary: "List the caller's sessions, newest first",
          security: authed,
          parameters: [
            { name: 'status', in: 'query', schema: STATUS },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
            { name: 'before', in: 'query', schema: { type: 'string' }, description: 'A session id: list those created before it' },
          ],
          responses: { '200': json(ref('SessionList')), ...ERRORS },
        },
      },
      '/v1/sessions/{session_id}': {
        get: {
          tags: ['sessions'],
          summary: 'Get a session',
          security: authed,
          parameters: [sessionIdParam],
          responses: { '200': json(ref('Session')), ...ERRORS },
        },
        delete: {
          tags: ['sessions'],
          summary: 'End a session: releases its worker, records usage. Idempotent.',
          security: authed,
          parameters: [sessionIdParam],
          responses: { '200': json(ref('Session')), ...ERRORS },
        },
      },
      '/v1/sessions/{session_id}/chat': {
        get: {
          tags: ['sessions'],
          summary: 'Chat history of a session',
          security: authed,
          parameters: [sessionIdParam],
          responses: { '200': json(ref('Chat')), ...ERRORS },
        },
      },
      '/sessions': {
        post: {
          tags: ['sessions (older form)'],
          summary: 'Create a session (older form)',
          security: authed,
          requestBody: { required: true, content: { 'application/json': { schema: ref('LegacySessionCreateRequest') } } },
          responses: { '200': json(ref('LegacySession')), ...ERRORS, ...JSON_BODY_ERRORS, '503': errorResponse('No worker slot free') },
        },
      },
      '/sessions/{id}': {
        get: {
          tags: ['sessions (older form)'],
          summary: 'Get a session (older form)',
          security: authed,
          parameters: [legacyIdParam],
          responses: { '200': json(ref('LegacySession')), ...ERRORS },
        },
      },
      '/sessions/{id}/end': {
        post: {
          tags: ['sessions (older form)'],
          summary: 'End a session (older form). Idempotent.',
          security: authed,
          parameters: [legacyIdParam],
          responses: { '200': json(ref('LegacySession')), ...ERRORS },
        },
      },
      ...assetPaths('faces', 'face', ['image/jpeg', 'image/png', 'image/webp'], true),
      ...assetPaths('voices', 'voice', ['audio/wav', 'audio/mpeg'], true),
      ...assetPaths('driving', 'driving motion', ['application/x-pickle', 'application/octet-stream'], false),
      '/v1/realtime/client_secrets': {
        post: {
          tags: ['realtime'],
          summary: 'Mint an ephemeral key bound to a session config',
          security: authed,
          requestBody: { required: false, content: { 'application/json': { schema: ref('ClientSecretRequest') } } },
          responses: { '200': json(ref('ClientSecret')), ...ERRORS, ...JSON_BODY_ERRORS },
        },
      },
      '/v1/realtime/calls': {
        post: {
          tags: ['realtime'],
          summary: 'Start a WebRTC call: answer an SDP offer (API key or ephemeral key)',
          description:
            'Audio (Opus) and video (H.264 or VP8, as the offer allows and session video_codec prefers) travel as RTP; events on the data channel the client opens (any label). ' +
            'The session is created pending with its worker slot, starts when the media connects, and ends with the call. CORS: any origin.',
          security: authed,
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': { schema: ref('CallOffer') },
              'application/sdp': { schema: { type: 'string', description: 'The SDP offer; the session config then comes from the ephemeral key, or defaults' } },
              'application/json': { schema: ref('CallOffer') },
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
      },
      '/v1/realtime/calls/{call_id}/hangup': {
        post: {
          tags: ['realtime'],
          summary: 'End a call (its session ends, usage recorded)',
          security: authed,
          parameters: [{ name: 'call_id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': json(ref('CallHangup')), ...ERRORS },
        },
      },
      '/v1/usage': {
        get: {
          tags: ['usage'],
          summary: "The caller's usage records whose session started in [start_time, end_time)",
          security: authed,
          parameters: [
            { name: 'start_time', in: 'query', schema: { type: 'string' }, description: 'Unix seconds or ISO 8601; default end_time - 30 days' },
            { name: 'end_time', in: 'query', schema: { type: 'string' }, description: 'Unix seconds or ISO 8601; default now' },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
          ],
          responses: { '200': json(ref('UsageList')), ...ERRORS },
        },
      },
    },
  };
}

/** Spec 2.1: the session object, the same for create, get and end. */
const SESSION_PROPERTIES: Record<string, Schema> = {
  id: { type: 'string' },
  user_id: { type: 'string' },
  voice: { type: 'string' },
  model: { type: 'string' },
  instructions: { type: 'string' },
  status: STATUS,
  created_at: TIMESTAMP,
  started_at: NULLABLE_TIMESTAMP,
  ended_at: NULLABLE_TIMESTAMP,
  duration_seconds: nullable('number'),
};
const SESSION_FIELDS = Object.keys(SESSION_PROPERTIES);

const SCHEMAS: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['message', 'type', 'code', 'param'],
        properties: {
          message: { type: 'string' },
          type: {
            type: 'string',
            enum: ['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'rate_limit_error', 'server_error'],
          },
          code: { type: 'string' },
          param: nullable('string'),
        },
      },
    },
  },
  Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  Ready: {
    type: 'object',
    required: ['status', 'checks', 'workers'],
    properties: {
      status: { enum: ['ready', 'not_ready'] },
      checks: { type: 'object', additionalProperties: { type: 'string' } },
      workers: {
        type: 'object',
        required: ['capacity', 'used'],
        properties: { capacity: { type: 'integer' }, used: { type: 'integer' } },
      },
    },
  },
  SessionCreateRequest: {
    type: 'object',
    properties: {
      model: { type: 'string', default: 'gpt-5.2' },
      voice: { type: 'string', default: 'default', description: 'Standard voice id or the UUID of an uploaded voice' },
      face: { type: 'string', description: 'Standard face id or the UUID of an uploaded face' },
      instructions: { type: 'string', default: 'You are a helpful assistant.' },
      driving: { type: 'string', description: 'Standard driving motion id or the UUID of an uploaded one' },
      target_fps: {
        type: ['integer', 'string'],
        minimum: TARGET_FPS_RANGE.min,
        maximum: TARGET_FPS_RANGE.max,
        description: 'Video frame rate; default 25',
      },
      upsample_factor: {
        type: ['number', 'string'],
        minimum: UPSAMPLE_FACTOR_RANGE.min,
        maximum: UPSAMPLE_FACTOR_RANGE.max,
        description: 'The face is rendered at output size / factor and upscaled by the factor; default 1',
      },
      tts_source: { enum: [...TTS_SOURCES], description: 'Speech provider; default auto' },
      video_codec: { enum: [...VIDEO_CODECS], description: 'WebRTC video codec; default h264' },
      output_size: { enum: [...OUTPUT_SIZES], description: "The avatar's video size (1280x720: landscape, the face centred); default the server's AVATAR_OUTPUT_SIZE, 512x512" },
    },
  },
  LegacySessionCreateRequest: {
    type: 'object',
    required: ['model'],
    properties: {
      model: { type: 'string' },
      voice: { type: 'string', default: 'default' },
      video: { type: 'boolean', default: true },
      face_id: { type: 'string' },
    },
  },
  Session: {
    type: 'object',
    additionalProperties: false,
    required: SESSION_FIELDS,
    properties: SESSION_PROPERTIES,
  },
  LegacySession: {
    type: 'object',
    additionalProperties: false,
    required: ['session_id', ...SESSION_FIELDS, 'video', 'face_id'],
    properties: { session_id: { type: 'string' }, ...SESSION_PROPERTIES, video: { type: 'boolean' }, face_id: nullable('string') },
  },
  SessionList: {
    type: 'object',
    required: ['object', 'data', 'has_more', 'last_id'],
    properties: {
      object: { const: 'list' },
      data: { type: 'array', items: ref('Session') },
      has_more: { type: 'boolean' },
      last_id: nullable('string'),
    },
  },
  Chat: {
    type: 'object',
    additionalProperties: false,
    required: ['session_id', 'instructions', 'turns', 'current_transcript'],
    properties: {
      session_id: { type: 'string' },
      instructions: { type: 'string' },
      turns: {
        type: 'array',
        items: {
          type: 'object',
          required: ['role', 'content'],
          properties: { role: { enum: ['user', 'assistant'] }, content: { type: 'string' } },
        },
      },
      current_transcript: { type: 'string' },
    },
  },
  AssetEntry: {
    type: 'object',
    required: ['id', 'filename', 'description'],
    properties: { id: { type: 'string' }, filename: { type: 'string' }, description: { type: 'string' } },
  },
  Asset: {
    type: 'object',
    required: ['id', ...ASSET_FIELDS],
    properties: {
      id: { type: 'string', format: 'uuid' },
      face_id: { type: 'string', format: 'uuid' },
      voice_id: { type: 'string', format: 'uuid' },
      driving_id: { type: 'string', format: 'uuid' },
      ...ASSET_PROPERTIES,
      created_at: TIMESTAMP,
    },
  },
  StandardAsset: {
    type: 'object',
    description: 'A standard asset, described as an upload is',
    required: ['id', 'standard', ...ASSET_FIELDS],
    properties: {
      id: { type: 'string' },
      face_id: { type: 'string' },
      voice_id: { type: 'string' },
      driving_id: { type: 'string' },
      standard: { const: true },
      ...ASSET_PROPERTIES,
      created_at: { type: 'null' },
    },
  },
  AssetDeleted: {
    type: 'object',
    required: ['id', 'object', 'deleted'],
    properties: { id: { type: 'string' }, object: { type: 'string' }, deleted: { const: true } },
  },
  ClientSecretRequest: {
    type: 'object',
    properties: {
      session: {
        type: 'object',
        description: "Realtime session config (GA fields and the flat voice/face/driving) with type 'realtime' (the default), or an avatar-only session (AvatarSession) with type 'avatar'",
        oneOf: [{ type: 'object', properties: { type: { const: 'realtime' } } }, ref('AvatarSession')],
      },
      expires_after: {
        type: 'object',
        properties: { anchor: { const: 'created_at' }, seconds: { type: 'integer', minimum: 1, maximum: 7200, default: 60 } },
      },
    },
  },
  AvatarSession: {
    type: 'object',
    description:
      'An avatar-only session (docs/avatar-mode.md): the client streams an agent\'s speech (output_audio_buffer.append / commit / clear, avatar.listen) and gets back the played audio and the frames on one clock ' +
      '(response.output_audio.delta, response.output_image.delta or binary I420 frames; output_audio_buffer.started / committed / stopped {segment_id, played_ms, interrupted} / cleared). No model, voice or recogniser runs.',
    required: ['type'],
    properties: {
      type: { const: 'avatar' },
      face: { type: ['string', 'null'] },
      driving: { type: ['string', 'null'] },
      output_modalities: { type: 'array', items: { enum: ['audio', 'image'] }, default: ['audio', 'image'] },
      audio: {
        type: 'object',
        properties: {
          input: { type: 'object', properties: { format: { type: 'object', description: "The agent's speech: {type:'audio/pcm', rate: 8000..48000} (PCM16 mono), {type:'audio/pcmu'} or {type:'audio/pcma'}" } } },
          output: { type: 'object', properties: { format: { type: 'object', description: "The played audio sent back: {type:'audio/pcm', rate: 24000}, {type:'audio/pcmu'} or {type:'audio/pcma'}" } } },
        },
      },
      video: { type: 'object', properties: { format: { enum: ['jpeg', 'i420'], default: 'jpeg', description: 'i420: raw frames as binary WebSocket messages (24-byte header); fixed when the session opens' } } },
    },
  },
  CallOffer: {
    type: 'object',
    required: ['sdp'],
    properties: {
      sdp: { type: 'string', description: 'The SDP offer' },
      session: {
        description: "Realtime session config (GA fields, the flat voice/face/driving/modalities, and video_codec, target_fps, upsample_factor, tts_source, output_size), or an avatar-only one (AvatarSession, type 'avatar': speech in on the data channel, audio and video out as RTP): an object, or a JSON string of one in a form",
        type: ['object', 'string'],
      },
    },
  },
  CallHangup: {
    type: 'object',
    required: ['id', 'object', 'status', 'session_id'],
    properties: { id: { type: 'string' }, object: { const: 'realtime.call' }, status: { const: 'ended' }, session_id: { type: 'string' } },
  },
  ClientSecret: {
    type: 'object',
    required: ['value', 'expires_at', 'session', 'client_secret', 'expires_in'],
    properties: {
      value: { type: 'string', pattern: '^ek_' },
      expires_at: { type: 'integer', description: 'Unix seconds' },
      session: { type: 'object', required: ['type', 'object', 'model'] },
      client_secret: { type: 'string', pattern: '^ek_' },
      expires_in: { type: 'integer', description: 'Seconds' },
    },
  },
  UsageRecord: {
    type: 'object',
    required: [
      'id', 'object', 'user_id', 'session_id', 'model', 'voice', 'face', 'driving', 'status', 'end_reason', 'started_at',
      'ended_at', 'duration_seconds', 'audio_seconds_out', 'frames_out', 'input_tokens', 'output_tokens', 'created_at',
    ],
    properties: {
      id: { type: 'string' },
      object: { const: 'usage.record' },
      user_id: { type: 'string' },
      session_id: { type: 'string' },
      model: { type: 'string' },
      voice: { type: 'string' },
      face: nullable('string'),
      driving: nullable('string'),
      status: STATUS,
      end_reason: nullable('string'),
      started_at: TIMESTAMP,
      ended_at: TIMESTAMP,
      duration_seconds: { type: 'number' },
      audio_seconds_out: { type: 'number' },
      frames_out: { type: 'integer' },
      input_tokens: { type: 'integer' },
      output_tokens: { type: 'integer' },
      created_at: TIMESTAMP,
    },
  },
  UsageList: {
    type: 'object',
    required: ['object', 'data', 'totals', 'has_more'],
    properties: {
      object: { const: 'list' },
      data: { type: 'array', items: ref('UsageRecord') },
      totals: {
        type: 'object',
        required: ['sessions', 'duration_seconds', 'audio_seconds_out', 'frames_out', 'input_tokens', 'output_tokens'],
      },
      has_more: { type: 'boolean' },
    },
  },
};
