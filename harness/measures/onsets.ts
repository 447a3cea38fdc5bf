/**
 * Lip-sync onsets, one measure for every bench (webrtc, avatar, endpoint) and every mouth method:
 * when speech starts (the reply's first sound, and each phrase after a pause), when the mouth
 * starts to open, and the two paired. Pure functions of time series; no I/O.
 *
 *  - Speech onsets (speechOnsets): a sound block (RMS over SILENT_RMS) with no sound in the
 *    PAUSE_MS before it. After that long a silence the animator has closed the mouth
 *    (native/animation FULL_CLOSE_PAUSE_NS), so the next phrase must open it again: a viewer sees
 *    each such onset as well as the reply's first one. A shorter gap is inside a phrase, no onset.
 *  - Mouth onsets (mouthOnsets): any opening series (landmark cavity, pixel statistics, a box's
 *    darkening from greyOpening): the first frame over `closedMax` after at least CLOSED_FRAMES
 *    frames at or under it, that goes on to reach half of `openMin` within REACH_FRAMES frames.
 *    Motion that stays under closedMax (the idle head, breathing) or never gets half open is
 *    not an onset. One closed frame is enough: in a pause of 150-200 ms the lips take about
 *    120 ms to close and part again 40 ms before the next sound, so at 25 fps they are seen shut
 *    in one frame (a person's too). Asking for two paired such a phrase with the mouth's next
 *    reopening instead, after a bilabial 200 ms into it (measured on a reply's "humidity, and
 *    precipitation"), and reported a mouth 200 ms late that had opened with the sound.
 *  - Pairing (pairOnsets): each speech onset takes the nearest mouth onset not taken yet within
 *    [-BEFORE_MS, +AFTER_MS] of it; offset = mouth − sound, negative when the picture is early.
 *    The window reaches 400 ms early on purpose: the measure this replaces (call-measures
 *    mouthOnset) took its idle baseline from the half second before "150 ms ahead of the sound",
 *    so a mouth that opened earlier widened the baseline and the onset came out late or not at
 *    all; at a WebRTC receiver the picture has been 180-240 ms early.
 *  - A bilabial start (/b/, /p/, /m/: the lips pressed while the sound is voiced, then released)
 *    opens the mouth after the sound rightly. Where a method can tell a press (a frame's
 *    `pressed`), a late onset with a press between the sound and the opening is flagged
 *    `bilabial` and left out of the offsets (counted), rather than moved or hidden.
 *
 * Invariants: times in ms on one clock (the caller's: a page's performance.now(), or pts); series
 * in time order; nothing here looks at anything but its arguments.
 */
import { SILENT_RMS } from './mouth-opening.js';

/** Silence before a sound that makes it a speech onset, ms. */
export const PAUSE_MS = 150;
/** How early (before the sound) and how late a mouth onset may be and still pair with it, ms. */
export const BEFORE_MS = 400;
export const AFTER_MS = 600;
/** Frames at or under closedMax before an onset (see the header). */
export const CLOSED_FRAMES = 1;
/** Frames from an onset within which the opening must reach openMin / 2. */
export const REACH_FRAMES = 4;

/** A block of audio as played (or in the stream): its start time and RMS (full scale 1). */
export interface SoundBlock {
  t: number;
  rms: number;
}

export type OnsetKind = 'first sound' | 'after a pause';

export interface SpeechOnset {
  t: number;
  kind: OnsetKind;
}

/**
 * Speech onsets after `from` (see the header): blocks (each `blockMs` long) over `silentRms`
 * with PAUSE_MS or more of silence before them (blocks before `from` count as sound before). The
 * first is the 'first sound' when nothing was heard between `from` and it, otherwise every onset
 * is 'after a pause'. Blocks not given are silent (a page keeps only blocks louder than silence).
 */
export function speechOnsets(blocks: SoundBlock[], from: number, blockMs: number, silentRms = SILENT_RMS): SpeechOnset[] {
  const out: SpeechOnset[] = [];
  let soundEnd = -Infinity;
  let heardSinceFrom = false;
  for (const b of blocks) {
    if (b.rms <= silentRms) continue;
    if (b.t > from && b.t - soundEnd >= PAUSE_MS) out.push({ t: b.t, kind: heardSinceFrom ? 'after a pause' : 'first sound' });
    if (b.t > from) heardSinceFrom = true;
    soundEnd = b.t + blockMs;
  }
  return out;
}

/** Sound blocks every `stepMs` from `from` to `to` of an RMS function (a stream's, or a synthetic one). */
export function soundBlocks(rmsAt: (t: number) => number, from: number, to: number, stepMs = 10): SoundBlock[] {
  const out: SoundBlock[] = [];
  for (let t = from; t < to; t += stepMs) out.push({ t, rms: rmsAt(t) });
  return out;
}

