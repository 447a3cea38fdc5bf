/**
 * Phoneme timings moved by time warping (src/providers/tts/phoneme-align.ts): checked where the
 * truth is known — espeak-ng saying the same sentence at two paces, each with its own timings (an
 * even stretch of the fast timings is 27 ms off there, median, and 54 ms at p90; these bounds fail
 * it) — and for the shape of what it returns.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { synthesizeEspeak } from '../../../src/media/speech-synth.js';
import { alignByWarping, MAX_ALIGN_SECONDS } from '../../../src/providers/tts/phoneme-align.js';
import type { PhonemeTiming } from '../../../src/providers/tts/base.js';

const SENTENCE = 'Shall we begin with a short walk around the old harbour?';

function assertCover(out: PhonemeTiming[], totalNs: number): void {
  assert.ok(out.length > 0);
  assert.is(out[0]!.startNs, 0, 'starts at 0');
  assert.is(out.at(-1)!.endNs, totalNs, 'ends where the audio ends');
  for (let i = 0; i < out.length; i++) {
    assert.ok(out[i]!.endNs > out[i]!.startNs, `phoneme ${i} has a length`);
    if (i > 0) assert.is(out[i]!.startNs, out[i - 1]!.endNs, `phoneme ${i} starts where the last ended`);
  }
}

test('espeak-ng timings at 175 words a minute, warped onto the same sentence at 125, land on that rendition’s own phonemes', async () => {
  const fast = await synthesizeEspeak(SENTENCE, { voice: 'en-us', rateWpm: 175 });
  const slow = await synthesizeEspeak(SENTENCE, { voice: 'en-us', rateWpm: 125 });
  assert.equal(
    fast.phonemes.map((p) => p.phoneme),
    slow.phonemes.map((p) => p.phoneme),
    'the same phonemes at both paces',
  );
  const totalNs = Math.round((slow.pcm.length / slow.sampleRateHz) * 1e9);
  const out = alignByWarping(fast.phonemes, fast.pcm, fast.sampleRateHz, slow.pcm, slow.sampleRateHz);
  assert.ok(out, 'aligned');
  assertCover(out, totalNs);
  assert.equal(out.map((p) => p.phoneme), slow.phonemes.filter((p) => p.endNs > p.startNs).map((p) => p.phoneme).slice(0, out.length));

  // Phoneme starts inside the speech (not the silences around it) against the truth.
  const errorsMs: number[] = [];
  for (let i = 1; i < out.length; i++) {
    if (slow.phonemes[i]!.phoneme === '_') continue;
    errorsMs.push(Math.abs(out[i]!.startNs - slow.phonemes[i]!.startNs) / 1e6);
  }
  errorsMs.sort((a, b) => a - b);
  const median = errorsMs[Math.floor(errorsMs.length / 2)]!;
  const p90 = errorsMs[Math.floor(errorsMs.length * 0.9)]!;
  console.log(`    warped phoneme starts: median ${median.toFixed(0)} ms, p90 ${p90.toFixed(0)} ms off over ${errorsMs.length}`);
  assert.ok(median <= 15, `median error ${median.toFixed(0)} ms`);
  assert.ok(p90 <= 30, `p90 error ${p90.toFixed(0)} ms`);
});

test('alignByWarping gives up (null) on empty input and on audio longer than it aligns', async () => {
  const s = await synthesizeEspeak('Hello there.', { voice: 'en-us', rateWpm: 175 });
  assert.is(alignByWarping([], s.pcm, s.sampleRateHz, s.pcm, s.sampleRateHz), null);
  assert.is(alignByWarping(s.phonemes, new Int16Array(0), s.sampleRateHz, s.pcm, s.sampleRateHz), null);
  const long = new Int16Array(Math.ceil((MAX_ALIGN_SECONDS + 1) * s.sampleRateHz));
  assert.is(alignByWarping(s.phonemes, s.pcm, s.sampleRateHz, long, s.sampleRateHz), null);
});

test('a rendition aligned onto itself keeps its timings within a frame', async () => {
  const s = await synthesizeEspeak(SENTENCE, { voice: 'en-us', rateWpm: 160 });
  const out = alignByWarping(s.phonemes, s.pcm, s.sampleRateHz, s.pcm, s.sampleRateHz);
  assert.ok(out);
  for (let i = 1; i < out.length; i++) {
    assert.ok(Math.abs(out[i]!.startNs - s.phonemes[i]!.startNs) <= 10e6, `phoneme ${i} moved ${(out[i]!.startNs - s.phonemes[i]!.startNs) / 1e6} ms`);
  }
});

test.run();
