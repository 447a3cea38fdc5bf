/**
 * The settings of an avatar-only session (`session.type: "avatar"`, docs/avatar-mode.md): what
 * session.update and the initial config may set, checked field by field with errors naming the
 * field, and the session object sent in session.created / session.updated.
 *
 *   face, driving          asset ids (checked against the caller's assets by the engine)
 *   audio.input.format     the agent's speech the client appends: PCM16 at 8..48 kHz, or G.711
 *   audio.output.format    the played audio sent back: PCM16 24 kHz, or G.711
 *   output_modalities      'audio' and/or 'image' (what goes back over WebSocket)
 *   video.format           'jpeg' or 'i420', fixed when the session opens (it picks the encoder);
 *                          video.width / height / fps are the frames' (read-only)
 *
 * Fields of realtime sessions that have no meaning here (instructions, tools, voice, turn
 * detection, ...) are refused with `unsupported_in_avatar_session`, so a client that thinks it
 * configured a model learns at once that none runs.
 */
import { type Json, RealtimeError, describeValue, isObject } from './protocol.js';
import { stringAt } from './session-object.js';
import { checkFormat } from './session-update.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import { type WireAudioFormat, wireFormat } from '../audio/wire-format.js';

/** The speech a client appends: PCM16 at its own rate (resampled natively), or G.711. */
export type AvatarInputFormat = { type: 'audio/pcm'; rate: number } | { type: 'audio/pcmu'; rate: 8000 } | { type: 'audio/pcma'; rate: 8000 };
export type AvatarVideoFormat = 'jpeg' | 'i420';
export type AvatarModality = 'audio' | 'image';

/** PCM rates the media plane resamples from (native MediaSession.pushAudio). */
export const MIN_INPUT_RATE_HZ = 8000;
export const MAX_INPUT_RATE_HZ = 48000;

/** What the session's frames are (read-only in the session object: set by the REST session's output_size and target_fps, or the server's defaults). */
export interface AvatarFrameShape {
  width: number;
  height: number;
  fps: number;
}

export interface AvatarSessionSettings {
  face: string | null;
  driving: string | null;
  inputFormat: AvatarInputFormat;
  outputFormat: WireAudioFormat;
  modalities: AvatarModality[];
  videoFormat: AvatarVideoFormat;
}

export const DEFAULT_AVATAR_SETTINGS: AvatarSessionSettings = {
  face: null,
  driving: null,
  inputFormat: { type: 'audio/pcm', rate: PCM_RATE_HZ },
  outputFormat: wireFormat('audio/pcm'),
  modalities: ['audio', 'image'],
  videoFormat: 'jpeg',
};

/** Fields an avatar session accepts (and the ones it echoes back, which clients resend). */
const VIDEO_FIELDS = new Set(['format', 'width', 'height', 'fps']);
const ACCEPTED = new Set(['type', 'id', 'object', 'face', 'driving', 'audio', 'output_modalities', 'video', 'expires_at', 'model']);

/** Whether an initial config (an ephemeral key's session, a call's, the WebSocket's) opens an avatar-only session. */
export function isAvatarConfig(config: Json): boolean {
  return config.type === 'avatar';
}

/**
 * `update` applied to `previous` (null: the defaults). `opening` is true for the initial config,
 * the only time `video.format` may change.
 */
export function applyAvatarSessionUpdate(previous: AvatarSessionSettings | null, update: Json, opening: boolean): AvatarSessionSettings {
  const next: AvatarSessionSettings = { ...(previous ?? DEFAULT_AVATAR_SETTINGS) };
  if (update.type !== undefined && update.type !== 'avatar') {
    throw new RealtimeError('invalid_value', `Invalid value for 'session.type': ${describeValue(update.type)}. This is an avatar-only session ('avatar'); a session's type is fixed when it opens.`, 'session.type');
  }
  for (const key of Object.keys(update)) {
    if (!ACCEPTED.has(key)) {
      throw new RealtimeError(
        'unsupported_in_avatar_session',
        `'session.${key}' has no effect in an avatar-only session: the client supplies the speech, and no model, voice or turn detection runs.`,
        `session.${key}`,
      );
    }
  }
  // Named by the same rules as in realtime sessions (session-object.ts).
  if (update.face !== undefined) next.face = stringAt(update, 'face', 'session.face');
  if (update.driving !== undefined) next.driving = stringAt(update, 'driving', 'session.driving');
  if (update.audio !== undefined) {
    if (!isObject(update.audio)) throw new RealtimeError('invalid_type', "Invalid type for 'session.audio': expected an object.", 'session.audio');
    const { input, output } = update.audio;
    if (input !== undefined) next.inputFormat = inputFormat(formatOf(input, 'session.audio.input'), 'session.audio.input.format') ?? next.inputFormat;
    if (output !== undefined) next.outputFormat = outputFormat(formatOf(output, 'session.audio.output'), 'session.audio.output.format') ?? next.outputFormat;
  }
  if (update.output_modalities !== undefined) next.modalities = modalities(update.output_modalities);
  if (update.video !== undefined) {
    const format = videoFormat(update.video);
    if (format !== null && format !== next.videoFormat && !opening) {
      throw new RealtimeError(
        'invalid_value',
        `'session.video.format' is fixed when the session opens (it is ${next.videoFormat}); open the session with video_format=${format} in the URL or the session config.`,
        'session.video.format',
      );
    }
    if (format !== null) next.videoFormat = format;
  }
  return next;
}

