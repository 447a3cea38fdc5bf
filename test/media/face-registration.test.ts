import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import {
  FaceRegistry,
  LANDMARK,
  LANDMARK_COUNT,
  MAX_PITCH_DEG,
  MAX_YAW_DEG,
  MIN_FACE_HEIGHT_FRACTION,
  MIN_FACE_HEIGHT_PX,
  checkUsable,
  type FaceLandmarks,
  type RegisteredFace,
} from '../../src/media/face-registration.js';
import { chooseFrame } from '../../src/media/framing.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FACE_FILES = { default: 'models/assets/faces/default.jpg', face1: 'models/assets/faces/face1.jpg' } as const;
const image = (name: keyof typeof FACE_FILES): Buffer => fs.readFileSync(path.join(ROOT, FACE_FILES[name]));
const fixture = (name: keyof typeof FACE_FILES): FaceLandmarks =>
  JSON.parse(fs.readFileSync(path.join(ROOT, `test/fixtures/faces/${name}.landmarks.json`), 'utf8')) as FaceLandmarks;

/** Landmarks may differ by this much from the fixture: model noise across resampling and CPUs. */
const FIXTURE_MAX_PX = 3;
const FIXTURE_MEAN_PX = 1;

type Point = [number, number, number];

/** A registration result as the cache stores it: what the models found, without the derived frame. */
function withoutFrame(r: RegisteredFace): FaceLandmarks {
  const { frame: _frame, ...found } = r;
  return found;
}

function pt(result: FaceLandmarks, index: number): Point {
  const p = result.landmarks[index];
  assert.ok(p, `no landmark ${index}`);
  return p;
}

/** Mean and largest 2D distance between corresponding landmarks. */
function distance(a: Point[], b: Point[]): { mean: number; max: number } {
  assert.is(a.length, b.length);
  let sum = 0;
  let max = 0;
  a.forEach((p, i) => {
    const q = b[i] as Point;
    const d = Math.hypot(p[0] - q[0], p[1] - q[1]);
    sum += d;
    max = Math.max(max, d);
  });
  return { mean: sum / a.length, max };
}

/** Awaits a promise that must reject with an AppError; assertion errors are never swallowed. */
async function rejectsWith(promise: Promise<unknown>, status: number, code: string): Promise<AppError> {
  let caught: unknown = null;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof AppError, `expected AppError ${status} ${code}, got ${String(caught)}`);
  assert.is(caught.status, status);
  assert.is(caught.code, code, caught.message);
  assert.is(caught.param, 'file');
  return caught;
}

/** The astronaut portrait, scaled, on a flat canvas of another size. */
async function onCanvas(width: number, height: number, scale: number, left: number, top: number): Promise<Buffer> {
  const face = await sharp(image('default')).resize(Math.round(512 * scale)).toBuffer();
  return sharp({ create: { width, height, channels: 3, background: '#6a7a8a' } })
    .composite([{ input: face, left, top }])
    .png()
    .toBuffer();
}

const Registry = suite<{ dir: string; registry: FaceRegistry }>('FaceRegistry', {
  dir: '',
  registry: null as unknown as FaceRegistry,
});

Registry.before.each(async (ctx) => {
  ctx.dir = await mkdtemp(path.join(os.tmpdir(), 'face-registry-'));
  ctx.registry = new FaceRegistry(ctx.dir);
});
Registry.after.each(async (ctx) => {
  await ctx.registry.close();
  await rm(ctx.dir, { recursive: true, force: true });
});

