/**
 * The playground draws the face itself (issue 42) in a browser with WebGL2 (headless Chromium,
 * software WebGL through SwiftShader), by default: over WebRTC the call takes no video and the
 * face is drawn on the page's canvas from the motion stream, timed by the audio track's playout
 * clock; over WebSocket the same from the socket's events, timed by the audio deltas' pts. What the
 * page drew is compared with what the server's CPU renderer draws for the same frame (the texture,
 * mesh and rig came over the wire and were decoded by the page): mean absolute difference ≤ 3
 * levels over the face and ≤ 6 in the mouth, for the default face and for a photo uploaded through
 * the page (registered by the server; the test finds its landmarks with the same registry to
 * render the reference; face1 is in face-renderer.test.ts). `/playground/face.js`, the renderer for pages of
 * their own, is served to any origin and imports there. Without WebGL2 the page falls back to the
 * server's video (playground.test.ts runs that way). The A/V figures at the page are in the
 * avatar bench, not here.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { buildPlayground } from '../../src/cli/build-playground.js';
import { CHROMIUM_PATH, chromiumAvailable, launchChromium } from '../../harness/clients/browser.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { faceInputFromImage } from '../../src/media/face-input.js';
import { FaceRegistry, type FaceLandmarks } from '../../src/media/face-registration.js';
import { prepareFace, type PreparedFace } from '../../src/media/media-session.js';
import { openPlayground, snapshot, until, type PlaygroundSnapshot as Snapshot } from '../helpers/playground-page.js';
import { meanAbsDiff } from '../helpers/images.js';
import { suiteNeeding } from '../helpers/skip.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SIZE = 512;

interface Ctx {
  t: RealtimeTestServer;
  chromium: Awaited<ReturnType<typeof launchChromium>>;
  /** The default face as the server frames it for 512x512, and its regions there. */
  reference: Reference;
}

/** A face as the server frames and renders it for a 512x512 session, with its face and mouth regions there. */
interface Reference {
  face: PreparedFace;
  regions: { face: Box; mouth: Box };
}

type Box = { x0: number; y0: number; x1: number; y1: number };
type Frame = Record<string, number | boolean>;
interface Drawn {
  ptsMs: number;
  frame: Frame;
  rgb: string;
}
/** What the page drew last, against the CPU renderer's frame for the same parameters. */
async function compareDrawn(ref: Reference, page: Page): Promise<{ face: number; mouth: number; frame: Frame }> {
  const drawn = (await page.evaluate('window.playground.drawnFace()')) as Drawn | null;
  assert.ok(drawn, 'the page drew a frame');
  const pixels = Buffer.from(drawn.rgb, 'base64');
  assert.is(pixels.length, SIZE * SIZE * 3);
  const f = drawn.frame;
  const reference = ref.face.renderStill(
    { pitchDeg: +f.pitchDeg!, yawDeg: +f.yawDeg!, rollDeg: +f.rollDeg!, tx: +f.tx!, ty: +f.ty!, scale: +f.scale!, mouthOpen: +f.mouthOpen!, mouthWide: +f.mouthWide!, mouthPress: +f.mouthPress!, tongue: +f.tongue!, eyeOpenLeft: +f.eyeOpenLeft!, eyeOpenRight: +f.eyeOpenRight!, brow: +f.brow!, cheek: +f.cheek!, listening: Boolean(f.listening) },
    SIZE,
    SIZE,
    1,
  );
  const mad = ({ x0, y0, x1, y1 }: Box): number => meanAbsDiff(pixels, reference, SIZE, SIZE, [x0, y0, x1, y1]);
  return { face: mad(ref.regions.face), mouth: mad(ref.regions.mouth), frame: f };
}

const openPage = (ctx: Ctx): Promise<Page> => openPlayground(ctx.chromium.browser, ctx.t, 'off');

/** Says something and waits until the page has drawn the reply's open mouth and the reply is done. */
async function talk(page: Page, text: string): Promise<Snapshot> {
  const before = (await snapshot(page)).eventTypes.filter((t) => t === 'response.done').length;
  await page.fill('#text', text);
  await page.click('#send');
  return until(page, (s) => s.eventTypes.filter((t) => t === 'response.done').length > before && s.drawn.some((d) => d.mouthOpen > 0.25), 'the reply drawn', 60_000);
}

