/**
 * Delivers usage records to the configured webhook from the durable outbox in the store.
 *
 * Each usage record gets an outbox entry in the same transaction that ends its session. The
 * dispatcher POSTs due entries, marks 2xx as delivered, and reschedules anything else with
 * exponential backoff (base * 2^attempts, capped, with +-20 % jitter so a recovering receiver is
 * not hit by a thundering herd). After maxAttempts an entry is marked dead but kept. Entries
 * survive restarts: a new process picks up where the old one stopped. Delivery is at least once;
 * receivers deduplicate by the `id` field (also sent as X-Avatar-Event-Id).
 *
 * Signature: X-Avatar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
 */
import { createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import { formatTimestamp, unixSeconds } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { WebhookConfig } from '../config.js';
import type { OutboxEntry, Store, UsageRecord } from '../store/store.js';
import { usageView } from './usage-view.js';

/** Entries sent per pass; the next pass starts as soon as this one ends if more are due. */
const BATCH_SIZE = 20;
/** Longest idle sleep between passes, so entries scheduled by another process are not missed long. */
const IDLE_POLL_MS = 30_000;
const JITTER = 0.2;

export function webhookBody(eventId: string, usage: UsageRecord): string {
  return JSON.stringify({
    id: eventId,
    object: 'event',
    type: 'usage.recorded',
    created_at: formatTimestamp(usage.createdAtUs),
    data: usageView(usage),
  });
}

export function signWebhook(secret: string, timestampS: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${timestampS}.${body}`).digest('hex');
  return `t=${timestampS},v1=${mac}`;
}

export interface WebhookEvents {
  delivered: [OutboxEntry];
  /** A failed attempt; the entry is retried later. */
  retry: [OutboxEntry, string];
  /** Given up after maxAttempts; the entry stays in the outbox, marked dead. */
  dead: [OutboxEntry, string];
}

export class WebhookDispatcher extends EventEmitter<WebhookEvents> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly store: Store,
    private readonly config: WebhookConfig,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    super();
  }

  start(): void {
    this.schedule(0);
  }

  /** Runs a pass now (called when a session ends, so delivery does not wait for the poll). */
  poke(): void {
    if (!this.stopped && !this.running) this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.pass().finally(() => {
        this.running = null;
      });
    }, delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      const due = await this.store.dueOutboxEntries(this.clock.nowUs(), BATCH_SIZE);
      for (const entry of due) {
        if (this.stopped) return;
        await this.deliver(entry);
      }
      if (due.length === BATCH_SIZE) return this.schedule(0);
      const next = await this.store.nextOutboxAttemptUs();
      const waitMs = next === null ? IDLE_POLL_MS : Math.min(IDLE_POLL_MS, Math.max(0, (next - this.clock.nowUs()) / 1000));
      this.schedule(waitMs);
    } catch (err) {
      this.log.error('webhook pass failed', { err });
      this.schedule(this.config.retryBaseMs);
    }
  }

  private async deliver(entry: OutboxEntry): Promise<void> {
    const now = this.clock.nowUs();
    let failure: string;
    try {
      const res = await fetch(this.config.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'avatar-server-webhook/1',
          'x-avatar-event-id': entry.eventId,
          'x-avatar-signature': signWebhook(this.config.secret, unixSeconds(now), entry.payload),
        },
        body: entry.payload,
        signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.config.timeoutMs)]),
      });
      await res.arrayBuffer().catch(() => undefined); // drain so the connection is reused
      if (res.ok) {
        await this.store.markOutboxDelivered(entry.id, this.clock.nowUs());
        this.log.info('webhook delivered', { eventId: entry.eventId, attempts: entry.attempts + 1 });
        this.emit('delivered', entry);
        return;
      }
      failure = `HTTP ${res.status}`;
    } catch (err) {
      if (this.stopped) return; // shutting down: the entry stays due for the next process
      failure = (err as Error).message;
    }
    const attempts = entry.attempts + 1;
    if (attempts >= this.config.maxAttempts) {
      await this.store.markOutboxFailed(entry.id, failure, null, this.clock.nowUs());
      this.log.error('webhook entry dead after max attempts', { eventId: entry.eventId, attempts, failure });
      this.emit('dead', entry, failure);
      return;
    }
    const backoffMs = Math.min(this.config.retryMaxMs, this.config.retryBaseMs * 2 ** (attempts - 1));
    const jittered = backoffMs * (1 - JITTER + Math.random() * 2 * JITTER);
    await this.store.markOutboxFailed(entry.id, failure, this.clock.nowUs() + Math.round(jittered * 1000), this.clock.nowUs());
    this.log.warn('webhook delivery failed; will retry', { eventId: entry.eventId, attempts, failure, retryInMs: Math.round(jittered) });
    this.emit('retry', entry, failure);
  }
}
