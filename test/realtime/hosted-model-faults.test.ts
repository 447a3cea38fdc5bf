/**
 * A hosted language model that misbehaves (issue 43), as a production deployment meets it: the
 * server's own OpenAI-compatible provider, with its defaults, against a real HTTP stand-in on
 * loopback (harness/servers/chat-completions-server.ts). A model that accepts the request and
 * sends no token: the client gets the error event naming its response.create and then hears the
 * avatar's own line (LLM_FALLBACK_LINE) in the session's voice, long before the old 60 s, and the
 * response ends failed with that line as its message; with the line off, only the error. A stream
 * that stalls mid-reply ends with what was said kept in the conversation. Each fault before the
 * first token (500, 429 with and without Retry-After, a malformed event, a dropped stream, a
 * refused connection) gets the error and the line, and the session goes on; a stream cut
 * mid-reply ends at once with what was said kept.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ChatScript } from '../../harness/servers/chat-completions-server.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { Logger } from '../../src/core/log.js';
import { createLanguageModels, loadLlmConfig } from '../../src/providers/llm/index.js';

interface Ctx {
  upstream: ChatCompletionsServer;
  script: ChatScript;
  t: RealtimeTestServer;
}

const DEFAULT_LINE = "Sorry, I can't answer right now. Please ask me again in a moment.";

async function start(ctx: Ctx, env: Record<string, string> = {}): Promise<void> {
  ctx.upstream = await startChatCompletionsServer((body, n) => ctx.script(body, n));
  const config = loadLlmConfig({ LLM_PROVIDER: 'openai', LLM_BASE_URL: ctx.upstream.baseUrl, LLM_WORDS_READER: 'off', ...env });
  const llm = createLanguageModels(config, 'models', new Logger('silent'));
  ctx.t = await startRealtimeTestServer({ runtime: { llm } });
}

const Faults = suite<Ctx>('a hosted model that misbehaves, with the defaults', {} as Ctx);
Faults.after.each(async (ctx) => {
  await ctx.t?.close();
  await ctx.upstream?.close();
});

function ask(c: RealtimeTestClient, text: string, eventId = 'ask_1'): void {
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  c.send({ type: 'response.create', event_id: eventId });
}

Faults('no first token: the error event, then the avatar says its own line in the session voice; the response ends failed with it', async (ctx) => {
  ctx.script = () => ({ text: [], ending: 'hang' }); // headers and the role chunk, then nothing
  await start(ctx);
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  const t0 = performance.now();
  ask(c, 'Hello?');
  const error = await c.waitFor('error', { timeoutMs: 20_000 });
  const errorMs = performance.now() - t0;
  assert.equal([error.error.code, error.error.event_id], ['llm_request_failed', 'ask_1']);
  assert.match(error.error.message, /no first token within 2500 ms/);
  await c.waitFor('response.output_audio.delta', { timeoutMs: 20_000 });
  const done = await c.waitFor('response.done', { timeoutMs: 30_000 });
  assert.is(done.response.status, 'failed');
  assert.equal(done.response.status_details?.error?.code, 'llm_request_failed');
  const said = c.events.find((e) => e.type === 'response.output_audio_transcript.done');
  assert.is(said?.transcript, DEFAULT_LINE);
  assert.is(done.response.output[0]?.content?.[0]?.transcript, DEFAULT_LINE);
  // Bounded by the first-token time, not twice it nor the old 30 s: generous for a loaded machine.
  assert.ok(errorMs >= 2400 && errorMs < 2500 + 5000, `the error after ${errorMs.toFixed(0)} ms`);
  assert.is(ctx.upstream.requests.length, 1, 'a stall is not retried');
  await c.close();
});

Faults('with LLM_FALLBACK_LINE=off the client gets the error and a failed response, and nothing is said', async (ctx) => {
  ctx.script = () => ({ status: 500, errorMessage: 'upstream broke' });
  await start(ctx, { LLM_FALLBACK_LINE: 'off' });
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  ask(c, 'Hello?');
  const done = await c.waitFor('response.done', { timeoutMs: 20_000 });
  assert.is(done.response.status, 'failed');
  assert.equal(done.response.output, []);
  assert.is(c.events.find((e) => e.type === 'error')?.error.code, 'llm_request_failed');
  assert.not.ok(c.types().includes('response.output_audio.delta'));
  await c.close();
});

Faults('a stream that stalls mid-reply ends the response; what was said stays in the conversation, and nothing else is said', async (ctx) => {
  ctx.script = (_body, n) => (n === 0 ? { text: 'The weather today is bright and mild. And tomorrow', ending: 'hang' } : { text: 'Second answer.' });
  await start(ctx);
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  ask(c, 'What is the weather?');
  const done = await c.waitFor('response.done', { timeoutMs: 30_000 });
  assert.is(done.response.status, 'failed');
  const error = c.events.find((e) => e.type === 'error');
  assert.match(error?.error.message ?? '', /stalled: no token for 2000 ms/);
  assert.not.ok(c.events.some((e) => e.type === 'response.output_audio_transcript.done' && e.transcript.includes('Sorry')), 'the fallback line is for a model that said nothing');
  // The next turn reads what was said of the first.
  ask(c, 'And tomorrow?', 'ask_2');
  await c.waitFor((e) => e.type === 'response.done' && e.response.status === 'completed', { timeoutMs: 30_000 });
  const history = ctx.upstream.requests.at(-1)!.messages.map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : ''}`);
  assert.ok(history.some((m) => m.startsWith('assistant: The weather today is bright and mild.')), history.join('\n'));
  await c.close();
});

/**
 * The faults of a hosted model before its first token, each as the client meets it with the
 * defaults: the error event naming the response.create, then the avatar's own line, within the
 * first-token bound (the retry of a 5xx or a 429 included: never twice the wait).
 */
