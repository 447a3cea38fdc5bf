/**
 * Tests for the local GGUF provider (src/providers/llm/llama-cpp.ts) with the real default model
 * (models/manifest.json's llm-default, fetched by npm run setup:models). Skipped, with the reason
 * printed, when that model is not present. Also covers the chat-history mapping, which needs no
 * model, and the sequences' reuse of evaluated prompts (a conversation's next turn lands where its
 * last one was; prefilled instructions), read from the model's prompt counters. Prints the
 * measured load time, time to first text and token rate.
 */
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { modelPath } from '../../../src/models/manifest.js';
import { Logger } from '../../../src/core/log.js';
import type { GenerateChunk, GenerateRequest } from '../../../src/providers/llm/base.js';
import { DEFAULT_LLM_MODEL_NAME } from '../../../src/providers/llm/index.js';
import { LlamaCppModel, toHistory } from '../../../src/providers/llm/llama-cpp.js';
import { watchEventLoop } from '../../helpers/event-loop.js';

const MODELS_DIR = path.resolve(import.meta.dirname, '../../../models');
const MODEL_FILE = modelPath(MODELS_DIR, DEFAULT_LLM_MODEL_NAME);

interface Ctx {
  model: LlamaCppModel;
}

const test = suite<Ctx>('LlamaCppModel', {} as Ctx);
/** With the model absent, its tests are registered as skipped (uvu counts them) and say why. */
const modelTest = MODEL_FILE ? test : test.skip;
if (!MODEL_FILE) {
  process.stdout.write(`LlamaCppModel: skipping the real-model tests: '${DEFAULT_LLM_MODEL_NAME}' is not fetched (run npm run setup:models)\n`);
}

test.before(async (ctx) => {
  if (!MODEL_FILE) return;
  ctx.model = new LlamaCppModel({ modelFile: MODEL_FILE, threads: 1, contextTokens: 2048, parallel: 2, maxOutputTokens: 48, log: new Logger('warn') });
  const started = performance.now();
  await ctx.model.load();
  process.stdout.write(`LlamaCppModel: loaded ${path.basename(MODEL_FILE)} in ${Math.round(performance.now() - started)} ms\n`);
});

test.after(async (ctx) => {
  await ctx.model?.close();
});

function request(question: string, signal = new AbortController().signal, maxOutputTokens: number | null = null): GenerateRequest {
  return {
    messages: [
      { role: 'system', content: 'You are a friendly avatar. Answer in one short spoken sentence.' },
      { role: 'user', content: question },
    ],
    maxOutputTokens,
    signal,
  };
}

test('toHistory() maps roles to chat history items and merges consecutive turns of one role', () => {
  assert.equal(
    toHistory([
      { role: 'system', content: 'S1' },
      { role: 'system', content: 'S2' },
      { role: 'user', content: 'U1' },
      { role: 'user', content: 'U2' },
      { role: 'assistant', content: 'A1' },
      { role: 'user', content: 'U3' },
    ]),
    [
      { type: 'system', text: 'S1\n\nS2' },
      { type: 'user', text: 'U1\nU2' },
      { type: 'model', response: ['A1'] },
      { type: 'user', text: 'U3' },
    ],
  );
});

modelTest('generate() streams a non-empty reply, then done with tokenized usage', async (ctx) => {
  assert.is(ctx.model.id, 'llama-cpp:qwen2.5-coder-0.5b-instruct-q4_k_m');
  const started = performance.now();
  let firstMs = 0;
  const chunks: GenerateChunk[] = [];
  for await (const c of ctx.model.generate(request('What is the capital of France?'))) {
    if (c.type === 'text' && firstMs === 0) firstMs = performance.now() - started;
    chunks.push(c);
  }
  const totalMs = performance.now() - started;
  const text = chunks.map((c) => (c.type === 'text' ? c.text : '')).join('');
  const done = chunks.at(-1)!;
  assert.is(done.type, 'done');
  if (done.type !== 'done') return;
  assert.ok(text.trim().length > 0);
  assert.match(text, /Paris/);
  assert.is(chunks.filter((c) => c.type === 'done').length, 1);
  assert.ok(done.usage && done.usage.inputTokens > 10 && done.usage.outputTokens > 0, JSON.stringify(done.usage));
  const tokensPerSecond = done.usage!.outputTokens / ((totalMs - firstMs) / 1000);
  process.stdout.write(`LlamaCppModel: first text after ${Math.round(firstMs)} ms, ${done.usage!.outputTokens} tokens, ${tokensPerSecond.toFixed(1)} tokens/s after the first\n`);
});

