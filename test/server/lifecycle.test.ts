import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseSessionRequest } from '../../src/sessions/session-config.js';
import type { SessionRecord } from '../../src/store/store.js';
import { spawnServer } from '../../harness/servers/process.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { request, startTestServer, tempDir, type TestServer } from '../../harness/servers/server.js';

const Lifecycle = suite<{ t: TestServer }>('session lifecycle', {} as { t: TestServer });

Lifecycle.before.each(async (ctx) => {
  ctx.t = await startTestServer({ env: { MAX_SESSION_SECONDS: '1' }, pendingTimeoutMs: 300 });
});
Lifecycle.after.each(async (ctx) => {
  await ctx.t.close();
});

const config = () => parseSessionRequest({}, 'gpt-5.2');
const endedEvent = (t: TestServer, id: string) =>
  new Promise<SessionRecord>((resolve) => {
    const onEnded = (s: SessionRecord) => {
      if (s.id !== id) return;
      t.server.services.sessions.off('ended', onEnded);
      resolve(s);
    };
    t.server.services.sessions.on('ended', onEnded);
  });

Lifecycle('a call session is pending with a reserved slot until start(), then active', async ({ t }) => {
  const { sessions, pool } = t.server.services;
  const pending = await sessions.create('default', config(), 'call', { start: false });
  assert.is(pending.status, 'pending');
  assert.is((await pool.usage()).used, 1, 'pending sessions reserve their slot');
  const got = await t.request('GET', `/v1/sessions/${pending.id}`);
  assert.is(got.body.status, 'pending');
  assert.is(got.body.started_at, null);

  const active = await sessions.start(pending.id);
  assert.is(active.status, 'active');
  assert.ok(active.startedAtUs !== null && active.startedAtUs >= pending.createdAtUs);
  assert.is((await t.request('GET', `/v1/sessions/${pending.id}`)).body.status, 'active');
  try {
    await sessions.start(pending.id);
    assert.unreachable('start() twice must fail');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'invalid_session_state');
  }
});

Lifecycle('a start timeout does not end a session another node started (fleet mode: the call runs on its worker)', async ({ t }) => {
  const { sessions, store, pool } = t.server.services;
  const pending = await sessions.create('default', config(), 'call', { start: false });
  // Another node starts it: the store changes, this node's timer stays armed.
  const now = t.server.services.clock.nowUs();
  assert.ok(await store.markSessionStarted(pending.id, now, now + 60_000_000));
  await new Promise((r) => setTimeout(r, 600)); // twice the start timeout
  const got = (await store.getSession(pending.id))!;
  assert.is(got.status, 'active', 'the start timeout left the started session alone');
  assert.is((await pool.usage()).used, 1, 'and its slot');
  assert.is(await store.getUsageForSession(pending.id), null);
});

Lifecycle('ending a pending session cancels it without usage', async ({ t }) => {
  const pending = await t.server.services.sessions.create('default', config(), 'call', { start: false });
  const res = await t.request('DELETE', `/v1/sessions/${pending.id}`);
  assert.is(res.body.status, 'cancelled');
  assert.is(res.body.duration_seconds, 0);
  assert.is((await t.server.services.pool.usage()).used, 0);
  assert.is((await t.request('GET', '/v1/usage')).body.data.length, 0);
});

Lifecycle('a pending session that never starts is cancelled (start_timeout) and frees its slot', async ({ t }) => {
  const pending = await t.server.services.sessions.create('default', config(), 'call', { start: false });
  const ended = await endedEvent(t, pending.id);
  assert.is(ended.status, 'cancelled');
  assert.is(ended.endReason, 'start_timeout');
  assert.is((await t.server.services.pool.usage()).used, 0);
});

Lifecycle('fail() moves an active session to failed with usage recorded', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions');
  const failed = await t.server.services.sessions.fail(created.body.id, 'media_error');
  assert.is(failed.status, 'failed');
  assert.is(failed.endReason, 'media_error');
  assert.is((await t.request('GET', `/v1/sessions/${created.body.id}`)).body.status, 'failed');
  const usage = await t.request('GET', '/v1/usage');
  assert.is(usage.body.data[0].status, 'failed');
  assert.is(usage.body.data[0].end_reason, 'media_error');
  // Terminal states are final: ending a failed session returns it unchanged.
  const again = await t.request('DELETE', `/v1/sessions/${created.body.id}`);
  assert.is(again.body.status, 'failed');
});

Lifecycle('a session reaching MAX_SESSION_SECONDS is ended (max_duration) and billed', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions');
  const ended = await endedEvent(t, created.body.id);
  assert.is(ended.status, 'ended');
  assert.is(ended.endReason, 'max_duration');
  assert.ok(ended.durationSeconds! >= 0.99 && ended.durationSeconds! < 3, `duration ${ended.durationSeconds}`);
  assert.is((await t.server.services.pool.usage()).used, 0);
  const usage = await t.request('GET', '/v1/usage');
  assert.is(usage.body.data[0].end_reason, 'max_duration');
});

