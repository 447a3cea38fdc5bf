/**
 * What of a conversation a model is given (src/providers/llm/context.ts): the character budget for
 * a context size, and the newest turns that fit it, with the instructions kept (issue 8: a 15 MB
 * conversation was formatted and tokenized whole on every reply), and tool calls kept paired with
 * their outputs across the cut (a chat-completions server answers 400 for an orphan `tool` message).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { messageChars, type ChatMessage } from '../../../src/providers/llm/base.js';
import { CHARS_PER_TOKEN, fitMessages, promptCharBudget } from '../../../src/providers/llm/context.js';
import { Rng, fuzzSeed } from '../../helpers/fuzz.js';

const sys = (content: string): ChatMessage => ({ role: 'system', content });
const user = (content: string): ChatMessage => ({ role: 'user', content });
const bot = (content: string): ChatMessage => ({ role: 'assistant', content });
/** An assistant turn that made calls `ids` (each to `lookup` with arguments `args`). */
const calls = (ids: string[], content = '', args = '{}'): ChatMessage => ({ role: 'assistant', content, toolCalls: ids.map((id) => ({ id, name: 'lookup', arguments: args })) });
const output = (toolCallId: string, content: string): ChatMessage => ({ role: 'tool', toolCallId, content });
const chars = (messages: ChatMessage[]) => messages.reduce((n, m) => n + messageChars(m), 0);
/** A short label per message: its role's letter and the first character of its text (or its call ids). */
const labels = (messages: ChatMessage[]) => messages.map((m) => shape(m) + (m.role === 'tool' || (m.role === 'assistant' && m.toolCalls) ? '' : `:${m.content[0] ?? ''}`));
/** A message's role letter, and its call ids (assistant) or answered call id (tool). */
const shape = (m: ChatMessage) => (m.role === 'tool' ? `t:${m.toolCallId}` : m.role === 'assistant' && m.toolCalls ? `a:${m.toolCalls.map((c) => c.id).join(',')}` : m.role[0]);

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
  assert.equal(fitMessages([sys('I'.repeat(1000))], 200), [sys('I'.repeat(100))], 'instructions alone');
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

test('fitMessages() counts tool call names and arguments as prompt characters', () => {
  const messages = [sys('S'), user('q'), calls(['A'], '', `{"query":"${'x'.repeat(100)}"}`), output('A', 'r'), user('n'.repeat(10))];
  assert.is(messages.reduce((n, m) => n + m.content.length, 0), 13, 'the text alone would fit');
  const fitted = fitMessages(messages, 60);
  assert.equal(labels(fitted), ['s:S', 'u:n']);
});

test("fitMessages() never starts the turns with a 'tool' message whose call was cut away", () => {
  // The outputs and the question fit; the assistant message that made the calls does not.
  const messages = [sys('S'), user('q'), calls(['A', 'B'], 'c'.repeat(50)), output('A', 'a'.repeat(10)), output('B', 'b'.repeat(10)), user('u'.repeat(10))];
  const fitted = fitMessages(messages, 60);
  assert.equal(labels(fitted), ['s:S', 'u:u']);
});

test('fitMessages() keeps an assistant message with calls only together with the outputs answering them', () => {
  const messages = [sys('S'), user('q'.repeat(50)), calls(['A', 'B'], 'c'), output('A', 'a'.repeat(10)), output('B', 'b'.repeat(10)), user('u'.repeat(10))];
  const fitted = fitMessages(messages, 50);
  assert.equal(labels(fitted), ['s:S', 'a:A,B', 't:A', 't:B', 'u:u']);
  assert.ok(chars(fitted) <= 50);
});