modelTest("generate() honours maxOutputTokens with finishReason 'length'", async (ctx) => {
  const chunks: GenerateChunk[] = [];
  for await (const c of ctx.model.generate(request('Tell me a long story about a dragon.', undefined, 4))) chunks.push(c);
  const done = chunks.at(-1)!;
  assert.equal(done.type === 'done' && [done.finishReason, done.usage!.outputTokens <= 4], ['length', true]);
});

modelTest("aborting ends generate() with 'aborted' and no text after the abort; the model serves the next request", async (ctx) => {
  const controller = new AbortController();
  const chunks: GenerateChunk[] = [];
  for await (const c of ctx.model.generate(request('Count from one to fifty in words.', controller.signal))) {
    chunks.push(c);
    if (c.type === 'text' && chunks.length === 2) controller.abort();
  }
  assert.is(chunks.length, 3);
  const last = chunks.at(-1);
  assert.is(last?.type === 'done' ? last.finishReason : null, 'aborted');
  const again: GenerateChunk[] = [];
  for await (const c of ctx.model.generate(request('Say hello.', undefined, 8))) again.push(c);
  assert.ok(again.some((c) => c.type === 'text'));
});

modelTest('a 15 MB conversation: only what fits the context is tokenized, and the event loop is not blocked (issue 8)', async (ctx) => {
  // The tester's case: long turns, then a question. Before, all 15 MB was formatted and tokenized on
  // the event loop (19 s here); now the newest turns within the context's character budget are.
  const turn = 'The quick brown fox jumps over the lazy dog near the river bank today. '.repeat(1400);
  const messages: GenerateRequest['messages'] = [{ role: 'system', content: 'You are brief.' }];
  for (let i = 0; (messages.length - 1) * turn.length < 15_000_000; i++) messages.push({ role: i % 2 ? 'assistant' : 'user', content: turn });
  messages.push({ role: 'user', content: 'Which animal jumps? Answer in one word.' });
  const loop = watchEventLoop(5);
  const chunks: GenerateChunk[] = [];
  let worstGapMs: number;
  try {
    for await (const c of ctx.model.generate({ messages, maxOutputTokens: 8, signal: new AbortController().signal })) chunks.push(c);
  } finally {
    worstGapMs = loop.stop();
  }
  const done = chunks.at(-1);
  assert.ok(done?.type === 'done' && done.usage !== null);
  if (done?.type !== 'done' || !done.usage) return;
  process.stdout.write(`LlamaCppModel: 15 MB conversation: ${done.usage.inputTokens} input tokens, longest event-loop stall ${Math.round(worstGapMs)} ms\n`);
  assert.ok(done.usage.inputTokens <= 2048, `${done.usage.inputTokens} input tokens for a 2048-token context`);
  assert.ok(chunks.some((c) => c.type === 'text'));
  // Seconds before (the whole conversation tokenized at once); tens of ms now. 2 s separates the two on any machine.
  assert.ok(worstGapMs < 2000, `the event loop stalled ${Math.round(worstGapMs)} ms`);
});

modelTest('concurrent requests beyond the sequences wait their turn and all complete', async (ctx) => {
  const run = async (q: string) => {
    const out: GenerateChunk[] = [];
    for await (const c of ctx.model.generate(request(q, undefined, 6))) out.push(c);
    return out;
  };
  const results = await Promise.all([run('Say one.'), run('Say two.'), run('Say three.')]);
  for (const r of results) {
    assert.ok(r.some((c) => c.type === 'text'));
    assert.is(r.at(-1)!.type, 'done');
  }
});

