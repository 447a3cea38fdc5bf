/**
 * Test audio for tests and benchmarks: real speech by espeak-ng (Debian package; deterministic for
 * a given text, voice and rate) spoken to a WAV, decoded and resampled to the rate a test needs,
 * plus silence, seeded noise, tones, PCM16 conversion and concatenation. espeak-ng's absence fails
 * the test with a message saying so rather than skipping.
 */
import { execFileSync } from 'node:child_process';
import { decodeWav } from '../../src/assets/audio-file.js';
import { PCM_RATE_HZ } from '../../src/audio/pcm.js';
import { Resampler } from '../../src/audio/resample.js';

/** espeak-ng's default speaking rate, words per minute: a natural conversational pace. */
export const ESPEAK_DEFAULT_WPM = 175;

/** `text` spoken by espeak-ng (en-us) as mono samples -1..1 at espeak's own rate (22.05 kHz). */
export function espeak(text: string, wordsPerMinute = ESPEAK_DEFAULT_WPM): { samples: Float32Array; rateHz: number } {
  let wav: Buffer;
  try {
    wav = execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', String(wordsPerMinute), text], {
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    throw new Error(`espeak-ng is needed to make test speech (apt-get install espeak-ng): ${String(err)}`);
  }
  const decoded = decodeWav(wav);
  return { samples: decoded.samples, rateHz: decoded.sampleRate };
}

/** -1..1 floats to signed 16-bit, clipped. */
export function toPcm16(x: Float32Array): Int16Array {
  const out = new Int16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round((x[i] ?? 0) * 32767)));
  return out;
}

/** `text` spoken by espeak-ng as PCM16 mono at 24 kHz: the realtime API's input format. */
export function speechPcm24k(text: string, wordsPerMinute = ESPEAK_DEFAULT_WPM): Int16Array {
  return toPcm16(speak(text, PCM_RATE_HZ, wordsPerMinute));
}

/** Sample arrays one after another, as one. */
export function concatSamples(parts: Int16Array[]): Int16Array;
export function concatSamples(parts: Float32Array[]): Float32Array;
export function concatSamples(parts: Int16Array[] | Float32Array[]): Int16Array | Float32Array {
  const length = parts.reduce((n: number, p: Int16Array | Float32Array) => n + p.length, 0);
  const out = parts[0] instanceof Float32Array ? new Float32Array(length) : new Int16Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** |x| above this (-40 dBFS) marks where synthesised speech begins and ends. */
const SPEECH_EDGE_LEVEL = 0.01;

/** `text` spoken by espeak-ng as samples -1..1 at `rateHz` (resampled; the filter's tail flushed). */
export function speak(text: string, rateHz: number, wordsPerMinute = ESPEAK_DEFAULT_WPM): Float32Array {
  const decoded = espeak(text, wordsPerMinute);
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

export function rms(x: Float32Array): number {
  let sum = 0;
  for (const v of x) sum += v * v;
  return Math.sqrt(sum / Math.max(1, x.length));
}
