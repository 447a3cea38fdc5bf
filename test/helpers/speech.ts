/** Real speech for tests and benchmarks: espeak-ng (Debian package) spoken to a WAV and decoded. */
import { execFileSync } from 'node:child_process';
import { decodeWav } from '../../src/assets/audio-file.js';
import { Resampler } from '../../src/providers/vad/resample.js';

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
  const { samples, rateHz } = espeak(text, wordsPerMinute);
  const resampler = new Resampler(rateHz, 24000);
  return toPcm16(Float32Array.from([...resampler.push(samples), ...resampler.push(new Float32Array(64))]));
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
