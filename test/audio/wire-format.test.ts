/**
 * Tests for the wire audio formats (src/audio/wire-format.ts): the format vocabulary, `audio/pcm`
 * passed through untouched, G.711 (μ-law and A-law) out and back in: a 1 kHz tone keeps its
 * level and shape after the two resamplers' delay, what would alias is filtered out, full scale
 * does not wrap, and streaming in chunks of any size gives exactly the one-shot result.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { bytesPerMs, InputAudioDecoder, OutputAudioEncoder, WIRE_FORMAT_TYPES, wireFormat, type WireAudioFormat } from '../../src/audio/wire-format.js';
import { concatSamples, noise, rms, tone, toPcm16 } from '../../harness/measures/speech.js';

const G711_FORMATS = [wireFormat('audio/pcmu'), wireFormat('audio/pcma')];
/** Filter transients skipped before measuring: the filters are ≈ 2 and 6 ms long; 20 ms is ample. */
const SETTLE_SAMPLES_24K = 20 * 24;
/** Encoder then decoder: the two linear-phase filters' group delays, 23.5 + 71.5 samples at 24 kHz. */
const ROUND_TRIP_DELAY_SAMPLES = 95;

function bytesOf(pcm: Int16Array): Buffer {
  return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
}

/** `bytes` cut into pieces of the given sizes in turn (the last piece may be shorter). */
function pieces(bytes: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const size = sizes[k % sizes.length] ?? 1;
    out.push(bytes.subarray(at, at + size));
    at += size;
  }
  return out;
}

function encodeAll(format: WireAudioFormat, pcm: Buffer, sizes: number[]): Buffer {
  const encoder = new OutputAudioEncoder(format);
  return Buffer.concat([...pieces(pcm, sizes).map((p) => encoder.encode(p)), encoder.flush()]);
}

function decodeAll(format: WireAudioFormat, wire: Buffer, sizes: number[]): Int16Array {
  const decoder = new InputAudioDecoder(format);
  return concatSamples(pieces(wire, sizes).map((p) => Int16Array.from(decoder.decode(p))));
}

/** Amplitude of the `hz` component (projection over the given samples). */
function amplitudeAt(x: ArrayLike<number>, hz: number, rateHz: number): number {
  let re = 0;
  let im = 0;
  for (let n = 0; n < x.length; n++) {
    re += (x[n] ?? 0) * Math.cos((2 * Math.PI * hz * n) / rateHz);
    im += (x[n] ?? 0) * Math.sin((2 * Math.PI * hz * n) / rateHz);
  }
  return (2 / x.length) * Math.hypot(re, im);
}

/** The lag (0 … maxLag) at which `y` best matches `x`, by correlation over the same samples of `x`. */
function bestLag(x: Int16Array, y: Int16Array, maxLag: number): number {
  let best = 0;
  let bestScore = -Infinity;
  const end = Math.min(x.length, y.length - maxLag);
  for (let lag = 0; lag <= maxLag; lag++) {
    let score = 0;
    for (let n = SETTLE_SAMPLES_24K; n < end; n++) score += (x[n] ?? 0) * (y[n + lag] ?? 0);
    if (score > bestScore) {
      bestScore = score;
      best = lag;
    }
  }
  return best;
}

test('WIRE_FORMAT_TYPES and wireFormat() name the three formats with their rates', () => {
  assert.equal([...WIRE_FORMAT_TYPES], ['audio/pcm', 'audio/pcmu', 'audio/pcma']);
  assert.equal(wireFormat('audio/pcm'), { type: 'audio/pcm', rate: 24000 });
  assert.equal(wireFormat('audio/pcmu'), { type: 'audio/pcmu', rate: 8000 });
  assert.equal(wireFormat('audio/pcma'), { type: 'audio/pcma', rate: 8000 });
  assert.throws(() => wireFormat('g711_ulaw' as never), TypeError);
});

test('bytesPerMs() is 48 for PCM16 at 24 kHz and 8 for G.711', () => {
  assert.is(bytesPerMs(wireFormat('audio/pcm')), 48);
  assert.is(bytesPerMs(wireFormat('audio/pcmu')), 8);
  assert.is(bytesPerMs(wireFormat('audio/pcma')), 8);
});

test('the converters reject a format whose rate does not match its type', () => {
  assert.throws(() => new InputAudioDecoder({ type: 'audio/pcmu', rate: 24000 } as never), TypeError);
  assert.throws(() => new OutputAudioEncoder({ type: 'audio/pcm', rate: 8000 } as never), TypeError);
  assert.throws(() => new OutputAudioEncoder({ type: 'audio/opus', rate: 48000 } as never), TypeError);
});

