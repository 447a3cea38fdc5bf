/**
 * EarlyReply (src/realtime/early-reply.ts) on its own, over the fake model: it matches only the
 * exact request it was started for, hands over every chunk in order (those ready and those still
 * coming), a discard aborts the generation and keeps nothing, and aborting the taken stream aborts
 * the generation as a direct request would; it is speculative until taken, and never taken once
 * the model preempted it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { FakeLlm } from '../../src/providers/llm/fake-llm.js';
import { ProviderError, type GenerateChunk } from '../../src/providers/llm/base.js';
import { EarlyReply } from '../../src/realtime/early-reply.js';

const REQUEST = {
  messages: [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: 'What time is it?' },
  ],
  maxOutputTokens: null,
  tools: [],
  toolChoice: 'auto' as const,
  parallelToolCalls: true,
};

async function read(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const out: GenerateChunk[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

const textOf = (chunks: GenerateChunk[]) => chunks.map((c) => (c.type === 'text' ? c.text : '')).join('');

test('matches only the same model, messages and output limit', () => {
  const model = new FakeLlm({ reply: 'It is noon.' });
  const early = new EarlyReply(model, REQUEST);
  try {
    assert.ok(early.matches(model, { ...REQUEST, messages: REQUEST.messages.map((m) => ({ ...m })) }));
    assert.not.ok(early.matches(model, { ...REQUEST, maxOutputTokens: 100 }));
    assert.not.ok(early.matches(model, { ...REQUEST, messages: [REQUEST.messages[0]!, { role: 'user', content: 'What time is it' }] }));
    assert.not.ok(early.matches(model, { ...REQUEST, messages: REQUEST.messages.slice(1) }));
    assert.not.ok(early.matches(new FakeLlm({ id: 'another', reply: 'x' }), REQUEST));
  } finally {
    early.discard();
  }
});

test('it is speculative until taken, and a reply the model preempted is never taken', async () => {
  const model = new FakeLlm({ chunks: ['It ', 'is ', 'noon.'], chunkDelayMs: 30 });
  const early = new EarlyReply(model, REQUEST);
  const speculation = model.requests[0]!.speculation!;
  assert.ok(speculation.isSpeculative());
  speculation.preempted(); // what a local model does before it stops the generation
  assert.not.ok(early.matches(model, REQUEST));
  early.discard();
  const taken = new EarlyReply(model, REQUEST);
  taken.take();
  assert.not.ok(model.requests[1]!.speculation!.isSpeculative(), 'a taken reply is confirmed: it is not stopped for others');
  taken.discard();
});

test('take(): the chunks ready and those still coming, in order, ending with the model’s done', async () => {
  const model = new FakeLlm({ chunks: ['It ', 'is ', 'noon ', 'here.'], chunkDelayMs: 30 });
  const early = new EarlyReply(model, REQUEST);
  await new Promise((r) => setTimeout(r, 75)); // about two chunks generated before the turn is confirmed
  assert.ok(early.readyChars > 0 && early.readyChars < 'It is noon here.'.length, `ready ${early.readyChars}`);
  const chunks = await read(early.take().generate({ ...REQUEST, signal: new AbortController().signal }));
  assert.is(textOf(chunks), 'It is noon here.');
  const done = chunks.at(-1);
  assert.is(done?.type === 'done' ? done.finishReason : null, 'stop');
  assert.is(chunks.filter((c) => c.type === 'done').length, 1);
  assert.is(model.requests.length, 1, 'one generation, not two');
  assert.not.ok(early.matches(model, REQUEST), 'taken once');
  assert.throws(() => early.take());
});

test("take(): the model's second request (the step after an MCP call) is the model's own, not the replay", async () => {
  const model = new FakeLlm({ reply: (r) => (r.messages.length > 2 ? 'Second step.' : 'First step.') });
  const early = new EarlyReply(model, REQUEST);
  const taken = early.take();
  const signal = new AbortController().signal;
  assert.is(textOf(await read(taken.generate({ ...REQUEST, signal }))), 'First step.');
  const next = { ...REQUEST, messages: [...REQUEST.messages, { role: 'assistant' as const, content: 'x' }], signal };
  assert.is(textOf(await read(taken.generate(next))), 'Second step.');
  assert.is(model.requests.length, 2);
});

test('discard(): the generation is aborted and nothing of it can be taken', async () => {
  const model = new FakeLlm({ chunks: ['It ', 'is ', 'noon.'], chunkDelayMs: 20 });
  const early = new EarlyReply(model, REQUEST);
  await new Promise((r) => setTimeout(r, 30));
  early.discard();
  assert.is(model.requests[0]!.signal.aborted, true);
  assert.is(early.readyChars, 0);
  assert.not.ok(early.matches(model, REQUEST));
});

test('aborting the taken stream aborts the generation, which ends as aborted', async () => {
  const model = new FakeLlm({ chunks: ['One ', 'two ', 'three ', 'four ', 'five.'], chunkDelayMs: 20 });
  const early = new EarlyReply(model, REQUEST);
  const abort = new AbortController();
  const chunks: GenerateChunk[] = [];
  for await (const c of early.take().generate({ ...REQUEST, signal: abort.signal })) {
    chunks.push(c);
    if (c.type === 'text' && c.text === 'two ') abort.abort();
  }
  assert.is(model.requests[0]!.signal.aborted, true);
  assert.not.match(textOf(chunks), 'five');
  const done = chunks.at(-1);
  assert.is(done?.type === 'done' ? done.finishReason : null, 'aborted');
});

test('a model failure reaches the taken stream as the same error', async () => {
  const failure = new ProviderError('llm_request_failed', 'model crashed');
  const model = new FakeLlm({ chunks: ['It ', 'is'], error: failure, failAfterChunks: 1 });
  const early = new EarlyReply(model, REQUEST);
  const seen: string[] = [];
  try {
    for await (const c of early.take().generate({ ...REQUEST, signal: new AbortController().signal })) if (c.type === 'text') seen.push(c.text);
    assert.unreachable('the failure must be thrown');
  } catch (err) {
    assert.is(err, failure);
  }
  assert.equal(seen, ['It ']);
});

test.run();