/** The face and mouth regions (see the header) of `photo` with its landmarks, framed and prepared as a 512x512 session's face. */
async function referenceFace(photo: Buffer, landmarks: FaceLandmarks): Promise<Reference> {
  const input = await faceInputFromImage(photo, landmarks, { width: SIZE, height: SIZE });
  const face = await prepareFace(input);
  // The face: every landmark's box; the mouth: the lips' box, the jaw's drop below it, a quarter of its width around.
  const cf = face.clientFace(SIZE, SIZE, 1);
  const [m00, m01, m10, m11, tx, ty] = cf.fit as [number, number, number, number, number, number];
  const at = (i: number): [number, number] => {
    const [x, y] = [input.landmarks[i * 3]!, input.landmarks[i * 3 + 1]!];
    return [m00 * x + m01 * y + tx, m10 * x + m11 * y + ty];
  };
  const all = Array.from({ length: input.landmarks.length / 3 }, (_, i) => at(i));
  const box = (pts: Array<[number, number]>): Box => ({ x0: Math.min(...pts.map((p) => p[0])), y0: Math.min(...pts.map((p) => p[1])), x1: Math.max(...pts.map((p) => p[0])), y1: Math.max(...pts.map((p) => p[1])) });
  const lips = box([at(61), at(291), at(0), at(17)]);
  const pad = (lips.x1 - lips.x0) / 4;
  return { face, regions: { face: box(all), mouth: { x0: lips.x0 - pad, y0: lips.y0 - pad, x1: lips.x1 + pad, y1: lips.y1 + cf.mouth.jawDrop * m11 + pad } } };
}

