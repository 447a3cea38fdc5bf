/**
 * Client events typed at the edge, on the `openai` package's GA client-event types: each event the
 * engine handles is checked here once (its own fields: ids, indexes, base64 audio, the objects it
 * carries) and handed on as `ClientEventOf<T>`, so a handler reads `event.item_id` as a string it
 * can trust and a misspelt field fails `tsc`.
 *
 * The records an event carries (`item`, `session`, `response`) are left as JSON here: their own
 * parsers read them (items.ts, session-update.ts, response-request.ts), because clients send them
 * in shapes the GA types do not have (the older dialect's and rtAV's fields, the avatar's face and
 * image modality). Checking happens in the engine's ordered chain, not on arrival, so an error
 * event never overtakes the events of an earlier message.
 *
 * Avatar-only sessions have their own table (`AvatarFields`, `typedAvatarClientEvent`): OpenAI has
 * no type for `output_audio_buffer.append` / `.commit` or `avatar.listen`. Both tables are what
 * `npm run docs:events` (src/cli/realtime-schema.ts) publishes as the client events' JSON Schema,
 * doc comments included: a field held as `null` when absent is optional on the wire.
 */
import type {
  ConversationItemCreateEvent,
  ConversationItemDeleteEvent,
  ConversationItemRetrieveEvent,
  ConversationItemTruncateEvent,
  InputAudioBufferAppendEvent,
  InputAudioBufferClearEvent,
  InputAudioBufferCommitEvent,
  OutputAudioBufferClearEvent,
  ResponseCancelEvent,
  ResponseCreateEvent,
  SessionUpdateEvent,
} from 'openai/resources/realtime/realtime';
import type { EngineTransport } from './engine-ports.js';
import {
  type AvatarClientEventType,
  type ClientEvent,
  type ClientEventType,
  type Json,
  RealtimeError,
  optionalString,
  requireInteger,
  requireObject,
  requireString,
} from './protocol.js';

/** A GA event with `K`, the records it carries, left as the client's JSON (see the header). */
type Carrying<E, K extends keyof E> = Omit<E, K | 'event_id'> & { [P in keyof Pick<E, K>]: P extends 'session' ? Json : unknown };
type Plain<E> = Omit<E, 'event_id'>;

interface Fields {
  /**
   * Changes the session's settings; `session.updated` answers with the whole session. Accepted and
   * not used (echoed where OpenAI echoes them, changing nothing): `tracing`, `prompt` (OpenAI's
   * stored prompts), `include`, `truncation` (the server drops the oldest items itself),
   * `reasoning` (its effort checked), `audio.input.noise_reduction`, `temperature` (beta), and `response.prompt` /
   * `response.reasoning`. Refused rather than ignored: MCP tools, a change of the session's type
   * (a transcription session, `type: "transcription"`, is opened as one) and audio formats other
   * than PCM16 24 kHz, G.711 µ-law and A-law.
   */
  'session.update': Carrying<SessionUpdateEvent, 'session'>;
  'conversation.item.create': Carrying<ConversationItemCreateEvent, 'item' | 'previous_item_id'> & { previous_item_id: string | null };
  'conversation.item.truncate': Plain<ConversationItemTruncateEvent>;
  'conversation.item.delete': Plain<ConversationItemDeleteEvent>;
  'conversation.item.retrieve': Plain<ConversationItemRetrieveEvent>;
  'input_audio_buffer.append': Plain<InputAudioBufferAppendEvent>;
  'input_audio_buffer.commit': Plain<InputAudioBufferCommitEvent>;
  'input_audio_buffer.clear': Plain<InputAudioBufferClearEvent>;
  'output_audio_buffer.clear': Plain<OutputAudioBufferClearEvent>;
  'response.create': Carrying<ResponseCreateEvent, 'response'>;
  'response.cancel': Carrying<ResponseCancelEvent, 'response_id'> & { response_id: string | null };
}

/** A client's name for an avatar-only segment: at most this long (avatar-engine.ts). */
export const MAX_SEGMENT_ID_CHARS = 128;

/** The avatar-only session's client events (avatar-engine.ts, docs/avatar-mode.md); OpenAI has no type for three of them. */
interface AvatarFields {
  /** Changes the avatar session's settings (face, driving, formats, modalities); `session.updated` answers. */
  'session.update': { session: Json };
  /** Speech to play: audio in the session's input format; the first append after a commit or a clear opens a segment. */
  'output_audio_buffer.append': {
    /** Base64 audio (PCM16 at the session's rate, or G.711). */
    audio: string;
    /**
     * The client's name for the segment this append opens (ignored on appends that join the open
     * segment); null or absent: the server names it.
     * @minLength 1
     * @maxLength 128
     */
    segment_id: string | null;
  };
  /** Ends the open segment; `output_audio_buffer.committed` answers. */
  'output_audio_buffer.commit': object;
  'output_audio_buffer.clear': Plain<OutputAudioBufferClearEvent>;
  /** Whether the avatar looks as if it listens (between segments). */
  'avatar.listen': { listening: boolean };
}

