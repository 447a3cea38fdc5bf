/**
 * Notices API keys revoked by any process (the keys CLI writes the store while the server runs)
 * and announces them once each, so the server can end what they opened: live sessions and
 * realtime connections, including those authenticated by ephemeral keys the revoked key minted.
 *
 * A cheap indexed poll of the store every POLL_INTERVAL_MS (revocations must take effect within a
 * second). Only revocations after those already in the store at start are announced: a session
 * cannot outlive a restart (recovery ends them all), and connections do not survive one. Times
 * compared are the revocations' own (written by whichever process revoked), never this clock. In fleet mode a pub/sub
 * message can take the poll's place; the 'revoked' event stays the same.
 *
 * A failing poll is logged once per change, never once per poll (four a second): the store being
 * unavailable (postgres_unavailable: the store's DependencyHealth already said so) not at all here,
 * any other failure once at error level when it starts and once at info when polls succeed again.
 * Revocations made meanwhile are announced by the first poll that succeeds (`sinceUs` stays put).
 */
import { EventEmitter } from 'node:events';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ApiKeyRecord, Store } from '../store/store.js';

/** Revocations take effect within this long plus the time to close what the key opened. */
export const POLL_INTERVAL_MS = 250;

export interface RevocationEvents {
  /** API key ids revoked since the last announcement. */
  revoked: [string[]];
}

export class RevocationWatcher extends EventEmitter<RevocationEvents> {
  private timer: NodeJS.Timeout | null = null;
  private sinceUs = 0;
  /** Ids announced at exactly `sinceUs` (the query is inclusive, so a revocation at that instant is not missed). */
  private seenAtSince = new Set<string>();
  private polling: Promise<void> = Promise.resolve();
  /** Whether the last poll failed with an error other than the store being unavailable (already logged). */
  private failing = false;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly intervalMs = POLL_INTERVAL_MS,
  ) {
    super();
  }

  /** Takes the revocations already in the store as known (by their own times, whatever clock wrote them), then polls. */
  async start(): Promise<void> {
    if (this.timer) return;
    const known = await this.store.listRevokedApiKeys(0);
    this.sinceUs = Math.max(0, ...known.map((k) => k.revokedAtUs ?? 0));
    this.seenAtSince = new Set(known.filter((k) => k.revokedAtUs === this.sinceUs).map((k) => k.id));
    this.timer = setInterval(() => {
      this.polling = this.polling.then(() => this.poll());
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.polling;
  }

  /** One look at the store; exposed so a revocation made in-process can take effect at once. */
  async poll(): Promise<void> {
    let keys: ApiKeyRecord[];
    try {
      keys = await this.store.listRevokedApiKeys(this.sinceUs);
    } catch (err) {
      if (err instanceof AppError && err.status === 503) return; // an outage: reported by the store, once
      if (!this.failing) this.log.error('revocation check failed; retrying quietly until it works', { err });
      this.failing = true;
      return;
    }
    if (this.failing) {
      this.failing = false;
      this.log.info('revocation check works again');
    }
    const fresh = keys.filter((k) => !(k.revokedAtUs === this.sinceUs && this.seenAtSince.has(k.id)));
    if (fresh.length === 0) return;
    const latest = Math.max(...keys.map((k) => k.revokedAtUs ?? 0));
    if (latest > this.sinceUs) {
      this.sinceUs = latest;
      this.seenAtSince = new Set();
    }
    for (const k of keys) if (k.revokedAtUs === this.sinceUs) this.seenAtSince.add(k.id);
    this.log.info('API keys revoked', { keyIds: fresh.map((k) => k.id) });
    this.emit('revoked', fresh.map((k) => k.id));
  }
}
