/**
 * Validation of session creation requests, current form (POST /v1/sessions, spec 2.2) and older
 * form (POST /sessions, spec 2.3). Produces a SessionConfig with every default applied. Types and
 * ranges of the fields the spec leaves untyped are decided here and documented in docs/api.md (Session fields) and by the schemas below;
 * the media fields are core/media-options.ts's MediaFields, kept in SessionConfig as one
 * MediaOptions value.
 *
 * Unknown fields are ignored, so clients that send more than we know keep working; null is absent.
 * Each request is described once, as a TypeBox schema: core/schema.ts compiles it into the parser
 * below, and server/openapi.ts publishes the same schema in the OpenAPI document.
 */
import { Type } from '@sinclair/typebox';
import { MediaFields, mediaOptionsOf } from '../core/media-options.js';
import { compileRequest, lenientBoolean, nonBlankString } from '../core/schema.js';
import type { SessionRecord } from '../store/store.js';

export const DEFAULT_INSTRUCTIONS = 'You are a helpful assistant.';
export const DEFAULT_VOICE = 'default';
const MAX_MODEL_CHARS = 200;
export const MAX_INSTRUCTIONS_CHARS = 100_000;

/** What a creation request decides about a session: the configurable part of SessionRecord. */
export type SessionConfig = Pick<SessionRecord, 'model' | 'voice' | 'face' | 'driving' | 'instructions' | 'video' | 'media'>;

const assetId = (what: string) => nonBlankString(MAX_MODEL_CHARS, { description: `Standard ${what} id or the UUID of an uploaded ${what}` });
const instructions = Type.String({ maxLength: MAX_INSTRUCTIONS_CHARS, default: DEFAULT_INSTRUCTIONS });

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

const readSession = compileRequest(SessionCreateRequest);
const readLegacy = compileRequest(LegacySessionCreateRequest);

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
    media: mediaOptionsOf(body),
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
    media: mediaOptionsOf(body),
  };
}
