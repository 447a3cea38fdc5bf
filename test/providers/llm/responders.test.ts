/**
 * Tests for the two model-free LanguageModels: the offline responder
 * (src/providers/llm/offline-responder.ts), which stands in when no model is configured, and the
 * scripted fake (src/providers/llm/fake-llm.ts) the engine tests use.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError, type ChatMessage, type GenerateChunk, type GenerateRequest } from '../../../src/providers/llm/base.js';
import { FakeLlm, type Scheduler } from '../../../src/providers/llm/fake-llm.js';
import { OfflineResponder, offlineReply } from '../../../src/providers/llm/offline-responder.js';

function request(messages: ChatMessage[], signal = new AbortController().signal, maxOutputTokens: number | null = null): GenerateRequest {
  return { messages, maxOutputTokens, signal };
}

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const out: GenerateChunk[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

function textOf(chunks: GenerateChunk[]): string {
  return chunks.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

const SYSTEM: ChatMessage = { role: 'system', content: 'You are a helpful assistant.' };

test('offlineReply() says it is a rule-based responder and how to configure a real model', () => {
  for (const said of ['Hello!', 'What time is it?', 'I like trains', '']) {
    const reply = offlineReply([SYSTEM, { role: 'user', content: said }]);
    assert.match(reply, /built-in rule-based responder, not a language model/, said);
    if (!/bye/i.test(said)) assert.match(reply, /npm run setup:models/, said);
    if (!/bye/i.test(said)) assert.match(reply, /LLM_BASE_URL and LLM_API_KEY/, said);
  }
});

test('offlineReply() greets a greeting, quotes a question and echoes a statement from the last user turn', () => {
  assert.match(offlineReply([{ role: 'user', content: 'hey there' }]), /^Hello!/);
  assert.match(offlineReply([{ role: 'user', content: 'How tall is Everest?' }]), /^You asked: How tall is Everest\?/);
  const statement = offlineReply([
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi.' },
    { role: 'user', content: 'my cat is called Tom' },
  ]);
  assert.match(statement, /^I heard: my cat is called Tom\./);
  assert.match(offlineReply([{ role: 'user', content: 'thanks a lot' }]), /^You are welcome/);
  assert.is(offlineReply([{ role: 'user', content: 'goodbye' }]), 'Goodbye! Thanks for trying the avatar.');
});

test('offlineReply() quotes at most twelve words of a long utterance and is deterministic', () => {
  const long = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen';
  const reply = offlineReply([{ role: 'user', content: long }]);
  assert.match(reply, /^I heard: one two three four five six seven eight nine ten eleven twelve\.\.\. /);
  assert.is(offlineReply([{ role: 'user', content: long }]), reply);
});

test('OfflineResponder.generate() streams the reply word by word and counts words as tokens', async () => {
  const messages: ChatMessage[] = [SYSTEM, { role: 'user', content: 'Hello there' }];
  const chunks = await collect(new OfflineResponder().generate(request(messages)));
  const reply = offlineReply(messages);
  assert.is(textOf(chunks), reply);
  const texts = chunks.filter((c) => c.type === 'text');
  assert.is(texts.length, reply.split(' ').length);
  assert.equal(chunks.at(-1), { type: 'done', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: texts.length } });
});

test("OfflineResponder.generate() stops at maxOutputTokens with 'length' and at abort with 'aborted'", async () => {
  const messages: ChatMessage[] = [{ role: 'user', content: 'What is this?' }];
  const limited = await collect(new OfflineResponder().generate(request(messages, undefined, 3)));
  assert.is(limited.length, 4);
  assert.equal(limited.at(-1), { type: 'done', finishReason: 'length', usage: { inputTokens: 3, outputTokens: 3 } });

  const controller = new AbortController();
  const out: GenerateChunk[] = [];
  for await (const c of new OfflineResponder().generate(request(messages, controller.signal))) {
    out.push(c);
    if (out.length === 2) controller.abort();
  }
  assert.is(out.length, 3);
  assert.equal(out.at(-1), { type: 'done', finishReason: 'aborted', usage: { inputTokens: 3, outputTokens: 2 } });
});

test('FakeLlm streams its chunks, records the request and reports word usage', async () => {
  const fake = new FakeLlm({ chunks: ['Hi', ' you', '.'] });
  const req = request([{ role: 'user', content: 'say hi to me' }]);
  const chunks = await collect(fake.generate(req));
  assert.equal(chunks, [
    { type: 'text', text: 'Hi' },
    { type: 'text', text: ' you' },
    { type: 'text', text: '.' },
    { type: 'done', finishReason: 'stop', usage: { inputTokens: 4, outputTokens: 3 } },
  ]);
  assert.is(fake.requests[0], req);
  assert.is(fake.id, 'fake-llm');
});

test('FakeLlm splits a reply text into words and waits chunkDelayMs through its scheduler', async () => {
  const waits: number[] = [];
  const scheduler: Scheduler = async (ms) => {
    waits.push(ms);
  };
  const chunks = await collect(new FakeLlm({ reply: 'one two three', chunkDelayMs: 40, scheduler, usage: null }).generate(request([])));
  assert.is(textOf(chunks), 'one two three');
  assert.equal(waits, [40, 40, 40]);
  assert.equal(chunks.at(-1), { type: 'done', finishReason: 'stop', usage: null });
});

test("FakeLlm ends with 'aborted' when the signal aborts during a delay", async () => {
  const controller = new AbortController();
  const scheduler: Scheduler = async (_ms, signal) => {
    if (!signal.aborted) controller.abort();
  };
  const chunks = await collect(new FakeLlm({ reply: 'a b c', chunkDelayMs: 10, scheduler }).generate(request([], controller.signal)));
  assert.equal(chunks, [{ type: 'done', finishReason: 'aborted', usage: { inputTokens: 0, outputTokens: 0 } }]);
});

test('FakeLlm throws its ProviderError after failAfterChunks chunks', async () => {
  const error = new ProviderError('llm_request_failed', 'scripted failure');
  const seen: GenerateChunk[] = [];
  try {
    for await (const c of new FakeLlm({ reply: 'a b c', error, failAfterChunks: 2 }).generate(request([]))) seen.push(c);
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.is(err, error);
    assert.is(seen.length, 2);
  }
});

test("FakeLlm stops at maxOutputTokens with 'length'; generate() after close() throws 'llm_unavailable'", async () => {
  const fake = new FakeLlm({ reply: 'a b c d' });
  const chunks = await collect(fake.generate(request([], undefined, 2)));
  assert.is(textOf(chunks), 'a b');
  assert.equal(chunks.at(-1), { type: 'done', finishReason: 'length', usage: { inputTokens: 0, outputTokens: 2 } });
  await fake.close();
  assert.ok(fake.isClosed);
  try {
    await collect(fake.generate(request([])));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'llm_unavailable');
  }
});

test.run();
