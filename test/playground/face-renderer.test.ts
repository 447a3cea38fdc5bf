/**
 * The browser's face renderer (playground/src/face/renderer.ts, WebGL2 in headless Chromium on
 * SwiftShader) draws the frames the server's CPU renderer draws (PreparedFace.renderStill):
 * for the standard faces framed for a 512x512 session, as sessions draw them, at upsample
 * factor 1 (both faces) and 2 (the default face), over frames that move every part of the
 * rig — mouth shapes and tongue, eyes, brows, cheeks, each head-pose axis, a talking frame —
 * the mean absolute difference is at most FACE_MAD over the face and MOUTH_MAD over the mouth.
 * One line per case gives the measured values. The bounds mean something: an open mouth differs
 * from the rest frame by far more than MOUTH_MAD in the mouth region. Without WebGL2 the
 * renderer throws a clear Error (the page then falls back to video).
 *
 * Regions, in output pixels: the face is the bounding box of the face-oval landmarks through
 * the fit; the mouth is the bounding box of the mouth opening's vertices at the frame
 * (geometry.ts, the renderer's own CPU half), padded by a quarter of the mouth width.
 */
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import type { Page } from 'playwright-core';
import * as assert from 'uvu/assert';
import { CHROMIUM_PATH, chromiumAvailable, launchChromium } from '../../harness/clients/browser.js';
import { FaceGeometry, type ClientFace, type FaceFrame } from '../../playground/src/face/geometry.js';
import { faceInputFromImage } from '../../src/media/face-input.js';
import type { FaceLandmarks } from '../../src/media/face-registration.js';
import { prepareFace } from '../../src/media/media-session.js';
import { meanAbsDiff } from '../helpers/images.js';
import { suiteNeeding } from '../helpers/skip.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SIZE_PX = 512;
/** Mean absolute difference bounds, 0..255 levels per channel. */
const FACE_MAD = 3;
const MOUTH_MAD = 6;
/** face-render's `landmarks::FACE_OVAL`. */
const FACE_OVAL = [10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377, 152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109];

const REST: Required<FaceFrame> = { pitchDeg: 0, yawDeg: 0, rollDeg: 0, tx: 0, ty: 0, scale: 1, mouthOpen: 0, mouthWide: 0, mouthPress: 0, tongue: 0, eyeOpenLeft: 1, eyeOpenRight: 1, brow: 0, cheek: 0, listening: false };

const FRAMES: Array<[string, Partial<FaceFrame>]> = [
  ['rest', {}],
  ['mouth half open', { mouthOpen: 0.5 }],
  ['mouth open', { mouthOpen: 1 }],
  ['wide', { mouthWide: 1, mouthOpen: 0.3 }],
  ['round', { mouthWide: -1, mouthOpen: 0.4 }],
  ['pressed', { mouthPress: 1, mouthOpen: 0.5 }],
  ['tongue up', { mouthOpen: 0.8, tongue: 1 }],
  ['eyes closed', { eyeOpenLeft: 0, eyeOpenRight: 0 }],
  ['eyes half', { eyeOpenLeft: 0.5, eyeOpenRight: 0.4 }],
  ['brow raised', { brow: 1 }],
  ['brow knitted', { brow: -1 }],
  ['cheek', { cheek: 1 }],
  ['yaw +15', { yawDeg: 15 }],
  ['yaw -15', { yawDeg: -15 }],
  ['pitch 12', { pitchDeg: 12 }],
  ['roll 10', { rollDeg: 10 }],
  ['tx ty scale', { tx: 0.1, ty: -0.08, scale: 1.1 }],
  ['talking', { pitchDeg: 4, yawDeg: -8, rollDeg: 3, tx: 0.02, ty: 0.01, scale: 1.02, mouthOpen: 0.6, mouthWide: 0.3, tongue: 0.4, eyeOpenLeft: 0.8, eyeOpenRight: 0.85, brow: 0.4, cheek: 0.5 }],
];

/** A standard face as a session draws it: framed for the output, prepared for the CPU renderer. */
async function sessionFace(name: 'default' | 'face1') {
  const landmarks = JSON.parse(fs.readFileSync(path.join(ROOT, `test/fixtures/faces/${name}.landmarks.json`), 'utf8')) as FaceLandmarks;
  const input = await faceInputFromImage(fs.readFileSync(path.join(ROOT, `models/assets/faces/${name}.jpg`)), landmarks, { width: SIZE_PX, height: SIZE_PX });
  return { input, prepared: await prepareFace(input) };
}

type Box = [x0: number, y0: number, x1: number, y1: number];

