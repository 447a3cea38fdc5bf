/**
 * The largest appends a client may send (minutes of audio in one event) are heard without holding
 * the event loop: G.711 is decoded and the VAD hears the audio a second at a time, with the loop
 * running between seconds, so other sessions' events and /healthz are served meanwhile (the
 * realtime fuzz found 1.5–8 s stalls before). The engine is driven directly with the fakes; the
 * fake VAD counts the frames it scored, so nothing of the append is lost on the way.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PCM_RATE_HZ } from '../../src/audio/pcm.js';
import { engineHarness, type Harness } from '../helpers/engine-harness.js';

const VAD_FRAME_SAMPLES = 512; // FakeVad's frame at 16 kHz

/** Turns of the event loop's timer phase while `work` runs. */
async function loopTurnsDuring(work: () => Promise<void>): Promise<number> {
  let turns = 0;
  const timer = setInterval(() => turns++, 0);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return turns;
}

/** Sends one append of `bytes` and waits until the engine has handled it; the loop's turns meanwhile. */
async function appendAndSettle(h: Harness, bytes: Buffer): Promise<number> {
  return loopTurnsDuring(async () => {
    h.send({ type: 'input_audio_buffer.append', audio: bytes.toString('base64') });
    await h.engine.idle();
  });
}

/** The frames the fake VAD has scored once its queue has drained (it scores in order, asynchronously). */
async function scoredFrames(h: Harness, expected: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  while (h.vad.scored.length < expected - 1 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
  return h.vad.scored.length;
}

/** Quiet noise, under the fake VAD's speech level: heard, never a turn. */
function quietPcm16(seconds: number): Buffer {
  const pcm = new Int16Array(PCM_RATE_HZ * seconds);
  for (let i = 0; i < pcm.length; i++) pcm[i] = ((i * 7919) % 61) - 30;
  return Buffer.from(pcm.buffer);
}

test('a 3-minute PCM append: the loop runs while the VAD hears it, every second of it is heard, and it commits whole', async () => {
  const h = await engineHarness();
  try {
    const seconds = 180;
    const turns = await appendAndSettle(h, quietPcm16(seconds));
    assert.ok(turns >= 10, `the event loop ran ${turns} timer turns while 3 minutes were heard`);
    const expectedFrames = Math.floor((seconds * 16_000) / VAD_FRAME_SAMPLES);
    const scored = await scoredFrames(h, expectedFrames);
    assert.ok(Math.abs(scored - expectedFrames) <= 2, `the VAD scored ${scored} frames of ~${expectedFrames}`);
    h.send({ type: 'input_audio_buffer.commit' });
    const committed = await h.waitFor((e) => e.type === 'input_audio_buffer.committed');
    assert.type(committed.item_id, 'string');
    assert.not.ok(h.events.some((e) => e.type === 'error'), 'no error');
  } finally {
    await h.close();
  }
});

test('a 10-minute G.711 append: decoded a second at a time with the loop running, then heard whole', async () => {
  const h = await engineHarness();
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcmu' } } } } });
    await h.waitFor((e) => e.type === 'session.updated');
    const seconds = 600;
    const turns = await appendAndSettle(h, Buffer.alloc(8_000 * seconds, 0xff)); // μ-law silence
    assert.ok(turns >= 10, `the event loop ran ${turns} timer turns while 10 minutes were decoded and heard`);
    // The input buffer holds 5 minutes at most: this append is refused whole, after nothing was heard.
    const error = h.events.find((e) => e.type === 'error') as { error?: { code?: string } } | undefined;
    assert.is(error?.error?.code, 'input_audio_buffer_full');
    assert.is(h.vad.scored.length, 0, 'a refused append is not heard');
    const fits = await appendAndSettle(h, Buffer.alloc(8_000 * 120, 0xff)); // 2 minutes
    assert.ok(fits >= 1, `the loop ran while 2 minutes of G.711 were decoded (${fits} turns)`);
    const expectedFrames = Math.floor((120 * 16_000) / VAD_FRAME_SAMPLES);
    const scored = await scoredFrames(h, expectedFrames);
    assert.ok(Math.abs(scored - expectedFrames) <= 2, `the VAD scored ${scored} frames of ~${expectedFrames}`);
  } finally {
    await h.close();
  }
});

test.run();
