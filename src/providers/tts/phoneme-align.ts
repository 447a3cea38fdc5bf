/**
 * Phoneme timings moved from one rendition of a text to another by dynamic time warping: Piper
 * speaks what espeak-ng phonemised, but at its own pace, so espeak-ng's phoneme timeline is mapped
 * onto Piper's audio by aligning the two sounds, not by stretching it evenly. (On espeak-ng's own
 * speech at two paces, where the truth is known, an even stretch puts phoneme starts 27 ms off
 * (median; 54 ms p90), the warp 6 ms (12 ms); on Piper's speech the two disagree by 64 ms median,
 * 127 ms p90, and a mouth driven by the warped timings follows the sound better: r 0.55 -> 0.61.)
 *
 * Both sounds become frames of log band energies (20 ms hops, 25 ms Hann windows, 16 bands from
 * 150 Hz to 4 kHz, each utterance's mean removed so two voices' timbres cancel), on audio reduced
 * to 8 kHz first. The warping path is the cheapest monotone path through their frame distances,
 * within 300 ms of the even stretch; each source time maps to the mean target frame its source
 * frame is matched with, interpolated between frames and made non-decreasing. It runs on the
 * caller's thread, about 2 ms per second of audio on the 2-core test machine; clauses over
 * MAX_ALIGN_SECONDS are left to the even stretch, so one call stays under about 20 ms.
 *
 * Not here: phonemisation, synthesis, silence trimming (the caller maps onto the trimmed audio).
 */
import type { PhonemeTiming } from './base.js';

const HOP_S = 0.02;
const WINDOW_S = 0.025;
const FEATURE_RATE_HZ = 8000;
/** Band centres (Hz): roughly third-octave from 150 Hz to 4 kHz, the speech formant range. */
const BANDS_HZ = [150, 200, 250, 315, 400, 500, 630, 800, 1000, 1250, 1600, 2000, 2500, 3150, 3600, 4000];
/** How far (frames) the warp may stray from the even stretch: 300 ms, over twice the largest
 * drift measured between espeak-ng's and Piper's timing of a clause. */
const BAND_FRAMES = 15;
/** Longest input that is aligned (s); longer ones are left to the caller's even stretch. */
export const MAX_ALIGN_SECONDS = 8;

/** Log band energies per HOP_S frame of mono PCM16 at `rateHz`, each band's mean removed. */
function bandFrames(pcm: Int16Array, rateHz: number): Float32Array[] {
  const x = decimate(pcm, rateHz);
  const win = Math.round(WINDOW_S * FEATURE_RATE_HZ);
  const hop = Math.round(HOP_S * FEATURE_RATE_HZ);
  // One table per band: the window times the band's cosine and sine, interleaved.
  const tables = BANDS_HZ.map((f) => {
    const t = new Float32Array(2 * win);
    for (let i = 0; i < win; i++) {
      const w = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (win - 1));
      t[2 * i] = w * Math.cos((2 * Math.PI * f * i) / FEATURE_RATE_HZ);
      t[2 * i + 1] = w * Math.sin((2 * Math.PI * f * i) / FEATURE_RATE_HZ);
    }
    return t;
  });
  const frames: Float32Array[] = [];
  for (let s = 0; s + win <= x.length; s += hop) {
    const v = new Float32Array(BANDS_HZ.length);
    for (let b = 0; b < BANDS_HZ.length; b++) {
      const t = tables[b]!;
      let re = 0;
      let im = 0;
      for (let i = 0; i < win; i++) {
        const xi = x[s + i]!;
        re += xi * t[2 * i]!;
        im += xi * t[2 * i + 1]!;
      }
      v[b] = Math.log(re * re + im * im + 1e-9);
    }
    frames.push(v);
  }
  if (frames.length > 0) {
    for (let b = 0; b < BANDS_HZ.length; b++) {
      const mean = frames.reduce((a, f) => a + f[b]!, 0) / frames.length;
      for (const f of frames) f[b]! -= mean;
    }
  }
  return frames;
}

/** Samples at FEATURE_RATE_HZ (boxcar-averaged down, as floats in -1..1). */
function decimate(pcm: Int16Array, rateHz: number): Float32Array {
  const step = rateHz / FEATURE_RATE_HZ;
  const n = Math.floor(pcm.length / step);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const a = Math.floor(i * step);
    const b = Math.max(a + 1, Math.floor((i + 1) * step));
    let s = 0;
    for (let k = a; k < b; k++) s += pcm[k]!;
    out[i] = s / (b - a) / 32768;
  }
  return out;
}