/** Over WebSocket with a long reply: up to three mid-reply frames with the mouth open, compared as drawn; the worst of each region. */
async function compareMidReply(ref: Reference, page: Page, label: string): Promise<{ face: number; mouth: number }> {
  await page.click('label:has(input[name=transport][value=websocket])');
  await page.click('#connect');
  await until(page, (x) => x.state === 'connected' && x.firstFrameMs !== null, 'the first drawn frame');
  await page.fill('#text', 'Tell me about the weather');
  await page.click('#send');
  const open = await until(page, (x) => x.drawn.some((d) => d.mouthOpen > 0.3 && d.lateMs !== null), 'an open mouth placed by its sound', 60_000);
  assert.equal([open.render, open.transport], ['client', 'websocket']);
  let worst = { face: 0, mouth: 0 };
  let opened = 0;
  for (let i = 0; i < 40 && opened < 3; i++) {
    const d = await compareDrawn(ref, page);
    if (Number(d.frame.mouthOpen) > 0.2) {
      opened++;
      worst = { face: Math.max(worst.face, d.face), mouth: Math.max(worst.mouth, d.mouth) };
      console.log(`  ${label}, mid-reply: MAD face ${d.face.toFixed(2)}, mouth ${d.mouth.toFixed(2)} (mouth_open ${Number(d.frame.mouthOpen).toFixed(3)})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(opened >= 1, 'frames with the mouth open compared');
  return worst;
}

const LONG_REPLY = 'The weather is bright and mild today, with a light breeze from the west. '.repeat(4);

const NO_CHROMIUM = chromiumAvailable() ? null : `${CHROMIUM_PATH} is missing (src/cli/setup.sh installs it)`;
const Drawn = suiteNeeding<Ctx>('playground: the face drawn in the page (WebGL2)', NO_CHROMIUM, {} as Ctx);
Drawn.before(async (ctx) => {
  await buildPlayground();
  ctx.t = await startRealtimeTestServer();
  ctx.chromium = await launchChromium({ microphone: 'silence', webgl: true });
  const landmarks = JSON.parse(fs.readFileSync(path.join(ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8')) as FaceLandmarks;
  ctx.reference = await referenceFace(fs.readFileSync(path.join(ROOT, 'models/assets/faces/default.jpg')), landmarks);
});
Drawn.after(async (ctx) => {
  await ctx.chromium?.close();
  await ctx.t?.close();
});
Drawn.before.each((ctx) => ctx.t.resetProviders());

Drawn('by default over WebRTC: no video, the face drawn on the page in step with its audio, as the CPU renderer draws it', async (ctx) => {
  const page = await openPage(ctx);
  assert.is(await page.inputValue('#render'), 'client', 'drawn in the page by default');
  await page.click('#connect');
  const s = await until(page, (x) => x.state === 'connected' && x.firstFrameMs !== null, 'the first drawn frame');
  assert.equal([s.render, s.transport], ['client', 'webrtc']);
  assert.ok(await page.isVisible('#face'));
  assert.not.ok(await page.isVisible('#video'), 'no video element shown');
  const talked = await talk(page, 'Hello there');
  // Timed by the audio track's playout clock: the reply's frames were placed by their sound.
  const synced = talked.drawn.filter((d) => d.lateMs !== null);
  assert.ok(synced.length > 10, `${synced.length} frames placed by the audio clock`);
  assert.ok(talked.drawn.every((d, i) => i === 0 || d.ptsMs > talked.drawn[i - 1]!.ptsMs), 'frames drawn in order, each once');
  assert.not.ok(talked.eventTypes.some((t) => t.startsWith('output_motion')), 'the motion stream is the face view\'s, not the log\'s');
  // The frame the page shows as the reply plays out (its audio outlasts response.done), against the reference.
  const shown = await compareDrawn(ctx.reference, page);
  console.log(`  webrtc, a frame of the reply as drawn: MAD face ${shown.face.toFixed(2)}, mouth ${shown.mouth.toFixed(2)} (mouth_open ${Number(shown.frame.mouthOpen).toFixed(3)})`);
  assert.ok(shown.face <= 3 && shown.mouth <= 6, JSON.stringify(shown));
  await page.click('#hangup');
  await page.close();
});

Drawn('over WebSocket: the face drawn from the socket\'s motion stream, its frames placed by the audio deltas\' pts; mid-reply frames as the CPU renderer draws them, and again after a lost GL context', async (ctx) => {
  ctx.t.llm.options = { ...ctx.t.llm.options, reply: LONG_REPLY };
  const page = await openPage(ctx);
  const worst = await compareMidReply(ctx.reference, page, 'websocket, the default face');
  assert.ok(worst.face <= 3 && worst.mouth <= 6, JSON.stringify(worst));
  // The browser takes the GL context away (a GPU reset) and gives it back: the face is drawn again, as before.
  await page.evaluate(`window.__lose = document.getElementById('face').getContext('webgl2').getExtension('WEBGL_lose_context'); window.__lose.loseContext()`);
  await new Promise((r) => setTimeout(r, 300));
  const restoredAt = (await page.evaluate(`(window.__lose.restoreContext(), performance.now())`)) as number;
  await until(page, (x) => x.drawn.filter((d) => d.at > restoredAt).length > 10, 'frames drawn after the context came back');
  const again = await compareDrawn(ctx.reference, page);
  assert.ok(again.face <= 3 && again.mouth <= 6, `after a lost context: ${JSON.stringify(again)}`);
  assert.is((await snapshot(page)).lastError, null);
  await page.close();
});

Drawn('an uploaded photo (off-centre, mirrored): registered by the server, drawn in the page as the CPU renderer draws it', async (ctx) => {
  ctx.t.llm.options = { ...ctx.t.llm.options, reply: LONG_REPLY };
  const photo = await sharp(fs.readFileSync(path.join(ROOT, 'models/assets/faces/default.jpg'))).extract({ left: 140, top: 0, width: 372, height: 512 }).flop().jpeg({ quality: 92 }).toBuffer();
  // The reference: the photo's landmarks found as the server finds them (the same registry and models).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'client-face-'));
  const registry = new FaceRegistry(dir);
  let reference: Reference;
  try {
    reference = await referenceFace(photo, await registry.register(photo));
  } finally {
    await registry.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const page = await openPage(ctx);
  await page.setInputFiles('#face-file', { name: 'me.jpg', mimeType: 'image/jpeg', buffer: photo });
  // The page says when the photo is checked and ready (or why not).
  await page.waitForSelector('#upload-note:text-matches("Uploaded|cannot")', { timeout: 60_000 });
  assert.match((await page.textContent('#upload-note')) ?? '', /Uploaded/);
  const worst = await compareMidReply(reference, page, 'websocket, an upload');
  assert.ok(worst.face <= 3 && worst.mouth <= 6, JSON.stringify(worst));
  // The bounds can fail: the default face's reference against this drawing differs by far more.
  const other = await compareDrawn(ctx.reference, page);
  assert.ok(other.face > 3, `another face's reference is told apart: ${JSON.stringify(other)}`);
  await page.close();
});

Drawn('/playground/face.js is served to any origin and a page of its own imports the renderer', async (ctx) => {
  const res = await fetch(`${ctx.t.url}/playground/face.js`);
  assert.is(res.status, 200);
  assert.is(res.headers.get('access-control-allow-origin'), '*');
  assert.match(res.headers.get('content-type') ?? '', /javascript/);
  // A third party's page: another origin (its own loopback server), importing the module by URL.
  const site = http.createServer((_req, out) => out.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>a page of its own</title><canvas></canvas>'));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  const page = await ctx.chromium.browser.newPage();
  try {
    await page.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
    const moduleUrl = `${ctx.t.url}/playground/face.js`;
    assert.is.not(new URL(page.url()).origin, new URL(moduleUrl).origin);
    const exported = (await page.evaluate(async (url) => Object.keys(await import(url)).sort(), moduleUrl)) as string[];
    for (const name of ['FaceView', 'canDrawFaces', 'createFaceRenderer', 'drawFaceOnCall']) assert.ok(exported.includes(name), `${name} in ${exported.join(', ')}`);
    assert.is(await page.evaluate(async (url) => (await import(url)).canDrawFaces(), moduleUrl), true);
  } finally {
    await page.close();
    await new Promise((resolve) => site.close(resolve));
  }
});

Drawn.run();