/** Runs a request to its end; returns the reply text and the prompt tokens it evaluated and reused. */
async function turn(model: LlamaCppModel, messages: GenerateRequest['messages']): Promise<{ text: string; prompt: number; reused: number }> {
  const before = { ...model.promptStats };
  let text = '';
  for await (const c of model.generate({ messages, maxOutputTokens: 12, signal: new AbortController().signal })) if (c.type === 'text') text += c.text;
  return { text, prompt: model.promptStats.promptTokens - before.promptTokens, reused: model.promptStats.reusedTokens - before.reusedTokens };
}

modelTest('a conversation’s next turn lands on the sequence that holds its last one: only the new part is evaluated', async (ctx) => {
  const system = { role: 'system' as const, content: 'You are Ada, a patient maths tutor. Answer in one short spoken sentence.' };
  const first = await turn(ctx.model, [system, { role: 'user', content: 'What is two plus two?' }]);
  // Two sequences: before the affinity, the next request took the other one and evaluated it all.
  const second = await turn(ctx.model, [system, { role: 'user', content: 'What is two plus two?' }, { role: 'assistant', content: first.text }, { role: 'user', content: 'And three plus three?' }]);
  assert.ok(second.reused >= first.prompt, `reused ${second.reused} of ${second.prompt} tokens; the first turn's prompt was ${first.prompt}`);
  assert.ok(second.prompt - second.reused <= 40, `${second.prompt - second.reused} tokens evaluated for one new turn`);
});

modelTest('prefill(): instructions evaluated ahead are not evaluated again by a new conversation, on either sequence', async (ctx) => {
  const system = { role: 'system' as const, content: 'You are Bob, a cheerful travel guide for Lisbon. Answer in one short spoken sentence.' };
  await ctx.model.prefill([system]);
  const systemTokens = (await turn(ctx.model, [system, { role: 'user', content: 'Hi!' }])).reused;
  assert.ok(systemTokens >= 15, `reused ${systemTokens} tokens`);
  // Both sequences hold them: two conversations at once both start from the instructions.
  await ctx.model.prefill([system]);
  const [a, b] = await Promise.all([
    turn(ctx.model, [system, { role: 'user', content: 'Where should I eat?' }]),
    turn(ctx.model, [system, { role: 'user', content: 'What is the weather like?' }]),
  ]);
  assert.ok(a.reused >= systemTokens && b.reused >= systemTokens, `reused ${a.reused} and ${b.reused} tokens`);
});

modelTest('prepare(): a session\'s own instructions are evaluated ahead, never over a conversation, and kept for whichever sequence its first reply lands on', async (ctx) => {
  // Both sequences spare again (prefill marks what it evaluates as spare).
  await ctx.model.prefill([{ role: 'system', content: 'You are a friendly avatar.' }]);
  const guide = { role: 'system' as const, content: 'You are Dora, a museum guide in Porto. Answer in one short spoken sentence about art.' };
  await ctx.model.prepare({ messages: [guide] });
  const first = await turn(ctx.model, [guide, { role: 'user', content: 'What should I see first?' }]);
  assert.ok(first.reused >= 20, `the first reply reused ${first.reused} of ${first.prompt} tokens`);
  // Two conversations now hold the two sequences (neither is spare): preparing other instructions
  // evaluates nothing, so each conversation's next turn still lands on its own tokens.
  const other = { role: 'system' as const, content: 'You are Eli, a chess coach. Answer in one short spoken sentence.' };
  const second = await turn(ctx.model, [other, { role: 'user', content: 'How do I open?' }]);
  const finn = { role: 'system' as const, content: 'You are Finn, a weather reporter for Oslo. Answer in one short spoken sentence about the weather.' };
  await ctx.model.prepare({ messages: [finn] });
  const again = await turn(ctx.model, [guide, { role: 'user', content: 'What should I see first?' }, { role: 'assistant', content: first.text }, { role: 'user', content: 'And after that?' }]);
  assert.ok(again.reused >= first.prompt, `the guide's conversation kept its sequence: reused ${again.reused}, its first prompt was ${first.prompt}`);
  const chess = await turn(ctx.model, [other, { role: 'user', content: 'How do I open?' }, { role: 'assistant', content: second.text }, { role: 'user', content: 'And then?' }]);
  assert.ok(chess.reused >= second.prompt, `the coach's conversation kept its sequence: reused ${chess.reused}, its first prompt was ${second.prompt}`);
  // Finn's instructions were evaluated all the same (on the call gate's sequence) and kept as a state
  // any sequence loads: his first reply evaluates only his question, wherever it lands.
  const rain = await turn(ctx.model, [finn, { role: 'user', content: 'Will it rain today?' }]);
  assert.ok(rain.prompt - rain.reused <= 16, `${rain.prompt - rain.reused} of ${rain.prompt} prompt tokens evaluated by Finn's first reply`);
});