/**
 * For each frame of `a`, the (mean) frame of `b` it is matched with on the cheapest monotone
 * warping path (steps right, down, diagonal; Euclidean frame distances), searched within
 * BAND_FRAMES of the even stretch (the diagonal from the first frames to the last), which bounds
 * the cost to about n x (2 BAND_FRAMES + 1) cells.
 */
function warpPath(a: Float32Array[], b: Float32Array[]): Float64Array {
  const n = a.length;
  const m = b.length;
  const cost = new Float64Array((n + 1) * (m + 1)).fill(Number.POSITIVE_INFINITY);
  const at = (i: number, j: number) => i * (m + 1) + j;
  const band = (i: number): [number, number] => {
    const centre = (i * m) / n;
    return [Math.max(1, Math.floor(centre - BAND_FRAMES)), Math.min(m, Math.ceil(centre + BAND_FRAMES))];
  };
  cost[0] = 0;
  for (let i = 1; i <= n; i++) {
    const ai = a[i - 1]!;
    const [from, to] = band(i);
    for (let j = from; j <= to; j++) {
      const bj = b[j - 1]!;
      let d = 0;
      for (let k = 0; k < ai.length; k++) d += (ai[k]! - bj[k]!) ** 2;
      cost[at(i, j)] = Math.sqrt(d) + Math.min(cost[at(i - 1, j - 1)]!, cost[at(i - 1, j)]!, cost[at(i, j - 1)]!);
    }
  }
  const sum = new Float64Array(n);
  const count = new Float64Array(n);
  let i = n;
  let j = m;
  while (i > 0 && j > 0) {
    sum[i - 1]! += j - 1;
    count[i - 1]! += 1;
    const diag = cost[at(i - 1, j - 1)]!;
    const up = cost[at(i - 1, j)]!;
    const left = cost[at(i, j - 1)]!;
    if (diag <= up && diag <= left) {
      i--;
      j--;
    } else if (up < left) i--;
    else j--;
  }
  return sum.map((s, k) => (count[k]! > 0 ? s / count[k]! : k));
}

/**
 * `source` phoneme timings (of `sourcePcm`) moved onto `targetPcm`, the same words spoken by
 * another voice or at another pace; null when either is empty or longer than MAX_ALIGN_SECONDS.
 * The result covers [0, target length] like the input covers the source.
 */
export function alignByWarping(
  source: PhonemeTiming[],
  sourcePcm: Int16Array,
  sourceRateHz: number,
  targetPcm: Int16Array,
  targetRateHz: number,
): PhonemeTiming[] | null {
  const sourceS = sourcePcm.length / sourceRateHz;
  const targetS = targetPcm.length / targetRateHz;
  if (source.length === 0 || sourceS < 2 * WINDOW_S || targetS < 2 * WINDOW_S || sourceS > MAX_ALIGN_SECONDS || targetS > MAX_ALIGN_SECONDS) return null;
  const a = bandFrames(sourcePcm, sourceRateHz);
  const b = bandFrames(targetPcm, targetRateHz);
  if (a.length < 2 || b.length < 2) return null;
  const path = warpPath(a, b);
  const centre = WINDOW_S / 2;
  const totalNs = Math.round(targetS * 1e9);
  let last = 0;
  const map = (ns: number): number => {
    // Source time → source frame (frames are centred WINDOW_S/2 after their start) → target time.
    const f = Math.min(path.length - 1, Math.max(0, (ns / 1e9 - centre) / HOP_S));
    const lo = Math.floor(f);
    const hi = Math.min(path.length - 1, lo + 1);
    const g = path[lo]! + (path[hi]! - path[lo]!) * (f - lo);
    const t = Math.round((g * HOP_S + centre) * 1e9);
    last = Math.min(totalNs, Math.max(last, t));
    return last;
  };
  const out: PhonemeTiming[] = [];
  for (const [k, p] of source.entries()) {
    const startNs = k === 0 ? 0 : map(p.startNs);
    const endNs = k === source.length - 1 ? totalNs : map(p.endNs);
    if (endNs > startNs) out.push({ phoneme: p.phoneme, startNs, endNs });
  }
  for (let k = 1; k < out.length; k++) out[k]!.startNs = out[k - 1]!.endNs;
  return out.filter((p) => p.endNs > p.startNs);
}
