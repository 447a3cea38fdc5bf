/**
 * A session's media options, described once: the wire fields (names, types, ranges) as the
 * TypeBox schema MediaFields, their defaults, and MediaOptions, the decoded camelCase form every
 * reader takes (the session record's `media`, the avatar's start options). Adding an option is a
 * field of MediaFields and its MEDIA_DEFAULTS entry here (the compiler asks for it), plus its
 * mapping to the native config in media/avatar-output.ts; the request parsers, the OpenAPI
 * document and the store follow from these.
 *
 * Invariants:
 *   - a MediaOptions value is null where the client chose nothing: the default applies when the
 *     session runs (resolveMedia), so a stored null follows the server's current default
 *     (output_size: AVATAR_OUTPUT_SIZE);
 *   - the camelCase name of a field is its wire name with each `_x` as `X` (MediaOptions' type
 *     and mediaOptionsOf agree on it);
 *   - the store keeps the options as one JSON object under their wire names (storedMedia), read
 *     back by mediaOptionsFrom, which takes JSON text (SQLite), an object (PostgreSQL JSONB) or
 *     nothing; a missing or null field reads as null, an unknown one is ignored.
 *
 * In core because the store, the sessions, the media plane and signaling all read it; the TTS
 * source names live here for that reason (providers/tts/base.ts re-exports them).
 */
import { Type, type Static } from '@sinclair/typebox';
import { AppError } from './errors.js';
import { anyCaseEnum, compileRequest, numericField } from './schema.js';
import { DEFAULT_OUTPUT_SIZE, OUTPUT_SIZES } from './video-size.js';

/** The session `tts_source` values. */
export const TTS_SOURCES = ['auto', 'offline', 'piper', 'flite', 'espeak-ng', 'openai'] as const;
export type TtsSource = (typeof TTS_SOURCES)[number];
export const VIDEO_CODECS = ['h264', 'vp8'] as const;
/**
 * Where the face is drawn: 'server' (video: frames as image events, or RTP on a call) or
 * 'client' (the face's parameters each frame, `output_motion.delta` events; no video is drawn or
 * encoded here).
 */
export const VIDEO_RENDERS = ['server', 'client'] as const;
export type VideoRender = (typeof VIDEO_RENDERS)[number];
/**
 * The renderers a session may name (`renderer`): the native media engine's, by name
 * (native/media-core/src/frames/renderers.rs; test/media/media-engine.test.ts holds the two lists
 * equal). "cpu": the mesh-warp renderer, the one every machine has.
 */
export const RENDERERS = ['cpu'] as const;
export type RendererName = (typeof RENDERERS)[number];
export type VideoCodec = (typeof VIDEO_CODECS)[number];
export const TARGET_FPS_RANGE = { min: 1, max: 60 } as const;
export const UPSAMPLE_FACTOR_RANGE = { min: 1, max: 4 } as const;

const DEFAULT_FPS = 25;

/** The media fields of a session: both creation forms, and a WebRTC call's `session`. */
export const MediaFields = Type.Object({
  target_fps: Type.Optional(numericField(TARGET_FPS_RANGE, { integer: true, description: `Video frame rate; default ${DEFAULT_FPS}` })),
  upsample_factor: Type.Optional(
    numericField(UPSAMPLE_FACTOR_RANGE, { description: 'The face is rendered at output size / factor and upscaled by the factor; default 1' }),
  ),
  tts_source: Type.Optional(anyCaseEnum(TTS_SOURCES, { description: 'Speech provider; default auto' })),
  video_codec: Type.Optional(anyCaseEnum(VIDEO_CODECS, { description: 'WebRTC video codec; default h264' })),
  renderer: Type.Optional(anyCaseEnum(RENDERERS, { description: "What draws the face: 'cpu', the mesh-warp renderer; default cpu" })),
  video_render: Type.Optional(
    anyCaseEnum(VIDEO_RENDERS, { description: "Where the face is drawn: 'server' (video frames) or 'client' (the face's parameters each frame as output_motion.delta events, no video); default server" }),
  ),
  output_size: Type.Optional(
    anyCaseEnum(OUTPUT_SIZES, { description: "The avatar's video size (1280x720: landscape, the face centred); default the server's AVATAR_OUTPUT_SIZE, 512x512" }),
  ),
});

