/**
 * The rule every session engine keeps (session-engine.ts, avatar-engine.ts,
 * transcription-engine.ts): client events are handled strictly in arrival order, on one chain, so
 * a session.update completes before the event after it; an event that cannot be read is answered
 * with an `error` naming its event_id at once, and nothing reading it throws escapes. An engine's
 * own work that must be ordered with the client's events (a voice turn's response, the idle
 * timeout) joins the same chain with `then`.
 */
import type { Logger } from '../core/log.js';
import { type ClientEvent, type ServerEventDraft, errorEvent, readClientEvent } from './protocol.js';

export class EventChain<T extends string> {
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      /** The event types the engine reads (readClientEvent refuses others as unknown). */
      types?: readonly T[];
      /** Handles one event; its own failures are its to answer (it never rejects). */
      handle(event: ClientEvent<T>): Promise<void>;
      emit(event: ServerEventDraft): void;
      log: Logger;
      sessionId: string;
    },
  ) {}

  /** One text message from the client; handled after every earlier one. Never throws. */
  receive(text: string): void {
    try {
      const read = readClientEvent<T>(text, this.deps.types);
      if (read.error) {
        this.deps.emit(errorEvent(read.error, read.eventId));
        return;
      }
      const event = read.event;
      this.then(() => this.deps.handle(event));
    } catch (err) {
      this.deps.log.error('reading a client event failed', { sessionId: this.deps.sessionId, err });
      this.deps.emit(errorEvent(err, null));
    }
  }

  /** Runs `task` after everything chained so far. */
  then(task: () => Promise<void>): void {
    this.chain = this.chain.then(task);
  }

  /** Resolves once everything chained so far has run. */
  idle(): Promise<void> {
    return this.chain;
  }
}
