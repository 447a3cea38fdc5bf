/**
 * The response bodies of the REST routes, each described once as a TypeBox schema: views.ts
 * returns `Static<typeof X>` of these (a field added to a view and not here fails to compile) and
 * the OpenAPI document (openapi.ts) publishes them as components. The usage record's schema lives
 * with its view (usage/usage-view.ts; the webhook sends it too).
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { oneOfValues, Timestamp } from '../../core/schema.js';
import { SessionStatusSchema as SessionStatus, UsageRecord } from '../../usage/usage-view.js';

const nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options);

export const ErrorBody = Type.Object({
  error: Type.Object({
    message: Type.String(),
    type: oneOfValues(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'rate_limit_error', 'server_error'] as const),
    code: Type.String(),
    param: nullable(Type.String()),
  }),
});

export const Health = Type.Object({ status: Type.Literal('ok') });

export const Ready = Type.Object({
  status: oneOfValues(['ready', 'not_ready'] as const),
  checks: Type.Record(Type.String(), Type.String()),
  degraded: Type.Record(Type.String(), Type.String(), {
    description: "Hosted dependencies found down (language_model: a hosted model that failed or sent no first token in time), with since when and why; the server stays ready and a session's avatar says LLM_FALLBACK_LINE. Empty when all answer.",
  }),
  workers: nullable(Type.Object({ capacity: Type.Integer(), used: Type.Integer() }), {
    description: 'null when the worker slots cannot be read (in fleet mode: Redis unavailable)',
  }),
});

/** Spec 2.1: the session object, the same for create, get and end. */
const SESSION_PROPERTIES = {
  id: Type.String(),
  user_id: Type.String(),
  voice: Type.String(),
  model: Type.String(),
  instructions: Type.String(),
  status: SessionStatus,
  created_at: Timestamp,
  started_at: nullable(Timestamp),
  ended_at: nullable(Timestamp),
  duration_seconds: nullable(Type.Number()),
};
export const Session = Type.Object(SESSION_PROPERTIES, { additionalProperties: false });

export const LegacySession = Type.Object(
  { session_id: Type.String(), ...SESSION_PROPERTIES, video: Type.Boolean(), face_id: nullable(Type.String()) },
  { additionalProperties: false },
);

export const SessionList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(Session),
  has_more: Type.Boolean(),
  last_id: nullable(Type.String()),
});

export const Chat = Type.Object(
  {
    session_id: Type.String(),
    instructions: Type.String(),
    turns: Type.Array(Type.Object({ role: oneOfValues(['user', 'assistant'] as const), content: Type.String() })),
    current_transcript: Type.String(),
  },
  { additionalProperties: false },
);

export const AssetEntry = Type.Object({ id: Type.String(), filename: Type.String(), description: Type.String() });

/** What an upload and a standard asset are both described with (besides their ids and created_at). */
const ASSET_PROPERTIES = {
  object: oneOfValues(['face', 'voice', 'driving'] as const),
  name: Type.String(),
  filename: Type.String(),
  description: Type.String(),
  content_type: Type.String(),
  bytes: Type.Integer(),
  sha256: Type.String(),
  metadata: Type.Unsafe<Record<string, unknown>>({
    type: 'object',
    description:
      'What validation measured: width/height, duration/sample rate, frames/fps; faces also face_box, face_pose and face_frame (the head-and-shoulders crop the avatar shows, {x, y, width, height} in photo pixels)',
  }),
};
const uuid = () => Type.String({ format: 'uuid' });

export const Asset = Type.Object({
  id: uuid(),
  face_id: Type.Optional(uuid()),
  voice_id: Type.Optional(uuid()),
  driving_id: Type.Optional(uuid()),
  ...ASSET_PROPERTIES,
  created_at: Timestamp,
});

export const StandardAsset = Type.Object(
  {
    id: Type.String(),
    face_id: Type.Optional(Type.String()),
    voice_id: Type.Optional(Type.String()),
    driving_id: Type.Optional(Type.String()),
    standard: Type.Literal(true),
    ...ASSET_PROPERTIES,
    created_at: Type.Null(),
  },
  { description: 'A standard asset, described as an upload is' },
);

export const AssetDeleted = Type.Object({ id: Type.String(), object: Type.String(), deleted: Type.Literal(true) });

export const ClientSecret = Type.Object({
  value: Type.String({ pattern: '^ek_' }),
  expires_at: Type.Integer({ description: 'Unix seconds' }),
  session: Type.Unsafe<Record<string, unknown>>({ type: 'object', required: ['type', 'object'] }),
  client_secret: Type.String({ pattern: '^ek_' }),
  expires_in: Type.Integer({ description: 'Seconds' }),
});