Registry('registry.register() finds 478 landmarks on the astronaut portrait, on her eyes, nose and mouth', async ({ registry }) => {
  const r = await registry.register(image('default'));
  assert.is(r.width, 512);
  assert.is(r.height, 512);
  assert.is(r.landmarks.length, LANDMARK_COUNT);
  for (const [x, y, z] of r.landmarks) {
    assert.ok(x >= 0 && x <= r.width && y >= 0 && y <= r.height, `landmark outside the image: ${x},${y}`);
    assert.ok(Number.isFinite(z));
  }
  // Iris centres between the corners of their own eye (MediaPipe: 468 with 33/133, 473 with 263/362).
  const insideEye = (iris: Point, a: Point, b: Point) => {
    const width = Math.abs(a[0] - b[0]);
    assert.ok(iris[0] > Math.min(a[0], b[0]) && iris[0] < Math.max(a[0], b[0]), `iris x ${iris[0]} not between ${a[0]} and ${b[0]}`);
    assert.ok(Math.abs(iris[1] - (a[1] + b[1]) / 2) < width / 2, `iris y ${iris[1]} off the eye line`);
  };
  insideEye(pt(r, LANDMARK.rightIrisCentre), pt(r, LANDMARK.rightEyeOuter), pt(r, LANDMARK.rightEyeInner));
  insideEye(pt(r, LANDMARK.leftIrisCentre), pt(r, LANDMARK.leftEyeOuter), pt(r, LANDMARK.leftEyeInner));
  // In an unmirrored portrait the subject's right eye is on the image's left.
  assert.ok(pt(r, LANDMARK.rightIrisCentre)[0] < pt(r, LANDMARK.leftIrisCentre)[0]);
  // Eyes above the nose tip, nose tip above the mouth corners, mouth corners either side of the nose.
  const nose = pt(r, LANDMARK.noseTip);
  assert.ok(pt(r, LANDMARK.rightIrisCentre)[1] < nose[1] && pt(r, LANDMARK.leftIrisCentre)[1] < nose[1]);
  assert.ok(pt(r, LANDMARK.mouthRight)[1] > nose[1] && pt(r, LANDMARK.mouthLeft)[1] > nose[1]);
  assert.ok(pt(r, LANDMARK.mouthRight)[0] < nose[0] && nose[0] < pt(r, LANDMARK.mouthLeft)[0]);
  assert.ok(pt(r, LANDMARK.foreheadTop)[1] < pt(r, LANDMARK.chin)[1]);
  // The nose tip is the nearest point to the camera among these.
  assert.ok(nose[2] < pt(r, LANDMARK.mouthRight)[2] && nose[2] < pt(r, LANDMARK.rightEyeOuter)[2]);
  // The box is the landmarks' bounding box.
  const [bx, by, bw, bh] = r.box;
  for (const [x, y] of r.landmarks) assert.ok(x >= bx - 0.01 && x <= bx + bw + 0.01 && y >= by - 0.01 && y <= by + bh + 0.01);
  assert.ok(bh > 0.15 * r.height && bh < 0.5 * r.height, `face height ${bh}`);
  assert.ok(Math.abs(r.pose.yawDeg) < 10 && Math.abs(r.pose.pitchDeg) < 15 && Math.abs(r.pose.rollDeg) < 10, JSON.stringify(r.pose));
  assert.ok(r.score >= 0.9);
  assert.is(r.faces, 1);
  assert.match(r.model, /^human@\d+\.\d+\.\d+ facemesh\+iris$/);
});

Registry('registry.register() matches the committed fixtures within a few pixels', async ({ registry }) => {
  for (const name of ['default', 'face1'] as const) {
    const r = await registry.register(image(name));
    const f = fixture(name);
    // What the models found, as in the fixture, plus the frame derived from it (framing.ts).
    assert.equal(Object.keys(r).sort(), [...Object.keys(f), 'frame'].sort());
    assert.equal(r.frame, chooseFrame(r, 1, 1));
    assert.is(r.width, f.width);
    assert.is(r.height, f.height);
    assert.is(r.model, f.model);
    const d = distance(r.landmarks, f.landmarks);
    assert.ok(d.max <= FIXTURE_MAX_PX && d.mean <= FIXTURE_MEAN_PX, `${name}: mean ${d.mean.toFixed(2)} px, max ${d.max.toFixed(2)} px`);
    r.box.forEach((v, i) => assert.ok(Math.abs(v - (f.box[i] as number)) <= FIXTURE_MAX_PX, `${name} box ${r.box} vs ${f.box}`));
    assert.ok(Math.abs(r.pose.yawDeg - f.pose.yawDeg) < 3 && Math.abs(r.pose.pitchDeg - f.pose.pitchDeg) < 3, `${name} pose`);
  }
});

Registry('a second registry.register() of the same bytes is read from the cache and does not run the model', async ({ dir, registry }) => {
  const bytes = image('default');
  const first = await registry.register(bytes);
  assert.is(registry.modelRuns, 1);
  const file = path.join(dir, `${createHash('sha256').update(bytes).digest('hex')}.json`);
  // The cache holds what the models found; the frame is derived on every read (a new framing
  // rule applies at once).
  assert.equal(JSON.parse(await readFile(file, 'utf8')), withoutFrame(first));
  assert.equal(fs.readdirSync(dir), [path.basename(file)], 'no temporary file left behind');

  const second = await registry.register(Buffer.from(bytes));
  assert.is(registry.modelRuns, 1);
  assert.equal(second, first);

  // Another registry (another process, after a restart) on the same directory reads it too.
  const other = new FaceRegistry(dir);
  try {
    assert.equal(await other.register(bytes), first);
    assert.is(other.modelRuns, 0);
  } finally {
    await other.close();
  }
});

Registry('a damaged cache entry is recomputed and replaced', async ({ dir, registry }) => {
  const bytes = image('face1');
  const file = path.join(dir, `${createHash('sha256').update(bytes).digest('hex')}.json`);
  await writeFile(file, '{"width": 5');
  const r = await registry.register(bytes);
  assert.is(registry.modelRuns, 1);
  assert.equal(JSON.parse(await readFile(file, 'utf8')), withoutFrame(r));
});

Registry('concurrent registry.register() calls with the same bytes run the model once', async ({ registry }) => {
  const bytes = image('face1');
  const [a, b] = await Promise.all([registry.register(bytes), registry.register(Buffer.from(bytes))]);
  assert.equal(a, b);
  assert.is(registry.modelRuns, 1);
});

