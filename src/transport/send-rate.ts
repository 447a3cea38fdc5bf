/**
 * How fast a call may send: a sender-side rate controller over what the receiver reports in
 * RTCP, in the spirit of Google Congestion Control (draft-ietf-rmcat-gcc) but from the signal a
 * browser sends any RTP sender without extra negotiation: the report blocks of its receiver
 * reports (loss fraction, and the round trip through LSR/DLSR). Chromium's REMB is not used: with
 * neither abs-send-time nor transport-cc it is its receive-side estimator, bounded by the rate it
 * receives, and the avatar's video is far below its target most of the time (a still face
 * compresses well), so REMB falls to tens of kbit/s on a clean link and would starve the encoder
 * (seen: 275 → 10 kbit/s within a minute of a clean call).
 *
 * - Delay: a queue building at a bottleneck shows as a growing round trip. The round trip is
 *   read relative to its own minimum (arrival time minus LSR+DLSR: libdatachannel stamps its
 *   sender reports on the media clock, so only changes are meaningful); over QUEUE_DELAY_MS above
 *   the minimum (smoothed) is overuse.
 * - Loss: over LOSS_HIGH lost is overuse; under LOSS_LOW with no queue, the link has room. Loss
 *   is counted over windows of at least LOSS_WINDOW_MS from the reports' cumulative counters, not
 *   from each report's fraction: Chromium sends a report with every NACK, each covering a few
 *   packets, and one loss among ten reads as 10% (seen: 3% random loss took the encoder to its
 *   floor). Losses are counted before NACK resends repair them, so random loss the resends
 *   absorb stays under LOSS_HIGH.
 * - Repaired loss: the share of sent packets the viewer NACKed at least once (before repair).
 *   Over LOSSY the link loses enough that each frame of many packets waits for resends (seen: 5%
 *   loss with 30 ± 20 ms jitter at 1 Mbit/s froze the picture 16 times in 20 s, at 190 kbit/s
 *   twice): the estimate comes down by LOSSY_DECREASE per window, not under LOSSY_FLOOR_KBPS, and
 *   does not grow; fewer packets per frame, fewer frames hit.
 * - Delay overuse needs OVERUSE_SAMPLES reports in a row: one late report (the server's event
 *   loop busy, a jitter spike) is not a queue.
 * - Overuse takes the estimate down to DECREASE x the rate actually sent less what was lost, at
 *   most once per DECREASE_EVERY_MS, and further in proportion when the queue is already long
 *   (x QUEUE_DELAY_MS / delay: a queue of a second must drain, not just stop growing); room takes
 *   it up by INCREASE per second, up to the ceiling.
 * - The video encoder gets the estimate less the audio's share, and only changes of more than
 *   APPLY_STEP are applied (an encoder reconfiguration is not free).
 *
 * Pure: time and the sent rate are passed in, so it is tested without a network.
 */

/** The smoothed queueing delay above which the link is overused, ms. */
const QUEUE_DELAY_MS = 100;
/** Below this (and LOSS_LOW) the link has room to grow into, ms. */
const QUEUE_CLEAR_MS = 40;
const LOSS_HIGH = 0.1;
const LOSS_WINDOW_MS = 1000;
const LOSSY = 0.03;
const LOSSY_DECREASE = 0.85;
const LOSSY_FLOOR_KBPS = 300;
const OVERUSE_SAMPLES = 2;
const LOSS_LOW = 0.02;
/** On overuse: this share of the rate actually sent. */
const DECREASE = 0.85;
const DECREASE_EVERY_MS = 400;
/** With room: this much more per second. */
const INCREASE = 0.08;
/** Smoothing of the queueing-delay samples (EWMA weight of a new one). */
const DELAY_SMOOTHING = 0.6;
/** The round trip's minimum is taken over this long (a route change moves it). */
const MIN_WINDOW_MS = 30_000;
/** Send rate kept for audio, RTCP and the data channel, kbit/s. */
const AUDIO_KBPS = 50;
/** Encoder changes smaller than this share are not applied. */
const APPLY_STEP = 0.05;

export interface SendRateOptions {
  /** The encoder's bitrate at the start, and the most it gets, kbit/s. */
  maxVideoKbps: number;
  /** The least the encoder gets, kbit/s. */
  minVideoKbps: number;
}

export interface RateReport {
  /** The report block's extended highest sequence number and cumulative loss. */
  highestSequence: number;
  cumulativeLost: number;
  /** Video packets sent, and those NACKed at least once, since the call began. */
  packetsSent: number;
  packetsNacked: number;
  /** The round trip, ms (any constant added to every value would not matter: only its rise above the window's floor counts); null without an SR echoed yet. */
  relativeRttMs: number | null;
}

