/**
 * Stress and phrase marks carried from a clause's IPA onto espeak-ng's timed phoneme names
 * (src/providers/tts/phoneme-marks.ts), on the names and IPA espeak-ng gives for these clauses;
 * the Piper voice's own marks are checked in piper.test.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { PhonemeTiming } from '../../../src/providers/tts/base.js';
import { markPhonemes } from '../../../src/providers/tts/phoneme-marks.js';

/** Phonemes named by a space-separated list, 100 ns each, back to back. */
function timed(names: string): PhonemeTiming[] {
  return names.split(' ').map((phoneme, i) => ({ phoneme, startNs: i * 100, endNs: (i + 1) * 100 }));
}

/** The names `markPhonemes` gives, after checking that it kept every phoneme's times. */
function marked(names: string, ipa: string[]): string {
  const phonemes = timed(names);
  const out = markPhonemes(phonemes, ipa);
  assert.equal(
    out.map((p) => [p.startNs, p.endNs]),
    phonemes.map((p) => [p.startNs, p.endNs]),
  );
  return out.map((p) => p.phoneme).join(' ');
}

test('markPhonemes() puts the stress mark on the stressed vowel and a question’s ? after its last spoken phoneme', () => {
  assert.is(marked('ɪ z ɪ t ɹ eɪ n ɪ ŋ _', ['ɪz ɪt ɹˈeɪnɪŋ?']), 'ɪ z ɪ t ɹ ˈeɪ n ɪ ŋ? _');
});

test('markPhonemes() ends a statement with its full stop and keeps secondary stress', () => {
  assert.is(marked('l ɛ t m iː tʃ ɛ k _', ['lˈɛt mˌiː tʃˈɛk.']), 'l ˈɛ t m ˌiː tʃ ˈɛ k. _');
});

test('markPhonemes() ends a comma clause with its comma, on a phoneme that is also stressed', () => {
  assert.is(marked('_ ʃ ʊɹ _', ['ʃˈʊɹ,']), '_ ʃ ˈʊɹ, _');
  assert.is(marked('aɪ k æ n h ɛ l p w ɪ ð ð æ t _', ['aɪ kæn hˈɛlp wɪð ðˈæt,']), 'aɪ k æ n h ˈɛ l p w ɪ ð ð ˈæ t, _');
});

test('markPhonemes() puts punctuation between the IPA strings of a clause after the phoneme it follows', () => {
  assert.is(marked('w eɪ t w ʌ t _', ['wˈeɪt.', 'wˌʌt']), 'w ˈeɪ t. w ˌʌ t _');
});

test('markPhonemes() matches segments across length marks, tie bars, split diphthongs and language switches', () => {
  assert.is(marked('θ ɹ iː f oːɹ ɾ i', ['θɹˈiː fˈoːɹɾi.']), 'θ ɹ ˈiː f ˈoːɹ ɾ i.');
  assert.is(marked('t ʃ ɛ k', ['t͡ʃˈɛk']), 't ʃ ˈɛ k');
  assert.is(marked('m a ɪ n', ['mˈaɪn']), 'm ˈa ɪ n');
  assert.is(marked('ɪ t s k a f e t aɪ m _', ['ɪts (fr)kafˈe(en) tˈaɪm!']), 'ɪ t s k a f ˈe t ˈaɪ m! _');
});

test('markPhonemes() leaves a stretch that does not align unmarked, and the rest marked', () => {
  // The events say "dog" where the IPA says "cat": that word's stress has nowhere to go.
  assert.is(marked('ð ə d ɔ ɡ s æ t _', ['ðə kˈæt sˈæt.']), 'ð ə d ɔ ɡ s ˈæ t. _');
  // A vowel that matches between two segments that do not is not trusted with the stress.
  assert.is(marked('p ɪ k ə n', ['bˈɪɡ ˈən']), 'p ɪ k ˈə n');
  // espeak-ng's events leave out the IPA's l in "already": the ɔː before the gap keeps its place
  // through the v it joins, the ɹ after it through the stressed ɛ.
  assert.is(marked('f aɪ v ɔː ɹ ɛ d i _', ['fˈaɪv ɔːlɹˈɛdi?']), 'f ˈaɪ v ɔː ɹ ˈɛ d i? _');
});

test('markPhonemes() marks nothing without IPA and never marks silence', () => {
  assert.is(marked('_ h ə l oʊ _', []), '_ h ə l oʊ _');
  assert.is(marked('_', ['.']), '_');
});

test.run();
