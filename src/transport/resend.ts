/**
 * The video packets a call keeps for NACKs, and which of them to send again: a bounded answer to
 * the viewer's NACKs in place of libdatachannel's RtcpNackResponder, which resends every packet
 * asked for every time it is asked. On a congested link that feeds on itself: the resends join a
 * full bottleneck queue, are dropped, are asked for again (Chromium retries each packet up to ten
 * times) and keep the queue full after the encoder has come down (seen: about 1 Mbit/s of resends
 * on a 300 kbit/s link, the queue full for 14 s after the encoder was at 100 kbit/s).
 *
 * Invariants: a packet is resent only while it is younger than MAX_AGE_MS (older, the viewer's
 * jitter buffer has given up on it and a keyframe repairs the picture), at most once per
 * MIN_INTERVAL_MS (a retry of the same NACK within a round trip is not a new loss), and only while
 * the resends of the last second stay under the budget (a share of the send rate, with a floor):
 * past it, NACKs are dropped and counted. KEEP packets at most are kept, by sequence number.
 */

/** Packets kept (about 2 s of 720p video at 1 Mbit/s). */
const KEEP = 512;
const MAX_AGE_MS = 1000;
const MIN_INTERVAL_MS = 100;
/** Resends may take this share of the send rate, and at least BUDGET_FLOOR_KBPS. */
const BUDGET_SHARE = 0.25;
const BUDGET_FLOOR_KBPS = 64;

export interface ResendStats {
  /** Packets kept (sent), and those a NACK asked for at least once: the loss before repair. */
  kept: number;
  askedOnce: number;
  resent: number;
  /** Asked for but too old, unknown, or sent again too recently. */
  skipped: number;
  /** Asked for while the budget was spent. */
  overBudget: number;
}

export class ResendBuffer {
  private readonly packets = new Map<number, { data: Buffer; sentAt: number; resentAt: number; asked: boolean }>();
  private readonly order: number[] = [];
  private spent: Array<{ at: number; bytes: number }> = [];
  readonly stats: ResendStats = { kept: 0, askedOnce: 0, resent: 0, skipped: 0, overBudget: 0 };

  /** Keeps a packet just sent. */
  keep(sequence: number, data: Buffer, nowMs: number): void {
    if (!this.packets.has(sequence)) this.order.push(sequence);
    this.packets.set(sequence, { data, sentAt: nowMs, resentAt: -Infinity, asked: false });
    this.stats.kept++;
    while (this.order.length > KEEP) this.packets.delete(this.order.shift()!);
  }

  /** The packets to send again for a NACK of `sequences`, given the send rate now (kbit/s). */
  resend(sequences: number[], nowMs: number, sendKbps: number): Buffer[] {
    this.spent = this.spent.filter((s) => s.at > nowMs - 1000);
    const budgetBytes = (Math.max(BUDGET_FLOOR_KBPS, sendKbps * BUDGET_SHARE) * 1000) / 8;
    let used = this.spent.reduce((sum, s) => sum + s.bytes, 0);
    const out: Buffer[] = [];
    for (const sequence of sequences) {
      const kept = this.packets.get(sequence);
      if (kept && !kept.asked) {
        kept.asked = true;
        this.stats.askedOnce++;
      }
      if (!kept || nowMs - kept.sentAt > MAX_AGE_MS || nowMs - kept.resentAt < MIN_INTERVAL_MS) {
        this.stats.skipped++;
        continue;
      }
      if (used + kept.data.length > budgetBytes) {
        this.stats.overBudget++;
        continue;
      }
      used += kept.data.length;
      kept.resentAt = nowMs;
      this.spent.push({ at: nowMs, bytes: kept.data.length });
      this.stats.resent++;
      out.push(kept.data);
    }
    return out;
  }
}