/** Bounding box of canvas points (x, y pairs) in output pixels, padded, clipped to the output. */
function outputBox(face: ClientFace, pts: number[], pad = 0): Box {
  const k = face.width / face.canvasWidth;
  const xs = pts.filter((_, i) => i % 2 === 0).map((x) => x * k);
  const ys = pts.filter((_, i) => i % 2 === 1).map((y) => y * k);
  return [Math.max(Math.floor(Math.min(...xs) - pad), 0), Math.max(Math.floor(Math.min(...ys) - pad), 0), Math.min(Math.ceil(Math.max(...xs) + pad), face.width), Math.min(Math.ceil(Math.max(...ys) + pad), face.height)];
}

function faceBox(face: ClientFace, landmarks: Float32Array): Box {
  const f = face.fit as number[];
  const pts = FACE_OVAL.flatMap((i) => {
    const [x, y] = [landmarks[3 * i] as number, landmarks[3 * i + 1] as number];
    return [f[0]! * x + f[1]! * y + f[4]!, f[2]! * x + f[3]! * y + f[5]!];
  });
  return outputBox(face, pts);
}

function mouthBox(face: ClientFace, geometry: FaceGeometry, frame: FaceFrame): Box {
  const { positions } = geometry.frame(frame);
  const o = face.mouth.opening;
  const pts = [...Array.from(o.upper), ...Array.from(o.lower)].flatMap((v) => [positions[2 * v] as number, positions[2 * v + 1] as number]);
  return outputBox(face, pts, 0.25 * face.mouth.width * (face.fit[0] as number) * (face.width / face.canvasWidth));
}

/** The face with its typed arrays as base64 (what `PAGE` decodes). */
function toWire(v: unknown): unknown {
  const b64 = (t: ArrayBufferView, type: string) => ({ $b64: Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('base64'), type });
  if (v instanceof Float32Array) return b64(v, 'f32');
  if (v instanceof Uint32Array) return b64(v, 'u32');
  if (v instanceof Uint8Array) return b64(v, 'u8');
  if (Array.isArray(v)) return v.map(toWire);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toWire(x)]));
  return v;
}

/** Page side (plain JavaScript: the tests' TypeScript has no DOM types). */
const PAGE = `
(() => {
  const bytes = (s) => { const bin = atob(s); const out = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i); return out; };
  const decode = (v) => {
    if (v && typeof v.$b64 === 'string') { const b = bytes(v.$b64); return v.type === 'f32' ? new Float32Array(b.buffer) : v.type === 'u32' ? new Uint32Array(b.buffer) : b; }
    if (Array.isArray(v)) return v.map(decode);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
    return v;
  };
  const base64 = (u8) => { let s = ''; for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000)); return btoa(s); };
  const canvas = document.createElement('canvas');
  document.body.append(canvas);
  let renderer = null;
  window.parity = {
    load(wire) { const face = decode(wire); if (renderer) renderer.setFace(face); else renderer = faceRenderer.createFaceRenderer(canvas, face); },
    draw(frame) { renderer.draw(frame); return base64(renderer.readPixels()); },
    withoutWebGl(wire) {
      try { faceRenderer.createFaceRenderer({ getContext: () => null }, decode(wire)); return 'no error'; } catch (e) { return e instanceof Error ? e.message : String(e); }
    },
  };
})();
`;

/** What `PAGE` puts on the page, as `window.parity`. */
interface PageApi {
  load(wire: unknown): void;
  draw(frame: FaceFrame): string;
  withoutWebGl(wire: unknown): string;
}
type PageGlobal = { parity: PageApi };

type Drawn = Awaited<ReturnType<typeof drawBoth>>;

interface Ctx {
  chromium: Awaited<ReturnType<typeof launchChromium>>;
  page: Page;
  /** Each face and factor drawn once, by the first test that needs it. */
  drawn: Map<string, Promise<Drawn>>;
}

const Parity = suiteNeeding<Ctx>('face renderer (WebGL2)', chromiumAvailable() ? null : `${CHROMIUM_PATH} is missing (bash src/cli/setup.sh installs it)`, {} as Ctx);

Parity.before(async (ctx) => {
  const bundle = await build({
    entryPoints: [path.join(ROOT, 'playground/src/face/renderer.ts')],
    bundle: true,
    format: 'iife',
    globalName: 'faceRenderer',
    target: ['chrome110'],
    write: false,
    logLevel: 'warning',
  });
  ctx.drawn = new Map();
  ctx.chromium = await launchChromium({ webgl: true });
  ctx.page = await ctx.chromium.browser.newPage();
  ctx.page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await ctx.page.setContent('<!doctype html><body></body>');
  await ctx.page.addScriptTag({ content: bundle.outputFiles[0]!.text });
  await ctx.page.addScriptTag({ content: PAGE });
});

