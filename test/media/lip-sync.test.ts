/**
 * Lip sync measured on pixels: a spoken sentence with pauses goes through a real media session
 * (the astronaut portrait, a still head so only the mouth moves), the JPEG frames that come out are
 * decoded, and the mouth opening is measured in each as the dark (cavity) area inside the mouth
 * region. It must follow the energy of the audio that was played with it: Pearson r >= 0.6 at the
 * best lag, best lag within +-40 ms (one frame), and the mouth closed in the silent stretches.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { faceInputFromImage } from '../../src/media/face-input.js';
import { MediaSession, type MediaEvent } from '../../src/media/media-session.js';
import { REPO_ROOT } from '../helpers/server.js';
import { concatSamples, espeak, toPcm16 } from '../helpers/speech.js';

const FPS = 25;
const FRAME_NS = 1e9 / FPS;
const SIZE = 512;
const OUT_RATE_HZ = 24_000;
const SILENCE_S = [0.6, 0.8, 0.7]; // before, between and after the two phrases
/** Frames after speech ends that may still be closing (the lips release over ~100-150 ms). */
const RELEASE_FRAMES = 5;
/** Frames before speech is audible in which the lips may already part (onsets start quietly). */
const ONSET_FRAMES = 2;
/** Pixels this dark (luma) inside the mouth box are mouth cavity, not lips, skin or teeth. */
const CAVITY_LUMA = 70;

function speak(text: string): { samples: Int16Array; rate: number } {
  const audio = espeak(text, 160);
  return { samples: toPcm16(audio.samples), rate: audio.rateHz };
}

function pearson(a: number[], b: number[]): number {
  const n = a.length;
  const ma = a.reduce((s, x) => s + x, 0) / n;
  const mb = b.reduce((s, x) => s + x, 0) / n;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < n; i++) {
    num += (a[i]! - ma) * (b[i]! - mb);
    da += (a[i]! - ma) ** 2;
    db += (b[i]! - mb) ** 2;
  }
  return num / Math.sqrt(da * db);
}

test('the mouth opening of rendered frames follows the speech energy, and is closed in silence', async () => {
  const landmarks = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8'));
  const face = await faceInputFromImage(fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg')), landmarks);
  const one = speak('Hello there, my friend.');
  const two = speak('How are you doing today? Shall we begin?');
  assert.is(one.rate, two.rate);
  const rate = one.rate;
  const silence = (s: number) => new Int16Array(Math.round(s * rate));
  const speech = concatSamples([silence(SILENCE_S[0]!), one.samples, silence(SILENCE_S[1]!), two.samples, silence(SILENCE_S[2]!)]);

  const events: MediaEvent[] = [];
  const session = new MediaSession({
    width: SIZE,
    height: SIZE,
    fps: FPS,
    outputs: { jpeg: true, pcm: true },
    jpegQuality: 90,
    pacing: 'manual',
    pipelinesDir: path.join(REPO_ROOT, 'pipelines'),
    seed: 1,
    face,
    // A still head (one rest frame, no eye data): only the mouth and eyelids move.
    motion: { fps: FPS, frames: Float32Array.from([0, 0, 0, 0, 0, 1, -1, -1]) },
  });
  session.on('event', (e) => events.push(e));
  const placed = session.pushAudio(speech, rate, { ptsNs: 0 });
  assert.is(placed.startPtsNs, 0);
  const frames = Math.ceil(placed.endPtsNs / FRAME_NS) + 2;
  session.advance(frames);
  await session.close();

  // Energy of what was played in each frame's 40 ms, from the PCM the session emitted.
  const energy = new Array<number>(frames).fill(0);
  const counts = new Array<number>(frames).fill(0);
  for (const e of events) {
    if (e.type !== 'pcm') continue;
    const pcm = new Int16Array(e.data.buffer, e.data.byteOffset, e.data.length / 2);
    pcm.forEach((s, i) => {
      const frame = Math.floor((e.ptsNs + (i * 1e9) / OUT_RATE_HZ) / FRAME_NS);
      if (frame < frames) {
        energy[frame]! += (s / 32768) ** 2;
        counts[frame]! += 1;
      }
    });
  }
  const rms = energy.map((e, i) => Math.sqrt(e / Math.max(1, counts[i]!)));

  // Mouth box from the landmarks (the still head keeps it in place), extended down for the jaw.
  const lm = landmarks.landmarks as [number, number, number][];
  const xs = [61, 291].map((i) => lm[i]![0]);
  const top = lm[0]![1];
  const bottom = lm[17]![1];
  const mouthHeight = bottom - top;
  const box = {
    left: Math.floor(Math.min(...xs) - 4),
    top: Math.floor(top - 2),
    width: Math.ceil(Math.max(...xs) - Math.min(...xs) + 8),
    height: Math.ceil(mouthHeight * 2.2),
  };
  const darkPixels = async (image: Uint8Array) => {
    const data = await sharp(image).extract(box).greyscale().raw().toBuffer();
    let dark = 0;
    for (const v of data) if (v < CAVITY_LUMA) dark++;
    return dark;
  };
  // The photo's own dark pixels there (her smile has dark mouth corners) are the closed-mouth level.
  const rest = await darkPixels(fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg')));
  const opening = new Array<number>(frames).fill(Number.NaN);
  for (const e of events) {
    if (e.type === 'jpeg') opening[e.frameIndex] = Math.max(0, (await darkPixels(e.data)) - rest);
  }
  assert.ok(opening.every((o) => !Number.isNaN(o)), 'every frame came out as a JPEG');

  // Correlation at lags of -2..+2 frames (positive: the mouth trails the sound).
  let best = { lag: 0, r: -1 };
  for (let lag = -2; lag <= 2; lag++) {
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < frames; i++) {
      const j = i + lag;
      if (j >= 0 && j < frames) {
        a.push(rms[i]!);
        b.push(opening[j]!);
      }
    }
    const r = pearson(a, b);
    if (r > best.r) best = { lag, r };
  }
  console.log(`    lip sync: r = ${best.r.toFixed(3)} at lag ${best.lag * 40} ms over ${frames} frames`);
  assert.ok(best.r >= 0.6, `Pearson r ${best.r.toFixed(3)} < 0.6`);
  assert.ok(Math.abs(best.lag) <= 1, `best lag ${best.lag * 40} ms is outside +-40 ms`);

  // Silent stretches (away from speech by more than the onset and release times): mouth closed, as at rest.
  const peak = Math.max(...opening);
  const speaking = rms.map((r) => r > 0.01);
  for (let i = 0; i < frames; i++) {
    const nearSpeech = speaking.slice(Math.max(0, i - RELEASE_FRAMES), i + 1 + ONSET_FRAMES).some(Boolean);
    if (!nearSpeech) assert.ok(opening[i]! <= peak * 0.05, `frame ${i} is silent but the mouth is open (${opening[i]} of ${peak})`);
  }
  assert.ok(peak > 50, `the mouth opened visibly (peak cavity ${peak} px)`);
});

test.run();
