/**
 * Tests for the OpenAI-compatible provider (src/providers/llm/openai.ts) against a loopback HTTP
 * server that speaks the chat-completions streaming protocol (server-sent events): text and usage,
 * the request it sends, an error status, a connection cut mid-stream, abort, and the bounds: no
 * first token in time (its retry included, never twice the wait) and a stream that stalls.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError, type GenerateChunk, type GenerateRequest } from '../../../src/providers/llm/base.js';
import { OpenAiModel } from '../../../src/providers/llm/openai.js';

type Handler = (req: http.IncomingMessage, body: any, res: http.ServerResponse) => void;

interface Ctx {
  server: http.Server;
  baseUrl: string;
  handler: Handler;
  requests: { headers: http.IncomingHttpHeaders; body: any; url: string }[];
}

const test = suite<Ctx>('OpenAiModel', {} as Ctx);

test.before.each(async (ctx) => {
  ctx.requests = [];
  ctx.handler = () => {
    throw new Error('no handler');
  };
  ctx.server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : null;
      ctx.requests.push({ headers: req.headers, body, url: req.url ?? '' });
      ctx.handler(req, body, res);
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.baseUrl = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}/v1`;
});

test.after.each(async (ctx) => {
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
});

function sse(res: http.ServerResponse): (data: unknown) => void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return (data) => res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

function delta(content: string | null, finish: string | null = null): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'test-model',
    choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }],
  };
}

function model(ctx: Ctx, apiKey: string | null = 'sk-test', contextTokens = 4096): OpenAiModel {
  return new OpenAiModel({ baseUrl: ctx.baseUrl, apiKey, model: 'test-model', maxOutputTokens: 77, contextTokens, firstTokenTimeoutMs: 5000, tokenGapTimeoutMs: 5000, speculative: true });
}

function request(signal: AbortSignal = new AbortController().signal, maxOutputTokens: number | null = null): GenerateRequest {
  return {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi there' },
    ],
    maxOutputTokens,
    signal,
  };
}

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const out: GenerateChunk[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

test('generate() streams the deltas as text chunks, then done with the usage of the last event', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('Hello'));
    send(delta(' there'));
    send(delta('!', 'stop'));
    send({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'test-model', choices: [], usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } });
    send('[DONE]');
    res.end();
  };
  const chunks = await collect(model(ctx).generate(request()));
  assert.equal(chunks, [
    { type: 'text', text: 'Hello' },
    { type: 'text', text: ' there' },
    { type: 'text', text: '!' },
    { type: 'done', finishReason: 'stop', usage: { inputTokens: 12, outputTokens: 3 } },
  ]);
});

test('generate() sends the model, the messages in order, stream options, max_tokens and the bearer key', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('ok', 'stop'));
    send('[DONE]');
    res.end();
  };
  await collect(model(ctx).generate(request(undefined, 5)));
  await collect(model(ctx).generate(request()));
  const [first, second] = ctx.requests;
  assert.is(first!.url, '/v1/chat/completions');
  assert.is(first!.headers.authorization, 'Bearer sk-test');
  assert.is(first!.body.model, 'test-model');
  assert.equal(first!.body.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hi there' },
  ]);
  assert.is(first!.body.stream, true);
  assert.equal(first!.body.stream_options, { include_usage: true });
  assert.is(first!.body.max_tokens, 5);
  assert.is(second!.body.max_tokens, 77, 'a request without a limit gets the configured default');
});

test('generate() sends only the newest turns that fit contextTokens, with the instructions, not a 15 MB conversation (issue 8)', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('ok', 'stop'));
    send('[DONE]');
    res.end();
  };
  const turn = 'word '.repeat(200);
  const messages: GenerateRequest['messages'] = [{ role: 'system', content: 'Be brief.' }];
  for (let i = 0; messages.length * turn.length < 15_000_000; i++) messages.push({ role: i % 2 ? 'assistant' : 'user', content: `${i} ${turn}` });
  messages.push({ role: 'user', content: 'The last question?' });
  await collect(model(ctx, 'sk-test', 1024).generate({ messages, maxOutputTokens: 24, signal: new AbortController().signal }));
  const sent = ctx.requests[0]!.body.messages as { role: string; content: string }[];
  const sentChars = sent.reduce((n, m) => n + m.content.length, 0);
  assert.ok(sentChars <= (1024 - 24) * 4, `${sentChars} characters sent`);
  assert.equal(sent[0], { role: 'system', content: 'Be brief.' });
  assert.equal(sent.at(-1), { role: 'user', content: 'The last question?' });
  assert.equal(sent.slice(1, -1).map((m) => m.content), messages.slice(-sent.length + 1, -1).map((m) => m.content), 'a contiguous stretch of the newest turns');
  assert.ok(sent.length > 3);
});

test("generate() reports finishReason 'length' and usage null when the server sends no usage", async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('Once upon'));
    send(delta(null, 'length'));
    send('[DONE]');
    res.end();
  };
  const chunks = await collect(model(ctx, null).generate(request()));
  assert.equal(chunks.at(-1), { type: 'done', finishReason: 'length', usage: null });
  assert.is(ctx.requests[0]!.headers.authorization, 'Bearer no-key');
});

test("generate() throws ProviderError 'llm_request_failed' with the status for an error answer", async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    res.writeHead(401, { 'content-type': 'application/json', 'x-request-id': 'req_123' });
    res.end(JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }));
  };
  try {
    await collect(model(ctx).generate(request()));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    const e = err as ProviderError;
    assert.is(e.code, 'llm_request_failed');
    assert.is(e.statusCode, 401);
    assert.is(e.requestId, 'req_123');
    assert.match(e.message, /401/);
  }
});

test('generate() fails on a 503 answer with its status (after its one retry)', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after-ms': '1' });
    res.end(JSON.stringify({ error: { message: 'overloaded' } }));
  };
  try {
    await collect(model(ctx).generate(request()));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).statusCode, 503);
    assert.is(ctx.requests.length, 2);
  }
});

function bounded(ctx: Ctx, firstTokenTimeoutMs: number, tokenGapTimeoutMs: number): OpenAiModel {
  return new OpenAiModel({ baseUrl: ctx.baseUrl, apiKey: 'sk-test', model: 'test-model', maxOutputTokens: 77, contextTokens: 4096, firstTokenTimeoutMs, tokenGapTimeoutMs, speculative: true });
}

/** Runs generate() to its end or its error: the chunks seen, the error, and how long it took. */
async function timed(m: OpenAiModel): Promise<{ seen: GenerateChunk[]; err: unknown; ms: number }> {
  const seen: GenerateChunk[] = [];
  const t0 = performance.now();
  try {
    for await (const c of m.generate(request())) seen.push(c);
    return { seen, err: null, ms: performance.now() - t0 };
  } catch (err) {
    return { seen, err, ms: performance.now() - t0 };
  }
}