/** The session object of session.created / session.updated. */
export function avatarSessionObject(settings: AvatarSessionSettings, id: string, expiresAt: number, frames: AvatarFrameShape | null = null): Json {
  return {
    type: 'avatar',
    object: 'realtime.session',
    id,
    face: settings.face ?? 'default',
    driving: settings.driving ?? 'default',
    output_modalities: settings.modalities,
    audio: { input: { format: settings.inputFormat }, output: { format: settings.outputFormat } },
    video: { format: settings.videoFormat, ...(frames ?? {}) },
    expires_at: expiresAt,
  };
}

/** `audio.input` / `audio.output`: an object whose `format` is the only field read. */
function formatOf(side: unknown, param: string): unknown {
  if (!isObject(side)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  for (const key of Object.keys(side)) {
    if (key !== 'format') {
      throw new RealtimeError('unsupported_in_avatar_session', `'${param}.${key}' has no effect in an avatar-only session; only '${param}.format' is read.`, `${param}.${key}`);
    }
  }
  return side.format;
}

function inputFormat(format: unknown, param: string): AvatarInputFormat | null {
  if (format === undefined) return null;
  if (!isObject(format)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  if (format.type === 'audio/pcmu' || format.type === 'audio/pcma') {
    if (format.rate !== undefined && format.rate !== 8000) throw new RealtimeError('invalid_value', `Invalid value for '${param}.rate': ${format.type} is 8000 Hz.`, `${param}.rate`);
    return { type: format.type, rate: 8000 };
  }
  if (format.type !== 'audio/pcm') {
    throw new RealtimeError('unsupported_audio_format', `Audio format ${describeValue(format.type)} is not supported; use {"type":"audio/pcm","rate":R} (PCM16 mono, R from ${MIN_INPUT_RATE_HZ} to ${MAX_INPUT_RATE_HZ}), {"type":"audio/pcmu"} or {"type":"audio/pcma"}.`, `${param}.type`);
  }
  const rate = format.rate ?? PCM_RATE_HZ;
  if (typeof rate !== 'number' || !Number.isInteger(rate) || rate < MIN_INPUT_RATE_HZ || rate > MAX_INPUT_RATE_HZ) {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}.rate': ${describeValue(rate)}; expected an integer from ${MIN_INPUT_RATE_HZ} to ${MAX_INPUT_RATE_HZ} (Hz).`, `${param}.rate`);
  }
  return { type: 'audio/pcm', rate };
}

/** The played audio's format: the realtime session's output formats (session-update.ts). */
function outputFormat(format: unknown, param: string): WireAudioFormat | null {
  if (format === undefined) return null;
  checkFormat(format, param);
  return wireFormat((format as { type: WireAudioFormat['type'] }).type);
}

function modalities(value: unknown): AvatarModality[] {
  const param = 'session.output_modalities';
  if (!Array.isArray(value) || value.length === 0 || value.length > 2) {
    throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected a non-empty array of 'audio' and 'image'.`, param);
  }
  const out: AvatarModality[] = [];
  for (const [i, m] of value.entries()) {
    if (m !== 'audio' && m !== 'image') throw new RealtimeError('invalid_value', `Invalid value for '${param}[${i}]': ${describeValue(m)}; expected 'audio' or 'image'.`, `${param}[${i}]`);
    if (!out.includes(m)) out.push(m);
  }
  return out;
}

function videoFormat(value: unknown): AvatarVideoFormat | null {
  const param = 'session.video';
  if (!isObject(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  for (const key of Object.keys(value)) {
    // width, height and fps are the session's, echoed back by clients that resend the object: read-only.
    if (!VIDEO_FIELDS.has(key)) throw new RealtimeError('unknown_parameter', `Unknown parameter: '${param}.${key}'.`, `${param}.${key}`);
  }
  if (value.format === undefined) return null;
  if (value.format !== 'jpeg' && value.format !== 'i420') {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}.format': ${describeValue(value.format)}; expected 'jpeg' or 'i420'.`, `${param}.format`);
  }
  return value.format;
}
