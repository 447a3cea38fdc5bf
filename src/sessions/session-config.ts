/**
 * Validation of session creation requests, current form (POST /v1/sessions, spec 2.2) and older
 * form (POST /sessions, spec 2.3). Produces a SessionConfig with every default applied. Types and
 * ranges of the fields the spec leaves untyped are decided here and documented in the README:
 *
 *   target_fps       integer 1..60 (or its decimal string); null = the media default, 25
 *   upsample_factor  number 1..4; the face is rendered at output_size / factor and upscaled by
 *                    the factor (1 = render at full size; higher = cheaper, softer)
 *   tts_source       one of TTS_SOURCES; null = auto (best configured voice)
 *   video_codec      h264 | vp8 (case-insensitive); null = h264
 *   output_size      512x512 | 720x720 | 1280x720; null = the server's AVATAR_OUTPUT_SIZE
 *
 * Unknown fields are ignored, so clients that send more than we know keep working.
 */
import { AppError, invalidParam } from '../core/errors.js';
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

export function requireObject(body: unknown): Body {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('invalid_request_body', 'The request body must be a JSON object.', { status: 400 });
  }
  return body as Body;
}

export function optionalString(body: Body, field: string, maxChars: number): string | null {
  const value = body[field];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalidParam(field, `'${field}' must be a string.`, 'invalid_type');
  if (value.length > maxChars) throw invalidParam(field, `'${field}' must be at most ${maxChars} characters.`, 'string_above_max_length');
  return value;
}

function nonEmpty(body: Body, field: string, maxChars: number): string | null {
  const value = optionalString(body, field, maxChars);
  if (value !== null && value.trim() === '') throw invalidParam(field, `'${field}' must not be empty.`);
  return value;
}

function numberField(body: Body, field: string, range: { min: number; max: number }, integer: boolean): number | null {
  let value = body[field];
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(value)) value = Number(value);
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw invalidParam(field, `'${field}' must be ${integer ? 'an integer' : 'a number'} from ${range.min} to ${range.max}.`, 'invalid_type');
  }
  if (value < range.min || value > range.max) {
    throw invalidParam(field, `'${field}' must be from ${range.min} to ${range.max}, got ${value}.`, 'out_of_range');
  }
  return value;
}

function enumField<T extends string>(body: Body, field: string, allowed: readonly T[]): T | null {
  const value = body[field];
  if (value === undefined || value === null) return null;
  const normal = typeof value === 'string' ? value.trim().toLowerCase() : value;
  if (typeof normal !== 'string' || !allowed.includes(normal as T)) {
    throw invalidParam(field, `'${field}' must be one of ${allowed.join(', ')}.`, 'invalid_value');
  }
  return normal as T;
}

function booleanField(body: Body, field: string): boolean | null {
  const value = body[field];
  if (value === undefined || value === null) return null;
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  throw invalidParam(field, `'${field}' must be a boolean.`, 'invalid_type');
}

/** The session fields parseMediaFields reads. */
export const MEDIA_FIELDS: readonly string[] = ['target_fps', 'upsample_factor', 'tts_source', 'video_codec', 'output_size'];

/** The media fields of a session (current and older form, and a WebRTC call's session config). */
export function parseMediaFields(body: Body): Pick<SessionConfig, 'targetFps' | 'upsampleFactor' | 'ttsSource' | 'videoCodec' | 'outputSize'> {
  return {
    targetFps: numberField(body, 'target_fps', TARGET_FPS_RANGE, true),
    upsampleFactor: numberField(body, 'upsample_factor', UPSAMPLE_FACTOR_RANGE, false),
    ttsSource: enumField(body, 'tts_source', TTS_SOURCES),
    videoCodec: enumField(body, 'video_codec', VIDEO_CODECS),
    outputSize: enumField(body, 'output_size', OUTPUT_SIZES),
  };
}

/** POST /v1/sessions body (spec 2.2). */
export function parseSessionRequest(raw: unknown, defaultModel: string): SessionConfig {
  const body = raw === undefined ? {} : requireObject(raw);
  return {
    model: nonEmpty(body, 'model', MAX_MODEL_CHARS) ?? defaultModel,
    voice: nonEmpty(body, 'voice', MAX_MODEL_CHARS) ?? DEFAULT_VOICE,
    face: nonEmpty(body, 'face', MAX_MODEL_CHARS),
    driving: nonEmpty(body, 'driving', MAX_MODEL_CHARS),
    instructions: optionalString(body, 'instructions', MAX_INSTRUCTIONS_CHARS) ?? DEFAULT_INSTRUCTIONS,
    video: true,
    ...parseMediaFields(body),
  };
}

/** POST /sessions body (spec 2.3): model required, `video` flag, `face_id` for the face. */
export function parseLegacySessionRequest(raw: unknown): SessionConfig {
  const body = requireObject(raw ?? {});
  const model = nonEmpty(body, 'model', MAX_MODEL_CHARS);
  if (model === null) throw invalidParam('model', "Missing required parameter: 'model'.", 'missing_required_parameter');
  return {
    model,
    voice: nonEmpty(body, 'voice', MAX_MODEL_CHARS) ?? nonEmpty(body, 'voice_id', MAX_MODEL_CHARS) ?? DEFAULT_VOICE,
    face: nonEmpty(body, 'face_id', MAX_MODEL_CHARS) ?? nonEmpty(body, 'face', MAX_MODEL_CHARS),
    driving: nonEmpty(body, 'driving', MAX_MODEL_CHARS),
    instructions: optionalString(body, 'instructions', MAX_INSTRUCTIONS_CHARS) ?? DEFAULT_INSTRUCTIONS,
    video: booleanField(body, 'video') ?? true,
    ...parseMediaFields(body),
  };
}
