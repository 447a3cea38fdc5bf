/**
 * The lip-sync onset measure (harness/measures/onsets.ts) on synthetic series: speech of two
 * phrases (1000-1600 ms with a 100 ms gap inside at 1300-1400, a 400 ms pause, 2000-2600 ms),
 * sound blocks every 10 ms, and a mouth at 25 fps that opens when the sound is loud, moved early
 * or late by a known amount.
 *  - a picture 200 ms early gives -200 at both onsets; the measure it replaces (call-measures'
 *    mouthOnset, a copy below) gives a late onset or none for the same frames: the regression;
 *  - a picture 30 ms late gives +30; a picture 450 ms early is outside the window (missing);
 *  - the reply's first sound and the phrase after the pause are onsets, the 100 ms gap is not;
 *  - idle head motion (under closedMax) is no mouth onset, with or without speech around it;
 *  - a phrase after a 150 ms pause, where the lips are seen shut in one frame only (a reply's
 *    measured frames), pairs with the mouth parting with its sound, not with the reopening after
 *    its bilabial 200 ms later;
 *  - a bilabial start (lips pressed while voiced for 80 ms) is flagged where the series shows the
 *    press and counted late where it does not;
 *  - a box's grey level (greyOpening) measures the same offsets as an opening series.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { pageOnsets } from '../../benchmarks/lib/call-measures.js';
import { greyOpening, lipOnsets, mouthOnsets, offsetsByKind, pairOnsets, soundBlocks, speechOnsets, type MouthSample } from '../../harness/measures/onsets.js';

const CLOSED_MAX = 0.01;
const OPEN_MIN = 0.03;
const loud = (t: number) => (t >= 1000 && t < 1600 && !(t >= 1300 && t < 1400)) || (t >= 2000 && t < 2600);
const rmsAt = (t: number) => (loud(t) ? 0.05 : 0);
const BLOCKS = soundBlocks(rmsAt, 0, 3000);

/** A mouth at 25 fps from `phase` ms: open (0.05) when the sound `shiftMs` later is loud; idle motion under closedMax added. */
function mouth(shiftMs: number, phase = 0, idle = 0): MouthSample[] {
  const out: MouthSample[] = [];
  for (let t = phase; t < 3000; t += 40) out.push({ t, opening: (loud(t - shiftMs) ? 0.05 : 0) + idle * (1 + Math.sin(t / 130)) / 2 });
  return out;
}

/** The onset measure this module replaces (benchmarks/lib/call-measures.ts before issue 28), kept as the regression's reference. */
function oldMouthOnset(frames: Array<{ t: number; grey: number }>, heardAt: number): number | null {
  const from = heardAt - 150;
  const idle = frames.filter((f) => f.t <= from && f.t > from - 500).map((f) => f.grey);
  if (idle.length < 8) return null;
  const lo = Math.min(...idle);
  const hi = Math.max(...idle);
  const margin = (hi - lo) / 4 + 1;
  const after = frames.filter((f) => f.t > from);
  const out = (g: number) => g < lo - margin || g > hi + margin;
  for (let i = 0; i + 1 < after.length; i++) if (out(after[i]!.grey) && out(after[i + 1]!.grey)) return after[i]!.t;
  return null;
}

const asGrey = (series: MouthSample[]) => series.map((f) => ({ t: f.t, grey: 120 - 200 * f.opening }));

test('speech onsets: the first sound and the phrase after a 400 ms pause; a 100 ms gap is none', () => {
  assert.equal(speechOnsets(BLOCKS, 0, 10), [
    { t: 1000, kind: 'first sound' },
    { t: 2000, kind: 'after a pause' },
  ]);
  // Sound already going at `from` is no first sound; the next phrase still counts.
  assert.equal(speechOnsets(BLOCKS, 1200, 10), [{ t: 2000, kind: 'after a pause' }]);
  // A 140 ms gap is inside a phrase, a 150 ms one is a pause.
  const gap = (ms: number) => soundBlocks((t) => (t < 500 || t >= 500 + ms ? 0.05 : 0), 0, 1000);
  assert.equal(speechOnsets(gap(140), -1, 10).length, 1);
  assert.equal(speechOnsets(gap(160), -1, 10).length, 2);
});

test('a picture 200 ms early gives -200 at each onset; the old measure does not see it', () => {
  const series = mouth(-200);
  const pairs = lipOnsets(BLOCKS, 10, 0, series, CLOSED_MAX, OPEN_MIN);
  assert.equal(pairs.map((p) => [p.kind, p.offsetMs]), [
    ['first sound', -200],
    ['after a pause', -200],
  ]);
  const old = oldMouthOnset(asGrey(series), 1000);
  assert.ok(old === null || old > 1000, `the old measure found ${old === null ? 'no onset' : `${old - 1000} ms`} (a picture 200 ms early is what it cannot see)`);
  // The same frames as a box's grey level, at rest before the reply (0-700 ms).
  const grey = greyOpening(asGrey(series), 0, 700)!;
  assert.equal(lipOnsets(BLOCKS, 10, 0, grey.series, grey.closedMax, grey.openMin).map((p) => p.offsetMs), [-200, -200]);
});

