/**
 * A client's events held while its session starts, in order and bounded: the WebSocket gateway,
 * the call gateway and the connection's listeners (sideband) each keep their early events in one.
 */
import { type ServerEventDraft, RealtimeError, errorEvent, eventIdOf } from '../realtime/protocol.js';

/** Client events that may wait for a session to start, and their total size. */
const MAX_PENDING_MESSAGES = 256;
const MAX_PENDING_BYTES = 32 * 1024 * 1024;
/** An event id is looked for in this much of a refused event's text. */
const EVENT_ID_SCAN_CHARS = 4096;

/**
 * Client events that arrive before a connection's engine runs (authentication, session start),
 * kept in order and bounded: MAX_PENDING_MESSAGES events, MAX_PENDING_BYTES in all. An event
 * that does not fit is refused with a `session_not_ready` error naming it, never dropped unsaid.
 */
export class PendingEvents {
  private readonly texts: string[] = [];
  private bytes = 0;

  /** Keeps `text`; when full, returns the error event to send instead. */
  push(text: string): ServerEventDraft | null {
    if (this.texts.length >= MAX_PENDING_MESSAGES || this.bytes + text.length > MAX_PENDING_BYTES) {
      const error = new RealtimeError(
        'session_not_ready',
        `The session is still starting and holds at most ${MAX_PENDING_MESSAGES} events meanwhile; send this event again after session.created.`,
      );
      return errorEvent(error, eventIdOf(text.slice(0, EVENT_ID_SCAN_CHARS)));
    }
    this.texts.push(text);
    this.bytes += text.length;
    return null;
  }

  /** Every kept event, oldest first; the queue is empty afterwards. */
  drain(): string[] {
    this.bytes = 0;
    return this.texts.splice(0);
  }
}