/** PCM16 samples (full scale 32768) at `rateHz` starting at `startMs`, as blocks of `blockMs` with their RMS (the last may be shorter). */
export function pcmBlocks(pcm: Int16Array, rateHz: number, startMs: number, blockMs: number): SoundBlock[] {
  const per = Math.round((rateHz * blockMs) / 1000);
  const out: SoundBlock[] = [];
  for (let start = 0; start < pcm.length; start += per) {
    const end = Math.min(pcm.length, start + per);
    let sum = 0;
    for (let i = start; i < end; i++) sum += (pcm[i]! / 32768) ** 2;
    out.push({ t: startMs + (start * 1000) / rateHz, rms: Math.sqrt(sum / (end - start)) });
  }
  return out;
}

/** A frame of a mouth series: when it was shown, its opening, and whether the lips are seen pressed (where a method can tell). */
export interface MouthSample {
  t: number;
  opening: number;
  pressed?: boolean;
}

/** Mouth onsets in `series` (see the header): the times of frames where the mouth starts to open. */
export function mouthOnsets(series: MouthSample[], closedMax: number, openMin: number): number[] {
  const out: number[] = [];
  for (let i = CLOSED_FRAMES; i < series.length; i++) {
    if (series[i]!.opening <= closedMax) continue;
    if (!series.slice(i - CLOSED_FRAMES, i).every((f) => f.opening <= closedMax)) continue;
    if (series.slice(i, i + REACH_FRAMES).some((f) => f.opening >= openMin / 2)) out.push(series[i]!.t);
  }
  return out;
}

/**
 * A box's mean grey levels turned into an opening series (an open mouth darkens its box): the
 * darkening from the median of the frames in [restFrom, restTo) (the face idle: before the
 * reply can have started), with closedMax the largest darkening among those frames plus one grey
 * level, and openMin twice that. Null with fewer than 8 frames at rest.
 */
export function greyOpening(frames: Array<{ t: number; grey: number }>, restFrom: number, restTo: number): { series: MouthSample[]; closedMax: number; openMin: number } | null {
  const rest = frames.filter((f) => f.t >= restFrom && f.t < restTo).map((f) => f.grey);
  if (rest.length < 8) return null;
  const level = [...rest].sort((a, b) => a - b)[Math.floor(rest.length / 2)]!;
  const closedMax = Math.max(...rest.map((g) => level - g)) + 1;
  return { series: frames.map((f) => ({ t: f.t, opening: level - f.grey })), closedMax, openMin: 2 * closedMax };
}

export interface OnsetPair {
  soundAt: number;
  kind: OnsetKind;
  /** The mouth onset paired with it; null: none in the window (see `missing`). */
  mouthAt: number | null;
  /** mouthAt − soundAt, ms; negative: the picture is early. */
  offsetMs: number | null;
  /** A late opening with the lips seen pressed after the sound: a bilabial start, not a late picture. */
  bilabial: boolean;
  missing: string | null;
}

/**
 * Each speech onset, in order, with the nearest mouth onset not yet taken within
 * [-before, +after] ms of it (see the header).
 */
export function pairOnsets(speech: SpeechOnset[], mouth: number[], series: MouthSample[] = [], window = { before: BEFORE_MS, after: AFTER_MS }): OnsetPair[] {
  const taken = new Set<number>();
  return speech.map((s) => {
    let best: number | null = null;
    for (const m of mouth) {
      if (taken.has(m) || m < s.t - window.before || m > s.t + window.after) continue;
      if (best === null || Math.abs(m - s.t) < Math.abs(best - s.t)) best = m;
    }
    if (best === null) return { soundAt: s.t, kind: s.kind, mouthAt: null, offsetMs: null, bilabial: false, missing: `no mouth onset from ${window.before} ms before to ${window.after} ms after the sound` };
    taken.add(best);
    const bilabial = best > s.t && series.some((f) => f.pressed === true && f.t >= s.t && f.t < best!);
    return { soundAt: s.t, kind: s.kind, mouthAt: best, offsetMs: best - s.t, bilabial, missing: null };
  });
}

/** Offsets by kind of onset (bilabial starts left out), and how many onsets had no mouth onset or a bilabial one. */
export interface OnsetOffsets {
  firstSound: number[];
  afterPause: number[];
  missing: number;
  bilabial: number;
}

/** No offsets yet: what offsetsByKind adds to. */
export function noOffsets(): OnsetOffsets {
  return { firstSound: [], afterPause: [], missing: 0, bilabial: 0 };
}

export function offsetsByKind(pairs: OnsetPair[], into: OnsetOffsets = noOffsets()): OnsetOffsets {
  for (const p of pairs) {
    if (p.offsetMs === null) into.missing++;
    else if (p.bilabial) into.bilabial++;
    else (p.kind === 'first sound' ? into.firstSound : into.afterPause).push(Math.round(p.offsetMs));
  }
  return into;
}

/** Speech onsets after `from` paired with the mouth onsets of `series`: the whole measure in one call. */
export function lipOnsets(blocks: SoundBlock[], blockMs: number, from: number, series: MouthSample[], closedMax: number, openMin: number): OnsetPair[] {
  return pairOnsets(speechOnsets(blocks, from, blockMs), mouthOnsets(series, closedMax, openMin), series);
}
