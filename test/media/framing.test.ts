/**
 * Framing (src/media/framing.ts): the head-and-shoulders crop chosen from the landmarks, and the
 * picture the renderer then draws. The rule is checked on the landmark fixtures and on made-up
 * faces at the photo's edges; then, end to end, the standard faces and an off-centre upload are
 * framed, rendered by a real media session, decoded from its JPEG output, and registered again
 * with the same face models: the face found in the output must be 35-50 % of the frame's width,
 * where the unframed render of the default photo shows it at a fifth.
 */
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { faceInputFromImage } from '../../src/media/face-input.js';
import { FaceRegistry, type FaceLandmarks } from '../../src/media/face-registration.js';
import { chooseFrame, EYE_LINE_FROM_TOP, FACE_WIDTH_FRACTION, frameLandmarks, pixelFrame, type FaceFrame } from '../../src/media/framing.js';
import { MediaSession } from '../../src/media/media-session.js';
import { standardMediaConfig } from '../helpers/media.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

const fixture = (name: string): FaceLandmarks => JSON.parse(fs.readFileSync(path.join(REPO_ROOT, `test/fixtures/faces/${name}.landmarks.json`), 'utf8')) as FaceLandmarks;
const photo = (name: string): Buffer => fs.readFileSync(path.join(REPO_ROOT, `models/assets/faces/${name}.jpg`));
const eyeLine = (face: Pick<FaceLandmarks, 'landmarks'>) => (face.landmarks[468]![1] + face.landmarks[473]![1]) / 2;

/** A face with only what chooseFrame reads: a box and the two iris centres. */
function madeUpFace(width: number, height: number, box: [number, number, number, number], eyeY: number): Pick<FaceLandmarks, 'width' | 'height' | 'box' | 'landmarks'> {
  const landmarks: [number, number, number][] = Array.from({ length: 478 }, () => [box[0] + box[2] / 2, box[1] + box[3] / 2, 0]);
  landmarks[468] = [box[0] + box[2] * 0.3, eyeY, 0];
  landmarks[473] = [box[0] + box[2] * 0.7, eyeY, 0];
  return { width, height, box, landmarks };
}

function assertInside(frame: FaceFrame, width: number, height: number): void {
  assert.ok(frame.x >= 0 && frame.y >= 0, `frame starts inside the photo: ${JSON.stringify(frame)}`);
  assert.ok(frame.x + frame.width <= width + 0.01 && frame.y + frame.height <= height + 0.01, `frame ends inside the ${width}x${height} photo: ${JSON.stringify(frame)}`);
}

const Rule = suite('framing rule');

Rule('the default portrait: the face is 40 % of a square frame, eyes 40 % from the top, centred', () => {
  const face = fixture('default');
  const f = chooseFrame(face, 512, 512);
  assertInside(f, face.width, face.height);
  assert.ok(Math.abs(f.width - f.height) < 0.02, 'square');
  assert.ok(Math.abs(face.box[2] / f.width - FACE_WIDTH_FRACTION) < 0.001, `face share ${face.box[2] / f.width}`);
  assert.ok(Math.abs((eyeLine(face) - f.y) / f.height - EYE_LINE_FROM_TOP) < 0.001, 'eye line');
  assert.ok(Math.abs(f.x + f.width / 2 - (face.box[0] + face.box[2] / 2)) < 0.01, 'face centred');
  // The whole photo showed the face at 18 % of the width: framing zooms in 2.2x.
  assert.ok(f.width < face.width / 2, `a real crop (${f.width} of ${face.width} px)`);
});

Rule('a wider output widens the same crop sideways: same height, same eye line, 16:9', () => {
  const face = fixture('default');
  const square = chooseFrame(face, 720, 720);
  const wide = chooseFrame(face, 1280, 720);
  assertInside(wide, face.width, face.height);
  assert.ok(Math.abs(wide.width / wide.height - 16 / 9) < 0.001, 'output aspect');
  assert.is(wide.height, square.height);
  assert.is(wide.y, square.y);
  assert.ok(Math.abs(wide.x + wide.width / 2 - (square.x + square.width / 2)) < 0.01, 'face centred');
});

Rule('a face near an edge: the frame moves inside the photo rather than showing past its border', () => {
  // A 100 px face whose left edge is 20 px from the photo's, eyes 30 px from the top.
  const face = madeUpFace(1000, 800, [20, 10, 100, 120], 30);
  const f = chooseFrame(face, 512, 512);
  assertInside(f, face.width, face.height);
  assert.is(f.x, 0);
  assert.is(f.y, 0);
  assert.is(f.width, 250, 'the zoom is kept: face still 40 %');
});

