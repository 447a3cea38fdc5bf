/**
 * OpenAI TTS (src/providers/tts/openai.ts) against a local HTTP server that answers like
 * `POST /v1/audio/speech` with response_format pcm: streamed chunks, the request it sends,
 * error answers, timeouts and abort.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError } from '../../../src/providers/tts/base.js';
import type { OpenAiTtsConfig } from '../../../src/providers/tts/config.js';
import { OpenAiVoice } from '../../../src/providers/tts/openai.js';
import { collect } from './tts-helpers.js';

interface Ctx {
  server: http.Server;
  config: OpenAiTtsConfig;
  requests: Array<{ url: string; auth: string | undefined; body: Record<string, unknown> }>;
  /** How the server answers the next request. */
  answer: (req: http.IncomingMessage, res: http.ServerResponse) => void;
}

const OpenAi = suite<Ctx>('OpenAiVoice', {} as Ctx);

/** 24 kHz PCM16LE ramp: sample i = i - 1000 (wraps within int16). */
function pcmBytes(samples: number, from = 0): Buffer {
  const b = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) b.writeInt16LE(((from + i) % 2000) - 1000, i * 2);
  return b;
}

OpenAi.before.each(async (ctx) => {
  ctx.requests = [];
  ctx.answer = (_req, res) => res.end(pcmBytes(2400));
  ctx.server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      ctx.requests.push({ url: req.url ?? '', auth: req.headers.authorization, body: JSON.parse(body || '{}') });
      ctx.answer(req, res);
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  const { port } = ctx.server.address() as AddressInfo;
  ctx.config = { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test', model: 'gpt-4o-mini-tts', timeoutMs: 2000 };
});

OpenAi.after.each(async (ctx) => {
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
});

OpenAi('speak() posts the cleaned text as pcm with the voice, model, key and speed', async (ctx) => {
  await collect(new OpenAiVoice('alice', 'coral', ctx.config, 1.1), '**Hello** there 👋', { speed: 0.5 });
  assert.is(ctx.requests.length, 1);
  const r = ctx.requests[0]!;
  assert.is(r.url, '/v1/audio/speech');
  assert.is(r.auth, 'Bearer sk-test');
  assert.equal(r.body, { model: 'gpt-4o-mini-tts', voice: 'coral', input: 'Hello there', response_format: 'pcm', speed: 0.55 });
});

OpenAi('speak() streams 100 ms chunks of 24 kHz audio in order as the body arrives, with no phoneme timings', async (ctx) => {
  ctx.answer = (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'audio/pcm' });
    // 1 s in uneven pieces, one of them splitting a sample in half.
    const all = pcmBytes(24000);
    const cuts = [0, 1001, 9600, 9601, 30000, all.length];
    let i = 0;
    const next = () => {
      if (i + 1 >= cuts.length) return res.end();
      res.write(all.subarray(cuts[i]!, cuts[i + 1]!));
      i++;
      setImmediate(next);
    };
    next();
  };
  const chunks = await collect(new OpenAiVoice('default', 'alloy', ctx.config), 'Hello.');
  assert.is(chunks.length, 10); // 100 ms each, however the body was split
  const joined = chunks.flatMap((c) => Array.from(c.pcm));
  assert.is(joined.length, 24000);
  for (let i = 0; i < joined.length; i++) if (joined[i] !== (i % 2000) - 1000) assert.unreachable(`sample ${i} is ${joined[i]}`);
  for (const c of chunks) {
    assert.is(c.sampleRateHz, 24000);
    assert.equal(c.phonemes, []);
  }
});

OpenAi('speak() throws ProviderError tts_request_failed with the status for an error answer', async (ctx) => {
  for (const status of [401, 429, 503]) {
    ctx.answer = (_req, res) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'x-request-id': 'req_1' });
      res.end('{"error":{"message":"nope"}}');
    };
    try {
      await collect(new OpenAiVoice('default', 'alloy', ctx.config), 'Hello.');
      assert.unreachable('should have thrown');
    } catch (err) {
      assert.instance(err, ProviderError);
      const e = err as ProviderError;
      assert.is(e.code, 'tts_request_failed');
      assert.is(e.statusCode, status);
      assert.is(e.requestId, 'req_1');
      assert.match(e.message, /nope/);
    }
  }
});

OpenAi('speak() throws ProviderError tts_timeout when no answer starts in time', async (ctx) => {
  ctx.answer = () => undefined; // never answers
  try {
    await collect(new OpenAiVoice('default', 'alloy', { ...ctx.config, timeoutMs: 150 }), 'Hello.');
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'tts_timeout');
  }
});

OpenAi('speak() ends quietly when aborted mid-stream and stops the download', async (ctx) => {
  let closed!: () => void;
  const serverSawClose = new Promise<void>((resolve) => (closed = resolve));
  ctx.answer = (_req, res) => {
    res.writeHead(200);
    res.write(pcmBytes(4800));
    res.on('close', () => closed()); // keeps the stream open until the client goes away
  };
  const controller = new AbortController();
  const chunks = [];
  for await (const chunk of new OpenAiVoice('default', 'alloy', ctx.config).speak('Hello.', { speed: 1, signal: controller.signal })) {
    chunks.push(chunk);
    controller.abort();
  }
  assert.is(chunks.length, 1);
  await serverSawClose;
});

OpenAi('speak() throws ProviderError tts_request_failed when the server is unreachable', async (ctx) => {
  const { port } = ctx.server.address() as AddressInfo;
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
  ctx.server = http.createServer();
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve)); // for after.each
  try {
    await collect(new OpenAiVoice('default', 'alloy', { ...ctx.config, baseUrl: `http://127.0.0.1:${port}/v1` }), 'Hello.');
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'tts_request_failed');
    assert.is((err as ProviderError).statusCode, null);
  }
});

OpenAi.run();
