/** The speech text normaliser (src/providers/tts/text.ts): markdown and emoji are not spoken, words and numbers are. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_SPEECH_PIECE_CHARS, normalizeSpeechText, speechPieces, splitClauses, splitSentences, toAsciiSpeech } from '../../../src/providers/tts/text.js';

test('normalizeSpeechText() removes markdown emphasis, headings and inline code but keeps the words', () => {
  assert.is(normalizeSpeechText('## Hello **world**, this is *really* `npm test`!'), 'Hello world, this is really npm test!');
  assert.is(normalizeSpeechText('__bold__ and _italic_ ~~old~~'), 'bold and italic old');
});

test('normalizeSpeechText() drops emoji, skin tones, joiners and flags', () => {
  assert.is(normalizeSpeechText('Great job 👍🏽! See you 👨‍👩‍👧 in 🇺🇸 soon 🙂.'), 'Great job! See you in soon.');
});

test('normalizeSpeechText() turns bullets and numbered lists into clauses', () => {
  assert.is(normalizeSpeechText('You need:\n- flour\n- 2 eggs\n\n1. Mix\n2. Bake.'), 'You need: flour, 2 eggs, Mix, Bake.');
});

test('normalizeSpeechText() keeps link text, replaces bare URLs, and removes HTML tags and code fences', () => {
  assert.is(normalizeSpeechText('See [the docs](https://x.y/z) or https://example.com/a?b=1.'), 'See the docs or a link.');
  assert.is(normalizeSpeechText('<b>Hi</b> there'), 'Hi there');
  assert.is(normalizeSpeechText('```js\nconst x = 1;\n```'), 'const x = 1;');
});

test('normalizeSpeechText() keeps numbers and names symbols that engines would skip', () => {
  assert.is(normalizeSpeechText('I have 42 apples & 50% more at 20°C; 2+2=4.'), 'I have 42 apples and 50 percent more at 20 degrees C; 2 plus 2 equals 4.');
  assert.is(normalizeSpeechText('Write to me@example.com'), 'Write to me at example.com');
});

test('normalizeSpeechText() reads a table row as a list and leaves snake_case names as words', () => {
  assert.is(normalizeSpeechText('| name | age |\n|---|---|\n| Ann | 30 |'), 'name, age. Ann, 30.');
  assert.is(normalizeSpeechText('call get_user_name now'), 'call get user name now');
});

test('normalizeSpeechText() drops control characters (a NUL stops espeak-ng and flite)', () => {
  const spoken = normalizeSpeechText('😀 héllo \u0000 ok\u0007');
  assert.not.match(spoken, /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/);
  assert.match(spoken, /héllo\s+ok/);
});

test('normalizeSpeechText() of markup alone is empty', () => {
  assert.is(normalizeSpeechText('**  ** 🎉 ---'), '');
});

test('toAsciiSpeech() folds accents and drops what flite cannot read', () => {
  assert.is(toAsciiSpeech('Café naïve 東京 ok'), 'Cafe naive ok');
});

test('splitSentences() splits at sentence ends but not at abbreviations or decimals', () => {
  assert.equal(splitSentences('Hello Dr. Smith. Pi is 3.14, e.g. this. Really?! Yes'), ['Hello Dr. Smith.', 'Pi is 3.14, e.g. this.', 'Really?!', 'Yes']);
});

test('splitClauses() splits at commas, semicolons and colons followed by a space', () => {
  assert.equal(splitClauses('Well, 1,000 apples; that is: a lot.'), ['Well,', '1,000 apples;', 'that is:', 'a lot.']);
});


test('a letter held for emphasis is said three times, not spelled out hundreds of times', () => {
  assert.is(normalizeSpeechText('That is sooooo good.'), 'That is sooo good.');
  assert.is(normalizeSpeechText(`I heard: ${'x'.repeat(1700)}`), 'I heard: xxx');
  assert.is(normalizeSpeechText('Call 1000000 now.'), 'Call 1000000 now.', 'digits are not letters');
});

test('speechPieces: a native call reads at most MAX_SPEECH_PIECE_CHARS, cut at words, over-long words cut, nothing lost', () => {
  assert.equal(speechPieces('Hello there.'), ['Hello there.']);
  const long = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ') + '.';
  const pieces = speechPieces(long);
  assert.ok(pieces.length > 1);
  for (const p of pieces) assert.ok(p.length <= MAX_SPEECH_PIECE_CHARS, `${p.length} chars`);
  assert.is(pieces.join(' '), long);
  const hash = 'a1b2c3d4'.repeat(60);
  const cut = speechPieces(`The key is ${hash}.`);
  assert.ok(cut.every((p) => p.length <= MAX_SPEECH_PIECE_CHARS));
  assert.ok(cut.join(' ').split(' ').every((w) => w.length <= 40));
  assert.is(cut.join('').replace(/ /g, ''), `Thekeyis${hash}.`);
});

test.run();