type Wire = Static<typeof MediaFields>;
type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;

/** A session's media options, decoded; null = not chosen (the default applies). */
export type MediaOptions = { [K in keyof Wire as CamelCase<K & string>]-?: NonNullable<Wire[K]> | null };
/** Media options with every default applied: what a running session uses. */
export type ResolvedMedia = { [K in keyof MediaOptions]: NonNullable<MediaOptions[K]> };

/** What a session gets where it chose nothing. The server's AVATAR_OUTPUT_SIZE replaces outputSize's (resolveMedia). */
export const MEDIA_DEFAULTS: Readonly<ResolvedMedia> = {
  targetFps: DEFAULT_FPS,
  upsampleFactor: 1,
  ttsSource: 'auto',
  videoCodec: 'h264',
  renderer: 'cpu',
  videoRender: 'server',
  outputSize: DEFAULT_OUTPUT_SIZE,
};

/** The wire names of the media fields (a call's `session` keeps the others for the realtime config). */
export const MEDIA_FIELDS: readonly string[] = Object.keys(MediaFields.properties);

/**
 * A session config's media fields apart from the rest (a call's `session`, an ephemeral key's
 * session: the media fields are the session record's settings, the rest the realtime config's).
 */
export function splitMediaFields<T extends Record<string, unknown>>(config: T): { media: Record<string, unknown>; rest: Record<string, unknown> } {
  const entries = Object.entries(config);
  return {
    media: Object.fromEntries(entries.filter(([k]) => MEDIA_FIELDS.includes(k))),
    rest: Object.fromEntries(entries.filter(([k]) => !MEDIA_FIELDS.includes(k))),
  };
}

const camelCase = (wire: string): string => wire.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The options of parsed media fields (or of any object holding them under their wire names, unchecked). */
export function mediaOptionsOf(wire: Partial<Record<string, unknown>>): MediaOptions {
  return Object.fromEntries(MEDIA_FIELDS.map((name) => [camelCase(name), wire[name] ?? null])) as MediaOptions;
}

/** No option chosen: every default applies. */
export const MEDIA_UNSET: Readonly<MediaOptions> = Object.freeze(mediaOptionsOf({}));

const readMedia = compileRequest(MediaFields);

/** The media fields of a request body (either creation form, a call's session), checked by MediaFields; throws AppError (400). */
export function parseMediaOptions(body: unknown): MediaOptions {
  return mediaOptionsOf(readMedia(body));
}

/**
 * The media fields of a session config (a call's `session`, an ephemeral key's session), as
 * parseMediaOptions reads them; a bad one is a 400 naming `session.<field>`.
 */
export function parseSessionMedia(fields: Record<string, unknown>): MediaOptions {
  try {
    return parseMediaOptions(fields);
  } catch (err) {
    if (err instanceof AppError) throw new AppError(err.code, err.message, { status: 400, param: err.param === null ? 'session' : `session.${err.param}` });
    throw err;
  }
}

/** The options with the defaults applied; `serverDefaults` replaces MEDIA_DEFAULTS' (the server's AVATAR_OUTPUT_SIZE). */
export function resolveMedia(options: MediaOptions, serverDefaults: Partial<ResolvedMedia> = {}): ResolvedMedia {
  const chosen = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== null));
  return { ...MEDIA_DEFAULTS, ...serverDefaults, ...chosen } as ResolvedMedia;
}

/** The store's form: one JSON object under the wire names (nulls kept: the row says what was left to the default). */
export function storedMedia(options: MediaOptions): string {
  return JSON.stringify(Object.fromEntries(MEDIA_FIELDS.map((name) => [name, options[camelCase(name) as keyof MediaOptions] ?? null])));
}

/** The store's form read back: JSON text (SQLite), an object (PostgreSQL JSONB), or null (every default). */
export function mediaOptionsFrom(stored: unknown): MediaOptions {
  if (stored === null || stored === undefined) return mediaOptionsOf({});
  const value: unknown = typeof stored === 'string' ? JSON.parse(stored) : stored;
  return mediaOptionsOf(value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {});
}