Lifecycle('graceful shutdown fails live sessions (server_shutdown) and restart keeps everything', async ({ t }) => {
  const a = await t.request('POST', '/v1/sessions');
  const b = await t.request('POST', '/v1/sessions');
  await t.request('DELETE', `/v1/sessions/${b.body.id}`);
  await t.restart();
  const ga = await t.request('GET', `/v1/sessions/${a.body.id}`);
  assert.is(ga.body.status, 'failed');
  const gb = await t.request('GET', `/v1/sessions/${b.body.id}`);
  assert.is(gb.body.status, 'ended');
  const usage = await t.request('GET', '/v1/usage');
  assert.equal(
    usage.body.data.map((u: { session_id: string; end_reason: string }) => [u.session_id, u.end_reason]).sort(),
    [
      [a.body.id, 'server_shutdown'],
      [b.body.id, 'client_request'],
    ].sort(),
  );
  assert.is((await t.server.services.pool.usage()).used, 0);
});

Lifecycle.run();

// ── Crash recovery runs the real entry point and kills it with SIGKILL ─────────────────────────

const Crash = suite('crash recovery');

Crash('a session left active by a killed process is closed as failed on next start, with usage', async () => {
  const dataDir = tempDir();
  const proc = await spawnServer({ DATA_DIR: dataDir });
  assert.ok(proc.bootstrapKey, `first start prints a key:\n${proc.stdout()}`);
  const created = await request(proc.url, 'POST', '/v1/sessions', { key: proc.bootstrapKey, json: { voice: 'alice' } });
  assert.is(created.status, 200, created.text);
  proc.child.kill('SIGKILL');
  await proc.exited;

  const t = await startTestServer({ dataDir });
  try {
    const got = await request(t.url, 'GET', `/v1/sessions/${created.body.id}`, { key: proc.bootstrapKey });
    assert.is(got.body.status, 'failed');
    assert.ok(got.body.ended_at);
    assert.type(got.body.duration_seconds, 'number');
    const usage = await request(t.url, 'GET', '/v1/usage', { key: proc.bootstrapKey });
    assert.is(usage.body.data.length, 1);
    assert.is(usage.body.data[0].session_id, created.body.id);
    assert.is(usage.body.data[0].end_reason, 'server_restart');
    assert.is(usage.body.data[0].voice, 'alice');
    assert.is((await t.server.services.pool.usage()).used, 0);
  } finally {
    await t.close();
  }
});

Crash('kill -9 in the middle of a spoken reply: every live session (realtime and REST) ends as failed with usage on the next start', async () => {
  const dataDir = tempDir();
  const proc = await spawnServer({ DATA_DIR: dataDir, LLM_PROVIDER: 'offline' });
  const key = proc.bootstrapKey!;
  const rest = await request(proc.url, 'POST', '/v1/sessions', { key, json: {} });
  const ws = await RealtimeTestClient.connect(proc.url, { key, query: 'model=gpt-realtime' });
  const created = await ws.waitFor('session.created');
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me about yourself.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.output_audio.delta', { timeoutMs: 60_000 });
  proc.child.kill('SIGKILL');
  await proc.exited;
  await ws.waitClose();

  const t = await startTestServer({ dataDir });
  try {
    for (const id of [created.session.id as string, rest.body.id as string]) {
      const got = await request(t.url, 'GET', `/v1/sessions/${id}`, { key });
      assert.is(got.body.status, 'failed', id);
      assert.type(got.body.duration_seconds, 'number');
      const usage = await t.server.services.store.getUsageForSession(id);
      assert.is(usage?.endReason, 'server_restart', id);
    }
    assert.is((await t.server.services.pool.usage()).used, 0);
  } finally {
    await t.close();
  }
});

Crash('SIGTERM shuts the process down gracefully: exit 0, live sessions billed as server_shutdown', async () => {
  const dataDir = tempDir();
  const proc = await spawnServer({ DATA_DIR: dataDir });
  // Models load on first use here (PRELOAD_MODELS=false), so it is ready to talk at once, and says where.
  const readyLine = `avatar server ready to talk: open ${proc.url}/ to talk to the avatar`;
  for (let i = 0; i < 100 && !proc.stdout().includes(readyLine); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(proc.stdout().includes(readyLine), proc.stdout());
  const created = await request(proc.url, 'POST', '/v1/sessions', { key: proc.bootstrapKey });
  proc.child.kill('SIGTERM');
  assert.is(await proc.exited, 0);
  assert.match(proc.stdout(), /"msg":"stopped"/);

  const second = await spawnServer({ DATA_DIR: dataDir });
  try {
    assert.is(second.bootstrapKey, null, 'the key banner is printed on first start only');
    const got = await request(second.url, 'GET', `/v1/sessions/${created.body.id}`, { key: proc.bootstrapKey });
    assert.is(got.body.status, 'failed');
    const usage = await request(second.url, 'GET', '/v1/usage', { key: proc.bootstrapKey });
    assert.is(usage.body.data[0].end_reason, 'server_shutdown');
  } finally {
    second.child.kill('SIGTERM');
    await second.exited;
  }
});

Crash.run();