/** POST /v1/live/sessions: the Live session and the SDP answer (openai-python's LiveCreateResponse). */
export const LiveSessionCreated = Type.Object({
  session: Type.Object({ id: Type.String({ description: 'The session id (sideband and controls use it)' }) }),
  transport: Type.Object({ type: Type.Literal('webrtc'), sdp: Type.String({ description: 'The SDP answer' }) }),
});

export const CallHangup = Type.Object({
  id: Type.String(),
  object: Type.Literal('realtime.call'),
  status: Type.Literal('ended'),
  session_id: Type.String(),
});

/**
 * An avatar-only session, for the document only: the fields are checked by the realtime session
 * rules (realtime/avatar-session-update.ts), which answer session.update too; this is their summary.
 */
export const AvatarSession = Type.Object(
  {
    type: Type.Literal('avatar'),
    face: Type.Optional(nullable(Type.String())),
    driving: Type.Optional(nullable(Type.String())),
    output_modalities: Type.Optional(Type.Array(oneOfValues(['audio', 'image'] as const), { default: ['audio', 'image'] })),
    audio: Type.Optional(
      Type.Object({
        input: Type.Optional(Type.Object({ format: Type.Optional(Type.Object({}, { description: "The agent's speech: {type:'audio/pcm', rate: 8000..48000} (PCM16 mono), {type:'audio/pcmu'} or {type:'audio/pcma'}" })) })),
        output: Type.Optional(Type.Object({ format: Type.Optional(Type.Object({}, { description: "The played audio sent back: {type:'audio/pcm', rate: 24000}, {type:'audio/pcmu'} or {type:'audio/pcma'}" })) })),
      }),
    ),
    video: Type.Optional(
      Type.Object({
        format: Type.Optional(oneOfValues(['jpeg', 'i420'] as const, { description: 'i420: raw frames as binary WebSocket messages (24-byte header); fixed when the session opens; default jpeg' })),
      }),
    ),
  },
  {
    description:
      "An avatar-only session (docs/avatar-mode.md): the client streams an agent's speech (output_audio_buffer.append / commit / clear, avatar.listen) and gets back the played audio and the frames on one clock " +
      '(response.output_audio.delta, response.output_image.delta or binary I420 frames; output_audio_buffer.started / committed / stopped {segment_id, played_ms, interrupted} / cleared). No model, voice or recogniser runs.',
  },
);

/**
 * A transcription session, for the document only: the fields are checked by the transcription
 * session rules (realtime/transcription-session.ts), which answer session.update too.
 */
export const TranscriptionSession = Type.Object(
  {
    type: Type.Literal('transcription'),
    audio: Type.Optional(
      Type.Object({
        input: Type.Optional(
          Type.Object({
            format: Type.Optional(Type.Object({}, { description: "{type:'audio/pcm', rate: 24000}, {type:'audio/pcmu'} or {type:'audio/pcma'}" })),
            noise_reduction: Type.Optional(nullable(Type.Object({}, { description: 'Accepted and echoed; not applied' }))),
            transcription: Type.Optional(nullable(Type.Object({}, { description: "{model, language, prompt}; null: the server's recogniser" }))),
            turn_detection: Type.Optional(
              nullable(Type.Object({}, { description: "server_vad (the default: threshold 0.5, prefix_padding_ms 300, silence_duration_ms 500) or semantic_vad; null: the client commits; idle_timeout_ms refused" })),
            ),
          }),
        ),
      }),
    ),
    include: Type.Optional(nullable(Type.Array(Type.Literal('item.input_audio_transcription.logprobs')))),
  },
  {
    description:
      'A transcription session (docs/realtime.md): input audio in (input_audio_buffer.append / commit / clear, or a call\'s microphone), its turns and their transcripts out ' +
      '(input_audio_buffer.speech_started / speech_stopped / committed, conversation.item.added / done, conversation.item.input_audio_transcription.delta / completed / failed). No model responds.',
  },
);

export const UsageList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(UsageRecord),
  totals: Type.Object({
    sessions: Type.Integer(),
    duration_seconds: Type.Number(),
    audio_seconds_out: Type.Number(),
    frames_out: Type.Integer(),
    input_tokens: Type.Integer(),
    output_tokens: Type.Integer(),
  }),
  has_more: Type.Boolean(),
});