test("fitMessages() keeps a newest tool output with the call it answers, the text of both sharing the budget", () => {
  const big = `${'o'.repeat(5000)}the end`;
  const messages = [sys('S'), user('What is the weather?'), calls(['A'], 'Let me look.'), output('A', big)];
  const fitted = fitMessages(messages, 200);
  assert.equal(labels(fitted), ['s:S', 'a:A', 't:A']);
  assert.is(fitted[1], messages[2], 'the short assistant message whole');
  assert.ok(fitted[2]!.content.endsWith('the end'), 'the output cut to its end');
  assert.is(chars(fitted), 200);
  // Parallel outputs: a short one whole, the long ones cut to equal shares of what is left.
  const parallel = fitMessages([sys('S'), calls(['A', 'B', 'C']), output('A', 'short'), output('B', 'b'.repeat(500)), output('C', 'c'.repeat(500))], 100);
  assert.equal(labels(parallel), ['s:S', 'a:A,B,C', 't:A', 't:B', 't:C']);
  const sizes = parallel.slice(2).map((m) => m.content.length);
  assert.equal(sizes, [5, 35, 35]);
  assert.ok(chars(parallel) <= 100);
});

test('fitMessages() never cuts tool call arguments: only they may take the newest turn over the budget', () => {
  const args = `{"text":"${'x'.repeat(300)}"}`;
  const fitted = fitMessages([sys('S'), user('q'), calls(['A'], 'hm', args), output('A', 'done')], 100);
  assert.equal(labels(fitted), ['s:S', 'a:A', 't:A']);
  const call = fitted[1] as Extract<ChatMessage, { role: 'assistant' }>;
  assert.is(call.toolCalls?.[0]?.arguments, args);
  assert.equal([call.content, fitted[2]!.content], ['', '']);
});

test("fitMessages() passes on a 'tool' message whose call is not in the conversation as it is (the engine pairs its input)", () => {
  const messages = [sys('S'), user('q'.repeat(100)), output('X', 'x'), user('u')];
  assert.equal(labels(fitMessages(messages, 1000)), ['s:S', 'u:q', 't:X', 'u:u']);
  assert.equal(labels(fitMessages(messages, 20)), ['s:S', 't:X', 'u:u']);
});

test('fitMessages() on random conversations with tool calls keeps the newest turn, the budget and every call paired', () => {
  const seed = fuzzSeed();
  const rng = new Rng(seed);
  for (let c = 0; c < 3000; c++) {
    const messages: ChatMessage[] = [sys('S'.repeat(rng.int(0, 40)))];
    let id = 0;
    for (let t = rng.int(1, 12); t > 0; t--) {
      const text = () => 'w'.repeat(rng.int(0, 80));
      const kind = rng.int(0, 3);
      if (kind === 0) messages.push(user(text() || 'u'));
      else if (kind === 1) messages.push(bot(text()));
      else {
        const ids = Array.from({ length: rng.int(1, 3) }, () => `c${id++}`);
        messages.push(calls(ids, rng.chance(0.5) ? text() : '', `{"q":"${'a'.repeat(rng.int(0, 30))}"}`));
        for (const i of ids) messages.push(output(i, text()));
      }
    }
    const budget = rng.int(2, chars(messages) + 10);
    const fitted = fitMessages(messages, budget);
    const where = `seed ${seed}, case ${c}: budget ${budget}, ${JSON.stringify(labels(messages))} -> ${JSON.stringify(labels(fitted))}`;
    const turns = fitted.slice(1);
    assert.ok(fitted.reduce((n, m) => n + m.content.length, 0) <= budget, `only call arguments may go over the budget: ${where}`);
    assert.ok(turns.length > 0, `the newest turn is kept: ${where}`);
    const kept = new Set(turns.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []).map((k) => k.id) : [])));
    const answered = new Set(turns.flatMap((m) => (m.role === 'tool' ? [m.toolCallId] : [])));
    for (const i of answered) assert.ok(kept.has(i), `no orphan output ${i}: ${where}`);
    for (const i of kept) assert.ok(answered.has(i), `call ${i} kept with its output: ${where}`);
    // A contiguous stretch of the newest messages (in order, by role and call ids).
    assert.equal(turns.map(shape), messages.slice(-turns.length).map(shape), where);
  }
});

test.run();