test('a server that sends its headers and an empty chunk, then no token, fails at the first-token bound', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send({ ...(delta(null) as object), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  };
  const { seen, err, ms } = await timed(bounded(ctx, 700, 5000));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'llm_request_failed');
  assert.match((err as Error).message, /no first token within 700 ms/);
  assert.equal(seen, []);
  assert.ok(ms >= 650 && ms < 700 + 3000, `failed after ${ms.toFixed(0)} ms`);
  assert.is(ctx.requests.length, 1, 'a stall is not retried');
});

test("the retry counts against the same first-token bound: a 503 then a stall fails once, not after twice the wait", async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    if (ctx.requests.length === 1) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after-ms': '300' });
      res.end(JSON.stringify({ error: { message: 'overloaded' } }));
      return;
    }
    sse(res); // headers, then nothing
  };
  const { err, ms } = await timed(bounded(ctx, 1000, 5000));
  assert.match((err as Error).message, /no first token within 1000 ms/);
  assert.is(ctx.requests.length, 2);
  assert.ok(ms < 1000 + 3000 && ms >= 950, `failed after ${ms.toFixed(0)} ms`);
});

test('a 429 whose Retry-After does not fit the first-token bound fails at once, with no retry; one that fits is retried after it', async (ctx) => {
  let retryAfter = '30';
  let limited = true; // each generate's first request is refused
  ctx.handler = (_req, _body, res) => {
    if (limited) {
      limited = false;
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': retryAfter });
      res.end(JSON.stringify({ error: { message: 'slow down' } }));
      return;
    }
    const send = sse(res);
    send(delta('Hi'));
    send(delta(null, 'stop'));
    send('[DONE]');
    res.end();
  };
  const late = await timed(bounded(ctx, 2000, 2000));
  assert.is((late.err as ProviderError).statusCode, 429);
  assert.ok(late.ms < 1500, `failed after ${late.ms.toFixed(0)} ms, not after waiting 30 s`);
  assert.is(ctx.requests.length, 1);
  retryAfter = '1';
  limited = true;
  const fits = await timed(bounded(ctx, 2500, 2000));
  assert.is(fits.err, null);
  assert.equal(fits.seen[0], { type: 'text', text: 'Hi' });
  assert.ok(fits.ms >= 950, `retried after the second the upstream asked for (${fits.ms.toFixed(0)} ms)`);
  assert.is(ctx.requests.length, 3);
});

