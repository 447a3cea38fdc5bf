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
 *
 * Reading a client event costs time linear in its size and never recurses over it: the nesting
 * depth and the number of elements are counted by one scan of the text before JSON.parse (events
 * deeper than MAX_CLIENT_EVENT_DEPTH or with more than MAX_CLIENT_EVENT_ELEMENTS are refused
 * unparsed, so JSON.parse never builds more than a bounded number of values), the same scan finds
 * the event_id of a message that fails later, and base64 is checked by a native round trip, not a
 * regular expression. Everything
 * downstream (session merging, echoes, JSON.stringify of server events) therefore only ever sees
 * values at most MAX_CLIENT_EVENT_DEPTH deep.
 */
import { AppError } from '../core/errors.js';
import { randomBase62 } from '../core/ids.js';
import type { ServerEventDraft, ServerEventType } from './server-events.js';

export type Dialect = 'ga' | 'legacy';

export type { ServerEvent, ServerEventDraft, ServerEventType } from './server-events.js';

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
  'output_audio_buffer.clear',
] as const;
export type ClientEventType = (typeof CLIENT_EVENT_TYPES)[number];

/** Client event types of avatar-only sessions (avatar-engine.ts, docs/avatar-mode.md). */
export const AVATAR_CLIENT_EVENT_TYPES = ['session.update', 'output_audio_buffer.append', 'output_audio_buffer.commit', 'output_audio_buffer.clear', 'avatar.listen'] as const;
export type AvatarClientEventType = (typeof AVATAR_CLIENT_EVENT_TYPES)[number];
/** Every client event type of either kind of session (an avatar-only session refuses the realtime ones by name). */
export const ALL_CLIENT_EVENT_TYPES: readonly string[] = [...new Set<string>([...CLIENT_EVENT_TYPES, ...AVATAR_CLIENT_EVENT_TYPES])];

