/**
 * Tests for the streaming polyphase resampler (src/audio/resample.ts) at the VAD's
 * 24 → 16 kHz ratio: passband gain, anti-alias stopband, streaming = one-shot, output count.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Resampler } from '../../src/audio/resample.js';
import { rms, tone } from '../../harness/measures/speech.js';

/** Filter transient skipped before measuring: 48 taps per phase ≈ 2 ms; 10 ms is ample. */
const SETTLE_MS = 10;

function run(input: Float32Array, chunk: number): Float32Array {
  const r = new Resampler(24000, 16000);
  const parts: Float32Array[] = [];
  for (let i = 0; i < input.length; i += chunk) parts.push(r.push(input.subarray(i, i + chunk)));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Amplitude of the `hz` component (projection over the given samples). */
function amplitudeAt(x: Float32Array, hz: number, rateHz: number): number {
  let re = 0;
  let im = 0;
  for (let n = 0; n < x.length; n++) {
    re += (x[n] ?? 0) * Math.cos((2 * Math.PI * hz * n) / rateHz);
    im += (x[n] ?? 0) * Math.sin((2 * Math.PI * hz * n) / rateHz);
  }
  return (2 / x.length) * Math.hypot(re, im);
}

test('Resampler(24000, 16000) keeps a 1 kHz tone within ±0.5 dB', () => {
  const out = run(tone(1000, 1000, 24000, 0.5), 480);
  const steady = out.subarray(SETTLE_MS * 16, SETTLE_MS * 16 + 16000 / 2); // 500 ms = 500 whole cycles
  const gainDb = 20 * Math.log10(amplitudeAt(steady, 1000, 16000) / 0.5);
  assert.ok(Math.abs(gainDb) <= 0.5, `1 kHz gain ${gainDb.toFixed(3)} dB`);
});

test('Resampler(24000, 16000) attenuates a 10 kHz tone (which would alias to 6 kHz) by at least 40 dB', () => {
  const input = tone(10000, 1000, 24000, 0.5);
  const out = run(input, 480);
  const steady = out.subarray(SETTLE_MS * 16);
  const attenuationDb = 20 * Math.log10(rms(input) / rms(steady));
  assert.ok(attenuationDb >= 40, `10 kHz attenuation ${attenuationDb.toFixed(1)} dB`);
});

test('Resampler output does not depend on how the input is chunked, and has 2/3 as many samples', () => {
  const input = tone(440, 500, 24000, 0.3);
  const whole = run(input, input.length);
  for (const chunk of [1, 7, 480, 1001]) {
    const streamed = run(input, chunk);
    assert.is(streamed.length, whole.length, `chunk ${chunk}`);
    for (let i = 0; i < whole.length; i++) assert.ok(Math.abs((streamed[i] ?? 0) - (whole[i] ?? 0)) < 1e-6, `chunk ${chunk} sample ${i}`);
  }
  assert.is(whole.length, (input.length * 2) / 3);
});

test('Resampler.reset() starts a new stream', () => {
  const r = new Resampler(24000, 16000);
  const input = tone(440, 100, 24000, 0.3);
  const first = r.push(input);
  r.reset();
  const second = r.push(input);
  assert.equal(Array.from(second), Array.from(first));
});

test.run();