test('a stream that stalls mid-reply fails at the token-gap bound, after the text it gave', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('Hello'));
    setTimeout(() => send(delta(' there')), 300);
  };
  const { seen, err } = await timed(bounded(ctx, 5000, 800));
  assert.match((err as Error).message, /stalled: no token for 800 ms/);
  assert.equal(seen, [{ type: 'text', text: 'Hello' }, { type: 'text', text: ' there' }], 'a token resets the gap bound');
});

test('a slow but steady stream is not cut: each token restarts the gap bound', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    const words = ['One', ' two', ' three', ' four'];
    words.forEach((w, i) => setTimeout(() => send(delta(w)), 200 * (i + 1)));
    setTimeout(() => {
      send(delta(null, 'stop'));
      send('[DONE]');
      res.end();
    }, 200 * (words.length + 1));
  };
  const { seen, err } = await timed(bounded(ctx, 600, 500));
  assert.is(err, null);
  assert.is(seen.filter((c) => c.type === 'text').map((c) => (c as { text: string }).text).join(''), 'One two three four');
});

test('generate() throws llm_request_failed without a status when the connection is cut mid-stream', async (ctx) => {
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('Partial'));
    setTimeout(() => res.socket?.destroy(), 20);
  };
  const seen: GenerateChunk[] = [];
  try {
    for await (const c of model(ctx).generate(request())) seen.push(c);
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'llm_request_failed');
    assert.is((err as ProviderError).statusCode, null);
    assert.equal(seen, [{ type: 'text', text: 'Partial' }]);
  }
});

test("aborting mid-stream ends generate() with finishReason 'aborted' and closes the upstream request", async (ctx) => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
  ctx.handler = (_req, _body, res) => {
    const send = sse(res);
    send(delta('First'));
    res.on('close', upstreamClosed);
    // Nothing more is sent: only the abort can end this stream.
  };
  const controller = new AbortController();
  const chunks: GenerateChunk[] = [];
  for await (const c of model(ctx).generate(request(controller.signal))) {
    chunks.push(c);
    if (c.type === 'text') controller.abort();
  }
  assert.equal(chunks, [
    { type: 'text', text: 'First' },
    { type: 'done', finishReason: 'aborted', usage: null },
  ]);
  await closed;
});

test("generate() with an already aborted signal sends nothing and ends with 'aborted'", async (ctx) => {
  const controller = new AbortController();
  controller.abort();
  const chunks = await collect(model(ctx).generate(request(controller.signal)));
  assert.equal(chunks, [{ type: 'done', finishReason: 'aborted', usage: null }]);
  assert.is(ctx.requests.length, 0);
});

test("generate() after close() throws ProviderError 'llm_unavailable'", async (ctx) => {
  const m = model(ctx);
  await m.close();
  try {
    await collect(m.generate(request()));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'llm_unavailable');
  }
});

test.run();
