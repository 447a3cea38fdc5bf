/**
 * The lip-sync measure the endpoint benchmark gives at a WebRTC receiver
 * (harness/measures/mouth-opening.ts), and its negative control: the figure must fail when the
 * audio is not the mouth's.
 *  - Statistics on synthetic series (seeded syllables of speech energy, a mouth that follows them
 *    one frame late): r at the best lag is high, at that lag, and the silent frames are closed and
 *    the loud ones open; against the same energy 400 ms later, r is low. The same with frames
 *    presented at irregular times and the lag found in ms.
 *  - On decoded frames: the default face, framed head and shoulders, with a dark mouth cavity
 *    painted between its lips (closed, half open, open) as the synthetic energy asks, JPEG-encoded:
 *    the tracker finds the face in every frame, its r is high aligned and low shifted by 400 ms; raw
 *    RGBA measures as its JPEG does; a frame without a face keeps the last landmarks (not detected),
 *    and a tracker that never saw a face gives null.
 */
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { FaceRegistry, type FaceLandmarks } from '../../src/media/face-registration.js';
import { bestLagFrames, bestLagMs, closedOpenShares, CLOSED_MAX, median, MouthTracker, OPEN_MIN } from '../../harness/measures/mouth-opening.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

const FRAME_MS = 40;
const SHIFT_FRAMES = 10; // 400 ms