const BEFORE_FIRST_TOKEN: Array<[string, ChatScript]> = [
  ['500 on every attempt', () => ({ status: 500, errorMessage: 'upstream broke' })],
  ['429 with a Retry-After longer than the bound', () => ({ status: 429, errorMessage: 'slow down', errorHeaders: { 'retry-after': '30' } })],
  ['429 without Retry-After', () => ({ status: 429, errorMessage: 'slow down' })],
  ['a malformed event in place of the first token', () => ({ text: [], malformed: '{"choices": [ not json' })],
  ['the stream dropped before its first token', () => ({ text: [], ending: 'cut' })],
];

for (const [fault, script] of BEFORE_FIRST_TOKEN) {
  Faults(`${fault}: the error event, then the avatar's line, within the first-token bound`, async (ctx) => {
    ctx.script = script;
    await start(ctx);
    const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
    await c.waitFor('session.created');
    const t0 = performance.now();
    ask(c, 'Hello?');
    const error = await c.waitFor('error', { timeoutMs: 20_000 });
    const errorMs = performance.now() - t0;
    assert.equal([error.error.code, error.error.event_id], ['llm_request_failed', 'ask_1']);
    const done = await c.waitFor('response.done', { timeoutMs: 30_000 });
    assert.is(done.response.status, 'failed');
    assert.is(c.events.find((e) => e.type === 'response.output_audio_transcript.done')?.transcript, DEFAULT_LINE);
    assert.ok(errorMs < 2500 + 5000, `the error after ${errorMs.toFixed(0)} ms`);
    assert.ok(ctx.upstream.requests.length <= 2, `${ctx.upstream.requests.length} requests: at most the one retry`);
    // The session goes on: the next turn is asked again.
    ctx.script = () => ({ text: 'Back again.' });
    ask(c, 'Are you there?', 'ask_2');
    const next = await c.waitFor((e) => e.type === 'response.done' && e.response.status === 'completed', { timeoutMs: 30_000 });
    assert.ok(next);
    await c.close();
  });
}

Faults('a refused connection: the error event, then the avatar says its line at once', async (ctx) => {
  ctx.script = () => ({ text: 'unused' });
  ctx.upstream = await startChatCompletionsServer(() => ({ text: 'unused' }));
  const baseUrl = ctx.upstream.baseUrl;
  await ctx.upstream.close(); // nothing listens there now
  const llm = createLanguageModels(loadLlmConfig({ LLM_PROVIDER: 'openai', LLM_BASE_URL: baseUrl, LLM_WORDS_READER: 'off' }), 'models', new Logger('silent'));
  ctx.t = await startRealtimeTestServer({ runtime: { llm } });
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  ask(c, 'Hello?');
  assert.is((await c.waitFor('error', { timeoutMs: 20_000 })).error.code, 'llm_request_failed');
  await c.waitFor('response.done', { timeoutMs: 30_000 });
  assert.is(c.events.find((e) => e.type === 'response.output_audio_transcript.done')?.transcript, DEFAULT_LINE);
  await c.close();
});

Faults('a stream cut mid-reply ends the response at once, what was said kept, and no line after it', async (ctx) => {
  // The first sentence at once (it plays), the start of the second 1.5 s later, then the connection drops.
  ctx.script = (_body, n) => (n === 0 ? { text: ['The weather today is bright and mild. ', 'And tomorrow'], firstDelayMs: 0, delayMs: 1500, ending: 'cut' } : { text: 'Again.' });
  await start(ctx);
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  ask(c, 'What is the weather?');
  const done = await c.waitFor('response.done', { timeoutMs: 30_000 });
  assert.is(done.response.status, 'failed');
  assert.not.ok(c.events.some((e) => e.type === 'response.output_audio_transcript.done' && e.transcript === DEFAULT_LINE));
  ask(c, 'And tomorrow?', 'ask_2');
  await c.waitFor((e) => e.type === 'response.done' && e.response.status === 'completed', { timeoutMs: 30_000 });
  const history = ctx.upstream.requests.at(-1)!.messages.map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : ''}`);
  assert.ok(history.some((m) => m.startsWith('assistant: The weather today')), history.join('\n'));
  await c.close();
});

Faults.run();
