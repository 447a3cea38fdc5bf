/**
 * espeak-ng and flite voices (src/providers/tts/espeak.ts, flite.ts) over the native addon: audio
 * of plausible length, phoneme timelines that cover it, settings that change pitch and rate,
 * abort, and engine errors as ProviderErrors.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError } from '../../../src/providers/tts/base.js';
import { EspeakVoice } from '../../../src/providers/tts/espeak.js';
import { FliteVoice } from '../../../src/providers/tts/flite.js';
import { assertTimeline, collect, peak, pitchOf, seconds, spokenPhonemes, TYPICAL_SENTENCE } from './tts-helpers.js';

test('EspeakVoice.speak() yields 22.05 kHz speech of plausible length with a covering IPA timeline', async () => {
  const chunks = await collect(new EspeakVoice('t', { voice: 'en-us' }), TYPICAL_SENTENCE);
  assert.is(chunks.length, 1);
  assert.is(chunks[0]?.sampleRateHz, 22050);
  const s = seconds(chunks);
  assert.ok(s > 2.5 && s < 7, `${s} s for ${TYPICAL_SENTENCE.split(' ').length} words`);
  assert.ok(peak(chunks) > 8000);
  chunks.forEach((c) => assertTimeline(c, 'espeak'));
  const spoken = spokenPhonemes(chunks);
  assert.ok(spoken.length > 30, spoken.join(' '));
  assert.ok(spoken.includes('ʃ') || spoken.includes('h'), spoken.join(' ')); // "sure", "help"
});

test('EspeakVoice.speak() reads numbers as words and skips markdown and emoji', async () => {
  const voice = new EspeakVoice('t', { voice: 'en-us' });
  const plain = seconds(await collect(voice, 'I have forty two apples.'));
  const marked = seconds(await collect(voice, '**I have 42 apples.** 🍎'));
  assert.ok(Math.abs(plain - marked) < 0.15, `plain ${plain} s, with digits and markup ${marked} s`);
});

test('EspeakVoice.speak() yields one chunk per sentence, in order', async () => {
  const chunks = await collect(new EspeakVoice('t', { voice: 'en-us' }), 'First one. Second one is longer than the first. Third.');
  assert.is(chunks.length, 3);
  assert.ok((chunks[1]?.pcm.length ?? 0) > (chunks[0]?.pcm.length ?? 0));
  chunks.forEach((c, i) => assertTimeline(c, `sentence ${i}`));
});

test('EspeakVoice pitch and speed settings change the voice measurably', async () => {
  const low = await collect(new EspeakVoice('t', { voice: 'en-us', pitch: 20 }), TYPICAL_SENTENCE);
  const high = await collect(new EspeakVoice('t', { voice: 'en-us+f3', pitch: 70 }), TYPICAL_SENTENCE);
  assert.ok(pitchOf(high) > pitchOf(low) * 1.8, `low ${pitchOf(low)} Hz, high ${pitchOf(high)} Hz`);
  const slow = seconds(await collect(new EspeakVoice('t', { voice: 'en-us' }), TYPICAL_SENTENCE, { speed: 0.5 }));
  const normal = seconds(low);
  assert.ok(slow > normal * 1.5, `speed 0.5: ${slow} s, speed 1: ${normal} s`);
});

test('FliteVoice.speak() yields 16 kHz speech with a covering IPA timeline for every voice', async () => {
  for (const name of ['slt', 'rms', 'awb', 'kal16']) {
    const chunks = await collect(new FliteVoice('t', { voice: name }), TYPICAL_SENTENCE);
    assert.is(chunks[0]?.sampleRateHz, 16000);
    const s = seconds(chunks);
    assert.ok(s > 2.5 && s < 7, `${name}: ${s} s`);
    chunks.forEach((c) => assertTimeline(c, name));
    assert.ok(spokenPhonemes(chunks).includes('ʃ'), `${name}: ${spokenPhonemes(chunks).join(' ')}`); // "sure"
  }
});

test('FliteVoice.speak() starts the sound within 50 ms and ends each sentence with a pause', async () => {
  const chunks = await collect(new FliteVoice('t', { voice: 'slt' }), 'Hello there. How are you?');
  for (const c of chunks) {
    const first = c.phonemes[0]!;
    const last = c.phonemes[c.phonemes.length - 1]!;
    assert.ok(first.phoneme !== '_' || first.endNs <= 50e6, `leading silence ${first.endNs} ns`);
    assert.is(last.phoneme, '_');
    assert.ok(last.endNs - last.startNs > 100e6, `trailing pause ${last.endNs - last.startNs} ns`);
    assertTimeline(c, 'flite trimmed');
  }
  const espeak = await collect(new EspeakVoice('t', { voice: 'en-us' }), 'Hello there.');
  const tail = espeak[0]!.phonemes[espeak[0]!.phonemes.length - 1]!;
  assert.ok(tail.phoneme === '_' && tail.endNs - tail.startNs > 100e6, JSON.stringify(tail));
});

test('FliteVoice speaks slt clearly higher than rms, and follows a pitch setting on slt', async () => {
  const slt = pitchOf(await collect(new FliteVoice('t', { voice: 'slt' }), TYPICAL_SENTENCE));
  const rms = pitchOf(await collect(new FliteVoice('t', { voice: 'rms' }), TYPICAL_SENTENCE));
  assert.ok(slt > rms * 1.35, `slt ${slt} Hz, rms ${rms} Hz`);
  const raised = pitchOf(await collect(new FliteVoice('t', { voice: 'slt', pitch: 230 }), TYPICAL_SENTENCE));
  assert.ok(raised > slt * 1.15, `slt ${slt} Hz, asked 230 Hz: ${raised} Hz`);
});

test('FliteVoice reads text with accents and non-Latin letters without failing', async () => {
  const chunks = await collect(new FliteVoice('t', { voice: 'slt' }), 'Café in 東京, naïve.');
  assert.ok(seconds(chunks) > 0.5);
});

test('Voice.speak() of markup only yields nothing', async () => {
  assert.is((await collect(new EspeakVoice('t', { voice: 'en-us' }), '** 🎉 **')).length, 0);
  assert.is((await collect(new FliteVoice('t', { voice: 'slt' }), '---')).length, 0);
});

test('Voice.speak() stops without an error when the signal is aborted', async () => {
  const text = 'One sentence here. Another sentence there. And a third one to finish.';
  for (const voice of [new EspeakVoice('t', { voice: 'en-us' }), new FliteVoice('t', { voice: 'slt' })]) {
    const controller = new AbortController();
    const chunks = [];
    for await (const chunk of voice.speak(text, { speed: 1, signal: controller.signal })) {
      chunks.push(chunk);
      controller.abort();
    }
    assert.is(chunks.length, 1, voice.engine);
    const pre = new AbortController();
    pre.abort();
    assert.is((await collect(voice, text, { speed: 1, signal: pre.signal })).length, 0);
  }
});

test('Voice.speak() throws ProviderError for an engine failure and RangeError for a bad speed', async () => {
  try {
    await collect(new EspeakVoice('t', { voice: 'xx-no-such-voice' }), 'Hello.');
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'tts_failed');
  }
  try {
    await collect(new FliteVoice('t', { voice: 'nope' }), 'Hello.');
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
  }
  assert.throws(() => new FliteVoice('t', { voice: 'slt' }).speak('Hi.', { speed: 3 }), RangeError);
});

test.run();