/** A small linear congruential generator: the same series every run. */
function seeded(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

/** Speech energy (RMS) per 40 ms frame: syllables of 2-5 frames at random loudness, apart by silences of 1-3 frames, sentences by 16. */
function syllables(frames: number, seed: number): number[] {
  const random = seeded(seed);
  const rms: number[] = [];
  while (rms.length < frames) {
    if (rms.length % 60 < 16) {
      rms.push(0);
      continue;
    }
    const length = 2 + Math.floor(random() * 4);
    const peak = 0.04 + random() * 0.16;
    for (let k = 0; k < length; k++) rms.push(peak * Math.sin((Math.PI * (k + 0.5)) / length));
    for (let k = Math.floor(random() * 3); k >= 0; k--) rms.push(0);
  }
  return rms.slice(0, frames);
}

/** Opening of a mouth that follows `rms` `lagFrames` late, with a little noise. */
function follow(rms: number[], lagFrames: number, seed: number): number[] {
  const random = seeded(seed);
  return rms.map((_, i) => Math.max(0, (rms[i - lagFrames] ?? 0) + 0.004 * (random() - 0.5)));
}

/** The energy heard 400 ms later than at the frame. */
const shifted = (rms: number[]) => [...new Array<number>(SHIFT_FRAMES).fill(0), ...rms.slice(0, -SHIFT_FRAMES)];

const Stats = suite('lip-sync statistics');

Stats('a mouth that follows the speech: r high at its lag; closed when silent, open when loud; 400 ms off: r low', () => {
  const rms = syllables(250, 7);
  const opening = follow(rms, 1, 8);
  const aligned = bestLagFrames(opening, rms, 1);
  assert.ok(aligned.r > 0.9, `r ${aligned.r}`);
  assert.is(aligned.lagFrames, 1);
  // The shares compare each frame with its own sound: a mouth in step.
  const shares = closedOpenShares(follow(rms, 0, 9), rms);
  assert.ok(shares.silent >= 20 && shares.loud >= 20, JSON.stringify(shares));
  assert.ok(shares.closed === shares.silent && shares.open >= 0.9 * shares.loud, JSON.stringify(shares));
  const off = bestLagFrames(opening, shifted(rms), 1);
  assert.ok(off.r < 0.4, `r against audio shifted by 400 ms: ${off.r}`);
  // A mouth that does not move at all correlates with nothing.
  assert.is(bestLagFrames(new Array<number>(rms.length).fill(0), rms, 1).r, 0);
});

Stats('frames presented at irregular times: the lag is found in ms, and 400 ms off fails', () => {
  const rms = syllables(250, 11);
  // The energy as a function of time (ms), linear between frame centres.
  const rmsAt = (t: number) => {
    const f = t / FRAME_MS - 0.5;
    const i = Math.floor(f);
    const a = rms[Math.max(0, Math.min(rms.length - 1, i))]!;
    const b = rms[Math.max(0, Math.min(rms.length - 1, i + 1))]!;
    return a + (f - i) * (b - a);
  };
  const random = seeded(12);
  const times = rms.map((_, i) => (i + 0.5) * FRAME_MS + 16 * (random() - 0.5));
  const opening = times.map((t) => 0.5 * rmsAt(t - 30));
  const best = bestLagMs(times, opening, rmsAt, 40, 10);
  assert.ok(best.r > 0.95, `r ${best.r}`);
  assert.is(best.lagMs, 30);
  const off = bestLagMs(times, opening, (t) => rmsAt(t + 400), 40, 10);
  assert.ok(off.r < 0.4, `r against audio shifted by 400 ms: ${off.r}`);
});

Stats.run();

// ---------------------------------------------------------------------------------------------

/** The default face framed head and shoulders (the face about 40 % of the width), 440 px square. */
const CROP = { left: 115, top: 15, width: 220, height: 220 };
const SIDE = 440;
const SCALE = SIDE / CROP.width;

const Frames = suite<{ dir: string; registry: FaceRegistry; frames: Buffer[] }>('lip sync on decoded frames with a painted mouth', { dir: '', registry: null as unknown as FaceRegistry, frames: [] });

Frames.before(async (ctx) => {
  ctx.dir = await mkdtemp(path.join(os.tmpdir(), 'mouth-opening-'));
  ctx.registry = new FaceRegistry(ctx.dir);
  const photo = fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg'));
  const face = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8')) as FaceLandmarks;
  const at = (i: number) => [(face.landmarks[i]![0] - CROP.left) * SCALE, (face.landmarks[i]![1] - CROP.top) * SCALE] as const;
  const framed = await sharp(photo).extract(CROP).resize(SIDE, SIDE).toBuffer();
  const [l, r, upper, lower] = [at(61), at(291), at(13), at(14)];
  const [cx, cy] = [(upper[0] + lower[0]) / 2, (upper[1] + lower[1]) / 2];
  const halfWidth = 0.3 * (r[0] - l[0]);
  // Closed, half open, open: a dark ellipse between the lips, 0, 6 and 14 px tall.
  for (const gap of [0, 6, 14]) {
    const svg = `<svg width="${SIDE}" height="${SIDE}" xmlns="http://www.w3.org/2000/svg">${gap ? `<ellipse cx="${cx}" cy="${cy}" rx="${halfWidth}" ry="${gap / 2}" fill="#1a0808"/>` : ''}</svg>`;
    ctx.frames.push(await sharp(framed).composite([{ input: Buffer.from(svg) }]).jpeg({ quality: 90 }).toBuffer());
  }
});

Frames.after(async (ctx) => {
  await ctx.registry.close();
  await rm(ctx.dir, { recursive: true, force: true });
});

Frames('the face is found in every frame; r high aligned, low against audio shifted by 400 ms', async ({ registry, frames }) => {
  const rms = syllables(100, 21);
  const peak = Math.max(...rms);
  // The frame each 40 ms shows: the opening the energy a frame earlier asks for.
  const shown = rms.map((_, i): number => {
    const e = rms[i - 1] ?? 0;
    return e < 0.1 * peak ? 0 : e < 0.5 * peak ? 1 : 2;
  });
  const tracker = new MouthTracker(registry);
  const raw: number[] = [];
  for (const k of shown) {
    const m = await tracker.measure(frames[k]!);
    assert.ok(m?.detected, 'the face found');
    raw.push(m.opening);
  }
  assert.is(tracker.detected, rms.length);
  const rest = median(raw.filter((_, i) => shown[i] === 0));
  const opening = raw.map((x) => x - rest);
  const levels = [0, 1, 2].map((k) => opening[shown.indexOf(k)]!);
  assert.ok(levels[0]! < CLOSED_MAX && levels[1]! > levels[0]! && levels[2]! >= OPEN_MIN && levels[2]! > levels[1]!, `openings closed/half/open: ${levels.join(', ')}`);
  const aligned = bestLagFrames(opening, rms, 1);
  assert.ok(aligned.r > 0.8 && aligned.lagFrames === 1, `r ${aligned.r} at ${aligned.lagFrames} frames`);
  const off = bestLagFrames(opening, shifted(rms), 1);
  console.log(`    painted mouth: r ${aligned.r.toFixed(2)} at ${aligned.lagFrames * FRAME_MS} ms; against audio shifted by 400 ms: r ${off.r.toFixed(2)}`);
  assert.ok(off.r < 0.5, `r against audio shifted by 400 ms: ${off.r}`);
});

Frames('raw RGBA measures as its JPEG; a frame without a face keeps the last landmarks; none seen: null', async ({ registry, frames }) => {
  const open = frames[2]!;
  const fromJpeg = await new MouthTracker(registry).measure(open);
  const { data, info } = await sharp(open).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const fromRgba = await new MouthTracker(registry).measure({ rgba: data, width: info.width, height: info.height });
  assert.ok(fromJpeg && fromRgba && fromRgba.detected);
  assert.ok(Math.abs(fromJpeg.opening - fromRgba.opening) < 0.005, `${fromJpeg.opening} vs ${fromRgba.opening}`);
  assert.equal(fromRgba.mouthBox, fromJpeg.mouthBox);
  // The mouth box holds the mouth, inside the face box.
  const [x, y, w, h] = fromJpeg.mouthBox;
  const [fx, fy, fw, fh] = fromJpeg.faceBox;
  assert.ok(x >= fx - 5 && y >= fy && x + w <= fx + fw + 5 && y + h <= fy + fh + 10 && w > 0.2 * fw, `mouth ${fromJpeg.mouthBox} in face ${fromJpeg.faceBox}`);

  const blank = await sharp({ create: { width: SIDE, height: SIDE, channels: 3, background: { r: 128, g: 128, b: 128 } } }).jpeg().toBuffer();
  const tracker = new MouthTracker(registry);
  const seen = await tracker.measure(frames[0]!);
  const missed = await tracker.measure(blank);
  assert.ok(missed && !missed.detected, 'the last landmarks used');
  assert.equal(missed.mouthBox, seen!.mouthBox);
  assert.is(tracker.detected, 1);
  assert.is(tracker.frames, 2);
  assert.is(await new MouthTracker(registry).measure(blank), null);
});

Frames.run();
