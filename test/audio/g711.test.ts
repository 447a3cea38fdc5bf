/**
 * Tests for G.711 companding (src/audio/g711.ts): known codes of both laws (the standard's edge
 * values, and samples checked against Python's `audioop`, i.e. Sun's g711.c, where it agrees with
 * G.191), decode of every code, symmetry, the round-trip error over the whole 16-bit range,
 * monotonicity, and the array forms.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  ALAW_DECODE_TABLE,
  alawToLinear,
  decodeAlaw,
  decodeUlaw,
  encodeAlaw,
  encodeUlaw,
  linearToAlaw,
  linearToUlaw,
  ULAW_DECODE_TABLE,
  ulawToLinear,
} from '../../src/audio/g711.js';

const hex = (code: number): string => `0x${code.toString(16).padStart(2, '0')}`;

function eachSample(check: (x: number) => void): void {
  for (let x = -32768; x <= 32767; x++) check(x);
}

test('linearToUlaw() gives the standard codes for zero, ±1 and full scale', () => {
  assert.is(hex(linearToUlaw(0)), '0xff');
  assert.is(hex(linearToUlaw(-1)), '0x7f'); // one's complement: −1 is the mirror of 0
  assert.is(hex(linearToUlaw(32767)), '0x80');
  assert.is(hex(linearToUlaw(-32768)), '0x00');
  assert.is(hex(linearToUlaw(32635)), '0x80'); // the clip level
  assert.is(hex(linearToUlaw(100_000)), '0x80'); // beyond 16 bits: clipped
  assert.is(hex(linearToUlaw(-100_000)), '0x00');
});

test('linearToUlaw() matches the reference codes of positive samples', () => {
  // Python audioop.lin2ulaw (Sun g711.c), which equals G.191 for x ≥ 0.
  const reference: [number, number][] = [
    [1, 0xff], [3, 0xff], [4, 0xfe], [8, 0xfe], [15, 0xfd], [16, 0xfd], [31, 0xfb], [100, 0xf2], [255, 0xe7],
    [1000, 0xce], [1234, 0xca], [4095, 0xaf], [5000, 0xab], [8159, 0x9f], [12345, 0x97], [20000, 0x8c], [30000, 0x82],
  ];
  for (const [x, code] of reference) assert.is(hex(linearToUlaw(x)), hex(code), `μ-law of ${x}`);
});

test('linearToAlaw() gives the standard codes for zero, ±1 and full scale, and matches the reference', () => {
  assert.is(hex(linearToAlaw(0)), '0xd5');
  assert.is(hex(linearToAlaw(-1)), '0x55');
  assert.is(hex(linearToAlaw(32767)), '0xaa');
  assert.is(hex(linearToAlaw(-32768)), '0x2a');
  assert.is(hex(linearToAlaw(100_000)), '0xaa');
  // Python audioop.lin2alaw (Sun g711.c = G.191 for A-law), both signs.
  const reference: [number, number][] = [
    [15, 0xd5], [16, 0xd4], [32, 0xd7], [100, 0xd3], [255, 0xda], [256, 0xc5], [1000, 0xfa], [1234, 0xe6], [4095, 0x9a],
    [4096, 0x85], [5000, 0x86], [8159, 0x8a], [12345, 0xbd], [20000, 0xa6], [30000, 0xa8],
    [-16, 0x55], [-31, 0x54], [-100, 0x53], [-256, 0x5a], [-1000, 0x7a], [-1234, 0x66], [-4096, 0x1a], [-5000, 0x06],
    [-12345, 0x3d], [-20000, 0x26], [-30000, 0x28],
  ];
  for (const [x, code] of reference) assert.is(hex(linearToAlaw(x)), hex(code), `A-law of ${x}`);
});

test('ulawToLinear() and alawToLinear() decode to the middle of each step', () => {
  assert.is(ulawToLinear(0xff), 0);
  assert.is(ulawToLinear(0x7f), 0);
  assert.is(ulawToLinear(0xfe), 8);
  assert.is(ulawToLinear(0x80), 32124);
  assert.is(ulawToLinear(0x00), -32124);
  assert.is(ulawToLinear(0xce), 988);
  assert.is(alawToLinear(0xd5), 8);
  assert.is(alawToLinear(0x55), -8);
  assert.is(alawToLinear(0xaa), 32256);
  assert.is(alawToLinear(0x2a), -32256);
  assert.is(alawToLinear(0xfa), 1008);
  for (let code = 0; code < 256; code++) {
    assert.is(ULAW_DECODE_TABLE[code], ulawToLinear(code), `μ-law table ${hex(code)}`);
    assert.is(ALAW_DECODE_TABLE[code], alawToLinear(code), `A-law table ${hex(code)}`);
  }
});

test('every code re-encodes to itself after decoding (μ-law 0x7f, negative zero, becomes 0xff)', () => {
  for (let code = 0; code < 256; code++) {
    assert.is(hex(linearToUlaw(ulawToLinear(code))), hex(code === 0x7f ? 0xff : code), `μ-law ${hex(code)}`);
    assert.is(hex(linearToAlaw(alawToLinear(code))), hex(code), `A-law ${hex(code)}`);
  }
});

test('x and −x − 1 encode alike but for the sign bit, both laws, over the whole range', () => {
  for (let x = 0; x <= 32767; x++) {
    if (linearToUlaw(~x) !== (linearToUlaw(x) ^ 0x80)) assert.unreachable(`μ-law: ${x} and ${~x}`);
    if (linearToAlaw(~x) !== (linearToAlaw(x) ^ 0x80)) assert.unreachable(`A-law: ${x} and ${~x}`);
  }
});

test('μ-law round trip is within half a step of every 16-bit sample: ≤ (|x| + 132) / 32', () => {
  let worstSmall = 0;
  eachSample((x) => {
    const error = Math.abs(ulawToLinear(linearToUlaw(x)) - x);
    if (error > (Math.abs(x) + 132) / 32) assert.unreachable(`μ-law ${x}: error ${error}`);
    if (Math.abs(x) < 120) worstSmall = Math.max(worstSmall, error); // the first segment: steps of 8
  });
  assert.is(worstSmall, 4);
});

test('A-law round trip is within half a step of every 16-bit sample: ≤ max(8, |x| / 32)', () => {
  let worstSmall = 0;
  eachSample((x) => {
    const error = Math.abs(alawToLinear(linearToAlaw(x)) - x);
    if (error > Math.max(8, Math.abs(x) / 32)) assert.unreachable(`A-law ${x}: error ${error}`);
    if (Math.abs(x) < 256) worstSmall = Math.max(worstSmall, error); // the first two segments: steps of 16
  });
  assert.is(worstSmall, 8);
});

test('decode(encode(x)) never decreases as x increases, both laws', () => {
  let previousU = -Infinity;
  let previousA = -Infinity;
  eachSample((x) => {
    const u = ulawToLinear(linearToUlaw(x));
    const a = alawToLinear(linearToAlaw(x));
    if (u < previousU) assert.unreachable(`μ-law falls at ${x}`);
    if (a < previousA) assert.unreachable(`A-law falls at ${x}`);
    previousU = u;
    previousA = a;
  });
  // Every level is reached: 255 distinct μ-law values (two zeros), 256 A-law ones.
  const levels = (toLinear: (c: number) => number, toCode: (x: number) => number): number => {
    const seen = new Set<number>();
    eachSample((x) => seen.add(toLinear(toCode(x))));
    return seen.size;
  };
  assert.is(levels(ulawToLinear, linearToUlaw), 255);
  assert.is(levels(alawToLinear, linearToAlaw), 256);
});

test('encodeUlaw/decodeUlaw and encodeAlaw/decodeAlaw agree with the per-sample functions', () => {
  const pcm = new Int16Array(4096);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(32767 * Math.sin(i * 0.01) * Math.cos(i * 0.0007));
  const ulaw = encodeUlaw(pcm);
  const alaw = encodeAlaw(pcm);
  const ulawBack = decodeUlaw(ulaw);
  const alawBack = decodeAlaw(alaw);
  for (let i = 0; i < pcm.length; i++) {
    assert.is(ulaw[i], linearToUlaw(pcm[i] ?? 0));
    assert.is(alaw[i], linearToAlaw(pcm[i] ?? 0));
    assert.is(ulawBack[i], ulawToLinear(ulaw[i] ?? 0));
    assert.is(alawBack[i], alawToLinear(alaw[i] ?? 0));
  }
  // Into a caller's array.
  const out = new Uint8Array(pcm.length);
  assert.is(encodeUlaw(pcm, out), out);
  assert.equal(Array.from(out), Array.from(ulaw));
});

test('the array forms reject an output of the wrong length', () => {
  assert.throws(() => encodeUlaw(new Int16Array(4), new Uint8Array(3)), RangeError);
  assert.throws(() => decodeAlaw(new Uint8Array(4), new Int16Array(5)), RangeError);
});

test.run();
