/**
 * Watches this process's event loop: a timer every `intervalMs` notes the longest gap between its
 * ticks, so a test can show that work it started did not block the loop (a stall of seconds shows
 * as a gap of seconds; load noise stays far below the bounds tests use).
 */
export interface LoopWatch {
  /** The longest gap since the start or the last reset, ms. */
  readonly worstGapMs: number;
  /** Forgets the gaps so far (e.g. after sending a large message, which is the test's own work). */
  reset(): void;
  /** Stops the timer; returns worstGapMs. */
  stop(): number;
}

export function watchEventLoop(intervalMs: number): LoopWatch {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, intervalMs);
  return {
    get worstGapMs() {
      return worst;
    },
    reset() {
      last = performance.now();
      worst = 0;
    },
    stop() {
      clearInterval(timer);
      return worst;
    },
  };
}
