/**
 * One text message of a client read as the event a session engine chains. Every engine
 * (session-engine.ts, avatar-engine.ts, transcription-engine.ts) keeps the same rule: events are
 * handled strictly in arrival order on one chain, and a message that is not an event is answered
 * at once with an `error` naming its event_id; nothing reading it throws. This is that reading; the
 * chain stays the engine's (its own work, a voice turn's response or the idle timeout, joins it).
 */
import type { Logger } from '../core/log.js';
import { type ClientEvent, type ClientEventType, type ServerEventDraft, errorEvent, readClientEvent } from './protocol.js';

export interface MessageReader<T extends string> {
  /** The event types the engine reads (readClientEvent refuses others as unknown); default the realtime ones. */
  types?: readonly T[];
  emit(event: ServerEventDraft): void;
  log: Logger;
  sessionId: string;
}

/** The event `text` holds, or null once its error has been sent. */
export function clientEventOf<T extends string = ClientEventType>(text: string, reader: MessageReader<T>): ClientEvent<T> | null {
  try {
    const read = readClientEvent<T>(text, reader.types);
    if (read.error) {
      reader.emit(errorEvent(read.error, read.eventId));
      return null;
    }
    return read.event;
  } catch (err) {
    reader.log.error('reading a client event failed', { sessionId: reader.sessionId, err });
    reader.emit(errorEvent(err, null));
    return null;
  }
}
