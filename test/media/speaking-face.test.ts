/**
 * The speaking face reads the Piper voice's phoneme marks through the media session: one Piper
 * chunk of a question is pushed to two manual sessions alike in everything but the names, marked
 * (`ˈeɪ`, `ŋ?`) and bare, and their raw frames compared. Skipped when the Piper model is not
 * fetched into models/weights/tts/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaSession, type MediaEvent } from '../../src/media/media-session.js';
import type { PhonemeTiming, SpeechChunk } from '../../src/providers/tts/base.js';
import { piperVoice } from '../../src/providers/tts/piper.js';
import { standardMediaConfig } from '../helpers/media.js';

const MODEL = path.resolve(import.meta.dirname, '../../models/weights/tts/en_US-joe-medium.onnx');
const FILES = { model: MODEL, config: `${MODEL}.json` };
const SIZE = 512;
/** The standard config's framing puts the eyes 40 % from the top: above them are the brows. */
const EYE_ROW = Math.round(0.4 * SIZE);
/** The middle of the frame: below it the nose, the cheeks and the mouth. */
const MID_ROW = SIZE / 2;
/** The most the brows' feathered edge may change a pixel over the upper lids (1–2 measured). */
const LID_LEVELS = 4;
/** Silence before the speech, and frames enough for it and the brows to settle after. */
const LEAD_FRAMES = 5;
const FRAMES = 60;

/** The Y planes of the frames a manual session renders with `chunk` pushed under `phonemes`. */
async function render(chunk: SpeechChunk, phonemes: PhonemeTiming[]): Promise<Buffer[]> {
  const session = new MediaSession(await standardMediaConfig({ i420: true }));
  const frames: Buffer[] = [];
  session.on('event', (e: MediaEvent) => {
    if (e.type === 'i420') frames.push(e.data.subarray(0, SIZE * SIZE));
  });
  session.advance(LEAD_FRAMES);
  session.pushAudio(chunk.pcm, chunk.sampleRateHz, { phonemes });
  session.advance(FRAMES);
  const deadline = Date.now() + 5_000;
  while (session.stats().eventsQueued > 0 && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  await session.close();
  return frames;
}

if (!fs.existsSync(FILES.model) || !fs.existsSync(FILES.config)) {
  console.log(`speaking-face.test.ts: skipping: ${FILES.model} is not fetched (npm run setup:models)`);
  test.skip('the speaking face on Piper marks (model not fetched)', () => undefined);
} else {
  test('a Piper question pushed with its marks moves the brows, and only the brows, away from the same question with bare names', async () => {
    const voice = await piperVoice('joe', FILES, 2);
    const chunks: SpeechChunk[] = [];
    for await (const c of voice.speak('Is it raining?', { speed: 1 })) chunks.push(c);
    assert.is(chunks.length, 1);
    const chunk = chunks[0]!;
    const names = chunk.phonemes.map((p) => p.phoneme).join(' ');
    assert.ok(/ˈ/.test(names) && /\?/.test(names), names);
    const bare = chunk.phonemes.map((p) => ({ ...p, phoneme: p.phoneme.replace(/^[ˈˌ]|[?.!,;]$/g, '') }));
    const [marked, plain] = [await render(chunk, chunk.phonemes), await render(chunk, bare)];
    assert.is(marked.length, LEAD_FRAMES + FRAMES);
    assert.is(plain.length, marked.length);
    // Above the eyes the brows lift. Below the middle of the frame (the nose, the cheeks, the
    // mouth and the jaw) everything is drawn from the visemes and the audio, which the marks leave
    // as they were: not one level changes there. Between the two lie the upper lids, where the
    // brow bases' feathered edge fades out: a level or two, by how high the brows lift on this
    // synthesis (Piper's durations vary by a frame from run to run, and the lift with them).
    let browPixels = 0;
    let lids = 0;
    let lowerFace = 0;
    marked.forEach((frame, f) => {
      for (let i = 0; i < frame.length; i++) {
        const d = Math.abs(frame[i]! - plain[f]![i]!);
        if (i < EYE_ROW * SIZE) browPixels += d > 2 ? 1 : 0;
        else if (i < MID_ROW * SIZE) lids = Math.max(lids, d);
        else lowerFace = Math.max(lowerFace, d);
      }
    });
    assert.ok(browPixels > 10_000, `${browPixels} pixels above the eyes changed by over 2 levels`);
    assert.ok(lids <= LID_LEVELS, `a pixel between the eyes and the frame's middle changed by ${lids} levels`);
    assert.is(lowerFace, 0, `a pixel below the frame's middle changed by ${lowerFace} levels`);
  });
}

test.run();
