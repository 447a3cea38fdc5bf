/**
 * The lip-sync figures of one turn's decoded frames by both mouth methods, the same for every
 * transport (the endpoint benchmark's WebRTC receiver, benchmarks/lib/endpoint/webrtc-measures.ts,
 * and its WebSocket client, benchmarks/lib/endpoint/websocket-lip-sync.ts), so that the two can be
 * shown side by side:
 *
 *  - method A: the face found and tracked on each frame (harness/measures/mouth-opening.ts
 *    MouthTracker: FaceRegistry landmarks, the last frame's where one misses), the mouth cavity
 *    over the mouth width squared;
 *  - method B: the dark and teeth pixels of a mouth region placed once on the first frame with a
 *    face and moved with the upper face (harness/measures/mouth-pixels.ts; no landmarks after it);
 *  - each series less its closed level (its lowest decile in the window), against the speech: Pearson
 *    r at the best lag within ±MAX_LAG_MS (positive: the mouth trails the sound), the shares of
 *    silent frames closed and loud frames open (thresholds in mouth-opening.ts), r against the
 *    audio 400 ms later, 400 ms earlier and reversed (controls: low), the best r within
 *    ±WIDE_LAG_MS, and the onsets (harness/measures/onsets.ts: the first sound and each phrase
 *    after a pause, mouth − sound) with the same onsets against the audio 200 ms later (a control:
 *    each moves about 200 ms earlier).
 *
 * Invariants: frames in time order, the first before the sound (the tracker's cavity threshold
 * comes from it); the speech and the frames on one clock, in ms (the caller's: a page's
 * performance.now(), or the server's pts).
 */
import type { FaceRegistry } from '../../src/media/face-registration.js';
import { bestLagMs, CLOSED_MAX, closedOpenShares, MouthTracker, OPEN_MIN, type MouthReading } from './mouth-opening.js';
import { decodePlanes, MouthPixels } from './mouth-pixels.js';
import { lipOnsets, noOffsets, offsetsByKind, type OnsetOffsets, type SoundBlock } from './onsets.js';

export const LIP_SYNC_METHOD = 'face landmarks on decoded frames (FaceRegistry), mouth cavity';
export const PIXEL_METHOD = 'dark and teeth pixels of a mouth region placed once, moved with the upper face (mouth-pixels.ts)';
/** Lags tried for r, ms. */
const MAX_LAG_MS = 40;
const LAG_STEP_MS = 10;
const WIDE_LAG_MS = 300;
/** The onsets' control: the audio this much later. */
const ONSET_SHIFT_MS = 200;

/** The speech a turn's frames are judged against, on the frames' clock. */
export interface TurnSpeech {
  /** The speech's RMS (full scale 1) around a time. */
  rmsAt: (t: number) => number;
  /** Its sound blocks (those not given are silent), each `blockMs` long, for the onsets. */
  blocks: SoundBlock[];
  blockMs: number;
  /** Speech onsets are looked for after this time (before it the mouth's rest). */
  from: number;
}

/** The figures of one method over one turn (see the header). */
export interface MethodFigures {
  /** Pearson r of mouth opening against speech RMS at the best lag within ±MAX_LAG_MS. */
  r: number;
  lag_ms: number;
  /** Silent frames (and SILENT_SPAN_FRAMES either side) with the mouth closed; loud frames with it open. */
  closed_share: number | null;
  open_share: number | null;
  silent_frames: number;
  loud_frames: number;
  /** r at the best lag against the audio 400 ms later than heard: a control, should be low. */
  r_audio_shifted_400ms: number;
  /** The same against the audio 400 ms earlier, and played backwards over the window: controls, low. */
  r_audio_earlier_400ms: number;
  r_audio_reversed: number;
  /** The best r within ±WIDE_LAG_MS (20 ms steps), and its lag: where the mouth follows the sound when out of sync. */
  wide: { r: number; lag_ms: number };
  /** Mouth onset − speech onset, ms, by kind; and the same against the audio ONSET_SHIFT_MS later (a control). */
  onsets: OnsetOffsets;
  onsets_audio_later_200ms: OnsetOffsets;
  method: string;
}

/** Method A's figures with how its frames went, and method B's on the same frames. */
export interface LipSyncFigures extends MethodFigures {
  frames_measured: number;
  /** Share of the frames measured in which the face was found (the rest used the last landmarks). */
  face_found_share: number;
  /** Method B on the same frames; null where its first frame's face could not be registered again. */
  method_b: MethodFigures | null;
}

/** A decoded frame kept whole, and method A's reading of it. */
export interface KeptFrame {
  t: number;
  jpeg: Buffer;
}
export interface Reading extends KeptFrame {
  m: MouthReading;
}

export const round3 = (v: number) => Math.round(v * 1000) / 1000;

/** Method A over `frames` in order: the readings (frames before any face are left out) and the tracker's counts. */
export async function trackMouth(frames: KeptFrame[], registry: FaceRegistry): Promise<{ readings: Reading[]; frames: number; detected: number }> {
  const tracker = new MouthTracker(registry);
  const readings: Reading[] = [];
  for (const f of frames) {
    const m = await tracker.measure(f.jpeg);
    if (m) readings.push({ ...f, m });
  }
  return { readings, frames: tracker.frames, detected: tracker.detected };
}

