/**
 * Mouth opening measured on decoded frames, for lip-sync measures (test/media/lip-sync.test.ts in
 * process, the endpoint benchmark's WebRTC calls at a receiver): the face is found in each frame
 * with the face models (src/media/face-registration.ts FaceRegistry), and the opening is the dark
 * (cavity) area between the lips, sampled on a grid that follows the mouth corners' landmarks (so
 * head motion, roll and scale drop out), over the square of the mouth's width. Then the statistics
 * that judge an opening series against the speech energy: Pearson r at the best lag, and the shares
 * of silent frames closed and loud frames open.
 *
 * Invariants:
 * - A MouthTracker measures the frames of one video in time order: the cavity threshold is set
 *   from the first frame it measures (CAVITY_SHARE of the mouth region's median luma; give it a
 *   silent, closed-mouth frame first), and a frame where no usable face is found is measured with
 *   the landmarks of the last frame where one was (`detected: false`); before any face, null.
 * - Openings are raw (no rest subtracted); callers subtract their silent frames' median.
 * - Lags are positive when the mouth trails the sound.
 * - Frames are measured at their own size: coordinates (landmarks, boxes) are in its pixels.
 */
import sharp from 'sharp';
import type { FaceLandmarks, FaceRegistry } from '../../src/media/face-registration.js';

/** Cavity: luma under this share of the mouth region's median luma in the first frame. */
export const CAVITY_SHARE = 0.4;
/** Region sampled, in mouth widths: from 0.15 above the corners' line to 0.45 below it. */
export const REGION_ABOVE = 0.15;
export const REGION_BELOW = 0.45;
/** Closed: cavity under 1 % of the mouth width squared (a 1 px gap across a 100 px mouth). */
export const CLOSED_MAX = 0.01;
/** Open: cavity of at least 3 % of the mouth width squared (a 3 px gap across a 100 px mouth). */
export const OPEN_MIN = 0.03;
/** A frame is silent when the RMS (full scale 1) of it and of the 3 frames either side is under this. */
export const SILENT_RMS = 0.003;
export const SILENT_SPAN_FRAMES = 3;
/** A frame is loud when its RMS is over this share of the series' peak. */
export const LOUD_SHARE = 0.25;
/** Samples across a mouth width on the grid. */
const GRID_STEPS = 64;

/** A decoded frame: an encoded image (JPEG, PNG...) or raw RGBA pixels. */
export type DecodedFrame = Buffer | { rgba: Uint8Array; width: number; height: number };

export interface MouthReading {
  /** Cavity area over mouth width squared (raw: the resting level not subtracted). */
  opening: number;
  /** The mouth box, [x, y, w, h] in the frame's pixels (mouthBoxOf). */
  mouthBox: [number, number, number, number];
  /** The face's landmark box, [x, y, w, h]. */
  faceBox: [number, number, number, number];
  /** Whether the face was found in this frame (false: the previous frame's landmarks were used). */
  detected: boolean;
  width: number;
  height: number;
}

/**
 * A mouth box from the landmarks: the corners (61, 291) with a quarter of the mouth's width on
 * either side, from that margin above the upper lip's top (0) down to the chin (152) plus a
 * sixteenth (room for the jaw and head motion), clipped to the frame.
 */
export function mouthBoxOf(lm: FaceLandmarks['landmarks'], width: number, height: number): [number, number, number, number] {
  const [left, right] = [Math.min(lm[61]![0], lm[291]![0]), Math.max(lm[61]![0], lm[291]![0])];
  const margin = (right - left) / 4;
  const x0 = Math.max(0, Math.round(left - margin));
  const y0 = Math.max(0, Math.round(lm[0]![1] - margin));
  const x1 = Math.min(width, Math.round(right + margin));
  const y1 = Math.min(height, Math.round(lm[152]![1] + margin / 4));
  return [x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0)];
}

/**
 * Luma on a grid that follows the mouth's corners (landmarks 61, 291): GRID_STEPS samples from
 * corner to corner, rows of the same spacing from REGION_ABOVE above the corners' line to
 * REGION_BELOW below it; samples outside the frame are left out.
 */
export function mouthSamples(lum: Uint8Array, width: number, height: number, lm: FaceLandmarks['landmarks']): number[] {
  const [l, r] = [lm[61]!, lm[291]!];
  const w = Math.hypot(r[0] - l[0], r[1] - l[1]);
  // Unit vectors along the mouth (corner to corner) and down across it.
  const [ax, ay] = [(r[0] - l[0]) / w, (r[1] - l[1]) / w];
  const [dx, dy] = [-ay, ax];
  const rows = Math.round(GRID_STEPS * (REGION_ABOVE + REGION_BELOW));
  const samples: number[] = [];
  for (let j = 0; j < rows; j++) {
    const v = (-REGION_ABOVE + (j + 0.5) / GRID_STEPS) * w;
    for (let i = 0; i < GRID_STEPS; i++) {
      const u = ((i + 0.5) / GRID_STEPS) * w;
      const x = Math.round(l[0] + ax * u + dx * v);
      const y = Math.round(l[1] + ay * u + dy * v);
      if (x >= 0 && y >= 0 && x < width && y < height) samples.push(lum[y * width + x]!);
    }
  }
  return samples;
}

/** Cavity area over mouth width squared: the grid's samples darker than `threshold`. */
export function cavity(samples: number[], threshold: number): number {
  return samples.filter((v) => v < threshold).length / (GRID_STEPS * GRID_STEPS);
}

