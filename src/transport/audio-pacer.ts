/**
 * Paces a call's Opus packets by their pts. The render loop makes a tick's audio at once (two
 * 20 ms packets a 40 ms tick at 25 fps), so unpaced they leave in pairs 40 ms apart, and a
 * receiver's jitter buffer (Chromium's NetEq) reads the first of each pair as 20 ms late and holds
 * all audio that much longer. Here a packet that arrives with the one before it (within
 * SAME_BURST_MS) leaves its pts' distance after that one left, as from a microphone; a packet that
 * arrives on its own leaves at once.
 *
 * Invariants:
 * - Order is kept, and nothing is dropped: every packet pushed is sent, at most MAX_HOLD_MS after
 *   it arrived.
 * - Holding never builds up: only packets of one burst are spread, so a late tick delays nothing
 *   after it, and a burst after a stall drains within MAX_HOLD_MS instead of over its length.
 * - `close()` drops what is still queued (the call is over) and stops the timer.
 */

/** The longest a packet is held after it arrived: one Opus packet. */
export const MAX_HOLD_MS = 20;
/** Packets that arrive this close together were made together (one tick's). */
export const SAME_BURST_MS = 5;

/** The clock and timer the pacer reads (tests give their own). */
export interface PacerClock {
  nowMs(): number;
  after(ms: number, fn: () => void): { cancel(): void };
}

const realClock: PacerClock = {
  nowMs: () => performance.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(timer) };
  },
};

interface Queued<T> {
  packet: T;
  ptsNs: number;
  arrivedMs: number;
}

export class AudioPacer<T> {
  readonly #send: (packet: T, ptsNs: number) => void;
  readonly #clock: PacerClock;
  #queue: Array<Queued<T>> = [];
  /** The packet sent last: when it arrived and left, and its pts. */
  #last: { arrivedMs: number; sentMs: number; ptsNs: number } | null = null;
  #timer: { cancel(): void } | null = null;
  #closed = false;

  constructor(send: (packet: T, ptsNs: number) => void, clock: PacerClock = realClock) {
    this.#send = send;
    this.#clock = clock;
  }

  /** Queues one packet of pts `ptsNs`; it leaves now or within MAX_HOLD_MS. */
  push(packet: T, ptsNs: number): void {
    if (this.#closed) return;
    this.#queue.push({ packet, ptsNs, arrivedMs: this.#clock.nowMs() });
    if (this.#timer === null) this.#pump();
  }

  /** Packets waiting to leave. */
  get queued(): number {
    return this.#queue.length;
  }

  close(): void {
    this.#closed = true;
    this.#queue = [];
    this.#timer?.cancel();
    this.#timer = null;
  }

  #pump(): void {
    this.#timer = null;
    while (!this.#closed && this.#queue.length > 0) {
      const next = this.#queue[0]!;
      const now = this.#clock.nowMs();
      const last = this.#last;
      const sameBurst = last !== null && next.arrivedMs - last.arrivedMs <= SAME_BURST_MS && next.ptsNs > last.ptsNs;
      const due = sameBurst ? Math.min(last.sentMs + (next.ptsNs - last.ptsNs) / 1e6, next.arrivedMs + MAX_HOLD_MS) : next.arrivedMs;
      if (due > now) {
        this.#timer = this.#clock.after(due - now, () => this.#pump());
        return;
      }
      this.#queue.shift();
      this.#last = { arrivedMs: next.arrivedMs, sentMs: now, ptsNs: next.ptsNs };
      this.#send(next.packet, next.ptsNs);
    }
  }
}
