/**
 * ITU-T G.711 companding, both laws, between PCM16 samples and 8-bit codes: μ-law (North America,
 * Japan; the realtime API's `audio/pcmu`, Twilio's default) and A-law (elsewhere; `audio/pcma`).
 * Pure sample-by-sample functions with no state and no notion of rate: G.711 audio is 8 kHz, and
 * getting there from the realtime API's 24 kHz is `wire-format.ts`'s work, not this module's.
 *
 * Bit-exact with ITU-T G.191's reference `g711.c` (the standard's software tool library), which
 * takes a negative sample's magnitude as its one's complement (−x − 1), so that x and −x − 1 get
 * the same code but for the sign bit. μ-law: magnitude clipped to 32635, bias 0x84 added, segment
 * from the highest set bit, four mantissa bits, all bits inverted. A-law: 12-bit magnitude,
 * segments, the even bits inverted (XOR 0x55). (Sun's `g711.c`, as in SoX and Python's `audioop`,
 * differs for μ-law only: negative samples at step edges get the next code away from zero.)
 * Decoding is by 256-entry tables; each code decodes to the middle of its step, so the
 * round-trip error is at most half a step: 4 for small μ-law samples, 8 for small A-law ones,
 * about 1/32 of the magnitude above that (plus the clipping of |x| > 32635 under μ-law).
 * μ-law has two codes for zero (0xFF, 0x7F); A-law has none (0xD5 decodes to 8).
 */

/** G.711 is defined at 8 kHz: narrowband telephony. */
export const G711_RATE_HZ = 8000;

/** μ-law: the bias added to the magnitude (33 in the standard's 14-bit units, ×4 for 16 bits). */
const ULAW_BIAS = 0x84;
/** μ-law: the largest magnitude encoded, so that magnitude + bias stays below 2^15. */
const ULAW_CLIP = 32635;
/** A-law: the even bits are inverted on the line (G.711's alternate-digit inversion). */
const ALAW_XOR = 0x55;

/** The μ-law code of one PCM16 sample (any number; clipped to the 16-bit range first). */
export function linearToUlaw(sample: number): number {
  const s = Math.max(-32768, Math.min(32767, sample | 0));
  const sign = s < 0 ? 0x80 : 0;
  let x = s < 0 ? ~s : s; // one's complement, as G.191
  if (x > ULAW_CLIP) x = ULAW_CLIP;
  x += ULAW_BIAS;
  // x is in [0x84, 0x7FFF]: the segment is the position of the highest set bit above bit 7.
  const exponent = 31 - Math.clz32(x >> 7);
  const mantissa = (x >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

/** The PCM16 sample a μ-law code stands for (the middle of its step). */
export function ulawToLinear(code: number): number {
  const u = ~code & 0xff;
  const exponent = (u >> 4) & 0x07;
  const magnitude = ((((u & 0x0f) << 3) + ULAW_BIAS) << exponent) - ULAW_BIAS;
  return (u & 0x80) !== 0 ? -magnitude : magnitude;
}

/** The A-law code of one PCM16 sample (any number; clipped to the 16-bit range first). */
export function linearToAlaw(sample: number): number {
  const x = Math.max(-32768, Math.min(32767, sample | 0));
  // Negative samples by one's complement (−x − 1), as G.191 does: the two halves mirror exactly.
  const magnitude13 = (x >= 0 ? x : ~x) >> 3;
  const mask = x >= 0 ? 0x80 ^ ALAW_XOR : ALAW_XOR;
  if (magnitude13 < 0x20) return ((magnitude13 >> 1) & 0x0f) ^ mask;
  const segment = 31 - Math.clz32(magnitude13) - 4; // 1 for 0x20..0x3F … 7 for 0x800..0xFFF
  return ((segment << 4) | ((magnitude13 >> segment) & 0x0f)) ^ mask;
}

/** The PCM16 sample an A-law code stands for (the middle of its step). */
export function alawToLinear(code: number): number {
  const a = (code & 0xff) ^ ALAW_XOR;
  const segment = (a >> 4) & 0x07;
  let magnitude = ((a & 0x0f) << 4) + 8;
  if (segment > 0) magnitude = (magnitude + 0x100) << (segment - 1);
  return (a & 0x80) !== 0 ? magnitude : -magnitude;
}

function decodeTable(toLinear: (code: number) => number): Int16Array {
  const table = new Int16Array(256);
  for (let code = 0; code < 256; code++) table[code] = toLinear(code);
  return table;
}

/** code → PCM16, both laws: 256 entries each, so decoding is one lookup per sample. */
export const ULAW_DECODE_TABLE: Readonly<Int16Array> = decodeTable(ulawToLinear);
export const ALAW_DECODE_TABLE: Readonly<Int16Array> = decodeTable(alawToLinear);

/** PCM16 samples to μ-law codes, one byte per sample; into `out` when given (same length). */
export function encodeUlaw(pcm: Int16Array, out: Uint8Array = new Uint8Array(pcm.length)): Uint8Array {
  checkLengths(pcm.length, out.length);
  for (let i = 0; i < pcm.length; i++) out[i] = linearToUlaw(pcm[i] ?? 0);
  return out;
}

/** μ-law codes to PCM16 samples; into `out` when given (same length). */
export function decodeUlaw(codes: Uint8Array, out: Int16Array = new Int16Array(codes.length)): Int16Array {
  checkLengths(codes.length, out.length);
  for (let i = 0; i < codes.length; i++) out[i] = ULAW_DECODE_TABLE[codes[i] ?? 0xff] ?? 0;
  return out;
}

/** PCM16 samples to A-law codes, one byte per sample; into `out` when given (same length). */
export function encodeAlaw(pcm: Int16Array, out: Uint8Array = new Uint8Array(pcm.length)): Uint8Array {
  checkLengths(pcm.length, out.length);
  for (let i = 0; i < pcm.length; i++) out[i] = linearToAlaw(pcm[i] ?? 0);
  return out;
}

/** A-law codes to PCM16 samples; into `out` when given (same length). */
export function decodeAlaw(codes: Uint8Array, out: Int16Array = new Int16Array(codes.length)): Int16Array {
  checkLengths(codes.length, out.length);
  for (let i = 0; i < codes.length; i++) out[i] = ALAW_DECODE_TABLE[codes[i] ?? 0xd5] ?? 0;
  return out;
}

function checkLengths(input: number, output: number): void {
  if (input !== output) throw new RangeError(`G.711: output holds ${output} samples for ${input} input samples`);
}
