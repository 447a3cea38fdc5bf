/**
 * OpenAI transcription (src/providers/asr/openai.ts) against a local HTTP server that answers like
 * `POST /v1/audio/transcriptions`: the multipart request it sends (WAV file, model, language,
 * prompt), the answer, error statuses, a timeout and abort.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import busboy from 'busboy';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ProviderError } from '../../../src/providers/asr/base.js';
import type { OpenAiAsrConfig } from '../../../src/providers/asr/config.js';
import { OpenAiTranscriber } from '../../../src/providers/asr/openai.js';
import { rejection } from '../../helpers/assert-error.js';

interface Received {
  url: string;
  auth: string | undefined;
  fields: Record<string, string>;
  file: { name: string; type: string; bytes: Buffer } | null;
}

interface Ctx {
  server: http.Server;
  config: OpenAiAsrConfig;
  received: Received[];
  answer: (res: http.ServerResponse) => void;
}

const OpenAi = suite<Ctx>('OpenAiTranscriber', {} as Ctx);

OpenAi.before.each(async (ctx) => {
  ctx.received = [];
  ctx.answer = (res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ text: ' Hello there. ' }));
  };
  ctx.server = http.createServer((req, res) => {
    const got: Received = { url: req.url ?? '', auth: req.headers.authorization, fields: {}, file: null };
    const bb = busboy({ headers: req.headers });
    bb.on('field', (name, value) => (got.fields[name] = value));
    bb.on('file', (name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => (got.file = { name: `${name}:${info.filename}`, type: info.mimeType, bytes: Buffer.concat(chunks) }));
    });
    bb.on('close', () => {
      ctx.received.push(got);
      ctx.answer(res);
    });
    req.pipe(bb);
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  const { port } = ctx.server.address() as AddressInfo;
  ctx.config = { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test', model: 'gpt-4o-mini-transcribe', timeoutMs: 5000 };
});

OpenAi.after.each(async (ctx) => {
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
});

/** 0.5 s of a 24 kHz ramp. */
const PCM = Int16Array.from({ length: 12000 }, (_, i) => (i % 2000) - 1000);

OpenAi('transcribe() posts a 24 kHz WAV with model, language and prompt, and returns the text as one delta', async (ctx) => {
  const t = new OpenAiTranscriber(ctx.config, 'gpt-4o-transcribe');
  assert.is(t.id, 'openai:gpt-4o-transcribe');
  const deltas: string[] = [];
  const result = await t.transcribe({ pcm: PCM, language: 'en', prompt: 'Avatar, WebRTC' }, (d) => deltas.push(d));
  assert.equal(result, { text: 'Hello there.', language: 'en', audioSeconds: 0.5 });
  assert.equal(deltas, ['Hello there.']);
  const got = ctx.received[0];
  assert.ok(got);
  assert.is(got.url, '/v1/audio/transcriptions');
  assert.is(got.auth, 'Bearer sk-test');
  assert.equal(got.fields, { model: 'gpt-4o-transcribe', response_format: 'json', language: 'en', prompt: 'Avatar, WebRTC' });
  assert.ok(got.file);
  assert.is(got.file.name, 'file:audio.wav');
  assert.is(got.file.type, 'audio/wav');
  const wav = got.file.bytes;
  assert.is(wav.toString('ascii', 0, 4), 'RIFF');
  assert.is(wav.readUInt32LE(24), 24000, 'sample rate');
  assert.is(wav.readUInt16LE(22), 1, 'mono');
  assert.is(wav.readUInt32LE(40), PCM.length * 2);
  assert.is(wav.readInt16LE(44 + 2 * 1500), PCM[1500]);
});

OpenAi('transcribe() leaves language and prompt out when the session gives none', async (ctx) => {
  const result = await new OpenAiTranscriber(ctx.config, 'whisper-1').transcribe({ pcm: PCM, language: null, prompt: null });
  assert.is(result.language, null);
  assert.equal(ctx.received[0]?.fields, { model: 'whisper-1', response_format: 'json' });
});


OpenAi('transcribe() turns an error status into asr_failed carrying the status and request id', async (ctx) => {
  const t = new OpenAiTranscriber(ctx.config, 'whisper-1');
  for (const status of [429, 503, 400, 401]) {
    ctx.answer = (res) => {
      res.statusCode = status;
      res.setHeader('x-request-id', 'req_123');
      res.end(JSON.stringify({ error: { message: `status ${status} here` } }));
    };
    const err = await rejection(t.transcribe({ pcm: PCM, language: null, prompt: null }));
    assert.instance(err, ProviderError);
    const e = err as ProviderError;
    assert.is(e.code, 'asr_failed');
    assert.is(e.statusCode, status);
    assert.is(e.requestId, 'req_123');
    assert.match(e.message, `status ${status} here`);
  }
});

OpenAi('transcribe() fails with asr_failed on an answer without text', async (ctx) => {
  ctx.answer = (res) => res.end('{"nope":1}');
  const err = await rejection(new OpenAiTranscriber(ctx.config, 'whisper-1').transcribe({ pcm: PCM, language: null, prompt: null }));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'asr_failed');
});

OpenAi('transcribe() gives up after timeoutMs with an asr_failed without an upstream status', async (ctx) => {
  ctx.answer = () => {}; // never answers
  const t = new OpenAiTranscriber({ ...ctx.config, timeoutMs: 200 }, 'whisper-1');
  const err = await rejection(t.transcribe({ pcm: PCM, language: null, prompt: null }));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'asr_failed');
  assert.is((err as ProviderError).statusCode, null);
  assert.match((err as Error).message, 'did not answer within 200 ms');
});

OpenAi('transcribe() rejects with the abort reason when the signal fires, and delivers no delta', async (ctx) => {
  const controller = new AbortController();
  ctx.answer = () => controller.abort(); // abort while the request is in flight
  const deltas: string[] = [];
  const err = await rejection(new OpenAiTranscriber(ctx.config, 'whisper-1').transcribe({ pcm: PCM, language: null, prompt: null, signal: controller.signal }, (d) => deltas.push(d)));
  assert.is((err as Error).name, 'AbortError');
  assert.equal(deltas, []);
  const already = await rejection(new OpenAiTranscriber(ctx.config, 'whisper-1').transcribe({ pcm: PCM, language: null, prompt: null, signal: AbortSignal.abort() }));
  assert.is((already as Error).name, 'AbortError');
  assert.is(ctx.received.length, 1, 'an already-aborted request is not sent');
});

OpenAi('transcribe() reports an unreachable server as an asr_failed without an upstream status', async (ctx) => {
  const { port } = ctx.server.address() as AddressInfo;
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
  const t = new OpenAiTranscriber({ ...ctx.config, baseUrl: `http://127.0.0.1:${port}/v1` }, 'whisper-1');
  const err = await rejection(t.transcribe({ pcm: PCM, language: null, prompt: null }));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'asr_failed');
  assert.is((err as ProviderError).statusCode, null);
  ctx.server = http.createServer();
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
});

OpenAi.run();