test('a picture 30 ms late gives +30; in sync 0; 450 ms early is outside the window', () => {
  assert.equal(lipOnsets(BLOCKS, 10, 0, mouth(30, 30), CLOSED_MAX, OPEN_MIN).map((p) => p.offsetMs), [30, 30]);
  assert.equal(lipOnsets(BLOCKS, 10, 0, mouth(0), CLOSED_MAX, OPEN_MIN).map((p) => p.offsetMs), [0, 0]);
  // One phrase (no gap whose reopening could pair instead).
  const phrase = soundBlocks((t) => (t >= 1000 && t < 1600 ? 0.05 : 0), 0, 3000);
  const early = lipOnsets(phrase, 10, 0, mouth(-450, 30).map((f) => ({ ...f, opening: f.t >= 550 && f.t < 1150 ? 0.05 : 0 })), CLOSED_MAX, OPEN_MIN);
  assert.equal(early[0]!.offsetMs, null);
  assert.match(early[0]!.missing!, /no mouth onset/);
  const offsets = offsetsByKind(lipOnsets(BLOCKS, 10, 0, mouth(30, 30), CLOSED_MAX, OPEN_MIN));
  assert.equal(offsets, { firstSound: [30], afterPause: [30], missing: 0, bilabial: 0 });
});

test('idle head motion under closedMax is no mouth onset', () => {
  const still = mouth(0, 0, 0.009).map((f) => ({ ...f, opening: Math.min(f.opening, 0.009) }));
  assert.equal(mouthOnsets(still, CLOSED_MAX, OPEN_MIN), []);
  // A twitch over closedMax that never gets half open is none either.
  const twitch = still.map((f) => (f.t === 400 ? { ...f, opening: 0.012 } : f));
  assert.equal(mouthOnsets(twitch, CLOSED_MAX, OPEN_MIN), []);
  // With the speech's openings on top, only they are onsets (the gap's reopening too, unpaired).
  assert.equal(mouthOnsets(mouth(0, 0, 0.009), CLOSED_MAX, OPEN_MIN), [1000, 1400, 2000]);
  // A box's grey level swaying with the head at rest: no onset.
  const sway = Array.from({ length: 75 }, (_, k) => ({ t: k * 40, grey: 120 + 2 * Math.sin(k / 3) }));
  const grey = greyOpening(sway, 0, 1000)!;
  assert.equal(mouthOnsets(grey.series, grey.closedMax, grey.openMin), []);
});

test('a phrase after a short pause pairs with the lips parting from their one closed frame', () => {
  // Method A's opening on a reply's frames (face1, "humidity, and precipitation"): the phrase
  // fades out by 8690 ms, the next starts at 8840 ("and"), the /p/ of "precipitation" closes the
  // lips at 8960-9000 and they part again at 9040.
  const measured: Array<[number, number]> = [[8520, 0.085], [8560, 0.089], [8600, 0.084], [8640, 0.071], [8680, 0.031], [8720, 0.017], [8760, 0], [8800, 0.016], [8840, 0.023], [8880, 0.026], [8920, 0.066], [8960, 0], [9000, -0.002], [9040, 0.1], [9080, 0.099], [9120, 0.097], [9160, 0.095], [9200, 0.063]];
  const series = measured.map(([t, opening]) => ({ t, opening }));
  const blocks = soundBlocks((t) => (t < 8690 || t >= 8840 ? 0.05 : 0), 8500, 9200);
  assert.equal(lipOnsets(blocks, 10, 8500, series, CLOSED_MAX, OPEN_MIN).map((p) => [p.kind, p.offsetMs]), [['after a pause', -40]]);
});

test('a voice turn: the listening head drifting before the reply is no early opening when the rest level ends at the reply\'s start', () => {
  // As measured (webrtc bench, the second voice turn of each call): the user stops at t0 = 0,
  // the reply leaves the server at 600 and is heard at 1000; meanwhile the listening head moves
  // and the mouth box's grey drifts down 3 levels. The mouth opens with the sound (8 levels).
  const loud = BLOCKS.filter((b) => b.rms > 0);
  const frames = Array.from({ length: 100 }, (_, k) => {
    const t = -1000 + k * 40;
    const drift = 3 * Math.min(1, Math.max(0, t / 600));
    return { t, receivedAt: t - 100, grey: 174 - drift - (loud.some((b) => b.t >= t - 20 && b.t < t + 20) ? 8 : 0) };
  });
  const before = pageOnsets({ loud, frames }, 0);
  assert.not.equal(before?.[0]?.offsetMs, 0, 'a rest level from before t0 takes the drift for the opening');
  const pairs = pageOnsets({ loud, frames }, 0, 600);
  assert.equal(pairs?.map((p) => [p.kind, p.offsetMs]), [
    ['first sound', 0],
    ['after a pause', 0],
  ]);
});

test('a bilabial start is flagged where the lips are seen pressed, and late where they are not', () => {
  // The lips pressed while voiced for the first 80 ms, then open with the sound.
  const series = mouth(0).map((f) => (f.t >= 1000 && f.t < 1080 ? { ...f, opening: 0, pressed: true } : f));
  const pairs = lipOnsets(BLOCKS, 10, 0, series, CLOSED_MAX, OPEN_MIN);
  assert.equal(pairs.map((p) => [p.offsetMs, p.bilabial]), [
    [80, true],
    [0, false],
  ]);
  assert.equal(offsetsByKind(pairs), { firstSound: [], afterPause: [0], missing: 0, bilabial: 1 });
  const unseen = series.map(({ pressed: _, ...f }) => f);
  assert.equal(lipOnsets(BLOCKS, 10, 0, unseen, CLOSED_MAX, OPEN_MIN).map((p) => [p.offsetMs, p.bilabial]), [
    [80, false],
    [0, false],
  ]);
});

test('each mouth onset pairs with one speech onset at most', () => {
  const pairs = pairOnsets(
    [
      { t: 1000, kind: 'first sound' },
      { t: 1200, kind: 'after a pause' },
    ],
    [1010],
  );
  assert.equal(pairs.map((p) => p.mouthAt), [1010, null]);
});

test.run();
