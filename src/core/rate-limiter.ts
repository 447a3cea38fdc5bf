/**
 * Token buckets by key: `burst` tokens at once, refilled at `perMinute`. In memory: limits are
 * about the next seconds and minutes, so they need not survive a restart. Used per API key for
 * requests and realtime connections, and per remote address for failed authentications.
 *
 * Bounded: beyond MAX_BUCKETS keys, buckets that have refilled completely (they carry no state
 * worth keeping) are dropped, so a stream of new keys (addresses) cannot grow it without limit.
 *
 * Time only refills: a clock stepped back (callers pass Date.now()) counts as no time passed, never
 * as tokens taken away (a 10 min step back would otherwise lock every key and address out for
 * 10 min: issue 25).
 */

/** Buckets kept before full ones are pruned. */
const MAX_BUCKETS = 10_000;

export interface TakeResult {
  allowed: boolean;
  remaining: number;
  /** Whole seconds until a token is available (0 when allowed). */
  retryAfterS: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedMs: number }>();

  constructor(
    readonly perMinute: number,
    readonly burst: number,
  ) {}

  /** Takes one token if there is one; otherwise says how many seconds until there will be. */
  take(key: string, nowMs: number): TakeResult {
    const bucket = this.refill(key, nowMs);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true, remaining: Math.floor(bucket.tokens), retryAfterS: 0 };
    }
    return { allowed: false, remaining: 0, retryAfterS: this.secondsUntilToken(bucket.tokens) };
  }

  /** Whether a token is there, without taking it. */
  peek(key: string, nowMs: number): TakeResult {
    const bucket = this.refill(key, nowMs);
    return bucket.tokens >= 1
      ? { allowed: true, remaining: Math.floor(bucket.tokens), retryAfterS: 0 }
      : { allowed: false, remaining: 0, retryAfterS: this.secondsUntilToken(bucket.tokens) };
  }

  private refill(key: string, nowMs: number): { tokens: number; updatedMs: number } {
    const rate = this.perMinute / 60_000;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUCKETS) this.prune(nowMs);
      bucket = { tokens: this.burst, updatedMs: nowMs };
      this.buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(this.burst, bucket.tokens + Math.max(0, nowMs - bucket.updatedMs) * rate);
    bucket.updatedMs = nowMs;
    return bucket;
  }

  private prune(nowMs: number): void {
    const rate = this.perMinute / 60_000;
    for (const [key, b] of this.buckets) if (b.tokens + Math.max(0, nowMs - b.updatedMs) * rate >= this.burst) this.buckets.delete(key);
  }

  private secondsUntilToken(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / (this.perMinute / 60_000) / 1000));
  }
}
