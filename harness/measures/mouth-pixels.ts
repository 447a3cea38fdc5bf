/**
 * Mouth opening measured a second way (method B), for lip-sync measures beside the landmark cavity
 * of mouth-opening.ts (method A), so that the two do not share blind spots: the dark-and-teeth
 * pixel statistics of a mouth region placed ONCE, from one frame's landmarks at rest, and moved
 * with the head as found by correlating the upper face (eyes and nose, which the mouth never
 * moves) against that first frame. A depends on the landmark model re-finding the lips in every
 * frame (which can snap to a closed-lip prior, or lose a mouth full of teeth) and sees the cavity
 * only; B never runs the landmark model after the first frame and sees teeth, but is fooled by a
 * head turn beyond its search (bounded: ±SEARCH_PX and SCALES).
 *
 * Invariants:
 * - A MouthPixels measures frames of one video, each the size of the first: the region, the
 *   upper-face patch and the thresholds all come from the frame it is built with (give it a
 *   silent, closed-mouth frame) and are never changed after.
 * - opening: the dark and teeth pixels over the mouth width squared (A's unit); dark: share of
 *   the region's pixels with luma under DARK_SHARE × the region's median luma at rest (the
 *   cavity); teeth: share brighter than the region's 90th percentile at rest with little
 *   colour (|Cb − 128| and |Cr − 128| under TEETH_CHROMA). Raw values: a smiling face's own teeth
 *   are in its rest level, which the caller subtracts (the median of its silent frames), as for A.
 * - The motion found is a translation and a scale about the patch's centre, in pixels of the frame.
 */
import sharp from 'sharp';
import type { FaceLandmarks } from '../../src/media/face-registration.js';
import { pearson } from './mouth-opening.js';

/** Cavity: luma under this share of the region's median luma at rest (as mouth-opening.ts CAVITY_SHARE). */
export const DARK_SHARE = 0.4;
/** Teeth: brighter than the region's 90th percentile at rest, with chroma within this of grey. */
export const TEETH_CHROMA = 12;
/** The region, in mouth widths: a mouth-width square's columns, from 0.15 above the corners' line to 0.55 below. */
const REGION_ABOVE = 0.15;
const REGION_BELOW = 0.55;
/** Head motion searched: translations within ±SEARCH_PX (2 px steps, then 1 px around the best), scales in SCALES. */
export const SEARCH_PX = 12;
const SCALES = [0.94, 0.96, 0.98, 1, 1.02, 1.04, 1.06];

/** A frame's pixels: luma and chroma planes (BT.601 full range), one byte per pixel each. */
export interface PixelPlanes {
  y: Uint8Array;
  cb: Uint8Array;
  cr: Uint8Array;
  width: number;
  height: number;
}

export interface PixelReading {
  /**
   * Dark and teeth pixels over the mouth width squared (the unit of mouth-opening.ts, so its
   * CLOSED_MAX and OPEN_MIN apply): raw, the resting level not subtracted.
   */
  opening: number;
  dark: number;
  teeth: number;
  /** The head motion found against the first frame. */
  dx: number;
  dy: number;
  scale: number;
}

/** Planes of packed RGB (3 or 4 channels). */
export function planesOf(rgb: Uint8Array, width: number, height: number, channels: 3 | 4): PixelPlanes {
  const n = width * height;
  const out = { y: new Uint8Array(n), cb: new Uint8Array(n), cr: new Uint8Array(n), width, height };
  for (let i = 0; i < n; i++) {
    const [r, g, b] = [rgb[i * channels]!, rgb[i * channels + 1]!, rgb[i * channels + 2]!];
    out.y[i] = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
    out.cb[i] = Math.max(0, Math.min(255, Math.round(128 - 0.168736 * r - 0.331264 * g + 0.5 * b)));
    out.cr[i] = Math.max(0, Math.min(255, Math.round(128 + 0.5 * r - 0.418688 * g - 0.081312 * b)));
  }
  return out;
}

