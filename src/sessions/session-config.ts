/**
 * Validation of session creation requests, current form (POST /v1/sessions, spec 2.2) and older
 * form (POST /sessions, spec 2.3). Produces a SessionConfig with every default applied. Types and
 * ranges of the fields the spec leaves untyped are decided here and documented in docs/api.md (Session fields) and by the schemas below:
 *
 *   target_fps       integer 1..60 (or its decimal string); null = the media default, 25
 *   upsample_factor  number 1..4; the face is rendered at output_size / factor and upscaled by
 *                    the factor (1 = render at full size; higher = cheaper, softer)
 *   tts_source       one of TTS_SOURCES; null = auto (best configured voice)
 *   video_codec      h264 | vp8 (case-insensitive); null = h264
 *   output_size      512x512 | 720x720 | 1280x720; null = the server's AVATAR_OUTPUT_SIZE
 *
 * Unknown fields are ignored, so clients that send more than we know keep working; null is absent.
 * Each request is described once, as a TypeBox schema: core/schema.ts compiles it into the parser
 * below, and server/openapi.ts publishes the same schema in the OpenAPI document.
 */
import { Type, type Static } from '@sinclair/typebox';
import { anyCaseEnum, compileRequest, lenientBoolean, nonBlankString, numericField } from '../core/schema.js';
import { OUTPUT_SIZES } from '../core/video-size.js';
import { TTS_SOURCES } from '../providers/tts/base.js';
import type { SessionRecord, VideoCodec } from '../store/store.js';

export const DEFAULT_INSTRUCTIONS = 'You are a helpful assistant.';
export const DEFAULT_VOICE = 'default';
export const VIDEO_CODECS: readonly VideoCodec[] = ['h264', 'vp8'];
const MAX_MODEL_CHARS = 200;
export const MAX_INSTRUCTIONS_CHARS = 100_000;
export const TARGET_FPS_RANGE = { min: 1, max: 60 } as const;
export const UPSAMPLE_FACTOR_RANGE = { min: 1, max: 4 } as const;

/** What a creation request decides about a session: the configurable part of SessionRecord. */
export type SessionConfig = Pick<
  SessionRecord,
  'model' | 'voice' | 'face' | 'driving' | 'instructions' | 'video' | 'targetFps' | 'upsampleFactor' | 'ttsSource' | 'videoCodec' | 'outputSize'
>;

type Body = Record<string, unknown>;

const assetId = (what: string) => nonBlankString(MAX_MODEL_CHARS, { description: `Standard ${what} id or the UUID of an uploaded ${what}` });
const instructions = Type.String({ maxLength: MAX_INSTRUCTIONS_CHARS, default: DEFAULT_INSTRUCTIONS });

/** The media fields of a session: both creation forms, and a WebRTC call's `session`. */
export const MediaFields = Type.Object({
  target_fps: Type.Optional(numericField(TARGET_FPS_RANGE, { integer: true, description: 'Video frame rate; default 25' })),
  upsample_factor: Type.Optional(
    numericField(UPSAMPLE_FACTOR_RANGE, { description: 'The face is rendered at output size / factor and upscaled by the factor; default 1' }),
  ),
  tts_source: Type.Optional(anyCaseEnum(TTS_SOURCES, { description: 'Speech provider; default auto' })),
  video_codec: Type.Optional(anyCaseEnum(VIDEO_CODECS, { description: 'WebRTC video codec; default h264' })),
  output_size: Type.Optional(
    anyCaseEnum(OUTPUT_SIZES, { description: "The avatar's video size (1280x720: landscape, the face centred); default the server's AVATAR_OUTPUT_SIZE, 512x512" }),
  ),
});

/** POST /v1/sessions body (spec 2.2); every field optional, unknown fields ignored. */
export const SessionCreateRequest = Type.Object({
  model: Type.Optional(nonBlankString(MAX_MODEL_CHARS, { description: "The LLM; default the server's DEFAULT_MODEL" })),
  voice: Type.Optional(nonBlankString(MAX_MODEL_CHARS, { default: DEFAULT_VOICE, description: 'Standard voice id or the UUID of an uploaded voice' })),
  face: Type.Optional(assetId('face')),
  driving: Type.Optional(assetId('driving motion')),
  instructions: Type.Optional(instructions),
  ...MediaFields.properties,
});

/** POST /sessions body (spec 2.3): `model` required; `voice_id` and `face` are aliases of `voice` and `face_id`. */
export const LegacySessionCreateRequest = Type.Object({
  model: nonBlankString(MAX_MODEL_CHARS),
  voice: Type.Optional(nonBlankString(MAX_MODEL_CHARS, { default: DEFAULT_VOICE, description: 'Standard voice id or the UUID of an uploaded voice' })),
  voice_id: Type.Optional(nonBlankString(MAX_MODEL_CHARS, { description: "An alias of 'voice'" })),
  face_id: Type.Optional(assetId('face')),
  face: Type.Optional(nonBlankString(MAX_MODEL_CHARS, { description: "An alias of 'face_id'" })),
  driving: Type.Optional(assetId('driving motion')),
  instructions: Type.Optional(instructions),
  video: Type.Optional(lenientBoolean({ default: true, description: 'false: audio only (also the strings "true"/"false")' })),
  ...MediaFields.properties,
});

const readMedia = compileRequest(MediaFields);
const readSession = compileRequest(SessionCreateRequest);
const readLegacy = compileRequest(LegacySessionCreateRequest);

/** The session fields parseMediaFields reads. */
export const MEDIA_FIELDS: readonly string[] = Object.keys(MediaFields.properties);

/** The media fields of a session (current and older form, and a WebRTC call's session config). */
export function parseMediaFields(body: Body): Pick<SessionConfig, 'targetFps' | 'upsampleFactor' | 'ttsSource' | 'videoCodec' | 'outputSize'> {
  return mediaConfig(readMedia(body));
}

function mediaConfig(m: Static<typeof MediaFields>): Pick<SessionConfig, 'targetFps' | 'upsampleFactor' | 'ttsSource' | 'videoCodec' | 'outputSize'> {
  return {
    targetFps: m.target_fps ?? null,
    upsampleFactor: m.upsample_factor ?? null,
    ttsSource: m.tts_source ?? null,
    videoCodec: m.video_codec ?? null,
    outputSize: m.output_size ?? null,
  };
}

/** POST /v1/sessions body (spec 2.2). */
export function parseSessionRequest(raw: unknown, defaultModel: string): SessionConfig {
  const body = readSession(raw === undefined ? {} : raw);
  return {
    model: body.model ?? defaultModel,
    voice: body.voice ?? DEFAULT_VOICE,
    face: body.face ?? null,
    driving: body.driving ?? null,
    instructions: body.instructions ?? DEFAULT_INSTRUCTIONS,
    video: true,
    ...mediaConfig(body),
  };
}

/** POST /sessions body (spec 2.3): model required, `video` flag, `face_id` for the face. */
export function parseLegacySessionRequest(raw: unknown): SessionConfig {
  const body = readLegacy(raw ?? {});
  return {
    model: body.model,
    voice: body.voice ?? body.voice_id ?? DEFAULT_VOICE,
    face: body.face_id ?? body.face ?? null,
    driving: body.driving ?? null,
    instructions: body.instructions ?? DEFAULT_INSTRUCTIONS,
    video: body.video ?? true,
    ...mediaConfig(body),
  };
}