export function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[values.length >> 1]!;
}

/** The frame's luma (BT.601, sharp's greyscale), and an encoded image for the face models. */
async function decodeFrame(frame: DecodedFrame): Promise<{ encoded: Buffer; lum: Uint8Array; width: number; height: number }> {
  if (Buffer.isBuffer(frame)) {
    const { data, info } = await sharp(frame).greyscale().raw().toBuffer({ resolveWithObject: true });
    return { encoded: frame, lum: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  }
  const { rgba, width, height } = frame;
  const lum = new Uint8Array(width * height);
  for (let i = 0; i < lum.length; i++) lum[i] = Math.round(0.299 * rgba[4 * i]! + 0.587 * rgba[4 * i + 1]! + 0.114 * rgba[4 * i + 2]!);
  const encoded = await sharp(Buffer.from(rgba.buffer, rgba.byteOffset, rgba.length), { raw: { width, height, channels: 4 } }).png({ compressionLevel: 1 }).toBuffer();
  return { encoded, lum, width, height };
}

/** Finds and follows one face over the frames of a video, measuring its mouth (see the module comment). */
export class MouthTracker {
  private threshold = 0;
  private last: FaceLandmarks | null = null;
  /** Frames measured, and those where the face was found. */
  frames = 0;
  detected = 0;

  constructor(private readonly registry: FaceRegistry) {}

  /** The mouth in `frame`; null while no face has been found in this or an earlier frame. */
  async measure(frame: DecodedFrame): Promise<MouthReading | null> {
    const { encoded, lum, width, height } = await decodeFrame(frame);
    let found: FaceLandmarks | null = null;
    try {
      found = await this.registry.register(encoded);
    } catch {
      // No usable face in this frame (a refusal of the registry's rules, a blur): the last one tracked.
    }
    this.frames++;
    if (found) {
      this.detected++;
      this.last = found;
    }
    const face = found ?? this.last;
    if (!face) return null;
    const samples = mouthSamples(lum, width, height, face.landmarks);
    if (this.threshold === 0) this.threshold = CAVITY_SHARE * median(samples);
    return { opening: cavity(samples, this.threshold), mouthBox: mouthBoxOf(face.landmarks, width, height), faceBox: face.box, detected: found !== null, width, height };
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics: an opening series against the speech energy (RMS, full scale 1) of the same frames.

/** Pearson r of two equal-length series (NaN under 3 values; 0 where either is flat). */
export function pearson(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  if (n < 3) return Number.NaN;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < n; i++) {
    ma += a[i]!;
    mb += b[i]!;
  }
  ma /= n;
  mb /= n;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < n; i++) {
    num += (a[i]! - ma) * (b[i]! - mb);
    da += (a[i]! - ma) ** 2;
    db += (b[i]! - mb) ** 2;
  }
  return da === 0 || db === 0 ? 0 : num / Math.sqrt(da * db);
}

/**
 * Pearson r of opening against energy at the best whole-frame lag within ±maxLagFrames (the
 * opening of frame i + lag against the energy of frame i; overlapping frames only).
 */
export function bestLagFrames(opening: number[], rms: number[], maxLagFrames: number): { r: number; lagFrames: number } {
  let best = { r: -1, lagFrames: 0 };
  for (let lag = -maxLagFrames; lag <= maxLagFrames; lag++) {
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < rms.length; i++) {
      const j = i + lag;
      if (j >= 0 && j < opening.length) {
        a.push(rms[i]!);
        b.push(opening[j]!);
      }
    }
    const r = pearson(a, b);
    if (r > best.r) best = { r, lagFrames: lag };
  }
  return best;
}

/**
 * Pearson r of the opening of frames presented at `times` (ms) against the energy heard around
 * each time less the lag, `rmsAt(t)`, at the best lag from -maxLagMs to maxLagMs in steps of
 * stepMs (frames presented at irregular times, as at a receiver).
 */
export function bestLagMs(times: number[], opening: number[], rmsAt: (t: number) => number, maxLagMs: number, stepMs: number): { r: number; lagMs: number } {
  let best = { r: -1, lagMs: 0 };
  for (let lag = -maxLagMs; lag <= maxLagMs; lag += stepMs) {
    const r = pearson(opening, times.map((t) => rmsAt(t - lag)));
    if (r > best.r) best = { r, lagMs: lag };
  }
  return best;
}

export interface Shares {
  /** Silent frames (silent themselves and SILENT_SPAN_FRAMES either side), and those closed (opening < CLOSED_MAX). */
  silent: number;
  closed: number;
  /** Loud frames (RMS > LOUD_SHARE of the peak), and those open (opening >= OPEN_MIN). */
  loud: number;
  open: number;
}

/** How many silent frames show a closed mouth and loud frames an open one (rest already subtracted from `opening`). */
export function closedOpenShares(opening: number[], rms: number[]): Shares {
  const peak = Math.max(...rms);
  const out: Shares = { silent: 0, closed: 0, loud: 0, open: 0 };
  for (let i = 0; i < opening.length; i++) {
    if (rms.slice(Math.max(0, i - SILENT_SPAN_FRAMES), i + SILENT_SPAN_FRAMES + 1).every((x) => x < SILENT_RMS)) {
      out.silent++;
      if (opening[i]! < CLOSED_MAX) out.closed++;
    }
    if (rms[i]! > LOUD_SHARE * peak) {
      out.loud++;
      if (opening[i]! >= OPEN_MIN) out.open++;
    }
  }
  return out;
}
