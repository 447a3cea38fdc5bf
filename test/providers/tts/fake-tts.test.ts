/** The fake voice and speech service for engine tests (src/providers/tts/fake-tts.ts): deterministic, scripted. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError } from '../../../src/providers/tts/base.js';
import { FAKE_PHONEME_MS, FakeSpeechService, FakeVoice } from '../../../src/providers/tts/fake-tts.js';
import { assertTimeline, collect, pitchOf } from './tts-helpers.js';

test('FakeVoice.speak() is deterministic, one chunk per word group, one phoneme per character', async () => {
  const voice = new FakeVoice('default', { wordsPerChunk: 2 });
  const a = await collect(voice, 'hello big world');
  const b = await collect(voice, 'hello big world');
  assert.is(a.length, 2);
  assert.equal(a.map((c) => Array.from(c.pcm)), b.map((c) => Array.from(c.pcm)));
  assert.is(a[0]?.phonemes.length, 'hello big '.length);
  assert.is(a[0]?.phonemes[5]?.phoneme, '_');
  assert.is(a[0]?.pcm.length, (24000 * FAKE_PHONEME_MS * 10) / 1000);
  a.forEach((c) => assertTimeline(c, 'fake'));
  assert.equal(voice.spoken, ['hello big world', 'hello big world']);
});

test('FakeVoice speed shortens phonemes and failAfterChunks throws ProviderError', async () => {
  const fast = await collect(new FakeVoice('x'), 'aaaa', { speed: 1.5 });
  assert.is(fast[0]?.pcm.length, Math.round((24000 * FAKE_PHONEME_MS) / 1000 / 1.5) * 4);
  const chunks = [];
  try {
    for await (const c of new FakeVoice('x', { wordsPerChunk: 1, failAfterChunks: 1 }).speak('one two three', { speed: 1 })) chunks.push(c);
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
  }
  assert.is(chunks.length, 1);
});

test('FakeVoice with chunkDelayMs stops when aborted during the wait', async () => {
  const controller = new AbortController();
  const voice = new FakeVoice('x', { chunkDelayMs: 10_000, wordsPerChunk: 1 });
  const done = collect(voice, 'one two', { speed: 1, signal: controller.signal });
  controller.abort();
  assert.is((await done).length, 0);
});

test('FakeSpeechService.voice() gives distinct voices for the standard ids and voice_not_found otherwise', async () => {
  const s = new FakeSpeechService();
  const d = await s.voice({ voiceId: 'default', userId: 'u', source: 'auto' });
  const a = await s.voice({ voiceId: 'alice', userId: 'u', source: 'auto' });
  assert.ok(pitchOf(await collect(a, 'aaaa eeee')) > pitchOf(await collect(d, 'aaaa eeee')) * 1.2);
  try {
    await s.voice({ voiceId: 'zed', userId: 'u', source: 'auto' });
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.is((err as ProviderError).code, 'voice_not_found');
  }
  assert.is(s.requests.length, 3);
});

test.run();
