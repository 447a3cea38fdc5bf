/**
 * The realtime wire protocol: OpenAI Realtime GA event names and snake_case shapes verbatim, the
 * older event dialect of the rtAV interface, and the one place where a server event is stamped
 * (event_id) and renamed for the connection's dialect.
 *
 * Dialects:
 *  - 'ga'     OpenAI Realtime GA names (conversation.item.added, response.output_audio.delta, ...)
 *             plus the avatar's response.output_image.delta / .done;
 *  - 'legacy' the older form of the interface (spec 6.3): conversation.item.created,
 *             response.audio.delta, response.audio_transcript.delta, response.text.delta,
 *             response.video.delta, ... (the OpenAI beta names, with video added).
 * Handlers always emit GA names; `renameForDialect` maps them at the edge, and events a dialect does
 * not have (conversation.item.done in legacy) are dropped there rather than sent to a client that
 * does not know them.
 */
import { AppError } from '../core/errors.js';
import { randomBase62 } from '../core/ids.js';

export type Dialect = 'ga' | 'legacy';

/** A server event before it is stamped: GA type plus its fields. */
export interface ServerEventDraft {
  type: string;
  [field: string]: unknown;
}

export interface ServerEvent extends ServerEventDraft {
  event_id: string;
}

/** Client event types this server accepts (GA names; legacy clients use the same client names). */
export const CLIENT_EVENT_TYPES = [
  'session.update',
  'conversation.item.create',
  'conversation.item.truncate',
  'conversation.item.delete',
  'conversation.item.retrieve',
  'input_audio_buffer.append',
  'input_audio_buffer.commit',
  'input_audio_buffer.clear',
  'response.create',
  'response.cancel',
] as const;
export type ClientEventType = (typeof CLIENT_EVENT_TYPES)[number];

const LEGACY_NAMES: Record<string, string | null> = {
  'conversation.item.added': 'conversation.item.created',
  'conversation.item.done': null,
  'response.output_audio.delta': 'response.audio.delta',
  'response.output_audio.done': 'response.audio.done',
  'response.output_audio_transcript.delta': 'response.audio_transcript.delta',
  'response.output_audio_transcript.done': 'response.audio_transcript.done',
  'response.output_text.delta': 'response.text.delta',
  'response.output_text.done': 'response.text.done',
  'response.output_image.delta': 'response.video.delta',
  'response.output_image.done': 'response.video.done',
};

/** The event's type in `dialect`, or null when the dialect has no such event. */
export function renameForDialect(type: string, dialect: Dialect): string | null {
  if (dialect === 'ga') return type;
  const legacy = LEGACY_NAMES[type];
  return legacy === undefined ? type : legacy;
}

export const newServerEventId = (): string => `event_${randomBase62(20)}`;
export const newItemId = (): string => `item_${randomBase62(20)}`;
export const newResponseId = (): string => `resp_${randomBase62(20)}`;
export const newConversationId = (): string => `conv_${randomBase62(20)}`;

/** Largest client event accepted (OpenAI's limit for an audio append is 15 MiB of base64). */
export const MAX_CLIENT_EVENT_BYTES = 16 * 1024 * 1024;
/** Client event ids are echoed in errors; OpenAI caps them at 512 characters. */
export const MAX_CLIENT_EVENT_ID_CHARS = 512;

/** A client event that failed validation or could not be carried out; becomes an `error` event. */
export class RealtimeError extends AppError {
  constructor(code: string, message: string, param: string | null = null, type: 'invalid_request_error' | 'server_error' = 'invalid_request_error') {
    super(code, message, { status: type === 'server_error' ? 500 : 400, type, param });
    this.name = 'RealtimeError';
  }
}

/** The `error` event for `err`, naming the client event that caused it. */
export function errorEvent(err: unknown, clientEventId: string | null): ServerEventDraft {
  const e =
    err instanceof AppError
      ? err
      : new RealtimeError('server_error', 'The server had an error while processing your event.', null, 'server_error');
  return {
    type: 'error',
    error: {
      type: e.type,
      code: e.code,
      message: e.expose || e instanceof RealtimeError ? e.message : 'The server had an error while processing your event.',
      param: e.param,
      event_id: clientEventId,
    },
  };
}

