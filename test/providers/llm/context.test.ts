/**
 * What of a conversation a model is given (src/providers/llm/context.ts): the character budget for
 * a context size, and the newest turns that fit it, with the instructions kept (issue 8: a 15 MB
 * conversation was formatted and tokenized whole on every reply).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ChatMessage } from '../../../src/providers/llm/base.js';
import { CHARS_PER_TOKEN, fitMessages, promptCharBudget } from '../../../src/providers/llm/context.js';

const sys = (content: string): ChatMessage => ({ role: 'system', content });
const user = (content: string): ChatMessage => ({ role: 'user', content });
const bot = (content: string): ChatMessage => ({ role: 'assistant', content });
const chars = (messages: ChatMessage[]) => messages.reduce((n, m) => n + m.content.length, 0);

test('promptCharBudget() reserves the reply (at most a quarter of the context) and counts the rest at CHARS_PER_TOKEN', () => {
  assert.is(promptCharBudget(4096, 1024), (4096 - 1024) * CHARS_PER_TOKEN);
  assert.is(promptCharBudget(4096, 16), (4096 - 16) * CHARS_PER_TOKEN);
  assert.is(promptCharBudget(4096, 32768), (4096 - 1024) * CHARS_PER_TOKEN);
});

test('fitMessages() returns a conversation that fits unchanged', () => {
  const messages = [sys('Be brief.'), user('Hi'), bot('Hello!'), user('How are you?')];
  assert.equal(fitMessages(messages, 1000), messages);
});

test('fitMessages() keeps the system message and the newest turns that fit whole, dropping the oldest first', () => {
  const messages = [sys('S'.repeat(10)), user('a'.repeat(40)), bot('b'.repeat(40)), user('c'.repeat(40)), bot('d'.repeat(40)), user('e'.repeat(20))];
  const fitted = fitMessages(messages, 100);
  assert.equal(fitted.map((m) => m.content[0]), ['S', 'd', 'e']);
  assert.ok(chars(fitted) <= 100);
  // A turn that does not fit ends the list, even if an older, shorter one would: the stretch is contiguous.
  const gap = fitMessages([sys('S'), user('x'), bot('y'.repeat(100)), user('z'.repeat(10))], 50);
  assert.equal(gap.map((m) => m.content[0]), ['S', 'z']);
});

test('fitMessages() cuts long instructions to half the budget and keeps the end of a newest turn that alone is too long', () => {
  const fitted = fitMessages([sys('I'.repeat(1000)), user('old'), user(`${'q'.repeat(1000)}the question?`)], 200);
  assert.is(fitted[0]?.content, 'I'.repeat(100));
  assert.is(fitted.length, 2);
  assert.is(fitted[1]?.content.length, 100);
  assert.ok(fitted[1]?.content.endsWith('the question?'));
  // No half surrogate pair at either cut.
  const emoji = fitMessages([sys('😀'.repeat(50)), user('😀'.repeat(50))], 41);
  for (const m of emoji) assert.not.match(m.content, /^[\udc00-\udfff]|[\ud800-\udbff]$/);
});

test('fitMessages() on 15 MB of conversation keeps the newest turns within the budget, quickly', () => {
  const turn = 'The quick brown fox jumps over the lazy dog. '.repeat(10);
  const messages: ChatMessage[] = [sys('Be brief.')];
  for (let i = 0; messages.length * turn.length < 15_000_000; i++) messages.push(i % 2 ? bot(`${i} ${turn}`) : user(`${i} ${turn}`));
  const budget = promptCharBudget(4096, 1024);
  const fitted = fitMessages(messages, budget);
  assert.ok(chars(fitted) <= budget);
  assert.ok(fitted.length > 10);
  assert.is(fitted[0]?.content, 'Be brief.');
  assert.is(fitted.at(-1), messages.at(-1));
});

test.run();
