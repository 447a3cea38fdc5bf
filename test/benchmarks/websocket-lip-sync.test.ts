/**
 * The endpoint benchmark's WebSocket lip sync, its pure pieces (benchmarks/lib/endpoint/
 * websocket-lip-sync.ts, lip-faces.ts, harness/measures/lip-figures.ts) on synthetic replies:
 *  - the audio's start on the pts base is read from the ticks: a first delta from mid-tick to the
 *    tick's end, whole ticks after it, each followed by its tick's image; a frame a tick late does
 *    not move it (it lowers the agreement); no image after any audio delta gives none;
 *  - the speech's RMS for a frame is that of its tick's samples on that base;
 *  - audio deltas decode to their samples; images without pts_ms are left out;
 *  - a method's figures: a mouth that follows the sound has a high r and onsets at 0, with the
 *    audio 400 ms away a low r, and with it 200 ms later onsets 200 ms early;
 *  - the uploads are what their labels say: mirrored and cut 372x512; scaled and turned.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { neutralUpload, OFF_CENTRE, smilingUpload, UPLOAD_SIDE_PX, UPLOAD_TURN_DEG } from '../../benchmarks/lib/endpoint/lip-faces.js';
import { audioStartMs, frameStepMs, replyDeltas, rmsOfFrame, type ReplyDelta } from '../../benchmarks/lib/endpoint/websocket-lip-sync.js';
import { figuresOf } from '../../harness/measures/lip-figures.js';
import { pcmBlocks } from '../../harness/measures/onsets.js';
import type { ServerEvent } from '../../harness/clients/realtime-client.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

const TICK = 960; // samples of a 40 ms tick at 24 kHz
const NO_JPEG = Buffer.alloc(0);
const image = (ptsMs: number): ReplyDelta => ({ kind: 'image', ptsMs, jpeg: NO_JPEG });
const audio = (samples: number): ReplyDelta => ({ kind: 'audio', pcm: new Int16Array(samples) });

/** A reply whose audio starts at pts 1012: images of the ticks 920 and 960 before it, then each tick's audio followed by its image, the last delta cut short. */
function reply(): ReplyDelta[] {
  const out = [image(920), image(960), audio(672), image(1000)];
  for (let tick = 1040; tick < 1400; tick += 40) out.push(audio(TICK), image(tick));
  out.push(audio(300), image(1400));
  return out;
}

test('audioStartMs() reads the audio start from the ticks: the first delta ends where its tick ends', () => {
  assert.equal(audioStartMs(reply()), { startMs: 1012, agreement: 1 });
});

test('audioStartMs() keeps the start when one frame comes a tick late, and says fewer ticks agree', () => {
  const late = reply();
  // The image of tick 1120 comes after the next tick's audio.
  const i = late.findIndex((d) => d.kind === 'image' && d.ptsMs === 1120);
  [late[i], late[i + 1]] = [late[i + 1]!, late[i]!];
  const anchor = audioStartMs(late)!;
  assert.is(anchor.startMs, 1012);
  assert.ok(anchor.agreement < 1 && anchor.agreement > 0.8, String(anchor.agreement));
});

test('audioStartMs() is null when no image follows an audio delta', () => {
  assert.is(audioStartMs([image(0), image(40), audio(TICK), audio(TICK)]), null);
});

test("rmsOfFrame() is the RMS of the samples of a frame's tick, [pts, pts + tick), the audio placed at its start", () => {
  const pcm = new Int16Array(24_000 * 0.3);
  pcm.fill(16384, 2400, 4800); // full scale 0.5 from 100 to 200 ms into the audio
  const rms = rmsOfFrame(pcm, 1000, 40);
  assert.ok(Math.abs(rms(1100) - 0.5) < 1e-6, 'the tick from the sound on');
  assert.ok(Math.abs(rms(1160) - 0.5) < 1e-6);
  assert.is(rms(1060), 0, 'the tick that ends as the sound starts');
  assert.is(rms(1200), 0, 'the tick that starts as the sound ends');
  assert.ok(Math.abs(rms(1080) - 0.5 * Math.SQRT1_2) < 1e-3, 'half the tick loud');
  assert.is(rms(900), 0, 'before the audio: silence');
});

test('frameStepMs() is the median step between image pts', () => {
  assert.is(frameStepMs(reply()), 40);
  assert.is(frameStepMs([image(0), audio(TICK)]), null);
});

