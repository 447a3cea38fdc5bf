/**
 * The running usage of one session's connection: what its engine delivered to the client (audio
 * seconds out, frames, tokens), counted as it goes out and committed to the store as it accrues,
 * so that an end the connection cannot take part in (its worker killed with SIGKILL, failed by the
 * janitor as worker_lost) still bills what was delivered up to the last commit.
 *
 *   engine delivers ─▶ add(delta) ─▶ totals ── within USAGE_FLUSH_MS ──▶ store.raiseUsageCounters
 *   flush()  commits everything counted so far now (before response.done reaches the client)
 *   close()  the last commit; nothing is counted afterwards
 *
 * Invariants:
 *  - Writes are running totals (the session's counters when the meter first wrote, plus what this
 *    meter counted), raised per counter in the store: a write retried after an error whose outcome
 *    is unknown, or a late one, never counts twice or lowers anything. One meter writes a session
 *    at a time (one connection runs a session), so the base it reads is not raced.
 *  - A write lands only while the session is live: once it has ended, its usage record is final,
 *    exact and never changes (the store refuses the write).
 *  - Writes are serialised; a failed one is logged and retried USAGE_FLUSH_MS later, amounts kept.
 *  - Loss bound under kill -9 (and for an end decided on another node while a reply streams): what
 *    was delivered after the last committed write, at most USAGE_FLUSH_MS + one avatar tick (40 ms
 *    at 25 fps) + one store write's latency, i.e. about 0.3 s of audio and 8 frames on a healthy
 *    store (measured in test/fleet/usage-faults.test.ts); a store outage extends it to the outage,
 *    as it stops every write. Every end decided where the session runs (client close, DELETE,
 *    cancel, timeouts, shutdown) commits the exact total first: see SessionService.finish.
 */
import type { Logger } from '../core/log.js';
import type { Store, UsageCounters } from '../store/store.js';

/**
 * Delivered usage is committed at most this long after it went out (plus a write's latency): one
 * primary-key UPDATE per speaking session four times a second, nothing while a session is silent.
 */
export const USAGE_FLUSH_MS = 250;

const ZERO: UsageCounters = { audioSecondsOut: 0, framesOut: 0, inputTokens: 0, outputTokens: 0 };

export interface UsageMeterOptions {
  sessionId: string;
  store: Pick<Store, 'getUsageCounters' | 'raiseUsageCounters'>;
  log: Logger;
  /** Default USAGE_FLUSH_MS. */
  flushMs?: number;
}

export class UsageMeter {
  /** What this meter counted; audio in whole nanoseconds, so that many small deltas add up exactly. */
  private readonly counted = { audioNs: 0, framesOut: 0, inputTokens: 0, outputTokens: 0 };
  /** The session's counters before this meter: read before its first write. */
  private base: UsageCounters | null = null;
  /** What the store holds from this meter (counted, as of the last committed write). */
  private committed: UsageCounters = { ...ZERO };
  private writes: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private failing = false;
  private readonly flushMs: number;

  constructor(private readonly o: UsageMeterOptions) {
    this.flushMs = o.flushMs ?? USAGE_FLUSH_MS;
  }

  /** Usage delivered now; committed within flushMs. Ignored once closed. */
  add(delta: Partial<UsageCounters>): void {
    if (this.closed) return;
    this.counted.audioNs += Math.round((delta.audioSecondsOut ?? 0) * 1e9);
    this.counted.framesOut += delta.framesOut ?? 0;
    this.counted.inputTokens += delta.inputTokens ?? 0;
    this.counted.outputTokens += delta.outputTokens ?? 0;
    this.arm();
  }

  /** What this meter has counted so far (its own, without the session's earlier counters). */
  get totals(): UsageCounters {
    const { audioNs, ...rest } = this.counted;
    return { audioSecondsOut: audioNs / 1e9, ...rest };
  }

  /** Commits everything counted so far; resolves once written (or the write failed, logged). Never rejects. */
  flush(): Promise<void> {
    this.writes = this.writes.then(() => this.write());
    return this.writes;
  }

  /** The last commit: resolves once everything counted is written; later add()s are ignored. */
  close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    return this.flush();
  }

  private arm(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, this.flushMs);
    this.timer.unref();
  }

  private async write(): Promise<void> {
    const snapshot = this.totals;
    if (sameCounters(snapshot, this.committed)) return;
    try {
      this.base ??= await this.o.store.getUsageCounters(this.o.sessionId);
      const base = this.base;
      const live = await this.o.store.raiseUsageCounters(this.o.sessionId, {
        audioSecondsOut: base.audioSecondsOut + snapshot.audioSecondsOut,
        framesOut: base.framesOut + snapshot.framesOut,
        inputTokens: base.inputTokens + snapshot.inputTokens,
        outputTokens: base.outputTokens + snapshot.outputTokens,
      });
      this.committed = snapshot;
      if (this.failing) this.o.log.info('usage writes succeed again', { sessionId: this.o.sessionId });
      this.failing = false;
      if (!live) this.o.log.debug('usage not written: the session has ended', { sessionId: this.o.sessionId });
    } catch (err) {
      if (!this.failing) this.o.log.error('writing usage failed; retrying', { sessionId: this.o.sessionId, err });
      this.failing = true;
      // Kept: the next write carries it (running totals, so nothing is counted twice).
      if (!this.closed) this.arm();
    }
  }
}

function sameCounters(a: UsageCounters, b: UsageCounters): boolean {
  return a.audioSecondsOut === b.audioSecondsOut && a.framesOut === b.framesOut && a.inputTokens === b.inputTokens && a.outputTokens === b.outputTokens;
}