export type Json = Record<string, unknown>;
export const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A parsed client event: its type, its event_id (if any) and the whole object. */
export interface ClientEvent {
  type: ClientEventType;
  eventId: string | null;
  body: Json;
}

/**
 * Parses one text message into a client event, or throws a RealtimeError naming what is wrong
 * (malformed JSON, not an object, no/unknown type, bad event_id). `eventIdOf` recovers the
 * event_id of a message that fails later checks, so the error can name it.
 */
export function parseClientEvent(text: string): ClientEvent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new RealtimeError('invalid_json', `The message is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(value)) throw new RealtimeError('invalid_event', 'A client event must be a JSON object with a "type" field.');
  const eventId = value.event_id;
  if (eventId !== undefined && (typeof eventId !== 'string' || eventId.length > MAX_CLIENT_EVENT_ID_CHARS)) {
    throw new RealtimeError('invalid_value', `'event_id' must be a string of at most ${MAX_CLIENT_EVENT_ID_CHARS} characters.`, 'event_id');
  }
  const type = value.type;
  if (type === undefined) throw new RealtimeError('invalid_event', "The 'type' field is missing.", 'type');
  if (typeof type !== 'string') throw new RealtimeError('invalid_event', "The 'type' field must be a string.", 'type');
  if (!(CLIENT_EVENT_TYPES as readonly string[]).includes(type)) {
    throw new RealtimeError('invalid_event', `Invalid value: '${type.slice(0, 100)}'. Supported values are: ${CLIENT_EVENT_TYPES.map((t) => `'${t}'`).join(', ')}.`, 'type');
  }
  return { type: type as ClientEventType, eventId: typeof eventId === 'string' ? eventId : null, body: value };
}

/** The event_id of a message, if it is a JSON object that has a string one; for error reports. */
export function eventIdOf(text: string): string | null {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) && typeof value.event_id === 'string' ? value.event_id.slice(0, MAX_CLIENT_EVENT_ID_CHARS) : null;
  } catch {
    return null;
  }
}

// Field readers for client events: each throws a RealtimeError naming the parameter.

export function requireString(obj: Json, key: string, param: string): string {
  const v = obj[key];
  if (v === undefined || v === null) throw new RealtimeError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
  if (typeof v !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected a string.`, param);
  return v;
}

export function optionalString(obj: Json, key: string, param: string): string | null {
  const v = obj[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected a string.`, param);
  return v;
}

export function requireObject(obj: Json, key: string, param: string): Json {
  const v = obj[key];
  if (v === undefined || v === null) throw new RealtimeError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
  if (!isObject(v)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  return v;
}

export function requireInteger(obj: Json, key: string, param: string, min: number): number {
  const v = obj[key];
  if (v === undefined || v === null) throw new RealtimeError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an integer.`, param);
  if (v < min) throw new RealtimeError('invalid_value', `Invalid value for '${param}': must be at least ${min}.`, param);
  return v;
}

const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Strict base64 (the standard alphabet, padded) → bytes; anything else is an invalid_value error. */
export function decodeBase64(text: string, param: string): Buffer {
  if (!BASE64_RE.test(text)) throw new RealtimeError('invalid_value', `Invalid value for '${param}': not valid base64.`, param);
  return Buffer.from(text, 'base64');
}

/** Base64 PCM16 little-endian → samples; an odd byte count is an error (half a sample). */
export function decodePcm16(text: string, param: string): Int16Array {
  const bytes = decodeBase64(text, param);
  if (bytes.length % 2 !== 0) {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}': PCM16 audio must have an even number of bytes.`, param);
  }
  const copy = new Int16Array(bytes.length / 2);
  Buffer.from(copy.buffer).set(bytes);
  return copy;
}

export function pcm16ToBase64(samples: Int16Array): string {
  return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength).toString('base64');
}