test('replyDeltas() decodes the audio deltas and leaves out images without pts_ms', () => {
  const pcm = Int16Array.from([1, -2, 300, -32768]);
  const delta = Buffer.from(pcm.buffer).toString('base64');
  const events = [
    { type: 'response.output_audio.delta', delta },
    { type: 'response.output_image.delta', delta: 'AAAA', pts_ms: 40 },
    { type: 'response.output_image.delta', delta: 'AAAA' },
    { type: 'response.output_audio_transcript.delta', delta: 'Hi' },
  ] as unknown as ServerEvent[];
  const out = replyDeltas(events);
  assert.is(out.length, 2);
  assert.equal(out[0]!.kind === 'audio' && [...out[0]!.pcm], [1, -2, 300, -32768]);
  assert.equal(out[1]!.kind === 'image' && out[1]!.ptsMs, 40);
});

test("figuresOf(): a mouth that follows the sound passes, and fails against audio 400 ms away; its onsets move 200 ms earlier with the audio 200 ms later", () => {
  // Speech in two phrases with a 400 ms pause, on the pts base from 1000 ms.
  const pcm = new Int16Array(24_000 * 2);
  pcm.fill(8000, 0.3 * 24_000, 0.9 * 24_000);
  pcm.fill(8000, 1.3 * 24_000, 1.9 * 24_000);
  const rmsAt = rmsOfFrame(pcm, 1000, 40);
  const times = Array.from({ length: 75 }, (_, i) => 1000 + i * 40);
  const opening = times.map((t) => (rmsAt(t) > 0.1 ? 0.05 : 0));
  const f = figuresOf(times, opening, { rmsAt, blocks: pcmBlocks(pcm, 24_000, 1000, 10), blockMs: 10, from: 1000 }, 'test');
  assert.ok(f.r > 0.9 && Math.abs(f.lag_ms) <= 20, `r ${f.r} at ${f.lag_ms}`);
  assert.is(f.closed_share, 1);
  assert.is(f.open_share, 1);
  assert.ok(f.r_audio_shifted_400ms < 0.5 && f.r_audio_earlier_400ms < 0.5, `${f.r_audio_shifted_400ms}, ${f.r_audio_earlier_400ms}`);
  assert.equal(f.onsets.firstSound.length, 1);
  assert.equal(f.onsets.afterPause.length, 1);
  for (const ms of [...f.onsets.firstSound, ...f.onsets.afterPause]) assert.ok(Math.abs(ms) <= 20, String(ms));
  for (const ms of [...f.onsets_audio_later_200ms.firstSound, ...f.onsets_audio_later_200ms.afterPause]) assert.ok(ms <= -180 && ms >= -220, String(ms));
});

/** Mean absolute difference of two images' grey pixels at one size. */
async function difference(a: Buffer, b: Buffer): Promise<number> {
  const grey = (x: Buffer) => sharp(x).resize(93, 128, { fit: 'fill' }).greyscale().raw().toBuffer();
  const [pa, pb] = await Promise.all([grey(a), grey(b)]);
  return pa.reduce((sum, v, i) => sum + Math.abs(v - pb[i]!), 0) / pa.length;
}

test('the smiling upload is default.jpg mirrored and cut 372x512 from x=140', async () => {
  const original = fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg'));
  const upload = await smilingUpload(original);
  const meta = await sharp(upload).metadata();
  assert.equal([meta.width, meta.height], [OFF_CENTRE.width, OFF_CENTRE.height]);
  const mirrored = await sharp(original).flop().extract(OFF_CENTRE).png().toBuffer();
  const unmirrored = await sharp(original).extract(OFF_CENTRE).png().toBuffer();
  const [same, other] = [await difference(upload, mirrored), await difference(upload, unmirrored)];
  assert.ok(same < 3 && other > 4 * same, `against the mirrored cut ${same.toFixed(1)}, the unmirrored ${other.toFixed(1)}`);
});

test('the neutral upload is face1.jpg at another size, turned', async () => {
  const original = fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/face1.jpg'));
  const meta = await sharp(await neutralUpload(original)).metadata();
  const side = Math.round(UPLOAD_SIDE_PX * (Math.cos((UPLOAD_TURN_DEG * Math.PI) / 180) + Math.sin((UPLOAD_TURN_DEG * Math.PI) / 180)));
  assert.ok(Math.abs(meta.width! - side) <= 2 && Math.abs(meta.height! - side) <= 2, `${meta.width}x${meta.height}, ${side} expected from a turned ${UPLOAD_SIDE_PX} px square`);
});

test.run();
