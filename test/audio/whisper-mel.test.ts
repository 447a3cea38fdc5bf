/**
 * Whisper log-mel features (src/audio/whisper-mel.ts) against the reference: the values below
 * were computed once by the numpy implementation Smart Turn ships with (pipecat-ai 1.14.0,
 * `compute_whisper_log_mel_features(x, do_normalize=True)`, itself checked against Hugging Face's
 * WhisperFeatureExtractor) on the same deterministic signal: 1 s of silence, then a chirp, a
 * 1200 Hz tone and LCG noise, 8 s at 16 kHz.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { logMelSpectrogram, melFilters } from '../../src/audio/whisper-mel.js';

function referenceSignal(): Float32Array {
  const n = 128000;
  const x = new Float32Array(n);
  let seed = 12345;
  for (let i = 0; i < n; i++) {
    seed = (seed * 69069 + 1) % 4294967296;
    const noise = seed / 4294967296 - 0.5;
    const t = i / 16000;
    x[i] = i < 16000 ? 0 : 0.3 * Math.sin(2 * Math.PI * (200 * t + 150 * t * t)) + 0.1 * Math.sin(2 * Math.PI * 1200 * t) + 0.05 * noise;
  }
  return x;
}

/** [mel, frame, value] from the reference. */
const REFERENCE: Array<[number, number, number]> = [
  [0, 0, -0.30335715413093567], [5, 50, -0.30335715413093567], [10, 100, 1.3285620212554932],
  [20, 200, 1.6315757036209106], [40, 400, 0.5964603424072266], [60, 600, 0.573178768157959],
  [79, 799, 0.5926001667976379], [30, 333, 1.5812406539916992], [70, 777, 0.5308566093444824],
  [1, 1, -0.30335715413093567],
];

test('logMelSpectrogram() matches the reference features (80 x 800, normalised) to float32 precision', () => {
  const f = logMelSpectrogram(referenceSignal(), { frames: 800, nMels: 80, normalize: true });
  assert.is(f.length, 80 * 800);
  for (const [mel, frame, value] of REFERENCE) {
    const got = f[mel * 800 + frame]!;
    assert.ok(Math.abs(got - value) < 1e-5, `mel ${mel} frame ${frame}: ${got} vs ${value}`);
  }
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const v of f) {
    sum += v;
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  assert.ok(Math.abs(sum / f.length - 0.5007299205409013) < 1e-6);
  assert.ok(Math.abs(min - -0.30335715413093567) < 1e-6);
  assert.ok(Math.abs(max - 1.6966428756713867) < 1e-6);
});

test('logMelSpectrogram() refuses a window of the wrong length', () => {
  assert.throws(() => logMelSpectrogram(new Float32Array(1000), { frames: 800 }), /800 frames need 128000 samples/);
});

test('melFilters() rows are contiguous triangles (the same bank the ggml converter writes)', () => {
  const f = melFilters(80);
  assert.is(f.length, 80 * 201);
  for (let m = 0; m < 80; m++) {
    const row = f.subarray(m * 201, (m + 1) * 201);
    const nonzero = [...row.keys()].filter((k) => row[k]! > 0);
    // Contiguous support.
    assert.is(nonzero.at(-1)! - nonzero[0]! + 1, nonzero.length, `row ${m}`);
  }
});

test.run();
