import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestServer, tempDir, type TestServer } from '../helpers/server.js';

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
    checks: { store: 'ok', assets: 'ok', accepting: 'ok' },
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

Readiness.run();
