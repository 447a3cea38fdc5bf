/**
 * RTCP sender reports of a call's outgoing streams, on the session clock. A receiver lines its
 * audio and video up by these reports alone: each maps a stream's RTP timestamps to one shared
 * wall clock (NTP), and the receiver plays the audio and the picture that map to the same instant
 * together (Chromium's RtpStreamsSynchronizer). So both streams' reports must say when their media
 * was *made*, on one clock, not when a packet happened to leave: libdatachannel's reporter stamps
 * each stream's last RTP timestamp with the wall clock at the moment it sends, so a stream that
 * leaves later than the other (Opus waits for whole 20 ms packets, an event-loop stall delays one
 * stream's callbacks) is shown that much out of step, whatever the session's own sync.
 *
 * Invariants:
 * - Every stream's RTP timestamp is its session pts on its codec clock plus a random origin
 *   (`rtpTimestamp`), and every report's NTP time is one epoch plus that pts: the epoch is the
 *   wall clock at the first packet of any stream minus its pts, fixed for the call. Two streams'
 *   reports therefore agree on the pts they describe, whenever each was sent.
 * - A stream is reported only once it has sent, and with the pts of the last packet it sent.
 * - The round trip is read from a report block's LSR/DLSR against the time this side sent that
 *   report (kept for REPORT_MEMORY reports), not against a clock the peer cannot know.
 */
import { ntpMiddle32, senderReport } from './rtp.js';

/** How many sent reports are remembered for round trips: 30 s of them at one a second per stream. */
const REPORT_MEMORY = 64;

/** A stream's RTP timestamp for session time `ptsNs` on a `clockHz` clock, from its random `origin`. */
export function rtpTimestamp(ptsNs: number, clockHz: number, origin: number): number {
  return (Math.round((ptsNs * clockHz) / 1e9) + origin) >>> 0;
}

interface Stream {
  clockHz: number;
  origin: number;
  lastPtsNs: number;
  packets: number;
  octets: number;
}

export class SenderReports {
  readonly #cname: string;
  /** Wall clock (Unix ms) and the monotonic clock (ms) this side reads; tests give their own. */
  readonly #wallMs: () => number;
  readonly #monotonicMs: () => number;
  readonly #streams = new Map<number, Stream>();
  /** Unix ms of session pts 0; null until the first packet. */
  #epochMs: number | null = null;
  /** Reports sent: the LSR value a receiver will echo, and the monotonic time it left. */
  #sent: Array<{ lsr: number; at: number }> = [];

  constructor(cname: string, clocks: { wallMs?: () => number; monotonicMs?: () => number } = {}) {
    this.#cname = cname;
    this.#wallMs = clocks.wallMs ?? (() => performance.timeOrigin + performance.now());
    this.#monotonicMs = clocks.monotonicMs ?? (() => performance.now());
  }

  /** Declares an outgoing stream: its SSRC, codec clock and random timestamp origin. */
  addStream(ssrc: number, clockHz: number, origin: number): void {
    this.#streams.set(ssrc, { clockHz, origin, lastPtsNs: 0, packets: 0, octets: 0 });
  }

  /** Counts one RTP packet of stream `ssrc` sent, holding media of session time `ptsNs`. */
  sent(ssrc: number, ptsNs: number, payloadBytes: number): void {
    const stream = this.#streams.get(ssrc);
    if (!stream) return;
    this.#epochMs ??= this.#wallMs() - ptsNs / 1e6;
    stream.lastPtsNs = ptsNs;
    stream.packets++;
    stream.octets += payloadBytes;
  }

  /** A sender report (with its SDES) for every stream that has sent; remembered for round trips. */
  reports(): Array<{ ssrc: number; packet: Buffer }> {
    const epochMs = this.#epochMs;
    if (epochMs === null) return [];
    const out: Array<{ ssrc: number; packet: Buffer }> = [];
    const at = this.#monotonicMs();
    for (const [ssrc, s] of this.#streams) {
      if (s.packets === 0) continue;
      const ntpMs = epochMs + s.lastPtsNs / 1e6;
      const packet = senderReport({ ssrc, ntpMs, rtpTimestamp: rtpTimestamp(s.lastPtsNs, s.clockHz, s.origin), packets: s.packets, octets: s.octets }, this.#cname);
      out.push({ ssrc, packet });
      this.#sent.push({ lsr: ntpMiddle32(ntpMs), at });
    }
    if (this.#sent.length > REPORT_MEMORY) this.#sent.splice(0, this.#sent.length - REPORT_MEMORY);
    return out;
  }

  /**
   * The round trip, ms, from a receiver report block's LSR (the middle 32 bits of one of our
   * reports' NTP time) and DLSR (1/65536 s it held it): null when the LSR is none of the reports
   * remembered (0: the receiver has none yet).
   */
  roundTripMs(lastSr: number, delaySinceLastSr: number): number | null {
    if (lastSr === 0) return null;
    const sent = this.#sent.findLast((r) => r.lsr === lastSr >>> 0);
    if (!sent) return null;
    return this.#monotonicMs() - sent.at - delaySinceLastSr / 65.536;
  }
}