export class SendRateControl {
  /** Total send rate allowed, kbit/s. */
  private estimate: number;
  private readonly max: number;
  private readonly min: number;
  private applied: number;
  private queueDelay = 0;
  private rtts: Array<{ at: number; value: number }> = [];
  private lastDecreaseAt = -Infinity;
  private lastUpdateAt: number | null = null;
  private lossWindow: { at: number; sequence: number; lost: number; sent: number; nacked: number } | null = null;
  /** The share of packets NACKed in the last window (loss before repair). */
  lastNacked = 0;
  private delayOverused = 0;
  decreases = 0;
  lastLoss = 0;

  constructor(options: SendRateOptions) {
    this.max = options.maxVideoKbps + AUDIO_KBPS;
    this.min = options.minVideoKbps + AUDIO_KBPS;
    this.estimate = this.max;
    this.applied = options.maxVideoKbps;
  }

  /** The video encoder's current target, kbit/s. */
  get videoKbps(): number {
    return this.applied;
  }

  /** The smoothed queueing delay, ms. */
  get queueDelayMs(): number {
    return this.queueDelay;
  }

  /**
   * One report about the video stream at `nowMs`, while `sentKbps` was being sent (all media of
   * the call). Returns the encoder's new target when it should change, else null.
   */
  update(report: RateReport, nowMs: number, sentKbps: number): number | null {
    const since = this.lastUpdateAt === null ? 0 : nowMs - this.lastUpdateAt;
    this.lastUpdateAt = nowMs;
    let lossDecided = false;
    const window = { at: nowMs, sequence: report.highestSequence, lost: report.cumulativeLost, sent: report.packetsSent, nacked: report.packetsNacked };
    if (!this.lossWindow) this.lossWindow = window;
    else if (nowMs - this.lossWindow.at >= LOSS_WINDOW_MS) {
      const expected = report.highestSequence - this.lossWindow.sequence;
      if (expected > 0) {
        this.lastLoss = Math.max(0, Math.min(1, (report.cumulativeLost - this.lossWindow.lost) / expected));
        lossDecided = true;
      }
      const sent = report.packetsSent - this.lossWindow.sent;
      this.lastNacked = sent > 0 ? Math.max(0, Math.min(1, (report.packetsNacked - this.lossWindow.nacked) / sent)) : 0;
      this.lossWindow = window;
    }
    const loss = this.lastLoss;
    if (report.relativeRttMs !== null) {
      this.rtts.push({ at: nowMs, value: report.relativeRttMs });
      while (this.rtts.length > 1 && this.rtts[0]!.at < nowMs - MIN_WINDOW_MS) this.rtts.shift();
      const floor = Math.min(...this.rtts.map((r) => r.value));
      this.queueDelay += DELAY_SMOOTHING * (report.relativeRttMs - floor - this.queueDelay);
    }
    this.delayOverused = this.queueDelay > QUEUE_DELAY_MS ? this.delayOverused + 1 : 0;
    const overused = this.delayOverused >= OVERUSE_SAMPLES || (lossDecided && loss > LOSS_HIGH);
    if (overused) {
      if (nowMs - this.lastDecreaseAt >= DECREASE_EVERY_MS) {
        const carried = sentKbps > 0 ? sentKbps * (1 - Math.min(loss, 0.5)) : this.estimate;
        const drain = this.queueDelay > QUEUE_DELAY_MS ? Math.max(0.3, QUEUE_DELAY_MS / this.queueDelay) : 1;
        this.estimate = Math.min(this.estimate, DECREASE * drain * carried);
        this.lastDecreaseAt = nowMs;
        this.decreases++;
      }
    } else if (this.lastNacked > LOSSY) {
      if (lossDecided && this.estimate > LOSSY_FLOOR_KBPS) this.estimate = Math.max(LOSSY_FLOOR_KBPS, this.estimate * LOSSY_DECREASE);
    } else if (this.queueDelay < QUEUE_CLEAR_MS && loss < LOSS_LOW && since > 0) {
      this.estimate *= 1 + INCREASE * Math.min(since, 1000) / 1000;
    }
    this.estimate = Math.max(this.min, Math.min(this.max, this.estimate));
    const video = Math.round(Math.max(this.min - AUDIO_KBPS, Math.min(this.max - AUDIO_KBPS, this.estimate - AUDIO_KBPS)));
    if (Math.abs(video - this.applied) / this.applied < APPLY_STEP && !(video === this.max - AUDIO_KBPS && this.applied !== video)) return null;
    this.applied = video;
    return video;
  }
}
