/**
 * Wall-clock time for records (sessions, keys, usage), in integer microseconds since the Unix
 * epoch, and its wire format. The REST interface shows timestamps as ISO 8601 without a zone and
 * with microseconds ("2024-01-01T00:00:00.000000"), always UTC. Tests inject a ManualClock.
 *
 * systemClock is the wall clock read once at start-up (performance.timeOrigin) moved on by the
 * monotonic clock: a wall clock stepped while the process runs changes nothing, but one that was
 * wrong when it started stays wrong for the process's life. Where several processes write one
 * set of records (fleet mode), SyncedClock follows one reference clock (the database's) the same
 * way, so every node's timestamps are on one timeline whatever the nodes' own clocks say.
 */
import type { Logger } from './log.js';

export interface Clock {
  /** Microseconds since the Unix epoch. */
  nowUs(): number;
}

export const systemClock: Clock = {
  nowUs: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private us: number = Date.UTC(2026, 0, 1) * 1000) {}
  nowUs(): number {
    return this.us;
  }
  advanceMs(ms: number): void {
    this.us += Math.round(ms * 1000);
  }
}

const US_PER_MS = 1000;
/** How often a SyncedClock reads its reference again. */
const RESYNC_MS = 30_000;
/** A reading that took longer than this round trip is not used (its time is too uncertain). */
const MAX_SYNC_RTT_MS = 1000;
/** A correction larger than this is logged: the reference (or this node's monotonic clock) moved. */
const STEP_LOG_US = 1_000_000;

/**
 * A clock that follows a reference clock (`read`, microseconds since the epoch; fleet mode: the
 * database's) and runs on the monotonic clock between readings, which come every RESYNC_MS. Each
 * reading is taken at the midpoint of its round trip; readings that fail or take over
 * MAX_SYNC_RTT_MS leave the clock running on the last good one. Never goes backwards: after a
 * correction back it stands still until the reference catches up, so no duration it measures is
 * negative.
 */
export class SyncedClock implements Clock {
  private baseUs = 0;
  private basePerfMs = 0;
  private lastUs = 0;
  private timer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly read: () => Promise<number>,
    private readonly log: Logger | null,
  ) {}

  /** The first reading must succeed (a node should not write records on a clock it could not set). */
  static async start(read: () => Promise<number>, options: { resyncMs?: number; log?: Logger } = {}): Promise<SyncedClock> {
    const clock = new SyncedClock(read, options.log ?? null);
    await clock.sync(true);
    clock.timer = setInterval(() => void clock.sync(false), options.resyncMs ?? RESYNC_MS);
    clock.timer.unref();
    return clock;
  }

  nowUs(): number {
    const us = Math.floor(this.baseUs + (performance.now() - this.basePerfMs) * US_PER_MS);
    this.lastUs = Math.max(this.lastUs, us);
    return this.lastUs;
  }

  /** Reads the reference now. False when the reading failed or was too slow to use. */
  async sync(first = false): Promise<boolean> {
    const sentMs = performance.now();
    let refUs: number;
    try {
      refUs = await this.read();
    } catch (err) {
      if (first) throw err;
      this.log?.warn('reading the reference clock failed; running on the last reading', { err });
      return false;
    }
    const backMs = performance.now();
    if (!Number.isFinite(refUs)) throw new Error(`the reference clock read ${refUs}`);
    if (backMs - sentMs > MAX_SYNC_RTT_MS && !first) return false;
    const before = first ? refUs : this.nowUs();
    this.baseUs = refUs;
    this.basePerfMs = (sentMs + backMs) / 2;
    const stepUs = Math.floor(this.baseUs + (backMs - this.basePerfMs) * US_PER_MS) - before;
    if (Math.abs(stepUs) >= STEP_LOG_US) this.log?.warn('the reference clock moved: following it', { stepMs: Math.round(stepUs / 1000) });
    return true;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

const US_PER_S = 1_000_000;

/** 1767225600123456 -> "2026-01-01T00:00:00.123456" */
export function formatTimestamp(us: number): string {
  const ms = Math.floor(us / US_PER_MS);
  const micros = us - ms * US_PER_MS;
  const iso = new Date(ms).toISOString(); // 2026-01-01T00:00:00.123Z
  return iso.slice(0, 23) + String(micros).padStart(3, '0');
}

export function formatNullableTimestamp(us: number | null): string | null {
  return us === null ? null : formatTimestamp(us);
}

/**
 * Reads a timestamp given by a client: ISO 8601 (a missing zone means UTC, up to microseconds) or
 * Unix seconds. Returns microseconds, or null when the text is neither.
 */
export function parseTimestamp(text: string): number | null {
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * US_PER_S);
  const m = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(text);
  if (!m) return null;
  const [, date, time = '00:00:00', frac = '', zone = 'Z'] = m;
  const ms = Date.parse(`${date}T${time.length === 5 ? time + ':00' : time}${zone}`);
  if (Number.isNaN(ms)) return null;
  return ms * US_PER_MS + Number(frac.padEnd(6, '0'));
}

export function secondsBetween(startUs: number, endUs: number): number {
  return Math.round(endUs - startUs) / US_PER_S;
}

export function unixSeconds(us: number): number {
  return Math.floor(us / US_PER_S);
}

/** Waits `ms` on the monotonic clock, or less: it resolves as soon as `signal` aborts (at once if it has). */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
