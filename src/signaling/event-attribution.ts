/**
 * Whose client event an `error` names, when several clients feed one engine (a call's data
 * channel and its sideband WebSockets, `?call_id=`). The engine names a failed event by its
 * `event_id` only, and two clients may use the same ids (or none at all), so an event from an
 * attributed source enters the engine under an id of this class's making; an `error` naming that
 * id is traced back to its source and given the source's own event_id again.
 *
 * Invariants: the engine sees the same event (only `event_id` differs); an id made here cannot be
 * one a client chose by chance (a random prefix per instance); the memory of original ids is
 * bounded (MAX_TRACKED_EVENTS, oldest forgotten first), and a forgotten id still names its source
 * (the source's number is in the id), only its original event_id becomes null.
 * Not done here: events that are not readable client events (bad JSON, too large) are not tagged;
 * the engine refuses those while reading them, so the caller attributes that refusal by timing
 * (RealtimeConnection's receiving window).
 */
import { randomBase62 } from '../core/ids.js';
import { ALL_CLIENT_EVENT_TYPES, MAX_CLIENT_EVENT_BYTES, readClientEvent } from '../realtime/protocol.js';

/**
 * Original event ids remembered. An error names an event while the engine handles it, or, for
 * response.create, until its response ends; 4096 events later that one is long over.
 */
const MAX_TRACKED_EVENTS = 4096;

export interface EventOrigin {
  /** The number the caller gave the source in tag(). */
  source: number;
  /** The source's own event_id (null: it sent none, or it was forgotten). */
  eventId: string | null;
}

export class EventAttribution {
  private readonly prefix = `evt_sb${randomBase62(10)}_`;
  private readonly origins = new Map<string, string | null>();
  private seq = 0;

  /**
   * The text to give the engine for `text` from `source` (a non-negative integer): the same event
   * under an id of ours. Null when `text` is not a readable client event (the engine refuses it at
   * once, as it would anyway).
   */
  tag(source: number, text: string): string | null {
    if (text.length > MAX_CLIENT_EVENT_BYTES) return null; // characters ≤ bytes: certainly too large
    const read = readClientEvent(text, ALL_CLIENT_EVENT_TYPES); // a call may run either kind of session
    if (read.error) return null;
    const id = `${this.prefix}${source}_${++this.seq}`;
    this.origins.set(id, read.event.eventId);
    if (this.origins.size > MAX_TRACKED_EVENTS) this.origins.delete(this.origins.keys().next().value!);
    return JSON.stringify({ ...read.event.body, event_id: id });
  }

  /** The source and original id of an event id made by tag(); null for any other id. */
  resolve(eventId: string | null | undefined): EventOrigin | null {
    if (typeof eventId !== 'string' || !eventId.startsWith(this.prefix)) return null;
    const source = Number.parseInt(eventId.slice(this.prefix.length), 10);
    if (!Number.isSafeInteger(source)) return null;
    return { source, eventId: this.origins.get(eventId) ?? null };
  }
}