test('audio/pcm passes through: the encoder returns its input, the decoder a view of it', () => {
  const pcm = toPcm16(tone(440, 50, 24000, 0.5));
  const bytes = bytesOf(pcm);
  const encoder = new OutputAudioEncoder(wireFormat('audio/pcm'));
  assert.is(encoder.encode(bytes), bytes);
  assert.is(encoder.flush().length, 0);
  assert.is(encoder.delayMs, 0);
  const decoder = new InputAudioDecoder(wireFormat('audio/pcm'));
  const decoded = decoder.decode(bytes);
  assert.is(decoded.buffer, bytes.buffer);
  assert.is(decoded.byteOffset, bytes.byteOffset);
  assert.equal(Array.from(decoded), Array.from(pcm));
  assert.is(decoder.delayMs, 0);
});

test('InputAudioDecoder(audio/pcm) joins samples split across appends, whatever the split', () => {
  const pcm = toPcm16(tone(440, 20, 24000, 0.9));
  pcm[0] = -32768;
  pcm[1] = 32767;
  pcm[2] = -1;
  for (const sizes of [[1], [3], [7, 2, 5], [961]]) {
    assert.equal(Array.from(decodeAll(wireFormat('audio/pcm'), bytesOf(pcm), sizes)), Array.from(pcm), `pieces of ${sizes.join(',')}`);
  }
});

for (const format of G711_FORMATS) {
  test(`${format.type}: a 1 kHz tone out and back in keeps its level and shape (SNR > 30 dB after the filters' delay)`, () => {
    const input = toPcm16(tone(1000, 500, 24000, 0.5));
    const wire = encodeAll(format, bytesOf(input), [960]); // 20 ms appends
    assert.is(wire.length, 500 * bytesPerMs(format) + 8); // + the filter's 1 ms tail from flush()
    const output = decodeAll(format, wire, [160]);
    assert.is(output.length, wire.length * 3);
    const delay = ROUND_TRIP_DELAY_SAMPLES;
    let signal = 0;
    let noise = 0;
    for (let n = SETTLE_SAMPLES_24K; n < input.length - SETTLE_SAMPLES_24K; n++) {
      const x = input[n] ?? 0;
      signal += x * x;
      noise += (x - (output[n + delay] ?? 0)) ** 2;
    }
    const snrDb = 10 * Math.log10(signal / noise);
    assert.ok(snrDb > 30, `SNR ${snrDb.toFixed(1)} dB`);
    const steady = output.subarray(delay + SETTLE_SAMPLES_24K, delay + SETTLE_SAMPLES_24K + 24000 * 0.4); // 400 whole cycles
    const gainDb = 20 * Math.log10(amplitudeAt(steady, 1000, 24000) / (0.5 * 32767));
    assert.ok(Math.abs(gainDb) <= 0.5, `1 kHz gain ${gainDb.toFixed(2)} dB`);
    // The 1 kHz component is where the energy is: its amplitude is the signal's, nearly all of it.
    assert.ok(amplitudeAt(steady, 1000, 24000) / (Math.SQRT2 * rms(Float32Array.from(steady))) > 0.99);
  });

  test(`${format.type}: out and back in delays by the filters' delayMs, no more (found on noise by correlation)`, () => {
    const input = toPcm16(noise(300, 24000, 0.2));
    const output = decodeAll(format, encodeAll(format, bytesOf(input), [960]), [160]);
    assert.is(bestLag(input, output, 200), ROUND_TRIP_DELAY_SAMPLES);
    const delayMs = new OutputAudioEncoder(format).delayMs + new InputAudioDecoder(format).delayMs;
    assert.is(Math.round((delayMs * 24000) / 1000), ROUND_TRIP_DELAY_SAMPLES);
  });

  test(`${format.type}: OutputAudioEncoder filters out a 6 kHz tone that would alias to 2 kHz (≥ 40 dB)`, () => {
    const input = tone(6000, 300, 24000, 0.5);
    const wire = encodeAll(format, bytesOf(toPcm16(input)), [960]);
    const output = Float32Array.from(decodeAll(format, wire, [160]), (v) => v / 32767);
    const steady = output.subarray(SETTLE_SAMPLES_24K * 2, output.length - SETTLE_SAMPLES_24K * 2);
    const attenuationDb = 20 * Math.log10(rms(input) / rms(steady));
    assert.ok(attenuationDb >= 40, `6 kHz attenuation ${attenuationDb.toFixed(1)} dB`);
  });

  test(`${format.type}: a full-scale square wave is clipped, not wrapped around`, () => {
    const input = new Int16Array(24000 / 10);
    for (let n = 0; n < input.length; n++) input[n] = Math.floor(n / 24) % 2 === 0 ? 32767 : -32768; // 500 Hz
    const output = decodeAll(format, encodeAll(format, bytesOf(input), [960]), [160]);
    let agree = 0;
    let counted = 0;
    for (let n = SETTLE_SAMPLES_24K; n + ROUND_TRIP_DELAY_SAMPLES < output.length; n++) {
      const x = input[n] ?? 0;
      const y = output[n + ROUND_TRIP_DELAY_SAMPLES] ?? 0;
      if (n % 24 < 4 || n % 24 > 20) continue; // leave out the edges, where the filters ring
      counted++;
      if (Math.sign(x) === Math.sign(y) && Math.abs(y) > 20000) agree++;
    }
    assert.is(agree, counted);
  });

  test(`${format.type}: encoding in pieces of any size (odd bytes too) equals encoding at once`, () => {
    const input = bytesOf(toPcm16(tone(700, 200, 24000, 0.7)));
    const whole = encodeAll(format, input, [input.length]);
    for (const sizes of [[1], [7], [333, 2], [960], [1001, 4]]) {
      assert.ok(encodeAll(format, input, sizes).equals(whole), `pieces of ${sizes.join(',')}`);
    }
  });

  test(`${format.type}: decoding in pieces of any size equals decoding at once, three samples a byte`, () => {
    const wire = encodeAll(format, bytesOf(toPcm16(tone(700, 200, 24000, 0.7))), [960]);
    const whole = decodeAll(format, wire, [wire.length]);
    assert.is(whole.length, wire.length * 3);
    for (const sizes of [[1], [7], [160], [333, 2]]) {
      assert.equal(Array.from(decodeAll(format, wire, sizes)), Array.from(whole), `pieces of ${sizes.join(',')}`);
    }
  });

  test(`${format.type}: OutputAudioEncoder.flush() ends the stream, so the next one encodes like the first`, () => {
    const input = bytesOf(toPcm16(tone(300, 60, 24000, 0.4)));
    const encoder = new OutputAudioEncoder(format);
    const first = Buffer.concat([encoder.encode(input), encoder.flush()]);
    assert.is(first.length, Math.ceil(input.length / 2 / 3) + 8);
    const second = Buffer.concat([encoder.encode(input), encoder.flush()]);
    assert.ok(second.equals(first));
    encoder.encode(input.subarray(0, 101)); // an odd byte left waiting, then dropped by reset()
    encoder.reset();
    assert.ok(Buffer.concat([encoder.encode(input), encoder.flush()]).equals(first));
  });

  test(`${format.type}: InputAudioDecoder.reset() starts a new stream`, () => {
    const wire = encodeAll(format, bytesOf(toPcm16(tone(300, 60, 24000, 0.4))), [960]);
    const decoder = new InputAudioDecoder(format);
    const first = Int16Array.from(decoder.decode(wire));
    decoder.reset();
    assert.equal(Array.from(decoder.decode(wire)), Array.from(first));
  });
}

