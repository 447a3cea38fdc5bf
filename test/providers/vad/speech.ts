/**
 * Test audio for the VAD tests: speech synthesised by espeak-ng (deterministic for a given text,
 * voice and rate), decoded with decodeWav and resampled to the rate a test needs, plus silence,
 * seeded noise, tones and PCM16 conversion. espeak-ng must be installed; its absence fails the
 * test with a message saying so rather than skipping.
 */
import { Resampler } from '../../../src/providers/vad/resample.js';
import { concatSamples, espeak, toPcm16 } from '../../helpers/speech.js';

/** |x| above this (-40 dBFS) marks where synthesised speech begins and ends. */
const SPEECH_EDGE_LEVEL = 0.01;

export function speak(text: string, rateHz: number): Float32Array {
  const decoded = espeak(text);
  if (decoded.rateHz === rateHz) return decoded.samples;
  const resampler = new Resampler(decoded.rateHz, rateHz);
  // Flush the filter's tail with zeros so the end of the speech comes out.
  const body = resampler.push(decoded.samples);
  const tail = resampler.push(new Float32Array(Math.ceil(decoded.rateHz / 100)));
  const out = new Float32Array(body.length + tail.length);
  out.set(body);
  out.set(tail, body.length);
  return out;
}

/** Sample indices [first, last] where |x| exceeds the speech edge level. */
export function speechEdges(x: Float32Array): { first: number; last: number } {
  let first = -1;
  let last = -1;
  for (let i = 0; i < x.length; i++) {
    if (Math.abs(x[i] ?? 0) > SPEECH_EDGE_LEVEL) {
      if (first < 0) first = i;
      last = i;
    }
  }
  if (first < 0) throw new Error('no speech found in the synthesised audio');
  return { first, last };
}

export const concat = (parts: Float32Array[]): Float32Array => concatSamples(parts);

export function silence(ms: number, rateHz: number): Float32Array {
  return new Float32Array(Math.round((ms * rateHz) / 1000));
}

/** Deterministic white noise (xorshift32), uniform with the given RMS. */
export function noise(ms: number, rateHz: number, rms: number, seed = 12345): Float32Array {
  const out = new Float32Array(Math.round((ms * rateHz) / 1000));
  let s = seed >>> 0 || 1;
  const scale = rms * Math.sqrt(3); // uniform on [-a, a] has RMS a/√3
  for (let i = 0; i < out.length; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = (s / 0xffffffff) * 2 * scale - scale;
  }
  return out;
}

export function tone(hz: number, ms: number, rateHz: number, amplitude: number): Float32Array {
  const out = new Float32Array(Math.round((ms * rateHz) / 1000));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * hz * i) / rateHz);
  return out;
}

export { toPcm16 };

export function rms(x: Float32Array): number {
  let sum = 0;
  for (const v of x) sum += v * v;
  return Math.sqrt(sum / Math.max(1, x.length));
}
