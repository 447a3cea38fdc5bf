/**
 * When to show each avatar frame that arrives over WebSocket, so that it is seen while its own
 * sound is heard. Pure: it is told what the page scheduled and reads no clock of its own.
 *
 * The server sends the avatar's output tick by tick (40 ms at 25 fps) on one clock, each tick's
 * PCM (`response.output_audio.delta`) just before its JPEG (`response.output_image.delta`, with
 * `pts_ms`: the tick's start). The first delta of a reply runs from its first sound to the end of
 * its tick; every later one is a whole tick, the last cut where the speech ends. A page plays the
 * PCM gaplessly on a Web Audio clock a little ahead of now (to ride out network jitter), and the
 * sound then takes the output device's latency to be heard. Drawn as it arrives, a frame would be
 * seen that long before its sound (60 ms of lead plus 10-200 ms of output, Bluetooth the most).
 *
 * So:
 *  - When playback (re)starts (a reply's first delta, or after an underrun), the delta it starts
 *    with ends at its tick's end; the first frame after it is that tick's. That pair fixes the
 *    audio clock's time for a pts: `offsetS` = the delta's end − (pts + tick). It holds for every
 *    frame until playback restarts (the audio is gapless in between); a later delta cannot fix it
 *    again, since the last one of a reply ends mid-tick.
 *  - While that audio plays, a frame of pts P is due when the audio clock's P + offsetS is heard:
 *    `heardAt` maps an audio-clock time to performance.now() by the context's output timestamp.
 *  - A face the client draws gets its frames as parameters (output_motion.delta) and its audio
 *    deltas with their own pts_ms: each delta fixes the offset directly.
 *  - Otherwise (idle, listening, between replies) a frame is due when audio arriving with it would
 *    be heard: the lead and the output latency after now. The delay is then the same as in a
 *    reply, so the picture neither jumps nor stalls when speech starts or ends.
 *
 * Invariants: times in ms on performance.now() unless named `…S` (audio-context seconds); the due
 * time of a frame never comes before the frame arrived.
 */

/** The audio context's clock as AudioContext.getOutputTimestamp() reads it, with its currentTime. */
export interface AudioClock {
  /** The context time (s) being heard at `performanceTime`. */
  contextTime: number;
  /** performance.now() (ms) of that reading. */
  performanceTime: number;
  /** The context's currentTime (s): where newly scheduled audio can start. */
  currentTime: number;
}

/** The tick assumed until two frames have shown it, ms (25 fps). */
const DEFAULT_TICK_MS = 40;

export class FrameClock {
  /** Audio-clock time (s) minus pts (s) for the audio playing now; null when none is known. */
  #offsetS: number | null = null;
  /** Playback restarted with a delta ending here (s); the next frame is its tick's. */
  #restartEndS: number | null = null;
  /** Where the audio scheduled so far ends (s). */
  #audioEndS = 0;
  #lastPtsMs: number | null = null;
  /** The smallest step between consecutive frames' pts seen (a dropped frame makes a longer one); null before two. */
  #tickMs: number | null = null;

  constructor(private readonly leadS: number) {}

  /**
   * A PCM delta was scheduled to end at `endS`; `restarted`: playback started again with it.
   * `ptsEndMs`: where it ends on the frames' clock, when the delta says (a face the client draws:
   * its audio carries pts_ms), which fixes the offset exactly.
   */
  audioScheduled(endS: number, restarted: boolean, ptsEndMs?: number): void {
    this.#audioEndS = endS;
    if (ptsEndMs !== undefined) {
      this.#offsetS = endS - ptsEndMs / 1000;
      this.#restartEndS = null;
    } else if (restarted) {
      this.#offsetS = null;
      this.#restartEndS = endS;
    }
  }

  /** The scheduled audio was cut (barge-in, interrupt): later frames take the idle delay. */
  audioStopped(): void {
    this.#offsetS = null;
    this.#restartEndS = null;
    this.#audioEndS = 0;
  }

  /**
   * When (performance.now(), ms) the frame of `ptsMs` that arrived at `arrivedMs` should be seen,
   * and whether it is placed by its sound (`synced`) or by the idle delay.
   */
  due(ptsMs: number, arrivedMs: number, clock: AudioClock): { atMs: number; synced: boolean } {
    const step = this.#lastPtsMs === null ? 0 : ptsMs - this.#lastPtsMs;
    if (step > 0) this.#tickMs = Math.min(this.#tickMs ?? step, step);
    this.#lastPtsMs = ptsMs;
    if (this.#restartEndS !== null) {
      this.#offsetS = this.#restartEndS - (ptsMs + (this.#tickMs ?? DEFAULT_TICK_MS)) / 1000;
      this.#restartEndS = null;
    }
    const playing = this.#offsetS !== null && this.#audioEndS > clock.currentTime;
    const atS = playing ? ptsMs / 1000 + this.#offsetS! : clock.currentTime + this.leadS;
    return { atMs: Math.max(arrivedMs, heardAt(atS, clock)), synced: playing };
  }
}

/** performance.now() (ms) at which audio scheduled at context time `atS` is heard. */
export function heardAt(atS: number, clock: AudioClock): number {
  return clock.performanceTime + (atS - clock.contextTime) * 1000;
}