Registry('landmarks are in source pixels for a larger, non-square, EXIF-rotated photo', async ({ registry }) => {
  // The portrait at 1.5x at (700, 100) on a 1400x900 canvas, stored turned 90° anticlockwise
  // with EXIF orientation 6 ("rotate 90° clockwise to view"), so it displays upright.
  const upright = await onCanvas(1400, 900, 1.5, 700, 100);
  const stored = await sharp(upright).rotate(-90).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer();
  const storedMeta = await sharp(stored).metadata();
  assert.is(storedMeta.width, 900, 'the stored pixels are portrait');
  assert.is(storedMeta.orientation, 6);

  const r = await registry.register(stored);
  assert.is(r.width, 1400);
  assert.is(r.height, 900);
  const expected = fixture('default').landmarks.map(([x, y, z]): Point => [x * 1.5 + 700, y * 1.5 + 100, z * 1.5]);
  const d = distance(r.landmarks, expected);
  // The detector sees this photo at 0.73x (1024 px wide), so allow for coarser quantization.
  assert.ok(d.mean < 3 && d.max < 8, `mean ${d.mean.toFixed(2)} px, max ${d.max.toFixed(2)} px`);
});

Registry('a flat grey picture is refused with 422 no_face_detected', async ({ registry }) => {
  const grey = await sharp({ create: { width: 512, height: 512, channels: 3, background: '#808080' } }).png().toBuffer();
  const err = await rejectsWith(registry.register(grey), 422, 'no_face_detected');
  assert.match(err.message, /portrait/);
  assert.is(err.toBody().error.type, 'invalid_request_error');
});

Registry('a face filling 6% of the picture is refused with 422 face_too_small', async ({ registry }) => {
  const err = await rejectsWith(registry.register(await onCanvas(1536, 1536, 1, 0, 0)), 422, 'face_too_small');
  assert.match(err.message, /too small/);
  assert.match(err.message, /crop/);
});

Registry('bytes that are not an image are refused with 400 invalid_file', async ({ registry }) => {
  await rejectsWith(registry.register(Buffer.from('not an image at all')), 400, 'invalid_file');
  assert.is(registry.modelRuns, 0);
});

Registry('registry.close() refuses further registrations', async ({ registry }) => {
  await registry.close();
  let caught: unknown = null;
  try {
    await registry.register(image('default'));
  } catch (err) {
    caught = err;
  }
  assert.instance(caught, Error);
  assert.match(String((caught as Error).message), /closed/);
});

Registry.run();

const Rules = suite('checkUsable()');

const FRONTAL = {
  box: [180, 70, 90, 100] as [number, number, number, number],
  pose: { pitchDeg: 5, yawDeg: -2, rollDeg: 3 },
  score: 0.98,
};

Rules('checkUsable() accepts a frontal face of a good size', () => {
  assert.is(checkUsable(FRONTAL, 512, 512), null);
  assert.is(checkUsable({ ...FRONTAL, pose: { pitchDeg: -MAX_PITCH_DEG, yawDeg: MAX_YAW_DEG, rollDeg: 40 } }, 512, 512), null);
});

Rules('checkUsable() refuses a head turned or tilted too far with 422 face_not_frontal', () => {
  for (const pose of [
    { pitchDeg: 0, yawDeg: MAX_YAW_DEG + 5, rollDeg: 0 },
    { pitchDeg: 0, yawDeg: -(MAX_YAW_DEG + 5), rollDeg: 0 },
    { pitchDeg: -(MAX_PITCH_DEG + 1), yawDeg: 0, rollDeg: 0 },
  ]) {
    const err = checkUsable({ ...FRONTAL, pose }, 512, 512);
    assert.ok(err, JSON.stringify(pose));
    assert.is(err.status, 422);
    assert.is(err.code, 'face_not_frontal');
    assert.is(err.param, 'file');
    assert.match(err.message, /straight at the camera/);
  }
});

Rules('checkUsable() refuses a face under 15% of the height or under 64 px with 422 face_too_small', () => {
  const h = 1000;
  const small = checkUsable({ ...FRONTAL, box: [0, 0, 120, MIN_FACE_HEIGHT_FRACTION * h - 1] }, 800, h);
  assert.is(small?.code, 'face_too_small');
  assert.is(checkUsable({ ...FRONTAL, box: [0, 0, 120, MIN_FACE_HEIGHT_FRACTION * h] }, 800, h), null);
  // 60 px is 23% of a 256 px photo, but under the absolute floor.
  const tiny = checkUsable({ ...FRONTAL, box: [0, 0, 50, MIN_FACE_HEIGHT_PX - 4] }, 256, 256);
  assert.is(tiny?.code, 'face_too_small');
  assert.is(tiny?.status, 422);
});

Rules('checkUsable() refuses a low-confidence face with 422 no_usable_face', () => {
  const err = checkUsable({ ...FRONTAL, score: 0.3 }, 512, 512);
  assert.is(err?.code, 'no_usable_face');
  assert.is(err?.status, 422);
  assert.is(err?.param, 'file');
});

Rules.run();