/** Both methods' figures over method A's readings; null without a face found or with fewer than 10 readings. */
export async function lipSyncFigures(tracked: Awaited<ReturnType<typeof trackMouth>>, registry: FaceRegistry, speech: TurnSpeech): Promise<LipSyncFigures | null> {
  const { readings } = tracked;
  if (tracked.detected === 0 || readings.length < 10) return null;
  return {
    ...figuresOf(readings.map((x) => x.t), aboveRest(readings.map((x) => x.m.opening)), speech, LIP_SYNC_METHOD),
    frames_measured: tracked.frames,
    face_found_share: round3(tracked.detected / tracked.frames),
    method_b: await pixelFigures(readings, registry, speech),
  };
}

/** A series less its closed level: the lowest decile of the window (the frames before the sound need not show a closed mouth: a picture ahead of its sound opens it early). */
export function aboveRest(raw: number[]): number[] {
  const rest = [...raw].sort((a, b) => a - b)[Math.floor(raw.length / 10)]!;
  return raw.map((x) => x - rest);
}

/** One method's figures (MethodFigures) for an opening series at `times` against the speech. */
export function figuresOf(times: number[], opening: number[], speech: TurnSpeech, method: string): MethodFigures {
  const { rmsAt } = speech;
  const best = bestLagMs(times, opening, rmsAt, MAX_LAG_MS, LAG_STEP_MS);
  const control = (at: (t: number) => number) => round3(bestLagMs(times, opening, at, MAX_LAG_MS, LAG_STEP_MS).r);
  const wide = bestLagMs(times, opening, rmsAt, WIDE_LAG_MS, 20);
  const shares = closedOpenShares(opening, times.map(rmsAt));
  const [first, last] = [times[0]!, times.at(-1)!];
  const series = times.map((t, i) => ({ t, opening: opening[i]! }));
  const onsets = (shiftMs: number) => offsetsByKind(lipOnsets(speech.blocks.map((b) => ({ ...b, t: b.t + shiftMs })), speech.blockMs, speech.from, series, CLOSED_MAX, OPEN_MIN), noOffsets());
  return {
    r: round3(best.r),
    lag_ms: best.lagMs,
    closed_share: shares.silent > 0 ? round3(shares.closed / shares.silent) : null,
    open_share: shares.loud > 0 ? round3(shares.open / shares.loud) : null,
    silent_frames: shares.silent,
    loud_frames: shares.loud,
    r_audio_shifted_400ms: control((t) => rmsAt(t + 400)),
    r_audio_earlier_400ms: control((t) => rmsAt(t - 400)),
    r_audio_reversed: control((t) => rmsAt(first + last - t)),
    wide: { r: round3(wide.r), lag_ms: wide.lagMs },
    onsets: onsets(0),
    onsets_audio_later_200ms: onsets(ONSET_SHIFT_MS),
    method,
  };
}

/** Method B (PIXEL_METHOD) over the readings from the first with a face found; null where that face cannot be registered again. */
async function pixelFigures(readings: Reading[], registry: FaceRegistry, speech: TurnSpeech): Promise<MethodFigures | null> {
  const from = readings.findIndex((x) => x.m.detected);
  if (from < 0) return null;
  const kept = readings.slice(from);
  let pixels: MouthPixels;
  try {
    pixels = new MouthPixels(await decodePlanes(kept[0]!.jpeg), (await registry.register(kept[0]!.jpeg)).landmarks);
  } catch {
    return null;
  }
  const raw: number[] = [];
  for (const x of kept) raw.push(pixels.measure(await decodePlanes(x.jpeg)).opening);
  return kept.length < 10 ? null : figuresOf(kept.map((x) => x.t), aboveRest(raw), speech, PIXEL_METHOD);
}

/** One method's figures in a line: r and lag, the shares, the onsets and the controls. */
export function describeFigures(f: MethodFigures): string {
  const share = (x: number | null) => (x === null ? '-' : `${Math.round(100 * x)} %`);
  const ms = (xs: number[]) => (xs.length === 0 ? '-' : xs.join(', '));
  return (
    `r ${f.r} at ${f.lag_ms} ms, closed in ${share(f.closed_share)} of ${f.silent_frames} silent frames, open in ${share(f.open_share)} of ${f.loud_frames} loud ones; ` +
    `onsets (mouth − sound) first sound ${ms(f.onsets.firstSound)} ms, after a pause ${ms(f.onsets.afterPause)} ms (${f.onsets.missing} unpaired); ` +
    `controls: r ${f.r_audio_shifted_400ms} (audio 400 ms later), ${f.r_audio_earlier_400ms} (earlier), ${f.r_audio_reversed} (reversed), onsets with audio 200 ms later ${ms([...f.onsets_audio_later_200ms.firstSound, ...f.onsets_audio_later_200ms.afterPause])} ms`
  );
}