/** Legacy names of the GA events that have one (null: the legacy dialect has no such event). */
const LEGACY_NAMES: { readonly [T in ServerEventType]?: string | null } = {
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
export function renameForDialect(type: ServerEventType, dialect: Dialect): string | null {
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
/**
 * Deepest nesting of objects and arrays in a client event (the event object is level 1). Real
 * events nest a few levels (a tool's JSON schema perhaps a dozen); 64 leaves room for any of them
 * while keeping every recursive walk of a client value (JSON.stringify of its echo included) far
 * from the stack limit, which V8 reaches at a few thousand levels.
 */
export const MAX_CLIENT_EVENT_DEPTH = 64;
/**
 * Most objects, arrays and members/elements (counted as containers plus commas) in one client
 * event. The 16 MiB event limit exists for one long base64 string; 16 MiB of `{},` is 5.6 million
 * objects, which JSON.parse takes 2.4 s and 600 MB to build, holding up every session. Real events
 * have at most a few thousand (a response.input of 1000 items); parsing 100,000 takes ~20 ms.
 */
export const MAX_CLIENT_EVENT_ELEMENTS = 100_000;
/** OpenAI's `metadata`: at most 16 pairs, keys up to 64 characters, values strings up to 512. */
export const MAX_METADATA_PAIRS = 16;
export const MAX_METADATA_KEY_CHARS = 64;
export const MAX_METADATA_VALUE_CHARS = 512;
/** A parameter path in an error names at most this many levels (e.g. `response.metadata.key`). */
const MAX_PARAM_LEVELS = 3;
/** Names quoted in error messages and params are cut to this length (a 10 MB key is not echoed). */
const MAX_QUOTED_CHARS = 64;

/** A client event that failed validation or could not be carried out; becomes an `error` event. */
export class RealtimeError extends AppError {
  constructor(code: string, message: string, param: string | null = null, type: 'invalid_request_error' | 'server_error' = 'invalid_request_error') {
    super(code, message, { status: type === 'server_error' ? 500 : 400, type, param });
    this.name = 'RealtimeError';
  }
}

/** The error for a binary message where only JSON text events are read (a WebSocket, a call's data channel). */
export function binaryMessageRefused(): ServerEventDraft {
  return errorEvent(new RealtimeError('invalid_event', 'Binary messages are not supported; send JSON text events.'), null);
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
export interface ClientEvent<T extends string = ClientEventType> {
  type: T;
  eventId: string | null;
  body: Json;
}

/** What one linear scan of a message's text finds, before (or instead of) parsing it. */
export interface EventScan {
  /** The top-level `event_id` when it is a string of at most MAX_CLIENT_EVENT_ID_CHARS characters. */
  eventId: string | null;
  /**
   * Null when the nesting stays within the limit; otherwise the parameter path of the first value
   * nested too deep, cut to MAX_PARAM_LEVELS levels ('' when it is not inside a named field).
   */
  tooDeepAt: string | null;
  /** Like tooDeepAt, naming the object or array in which the event passes MAX_CLIENT_EVENT_ELEMENTS elements. */
  tooManyAt: string | null;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

interface Frame {
  array: boolean;
  /** Objects: the key of the member being read; arrays: unused. */
  key: string;
  /** Arrays: the index of the element being read. */
  index: number;
}

/**
 * Scans JSON text once, left to right, without recursion: counts the nesting of objects and arrays
 * (stopping at the first level beyond `maxDepth`) and picks out the top-level event_id. Strings are
 * skipped with indexOf, so a 15 MiB base64 string costs one native search. Malformed text is
 * scanned as far as it goes; JSON.parse is what reports it.
 */
export function scanClientEvent(text: string, maxDepth = MAX_CLIENT_EVENT_DEPTH, maxElements = MAX_CLIENT_EVENT_ELEMENTS): EventScan {
  const stack: Frame[] = [];
  let eventId: string | null = null;
  let elements = 0;
  let expectKey = false;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = closingQuote(text, i + 1);
      if (end < 0) break;
      const top = stack[stack.length - 1];
      if (top && !top.array && expectKey) {
        top.key = quoted(decodeJsonString(text, i + 1, end, MAX_QUOTED_CHARS) ?? text.slice(i + 1, i + 1 + MAX_QUOTED_CHARS));
        expectKey = false;
      } else if (stack.length === 1 && top && !top.array && top.key === 'event_id' && eventId === null) {
        const id = decodeJsonString(text, i + 1, end, MAX_CLIENT_EVENT_ID_CHARS);
        if (id !== null && id.length <= MAX_CLIENT_EVENT_ID_CHARS) eventId = id;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length >= maxDepth) return { eventId, tooDeepAt: paramPath(stack), tooManyAt: null };
      if (++elements > maxElements) return { eventId, tooDeepAt: null, tooManyAt: paramPath(stack.slice(0, -1)) };
      stack.push({ array: c === 0x5b, key: '', index: 0 });
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      if (++elements > maxElements) return { eventId, tooDeepAt: null, tooManyAt: paramPath(stack.slice(0, -1)) };
      const top = stack[stack.length - 1];
      if (top?.array) top.index++;
      else if (top) expectKey = true;
    }
    i++;
  }
  return { eventId, tooDeepAt: null, tooManyAt: null };
}

/** Index of the quote that closes the string whose contents start at `from`, or -1. Linear: each backslash run is counted once. */
function closingQuote(text: string, from: number): number {
  let at = from;
  for (;;) {
    const q = text.indexOf('"', at);
    if (q < 0) return -1;
    let backslashes = 0;
    while (q - 1 - backslashes >= from && text.charCodeAt(q - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return q;
    at = q + 1;
  }
}

/**
 * The JSON string text[from, end) decoded, or null when it is certainly longer than `maxChars`
 * (an escape is at most 6 characters, so longer raw text cannot decode to fewer).
 */
function decodeJsonString(text: string, from: number, end: number, maxChars: number): string | null {
  if (end - from > maxChars * 6) return null;
  const raw = text.slice(from, end);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** `response.metadata.a`, `session.tools[0]`: the path of the open containers below the event. */
function paramPath(stack: readonly Frame[]): string {
  if (stack.length === 0 || stack[0]?.array) return '';
  let path = '';
  for (const frame of stack.slice(0, MAX_PARAM_LEVELS)) {
    if (frame.array) path += `[${frame.index}]`;
    else path += path === '' ? frame.key : `.${frame.key}`;
  }
  return path;
}

/** A parsed client event, or why the message is not one (and the event_id it had, if readable). */
export type ReadEvent<T extends string = ClientEventType> = { event: ClientEvent<T>; error: null } | { event: null; error: RealtimeError; eventId: string | null };

/** A too-large event's event_id is looked for in its first this many characters (it is not parsed). */
const OVERSIZE_EVENT_ID_SCAN_CHARS = 4096;

/**
 * Reads one text message as a client event: its size first (over MAX_CLIENT_EVENT_BYTES:
 * message_too_large, unparsed), then its shape (a message nested deeper than
 * MAX_CLIENT_EVENT_DEPTH, or with more than MAX_CLIENT_EVENT_ELEMENTS elements, is refused
 * unparsed: nesting_too_deep / too_many_elements, param naming the field), then JSON, an object,
 * its event_id, a known type.
 */
export function readClientEvent<T extends string = ClientEventType>(text: string, types: readonly T[] = CLIENT_EVENT_TYPES as readonly string[] as readonly T[]): ReadEvent<T> {
  const size = Buffer.byteLength(text);
  if (size > MAX_CLIENT_EVENT_BYTES) {
    // Not parsed (that is the point of the limit): the event_id is looked for in its first characters.
    const error = new RealtimeError('message_too_large', `The event is ${size} bytes; the limit is ${MAX_CLIENT_EVENT_BYTES}.`);
    return { event: null, eventId: eventIdOf(text.slice(0, OVERSIZE_EVENT_ID_SCAN_CHARS)), error };
  }
  const scan = scanClientEvent(text);
  if (scan.tooDeepAt !== null || scan.tooManyAt !== null) {
    const at = scan.tooDeepAt ?? scan.tooManyAt;
    const param = at === '' ? null : at;
    const where = param ? ` (in '${param}')` : '';
    const error =
      scan.tooDeepAt !== null
        ? new RealtimeError('nesting_too_deep', `The event nests objects and arrays more than ${MAX_CLIENT_EVENT_DEPTH} levels deep${where}.`, param)
        : new RealtimeError('too_many_elements', `The event has more than ${MAX_CLIENT_EVENT_ELEMENTS} objects, arrays and elements${where}.`, param);
    return { event: null, eventId: scan.eventId, error };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { event: null, eventId: scan.eventId, error: new RealtimeError('invalid_json', `The message is not valid JSON: ${quoted((err as Error).message, 200)}`) };
  }
  const fail = (error: RealtimeError, eventId: string | null = scan.eventId): ReadEvent<T> => ({ event: null, error, eventId });
  if (!isObject(value)) return fail(new RealtimeError('invalid_event', 'A client event must be a JSON object with a "type" field.'), null);
  const eventId = value.event_id;
  if (eventId !== undefined && (typeof eventId !== 'string' || eventId.length > MAX_CLIENT_EVENT_ID_CHARS)) {
    return fail(new RealtimeError('invalid_value', `'event_id' must be a string of at most ${MAX_CLIENT_EVENT_ID_CHARS} characters.`, 'event_id'), null);
  }
  const id = typeof eventId === 'string' ? eventId : null;
  const type = value.type;
  if (type === undefined) return fail(new RealtimeError('invalid_event', "The 'type' field is missing.", 'type'), id);
  if (typeof type !== 'string') return fail(new RealtimeError('invalid_event', "The 'type' field must be a string.", 'type'), id);
  if (!(types as readonly string[]).includes(type)) {
    return fail(new RealtimeError('invalid_event', `Invalid value: ${describeValue(type)}. Supported values are: ${types.map((t) => `'${t}'`).join(', ')}.`, 'type'), id);
  }
  return { event: { type: type as T, eventId: id, body: value }, error: null };
}

/** readClientEvent that throws the RealtimeError (for callers that do not need the event_id of a bad message). */
export function parseClientEvent(text: string): ClientEvent {
  const read = readClientEvent(text);
  if (read.error) throw read.error;
  return read.event;
}

/** The event_id of a message (a readable top-level string one), found without parsing it; for error reports. */
export function eventIdOf(text: string): string | null {
  return scanClientEvent(text).eventId;
}

/** A client value for an error message: strings quoted and cut, containers by kind (never stringified whole). */
export function describeValue(v: unknown): string {
  if (typeof v === 'string') return `'${quoted(v)}'`;
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return String(v);
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
export function quoted(text: string, max = MAX_QUOTED_CHARS): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
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

/**
 * OpenAI's `metadata` (null, or up to MAX_METADATA_PAIRS string pairs with keys up to
 * MAX_METADATA_KEY_CHARS and values up to MAX_METADATA_VALUE_CHARS characters); anything else is an
 * error naming `param`.
 */
export function optionalMetadata(obj: Json, key: string, param: string): Record<string, string> | null {
  const v = obj[key];
  if (v === undefined || v === null) return null;
  if (!isObject(v)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object of string key/value pairs.`, param);
  const entries = Object.entries(v);
  if (entries.length > MAX_METADATA_PAIRS) {
    throw new RealtimeError('invalid_value', `Invalid '${param}': at most ${MAX_METADATA_PAIRS} key/value pairs, got ${entries.length}.`, param);
  }
  for (const [k, value] of entries) {
    if (k.length > MAX_METADATA_KEY_CHARS) {
      throw new RealtimeError('invalid_value', `Invalid '${param}': key '${quoted(k)}' is longer than ${MAX_METADATA_KEY_CHARS} characters.`, param);
    }
    if (typeof value !== 'string' || value.length > MAX_METADATA_VALUE_CHARS) {
      throw new RealtimeError('invalid_value', `Invalid '${param}': the value of '${quoted(k)}' must be a string of at most ${MAX_METADATA_VALUE_CHARS} characters.`, param);
    }
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

/** A string field of at most `maxChars` characters (longer: string_above_max_length, as OpenAI answers). */
export function checkMaxLength(value: string, maxChars: number, param: string): string {
  if (value.length > maxChars) {
    throw new RealtimeError(
      'string_above_max_length',
      `Invalid '${param}': string too long. Expected a string with maximum length ${maxChars}, but got a string with length ${value.length} instead.`,
      param,
    );
  }
  return value;
}

/**
 * Strict base64 (the standard alphabet, padded, canonical) → bytes; anything else is an
 * invalid_value error. Checked by a round trip through the native codec (Node's decoder skips
 * characters outside the alphabet, so only canonical input re-encodes to itself): linear, no
 * regular expression, about 20 ms for the 15 MiB an append may carry.
 */
export function decodeBase64(text: string, param: string): Buffer {
  const bytes = Buffer.from(text, 'base64');
  if (text.length % 4 !== 0 || bytes.toString('base64') !== text) {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}': not valid base64.`, param);
  }
  return bytes;
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