test('delayMs reports the filters: ≈ 3 ms decoding 8 → 24 kHz, ≈ 1 ms encoding 24 → 8 kHz', () => {
  const decoder = new InputAudioDecoder(wireFormat('audio/pcmu'));
  const encoder = new OutputAudioEncoder(wireFormat('audio/pcma'));
  assert.ok(Math.abs(decoder.delayMs - 2.979) < 0.01, `decoder ${decoder.delayMs} ms`);
  assert.ok(Math.abs(encoder.delayMs - 0.979) < 0.01, `encoder ${encoder.delayMs} ms`);
});

test.run();

test('decodeYielding gives the samples of one decode call, and lets the event loop run between seconds of G.711', async () => {
  for (const format of G711_FORMATS) {
    const wire = encodeAll(format, bytesOf(toPcm16(noise(5_000, 24_000, 0.3))), [4800]); // 5 s
    const whole = new InputAudioDecoder(format).decode(wire);
    const decoder = new InputAudioDecoder(format);
    let turns = 0;
    const counting = setInterval(() => turns++, 0);
    const yielded = await decoder.decodeYielding(wire).finally(() => clearInterval(counting));
    assert.equal(Array.from(yielded), Array.from(whole), `${format.type}: the same samples`);
    assert.ok(turns >= 1, `${format.type}: the event loop ran while 5 s of audio decoded (${turns} timer turns)`);
    // The stream goes on across calls as with decode(): no seam at the call's end.
    const tail = wire.subarray(0, 1000);
    const joined = new InputAudioDecoder(format).decode(Buffer.concat([wire, tail]));
    assert.equal(Array.from(await decoder.decodeYielding(tail)), Array.from(joined.subarray(whole.length)), `${format.type}: continued`);
  }
});
