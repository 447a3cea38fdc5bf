import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { FakeLanguageModels } from '../../src/providers/llm/fake-llm.js';
import { FakeSpeechService } from '../../src/providers/tts/fake-tts.js';
import { FakeSpeechRecognizers } from '../../src/providers/asr/fake-asr.js';
import { startTestServer, tempDir, type TestServer } from '../../harness/servers/server.js';
import { startChatCompletionsServer } from '../../harness/servers/chat-completions-server.js';
import { until } from '../../harness/servers/wait.js';
import { Logger } from '../../src/core/log.js';
import { createLanguageModels, loadLlmConfig } from '../../src/providers/llm/index.js';

const Ops = suite<{ t: TestServer }>('operations endpoints', {} as { t: TestServer });
Ops.before.each(async (ctx) => {
  ctx.t = await startTestServer();
});
Ops.after.each(async (ctx) => {
  await ctx.t.close();
});

Ops('GET /healthz answers ok without a key', async ({ t }) => {
  const res = await t.request('GET', '/healthz', { key: null });
  assert.is(res.status, 200);
  assert.equal(res.body, { status: 'ok' });
});

Ops('GET /readyz reports store, assets and workers', async ({ t }) => {
  const res = await t.request('GET', '/readyz', { key: null });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, {
    status: 'ready',
    checks: { store: 'ok', assets: 'ok', accepting: 'ok', models: 'ok' },
    degraded: {},
    workers: { capacity: 4, used: 0 },
  });
});

Ops('GET /metrics exposes sessions by status, worker slots and request latency', async ({ t }) => {
  const s = await t.request('POST', '/v1/sessions');
  await t.request('DELETE', `/v1/sessions/${s.body.id}`);
  const res = await t.request('GET', '/metrics', { key: null });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  assert.match(res.text, /avatar_sessions\{status="ended"\} 1/);
  assert.match(res.text, /avatar_sessions\{status="active"\} 0/);
  assert.match(res.text, /avatar_worker_slots\{state="free"\} 4/);
  assert.match(res.text, /avatar_http_request_duration_seconds_count\{method="POST",route="\/v1\/sessions",status="200"\} 1/);
  assert.match(res.text, /avatar_http_request_duration_seconds_count\{method="DELETE",route="\/v1\/sessions\/:session_id",status="200"\} 1/);
  assert.match(res.text, /avatar_process_escaped_errors\{kind="uncaught_exception"\} 0/, 'the safety net counters are exported');
  assert.match(res.text, /avatar_process_escaped_errors\{kind="unhandled_rejection"\} 0/);
});

Ops.run();

const Readiness = suite('readiness without assets');

Readiness('GET /readyz is 503 and names the files when standard assets are missing', async () => {
  const models = tempDir('avatar-models-');
  fs.mkdirSync(path.join(models, 'assets'), { recursive: true });
  fs.copyFileSync(path.resolve(import.meta.dirname, '../../models/assets/catalog.json'), path.join(models, 'assets/catalog.json'));
  const t = await startTestServer({ env: { MODELS_DIR: models } });
  try {
    const res = await t.request('GET', '/readyz', { key: null });
    assert.is(res.status, 503);
    assert.is(res.body.status, 'not_ready');
    assert.match(res.body.checks.assets, /faces\/default\.jpg/);
    assert.match(res.body.checks.assets, /voices\/alice\.wav/);
  } finally {
    await t.close();
    fs.rmSync(models, { recursive: true, force: true });
  }
});

Readiness('GET /readyz is 503 while the models warm up at start, and ready once they are', async () => {
  // A language model that takes its time to load: the warm-up's first request waits for it.
  let loaded!: () => void;
  const loading = new Promise<void>((resolve) => (loaded = resolve));
  const llm = new FakeLanguageModels({ reply: 'Hi', scheduler: (_ms, _signal) => loading, chunkDelayMs: 1 });
  const t = await startTestServer({ runtime: { llm, tts: new FakeSpeechService('any'), asr: new FakeSpeechRecognizers({ transcript: '' }) } });
  try {
    assert.is((await t.request('GET', '/readyz', { key: null })).status, 200, 'not warming (PRELOAD_MODELS off): models load on first use');
    const warm = t.server.warmUp();
    const during = await t.request('GET', '/readyz', { key: null });
    assert.is(during.status, 503);
    assert.is(during.body.status, 'not_ready');
    assert.is(during.body.checks.models, 'warming up');
    loaded();
    await warm;
    const after = await t.request('GET', '/readyz', { key: null });
    assert.is(after.status, 200, after.text);
    assert.is(after.body.checks.models, 'ok');
  } finally {
    loaded();
    await t.close();
  }
});

Readiness('a hosted model that sends no token: the warm-up gives up at the first-token bound, the server is ready with the model marked degraded, and healthy again by itself once the model answers', async () => {
  let stalling = true;
  const upstream = await startChatCompletionsServer(() => (stalling ? { text: [], ending: 'hang' } : { text: 'Hi' }));
  const llm = createLanguageModels(loadLlmConfig({ LLM_PROVIDER: 'openai', LLM_BASE_URL: upstream.baseUrl, LLM_WORDS_READER: 'off', LLM_PROBE_INTERVAL_MS: '300' }), 'models', new Logger('silent'));
  const t = await startTestServer({ runtime: { llm, tts: new FakeSpeechService('any'), asr: new FakeSpeechRecognizers({ transcript: '' }) } });
  try {
    const t0 = performance.now();
    await t.server.warmUp();
    const warmMs = performance.now() - t0;
    assert.ok(warmMs < 10_000, `warmed up in ${warmMs.toFixed(0)} ms, not the old minute`);
    const degraded = await t.request('GET', '/readyz', { key: null });
    assert.is(degraded.status, 200, degraded.text);
    assert.is(degraded.body.status, 'ready');
    assert.match(degraded.body.degraded.language_model, /^down for \d+ s: The language model sent no first token within 2500 ms\.$/);
    assert.match((await t.request('GET', '/metrics', { key: null })).text, /avatar_upstream_up\{upstream="language_model"\} 0/);
    // The model recovers: its probe finds it with no conversation running.
    stalling = false;
    const healthy = await until(() => t.request('GET', '/readyz', { key: null }), (r) => Object.keys(r.body.degraded).length === 0, 'the model healthy again', 10_000);
    assert.is(healthy.status, 200);
    assert.match((await t.request('GET', '/metrics', { key: null })).text, /avatar_upstream_up\{upstream="language_model"\} 1/);
  } finally {
    await t.close();
    await upstream.close();
  }
});

Readiness('with the embedded models no hosted dependency is listed', async () => {
  const t = await startTestServer({ runtime: { llm: new FakeLanguageModels(), tts: new FakeSpeechService('any'), asr: new FakeSpeechRecognizers({ transcript: '' }) } });
  try {
    const ready = await t.request('GET', '/readyz', { key: null });
    assert.equal(ready.body.degraded, {});
    assert.not.match((await t.request('GET', '/metrics', { key: null })).text, /avatar_upstream_up\{/);
  } finally {
    await t.close();
  }
});

Readiness.run();