Rule('a face that fills the photo: the frame shrinks to the photo, keeping the output aspect', () => {
  const face = madeUpFace(400, 500, [50, 100, 300, 320], 220);
  const square = chooseFrame(face, 512, 512);
  assertInside(square, face.width, face.height);
  assert.is(square.width, 400);
  assert.is(square.height, 400);
  const wide = chooseFrame(face, 1280, 720);
  assertInside(wide, face.width, face.height);
  assert.is(wide.width, 400);
  assert.ok(Math.abs(wide.width / wide.height - 16 / 9) < 0.001);
});

Rule('pixelFrame() rounds into the photo; frameLandmarks() maps the frame onto the output', () => {
  assert.equal(pixelFrame({ x: 10.4, y: -0.2, width: 99.7, height: 600 }, 200, 300), { x: 10, y: 0, width: 100, height: 300 });
  const moved = frameLandmarks([[10, 20, 4], [110, 120, 0]], { x: 10, y: 20, width: 100, height: 100 }, 500, 500);
  assert.equal(moved, [[0, 0, 20], [500, 500, 0]]);
});

const Rendered = suite<{ dir: string; registry: FaceRegistry }>('framed faces as rendered', { dir: '', registry: null as unknown as FaceRegistry });
Rendered.before(async (ctx) => {
  ctx.dir = await mkdtemp(path.join(os.tmpdir(), 'framing-'));
  ctx.registry = new FaceRegistry(ctx.dir);
});
Rendered.after(async (ctx) => {
  await ctx.registry.close();
  await rm(ctx.dir, { recursive: true, force: true });
});

/** The first frame a media session renders of `image` framed for `width` x `height`, as decoded JPEG bytes. */
async function firstFrame(registry: FaceRegistry, image: Buffer, width: number, height: number, framed = true): Promise<Buffer> {
  const base = await standardMediaConfig({ jpeg: true });
  const face = await faceInputFromImage(image, await registry.register(image), framed ? { width, height } : undefined);
  const session = new MediaSession({ ...base, width, height, face });
  const jpeg = new Promise<Buffer>((resolve) => session.on('jpeg', (e) => resolve(Buffer.from(e.data))));
  session.advance(1);
  const frame = await jpeg;
  await session.close();
  return frame;
}

/** The offset photo an uploader might send: the default portrait cut so the face sits in its left quarter. */
async function offCentrePhoto(): Promise<Buffer> {
  return sharp(photo('default')).extract({ left: 140, top: 0, width: 372, height: 512 }).jpeg({ quality: 95 }).toBuffer();
}

for (const [name, load] of [
  ['the default face', async () => photo('default')],
  ['face1', async () => photo('face1')],
  ['an off-centre upload', offCentrePhoto],
] as const) {
  Rendered(`${name}: the face found in the rendered 512x512 output is 35-50 % of its width`, async ({ registry }) => {
    const image = await load();
    const found = await registry.register(await firstFrame(registry, image, 512, 512));
    const share = found.box[2] / found.width;
    assert.ok(share >= 0.35 && share <= 0.5, `face box ${found.box[2].toFixed(0)} px of ${found.width} (${(100 * share).toFixed(0)} %)`);
    const centre = (found.box[0] + found.box[2] / 2) / found.width;
    const source = await registry.register(image);
    if (source.frame.x > 0 && source.frame.x + source.frame.width < source.width - 0.5) {
      assert.ok(Math.abs(centre - 0.5) < 0.05, `face centred (${centre.toFixed(2)})`);
    }
  });
}

Rendered('a wide 1280x720 output frames the same head, centred, at 35-50 % of the height-square', async ({ registry }) => {
  const found = await registry.register(await firstFrame(registry, photo('default'), 1280, 720));
  assert.is(found.width, 1280);
  const share = found.box[2] / 720;
  assert.ok(share >= 0.35 && share <= 0.5, `face box ${found.box[2].toFixed(0)} px against a 720 px square (${(100 * share).toFixed(0)} %)`);
  const centre = (found.box[0] + found.box[2] / 2) / found.width;
  assert.ok(Math.abs(centre - 0.5) < 0.05, `face centred (${centre.toFixed(2)})`);
});

Rendered('the measure sees the difference: the unframed default photo shows the face at about a fifth of the width', async ({ registry }) => {
  const found = await registry.register(await firstFrame(registry, photo('default'), 512, 512, false));
  const share = found.box[2] / found.width;
  assert.ok(share < 0.25, `unframed face box ${(100 * share).toFixed(0)} % of the width`);
});

Rule.run();
Rendered.run();
