/**
 * The answers benchmark's rules (benchmarks/lib/answers/check.ts) on written answers, so a rule
 * that refuses right answers or passes wrong ones fails here rather than skewing a bench run:
 *  - every question's own right answer (its `example`), held-out ones too, is right, plain and within the spoken length;
 *  - wrong facts, a wrong claim beside the right one, an off-topic tip and a refusal are wrong;
 *  - JSON, a tool call's tag, special tokens, backticks, Markdown headings, bullets, bold and
 *    numbered lists and a stray hash sign are each flagged, and plain sentences with numbers and abbreviations are not;
 *  - sentences: "Mt. Everest", "3.5", "e.g.", "U.S." and a list item's "1." end none; "!", "?", "…" and line breaks do;
 *    words and the two-sentence, forty-word limit.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { checkAnswer, lengthOf, markupIn, MAX_WORDS, sentences, words } from '../../benchmarks/lib/answers/check.js';
import { HELD_OUT, QUESTIONS, type Question } from '../../benchmarks/lib/answers/questions.js';

const ask = (text: string): Question => {
  const found = QUESTIONS.find((q) => q.question === text);
  if (!found) throw new Error(`no question '${text}'`);
  return found;
};

test('the set: at least 40 questions, no repeats (held out ones included), every topic, advice among them', () => {
  assert.ok(QUESTIONS.length >= 40, `${QUESTIONS.length} questions`);
  const all = [...QUESTIONS, ...HELD_OUT];
  assert.is(new Set(all.map((q) => q.question)).size, all.length);
  for (const topic of ['geography', 'science', 'history', 'arithmetic', 'definition', 'conversion', 'advice']) {
    assert.ok(QUESTIONS.some((q) => q.topic === topic), topic);
  }
});

test("every question's example answer is right, plain and within the spoken length", () => {
  for (const q of [...QUESTIONS, ...HELD_OUT]) {
    const verdict = checkAnswer(q, q.example);
    assert.ok(verdict.right, `${q.question} → ${q.example}: ${verdict.why.join(', ')}`);
    assert.equal(markupIn(q.example), [], q.example);
    assert.ok(lengthOf(q.example).within, `${q.example}: ${JSON.stringify(lengthOf(q.example))}`);
  }
});

test('accepted variants of a right answer', () => {
  const right = (question: string, answer: string) => assert.ok(checkAnswer(ask(question), answer).right, `${question} → ${answer}`);
  right('What is the tallest mountain in the world?', 'Mt. Everest, on the border of Nepal and China.');
  right('At what temperature does water boil at sea level?', 'It boils at 212 °F.');
  right('At what temperature does water boil at sea level?', 'At 100°C.');
  right('How many planets are in our solar system?', 'There are 8 planets.');
  right('What is 7 times 8?', 'Fifty-six.');
  right('How many feet are in a mile?', 'There are 5280 feet in a mile.');
  right('Give me one tip for sleeping better.', "I'm sorry to hear you're sleeping badly: avoid caffeine after lunch.");
  right('Give me one tip for sleeping better.', 'Try deep breathing exercises.');
  right('What is 10 kilometers in miles?', 'About 6.21 miles.');
});

test('wrong facts, a wrong claim beside the right one, an off-topic tip and a refusal are wrong', () => {
  const wrong = (question: string, answer: string) => {
    const verdict = checkAnswer(ask(question), answer);
    assert.not.ok(verdict.right, `${question} → ${answer}`);
    assert.ok(verdict.why.length > 0);
    return verdict.why;
  };
  wrong('What is the tallest mountain in the world?', 'The tallest mountain in the world is K2.');
  wrong('What is the capital of France?', 'The capital of France is Lyon.');
  wrong('What is the capital of Australia?', 'The capital of Australia is Sydney.');
  wrong('What is 7 times 8?', '7 times 8 is 54.');
  wrong('What is the square root of 81?', 'The square root of 81 is 8.');
  wrong('What is gravity?', 'Gravity is a force.'); // one fact of two
  wrong('What is the tallest mountain in the world?', 'Mount Everest, which is 8,848 feet tall.'); // metres called feet
  wrong('What is the freezing point of water in Fahrenheit?', 'It is 32 degrees Celsius.');
  wrong('What is 10 kilometers in miles?', '10 kilometers is approximately 6.28 miles.');
  assert.equal(wrong('How many planets are in our solar system?', 'There are nine planets, or eight without Pluto.'), ['wrong claim \\b(?:nine|9) planets\\b']);
  assert.equal(wrong('Give me one tip for sleeping better.', 'Sleeping better is important for your health.'), ['off topic']);
  assert.ok(wrong('Give me one tip for sleeping better.', "I'm sorry, but I can't give medical advice about your bedtime.").includes('refusal'));
  assert.ok(wrong('What is the capital of France?', 'As an AI, I cannot answer that.').includes('refusal'));
});

test('JSON, tool syntax and Markdown are flagged, each by name', () => {
  assert.equal(markupIn('{"name": "get_weather", "arguments": {"city": "Paris"}}'), ['json/braces']);
  assert.ok(markupIn('<tool_call>\n{"name": "get_time"}\n</tool_call>').includes('tool tag'));
  assert.equal(markupIn('Paris.<|im_end|>'), ['special token']);
  assert.equal(markupIn('Use `sleep 8h` every night.'), ['backticks']);
  assert.equal(markupIn('## Sleeping better\nGo to bed early.'), ['heading']);
  assert.equal(markupIn('Try these:\n- go to bed early\n- avoid coffee'), ['bullet']);
  assert.equal(markupIn('The capital is **Paris**.'), ['bold']);
  assert.equal(markupIn('1. Go to bed early.\n2. Avoid coffee.'), ['numbered list']);
  assert.equal(markupIn('Two tips: 1. go to bed early 2. avoid coffee.'), ['numbered list']);
  assert.equal(markupIn('It is <b>Paris</b>.'), ['html tag']);
  assert.equal(markupIn('Gold is represented by the symbol #Au.'), ['hash sign']);
  assert.equal(markupIn('Sleep well! 😴'), ['emoji']);
});

test('plain speech with numbers and abbreviations is not markup', () => {
  for (const plain of [
    'Mt. Everest is 8,849 metres tall.',
    'It is about 3.5 kilometres, e.g. a short walk.',
    '7 times 8 is 56, and 2 + 2 is 4.',
    'World War II ended in 1945. The treaty came later.',
    "It's 100 °C - or 212 °F - at sea level.",
  ]) {
    assert.equal(markupIn(plain), [], plain);
  }
});

test('sentences: abbreviations and decimals end none; stops and line breaks do', () => {
  assert.is(sentences('Mt. Everest is the tallest. It is in Nepal.').length, 2);
  assert.is(sentences('It is 3.5 metres long.').length, 1);
  assert.is(sentences('Light is fast, e.g. 300,000 km per second in the U.S. and elsewhere.').length, 1);
  assert.is(sentences('Dr. Fleming found it at 9 a.m. on a Monday.').length, 1);
  assert.is(sentences('Hi! How are you? Fine.').length, 3);
  assert.is(sentences('Wait… really? Yes.').length, 3);
  assert.is(sentences('Go to bed early\nAvoid coffee').length, 2);
  assert.is(sentences('1. Prioritize tasks.\n2. Use apps.\n3. Set goals.\n4. Take breaks.').length, 4); // items, not their numbers
  assert.is(sentences('5.').length, 1);
  assert.is(sentences('There are 5. That is all.').length, 2);
  assert.is(sentences('It is about').length, 1); // cut off by the token limit
  assert.is(sentences('"Paris." He said so.').length, 2);
  assert.is(sentences('Pack tea, cups, etc. Then boil the water.').length, 2);
  assert.is(sentences('').length, 0);
  assert.is(sentences(' . ').length, 0);
});

test('words and the spoken length limit', () => {
  assert.is(words('Mt. Everest is 8,849 metres tall.'), 6);
  assert.is(words("Don't worry, it's 3.5 km."), 5);
  assert.ok(lengthOf('Paris. It is lovely.').within);
  assert.not.ok(lengthOf('Paris. It is lovely. Visit it.').within); // three sentences
  const long = `It is ${Array.from({ length: MAX_WORDS }, () => 'very').join(' ')} far.`;
  assert.is(lengthOf(long).sentences, 1);
  assert.not.ok(lengthOf(long).within); // one sentence, too many words
});

test.run();
