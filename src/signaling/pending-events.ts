/**
 * A client's events held until where they go is ready, in order and bounded. Every holder of early
 * events is an EventGate: a WebSocket client while it authenticates and its session is placed
 * (client-connection.ts), a relay until the worker's side opens (worker-relay.ts), and a
 * connection's transport and listeners until its engine runs (realtime-connection.ts). Handing the
 * held events on is written here, once: `open(deliver)`.
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

/**
 * A way in that holds a client's events (PendingEvents) until `open(deliver)`, then passes each
 * straight on. An event refused while held is answered through `refuse` (an error naming it).
 * `shut()` drops what is held and everything after: the receiver has gone.
 */
export class EventGate {
  private readonly pending = new PendingEvents();
  private deliver: ((text: string) => void) | null = null;
  private shutDown = false;

  constructor(private readonly refuse: (error: ServerEventDraft) => void) {}

  get isOpen(): boolean {
    return this.deliver !== null;
  }

  receive(text: string): void {
    if (this.shutDown) return;
    if (this.deliver) return this.deliver(text);
    const refused = this.pending.push(text);
    if (refused) this.refuse(refused);
  }

  /** From now on events go to `deliver`; the held ones go first, oldest first (also any that arrive while they are handed on). */
  open(deliver: (text: string) => void): void {
    if (this.shutDown || this.deliver) return;
    for (let held = this.pending.drain(); held.length > 0; held = this.pending.drain()) {
      for (const text of held) deliver(text);
    }
    if (!this.shutDown) this.deliver = deliver;
  }

  shut(): void {
    this.shutDown = true;
    this.deliver = null;
    this.pending.drain();
  }
}