Parity.after(async (ctx) => {
  await ctx.chromium?.close();
});

/** Draws every frame on the page and with renderStill; returns the per-frame pixels of both. */
async function drawBoth(page: Page, name: 'default' | 'face1', factor: number) {
  const { input, prepared } = await sessionFace(name);
  const face: ClientFace = prepared.clientFace(SIZE_PX, SIZE_PX, factor);
  await page.evaluate((w) => (globalThis as unknown as PageGlobal).parity.load(w), toWire(face));
  const geometry = new FaceGeometry(face);
  const out = [];
  for (const [label, f] of FRAMES) {
    const frame = { ...REST, ...f };
    const gpu = Buffer.from(await page.evaluate((f) => (globalThis as unknown as PageGlobal).parity.draw(f), frame), 'base64');
    out.push({ label, frame, gpu, cpu: new Uint8Array(prepared.renderStill(frame, SIZE_PX, SIZE_PX, factor)), mouth: mouthBox(face, geometry, frame) });
  }
  return { face, faceBox: faceBox(face, input.landmarks), frames: out };
}

function drawn(ctx: Ctx, name: 'default' | 'face1', factor: number): Promise<Drawn> {
  const key = `${name} x${factor}`;
  if (!ctx.drawn.has(key)) ctx.drawn.set(key, drawBoth(ctx.page, name, factor));
  return ctx.drawn.get(key)!;
}

/** Pixels of two RGB frames that differ at all. */
function differing(a: Uint8Array, b: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < a.length; i += 3) if (a[i] !== b[i] || a[i + 1] !== b[i + 1] || a[i + 2] !== b[i + 2]) n++;
  return n;
}

for (const [name, factor] of [
  ['default', 1],
  ['face1', 1],
  ['default', 2],
] as const) {
  Parity(`the ${name} face framed ${SIZE_PX}x${SIZE_PX}, upsample factor ${factor}: every frame within MAD ${FACE_MAD} (face) and ${MOUTH_MAD} (mouth) of renderStill()`, async (ctx) => {
    const { face, faceBox: box, frames } = await drawn(ctx, name, factor);
    assert.is(frames[0]!.gpu.length, face.width * face.height * 3);
    const failures: string[] = [];
    for (const { label, gpu, cpu, mouth } of frames) {
      const [m, mm] = [meanAbsDiff(gpu, cpu, face.width, face.height, box), meanAbsDiff(gpu, cpu, face.width, face.height, mouth)];
      console.log(`  ${name} x${factor} ${label.padEnd(16)} MAD face ${m.toFixed(3)}  mouth ${mm.toFixed(3)}  (pixels differing in the frame: ${differing(gpu, cpu)})`);
      if (m > FACE_MAD || mm > MOUTH_MAD) failures.push(`${label}: face ${m.toFixed(2)}, mouth ${mm.toFixed(2)}`);
    }
    assert.equal(failures, [], 'frames beyond the bounds');
  });
}

Parity('the bounds can fail: an open mouth differs from the rest frame in the mouth region by far more than the mouth bound', async (ctx) => {
  const { face, frames } = await drawn(ctx, 'default', 1);
  const rest = frames.find((f) => f.label === 'rest')!;
  const open = frames.find((f) => f.label === 'mouth open')!;
  const [cpu, gpu] = [meanAbsDiff(open.cpu, rest.cpu, face.width, face.height, open.mouth), meanAbsDiff(open.gpu, rest.cpu, face.width, face.height, open.mouth)];
  console.log(`  default x1 mouth open vs rest: MAD mouth ${cpu.toFixed(2)} (renderStill), ${gpu.toFixed(2)} (WebGL2)`);
  assert.ok(cpu > 4 * MOUTH_MAD && gpu > 4 * MOUTH_MAD, `open vs rest: ${cpu.toFixed(2)}, ${gpu.toFixed(2)}`);
});

Parity('createFaceRenderer() throws a clear Error where the canvas has no WebGL2', async ({ page }) => {
  const { prepared } = await sessionFace('face1');
  const message = await page.evaluate((w) => (globalThis as unknown as PageGlobal).parity.withoutWebGl(w), toWire(prepared.clientFace(SIZE_PX, SIZE_PX, 1)));
  assert.match(message, /WebGL2 is not available/);
});

Parity.run();
