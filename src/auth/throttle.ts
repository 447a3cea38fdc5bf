/**
 * Throttles failed authentication by remote address: each address may fail `perMinute` times a
 * minute (as a burst, refilled evenly); once that budget is spent, every authentication attempt
 * from it (REST, realtime WebSocket, calls) is refused with 429 `too_many_failed_authentications`
 * and Retry-After until the budget refills, without looking at the key. Successful
 * authentications, and requests that carry no key at all, cost nothing, so a working client never
 * notices; keys are far too long to guess, so this is about load and abuse, not brute force.
 */
import { AppError } from '../core/errors.js';
import { RateLimiter } from '../core/rate-limiter.js';

export class AuthThrottle {
  private readonly failures: RateLimiter | null;

  /** `perMinute` 0 turns throttling off. */
  constructor(readonly perMinute: number) {
    this.failures = perMinute > 0 ? new RateLimiter(perMinute, perMinute) : null;
  }

  /** Throws the 429 when `address` has no failures left to spend. */
  check(address: string, nowMs = Date.now()): void {
    if (!this.failures) return;
    const state = this.failures.peek(address, nowMs);
    if (!state.allowed) {
      throw new AppError(
        'too_many_failed_authentications',
        `Too many failed authentications from this address; try again in ${state.retryAfterS} s.`,
        { status: 429, headers: { 'Retry-After': String(state.retryAfterS) } },
      );
    }
  }

  /** Counts a failed authentication from `address`. */
  failed(address: string, nowMs = Date.now()): void {
    this.failures?.take(address, nowMs);
  }

  /** Runs `authenticate` for `address`: refused while throttled, failures counted. */
  async guard<T>(address: string, authenticate: () => Promise<T>): Promise<T> {
    this.check(address);
    try {
      return await authenticate();
    } catch (err) {
      // A wrong key counts; no key at all (a client that has not configured one yet) does not.
      if (err instanceof AppError && err.status === 401 && err.code !== 'missing_api_key') this.failed(address);
      throw err;
    }
  }
}