/** The checked fields of one client event type. */
export type ClientEventOf<T extends ClientEventType> = Fields[T] & { event_id: string | null };

/** Any checked client event, discriminated by `type`. */
export type TypedClientEvent = { [T in ClientEventType]: ClientEventOf<T> }[ClientEventType];

/** Checks the fields of a read event (protocol.ts readClientEvent); throws a RealtimeError naming the field. */
export function typedClientEvent(e: ClientEvent): TypedClientEvent {
  const { body, eventId: event_id } = e;
  switch (e.type) {
    case 'session.update':
      return { type: e.type, event_id, session: requireObject(body, 'session', 'session') };
    case 'conversation.item.create':
      return { type: e.type, event_id, item: body.item, previous_item_id: optionalString(body, 'previous_item_id', 'previous_item_id') };
    case 'conversation.item.truncate':
      return {
        type: e.type,
        event_id,
        item_id: requireString(body, 'item_id', 'item_id'),
        content_index: requireInteger(body, 'content_index', 'content_index', 0),
        audio_end_ms: requireInteger(body, 'audio_end_ms', 'audio_end_ms', 0),
      };
    case 'conversation.item.delete':
    case 'conversation.item.retrieve':
      return { type: e.type, event_id, item_id: requireString(body, 'item_id', 'item_id') };
    case 'input_audio_buffer.append':
      return { type: e.type, event_id, audio: requireString(body, 'audio', 'audio') };
    case 'input_audio_buffer.commit':
    case 'input_audio_buffer.clear':
    case 'output_audio_buffer.clear':
      return { type: e.type, event_id };
    case 'response.create':
      return { type: e.type, event_id, response: body.response };
    case 'response.cancel':
      return { type: e.type, event_id, response_id: optionalString(body, 'response_id', 'response_id') };
  }
}

/** The checked fields of one avatar-only client event type. */
export type AvatarClientEventOf<T extends AvatarClientEventType> = AvatarFields[T] & { type: T; event_id: string | null };

/** Any checked avatar-only client event, discriminated by `type`. */
export type TypedAvatarClientEvent = { [T in AvatarClientEventType]: AvatarClientEventOf<T> }[AvatarClientEventType];

/**
 * Checks the fields of an event read in an avatar-only session; null for a type that session does
 * not have (the caller refuses it by name). Throws a RealtimeError naming the field.
 */
export function typedAvatarClientEvent(e: ClientEvent<string>): TypedAvatarClientEvent | null {
  const { body, eventId: event_id } = e;
  switch (e.type) {
    case 'session.update':
      return { type: e.type, event_id, session: requireObject(body, 'session', 'session') };
    case 'output_audio_buffer.append': {
      if (typeof body.audio !== 'string') throw new RealtimeError('invalid_type', "Invalid type for 'audio': expected a base64 string.", 'audio');
      const id = body.segment_id;
      if (id !== undefined && id !== null && (typeof id !== 'string' || id === '' || id.length > MAX_SEGMENT_ID_CHARS)) {
        throw new RealtimeError('invalid_value', `Invalid value for 'segment_id': expected a string of 1 to ${MAX_SEGMENT_ID_CHARS} characters.`, 'segment_id');
      }
      return { type: e.type, event_id, audio: body.audio, segment_id: typeof id === 'string' ? id : null };
    }
    case 'output_audio_buffer.commit':
    case 'output_audio_buffer.clear':
      return { type: e.type, event_id };
    case 'avatar.listen':
      if (typeof body.listening !== 'boolean') throw new RealtimeError('invalid_type', "Invalid type for 'listening': expected a boolean.", 'listening');
      return { type: e.type, event_id, listening: body.listening };
    default:
      return null;
  }
}

/**
 * Events of one transport only (spec 4.5 rule 4): a call's microphone travels as RTP on its audio
 * track and server VAD commits its turns, so input_audio_buffer events are WebSocket-only;
 * output_audio_buffer.clear cuts a call's RTP audio and is WebRTC-only. Throws naming `type`.
 */
export function checkTransport(type: ClientEventType, transport: EngineTransport): void {
  if (transport === 'webrtc' && type.startsWith('input_audio_buffer.')) {
    throw new RealtimeError(
      'unsupported_on_webrtc',
      `'${type}' is not available on a WebRTC call: the microphone travels as RTP on the audio track, and server VAD commits turns. Send audio over /v1/realtime (WebSocket) to use the input audio buffer.`,
      'type',
    );
  }
  if (transport !== 'webrtc' && type === 'output_audio_buffer.clear') {
    throw new RealtimeError('unsupported_on_websocket', "'output_audio_buffer.clear' is for WebRTC calls; on WebSocket send response.cancel, or conversation.item.truncate.", 'type');
  }
}