/** Planes of an encoded image (JPEG, PNG...). */
export async function decodePlanes(image: Buffer): Promise<PixelPlanes> {
  const { data, info } = await sharp(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return planesOf(new Uint8Array(data.buffer, data.byteOffset, data.length), info.width, info.height, 3);
}

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export class MouthPixels {
  private readonly patch: Box;
  private readonly patchLuma: Float64Array;
  private readonly region: Box;
  private readonly darkBelow: number;
  private readonly teethAbove: number;

  /** Places the region and the upper-face patch on `first` from its landmarks (468-point face mesh). */
  constructor(first: PixelPlanes, landmarks: FaceLandmarks['landmarks']) {
    const [l, r] = [landmarks[61]!, landmarks[291]!];
    const mouthW = Math.hypot(r[0] - l[0], r[1] - l[1]);
    const midY = (l[1] + r[1]) / 2;
    this.region = { x: Math.min(l[0], r[0]), y: midY - REGION_ABOVE * mouthW, w: mouthW, h: (REGION_ABOVE + REGION_BELOW) * mouthW };
    // Eyes (outer corners 33, 263) down to the nose tip (1): rigid with the skull.
    const [e1, e2, nose] = [landmarks[33]!, landmarks[263]!, landmarks[1]!];
    const eyeW = Math.abs(e2[0] - e1[0]);
    const top = Math.min(e1[1], e2[1]) - 0.2 * eyeW;
    this.patch = clip({ x: Math.min(e1[0], e2[0]), y: top, w: eyeW, h: nose[1] - top }, first, SEARCH_PX + 4);
    this.patchLuma = sample(first.y, first.width, this.patch, this.centre(), 0, 0, 1);
    const rest = pixels(first, this.region).y.sort((a, b) => a - b);
    this.darkBelow = DARK_SHARE * rest[rest.length >> 1]!;
    this.teethAbove = rest[Math.floor(rest.length * 0.9)]!;
  }

  /** The head motion against the first frame, and the region's statistics moved by it. */
  measure(frame: PixelPlanes): PixelReading {
    const c = this.centre();
    // Normalised cross-correlation of the patches: Pearson r of their pixels.
    const score = (dx: number, dy: number, s: number) => pearson(this.patchLuma, sample(frame.y, frame.width, this.patch, c, dx, dy, s));
    let best = { dx: 0, dy: 0, scale: 1, r: -2 };
    for (const s of SCALES)
      for (let dy = -SEARCH_PX; dy <= SEARCH_PX; dy += 2)
        for (let dx = -SEARCH_PX; dx <= SEARCH_PX; dx += 2) {
          const r = score(dx, dy, s);
          if (r > best.r) best = { dx, dy, scale: s, r };
        }
    // 1 px around the best, at its scale and the scales either side (an odd translation on the
    // 2 px grid can be mimicked by a wrong scale).
    const coarse = best;
    for (const s of SCALES.filter((x) => Math.abs(x - coarse.scale) < 0.03))
      for (let dy = coarse.dy - 1; dy <= coarse.dy + 1; dy++)
        for (let dx = coarse.dx - 1; dx <= coarse.dx + 1; dx++) {
          const r = score(dx, dy, s);
          if (r > best.r) best = { dx, dy, scale: s, r };
        }
    const moved: Box = {
      x: c[0] + best.scale * (this.region.x - c[0]) + best.dx,
      y: c[1] + best.scale * (this.region.y - c[1]) + best.dy,
      w: best.scale * this.region.w,
      h: best.scale * this.region.h,
    };
    const px = pixels(frame, moved);
    let dark = 0;
    let teeth = 0;
    for (let i = 0; i < px.y.length; i++) {
      if (px.y[i]! < this.darkBelow) dark++;
      else if (px.y[i]! > this.teethAbove && Math.abs(px.cb[i]! - 128) < TEETH_CHROMA && Math.abs(px.cr[i]! - 128) < TEETH_CHROMA) teeth++;
    }
    const n = Math.max(1, px.y.length);
    return { opening: ((dark + teeth) / n) * (REGION_ABOVE + REGION_BELOW), dark: dark / n, teeth: teeth / n, dx: best.dx, dy: best.dy, scale: best.scale };
  }

  private centre(): [number, number] {
    return [this.patch.x + this.patch.w / 2, this.patch.y + this.patch.h / 2];
  }
}

/** `box` shrunk to keep `margin` pixels from the frame's edges. */
function clip(box: Box, f: PixelPlanes, margin: number): Box {
  const x0 = Math.max(margin, Math.round(box.x));
  const y0 = Math.max(margin, Math.round(box.y));
  const x1 = Math.min(f.width - margin, Math.round(box.x + box.w));
  const y1 = Math.min(f.height - margin, Math.round(box.y + box.h));
  return { x: x0, y: y0, w: Math.max(1, x1 - x0), h: Math.max(1, y1 - y0) };
}

/** Luma of `box`'s pixels (every other one), moved by a scale `s` about `c` and then (dx, dy); nearest pixel, clamped to the frame. */
function sample(y: Uint8Array, width: number, box: Box, c: [number, number], dx: number, dy: number, s: number): Float64Array {
  const height = y.length / width;
  const out = new Float64Array(Math.ceil(box.w / 2) * Math.ceil(box.h / 2));
  let k = 0;
  for (let j = 0; j < box.h; j += 2)
    for (let i = 0; i < box.w; i += 2) {
      const px = Math.round(c[0] + s * (box.x + i - c[0]) + dx);
      const py = Math.round(c[1] + s * (box.y + j - c[1]) + dy);
      out[k++] = y[Math.max(0, Math.min(height - 1, py)) * width + Math.max(0, Math.min(width - 1, px))]!;
    }
  return out;
}

/** The planes' pixels inside `box` (rounded to whole pixels, clipped to the frame). */
function pixels(f: PixelPlanes, box: Box): { y: number[]; cb: number[]; cr: number[] } {
  const out = { y: [] as number[], cb: [] as number[], cr: [] as number[] };
  const x0 = Math.max(0, Math.round(box.x));
  const y0 = Math.max(0, Math.round(box.y));
  const x1 = Math.min(f.width, Math.round(box.x + box.w));
  const y1 = Math.min(f.height, Math.round(box.y + box.h));
  for (let yy = y0; yy < y1; yy++)
    for (let xx = x0; xx < x1; xx++) {
      const i = yy * f.width + xx;
      out.y.push(f.y[i]!);
      out.cb.push(f.cb[i]!);
      out.cr.push(f.cr[i]!);
    }
  return out;
}