modelTest('endOfTurnProbability(): a finished question ends there, a fragment does not; the reply that follows evaluates only the end of the message', async (ctx) => {
  const system = { role: 'system' as const, content: 'You are Cleo, a friendly avatar. Answer in one short spoken sentence.' };
  const ask = (words: string) => ctx.model.endOfTurnProbability({ messages: [system, { role: 'user', content: words }], maxOutputTokens: 12, signal: new AbortController().signal });
  const finished = await ask('What time zone are you in right now');
  const fragments = await Promise.all(['What time zone', 'I would like to book a table for', 'Can you tell me about the'].map(ask));
  process.stdout.write(`LlamaCppModel: end of turn after a question ${finished?.toFixed(3)}, after fragments ${fragments.map((p) => p?.toExponential(1)).join(', ')}\n`);
  assert.ok(finished !== null && finished > 0.1, `finished ${finished}`);
  for (const p of fragments) assert.ok(p !== null && p < 1e-3, `fragment ${p}`);
  // The reply to the same words lands where they were just read.
  await ask('Where are you from');
  const reply = await turn(ctx.model, [system, { role: 'user', content: 'Where are you from?' }]);
  assert.ok(reply.prompt - reply.reused <= 8, `${reply.prompt - reply.reused} of ${reply.prompt} tokens evaluated for the reply`);
  const aborted = new AbortController();
  aborted.abort();
  assert.is(await ctx.model.endOfTurnProbability({ messages: [system, { role: 'user', content: 'Hello' }], maxOutputTokens: null, signal: aborted.signal }), null);
});

modelTest('a confirmed request does not wait for speculative ones: it stops one (told at once, its stream ends aborted) and is served first', async (ctx) => {
  const system = { role: 'system' as const, content: 'You are a storyteller. Tell long stories.' };
  const preempted: number[] = [];
  const speculative = (i: number) =>
    ctx.model.generate({
      messages: [system, { role: 'user', content: `Tell me story number ${i}.` }],
      maxOutputTokens: 48,
      signal: new AbortController().signal,
      speculation: { isSpeculative: () => true, preempted: () => preempted.push(i) },
    });
  const finishes = async (stream: AsyncIterable<GenerateChunk>) => {
    let reason = '';
    for await (const c of stream) if (c.type === 'done') reason = c.finishReason;
    return reason;
  };
  const before = ctx.model.preempted;
  // Both sequences generate speculatively; a speculative third waits behind the confirmed one.
  const running = [finishes(speculative(1)), finishes(speculative(2))];
  await new Promise((r) => setTimeout(r, 300));
  const third = finishes(speculative(3));
  const confirmed = await turn(ctx.model, [system, { role: 'user', content: 'Say hello.' }]);
  assert.ok(confirmed.text.length > 0);
  assert.is(ctx.model.preempted - before, 1, 'one speculative generation stopped');
  assert.is(preempted.length, 1);
  const reasons = await Promise.all(running);
  assert.is(reasons[preempted[0]! - 1], 'aborted', 'the preempted stream ends aborted');
  assert.ok(['stop', 'length'].includes(await third), 'the waiting speculative one is served after');
});

test.run();
