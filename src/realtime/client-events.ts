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
import { type ClientEvent, type ClientEventType, type Json, optionalString, requireInteger, requireObject, requireString } from './protocol.js';

/** A GA event with `K`, the records it carries, left as the client's JSON (see the header). */
type Carrying<E, K extends keyof E> = Omit<E, K | 'event_id'> & { [P in K]: P extends 'session' ? Json : unknown };
type Plain<E> = Omit<E, 'event_id'>;

interface Fields {
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
