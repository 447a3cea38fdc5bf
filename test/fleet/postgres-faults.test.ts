/**
 * PostgreSQL down, restarted or crashed under a running node: a real PostgreSQL (harness/servers/
 * postgres-server.ts, halted and started again on the same data and port) and the real entry point
 * (src/main.ts) as a separate process on it. While the store is down, every request that needs it
 * answers 503 `postgres_unavailable` with Retry-After at once (not 500, not a hang), /readyz says
 * not ready at once and /healthz stays up; a live conversation keeps talking; the node logs the
 * outage as one `dependency down` and one `dependency back` line, with no stack traces and nothing
 * unhandled; once PostgreSQL is back everything works again without restarting the node. Also
 * restarts (fast, and immediate: a crash) under load, a server that hangs (every process stopped:
 * answered within the connect and query timeouts), and the store's own line between an outage and
 * a query the server refuses (that stays a 500).
 * POSTGRES_FAULTS_REPORT=1 prints the measured times (the fault table in docs/fleet.md).
 */
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import { memoryLogger } from '../../src/core/log.js';
import { isConnectionError, PostgresStore } from '../../src/store/postgres-store.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { request, tempDir, type TestResponse } from '../../harness/servers/server.js';
import { until } from '../../harness/servers/wait.js';

/** "Fails fast": far below the outage it replaces (a request used to wait for it, or fail as 500). */
const FAST_MS = 3_000;
/** A hanging server is given up on after the connect or query timeout (2 s each): well under the hang. */
const HANG_BOUND_MS = 6_000;

interface Ctx {
  pg: TestPostgres;
  node: ServerProcess;
  key: string;
  dir: string;
  /** The node's output lines (stdout and stderr) since it listened. */
  lines: string[];
  /** How many lines there were when the current test started. */
  mark: number;
  times: Record<string, number>;
}

const Faults = suite<Ctx>('PostgreSQL faults under a running node', {} as Ctx);

Faults.before(async (ctx) => {
  ctx.times = {};
  ctx.pg = await startPostgres();
  ctx.dir = tempDir();
  ctx.node = await spawnServer({
    DATA_DIR: ctx.dir,
    DATABASE_URL: await ctx.pg.createDatabase(),
    LLM_PROVIDER: 'offline',
    LOG_LEVEL: 'info',
  });
  assert.ok(ctx.node.bootstrapKey, ctx.node.stdout());
  ctx.key = ctx.node.bootstrapKey!;
  ctx.lines = [];
  for (const stream of [ctx.node.child.stdout!, ctx.node.child.stderr!]) {
    let partial = '';
    stream.on('data', (d: Buffer) => {
      const parts = (partial + d.toString()).split('\n');
      partial = parts.pop()!;
      ctx.lines.push(...parts.filter((l) => l.trim() !== ''));
    });
  }
});

Faults.before.each((ctx) => {
  ctx.mark = ctx.lines.length;
});

Faults.after(async (ctx) => {
  if (process.env.POSTGRES_FAULTS_REPORT) console.log(`postgres faults (ms): ${JSON.stringify(ctx.times)}`);
  if (ctx.node?.child.exitCode === null) ctx.node.child.kill('SIGTERM');
  await ctx.node?.exited;
  try {
    ctx.pg?.thaw();
  } catch {
    // not running
  }
  await ctx.pg?.stop();
  if (ctx.dir) fs.rmSync(ctx.dir, { recursive: true, force: true });
});

const listSessions = (ctx: Ctx) => request(ctx.node.url, 'GET', '/v1/sessions', { key: ctx.key });
const createSession = (ctx: Ctx) => request(ctx.node.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} });

async function timed(work: () => Promise<TestResponse>): Promise<{ res: TestResponse; ms: number }> {
  const started = performance.now();
  const res = await work();
  return { res, ms: performance.now() - started };
}

function assertUnavailable(r: { res: TestResponse; ms: number }, what: string): void {
  assert.is(r.res.status, 503, `${what}: ${r.res.text}`);
  assert.is(r.res.body.error.code, 'postgres_unavailable', what);
  assert.is(r.res.headers.get('retry-after'), '2', `${what}: Retry-After`);
  assert.ok(r.ms < FAST_MS, `${what} failed fast (${Math.round(r.ms)} ms)`);
}

/** The node's output since the test began: what an operator's log shows of the fault. */
function logSince(ctx: Ctx): string[] {
  return ctx.lines.slice(ctx.mark);
}

/**
 * One down and one back line; every line JSON; no stack traces, nothing unhandled or escaped; no
 * warning or error repeated like a poll's (the revocation poll used to log one with a stack four
 * times a second). A live session's own store writes that met the outage may each say so once.
 */
async function assertQuietLog(ctx: Ctx, what: string): Promise<void> {
  // The back line comes once the store has answered for a moment (DEPENDENCY_SETTLE_MS).
  await until(async () => logSince(ctx).filter((l) => l.includes('"msg":"dependency back"')).length, (n) => n >= 1, "the node's back line", 10_000);
  // The banner main.ts prints once it is ready comes just after 'listening': not a log line.
  const lines = logSince(ctx).filter((l) => !l.startsWith('avatar server ready'));
  const shown = () => lines.filter((l) => !l.includes('"msg":"request"')).slice(0, 30).join('\n');
  const nonJson = lines.filter((l) => !l.startsWith('{'));
  assert.equal(nonJson, [], `${what}: every line is a JSON log line:\n${shown()}`);
  const records = lines.map((l) => JSON.parse(l) as { level: string; msg: string; dependency?: string });
  const down = records.filter((r) => r.msg === 'dependency down' && r.dependency === 'postgres');
  const back = records.filter((r) => r.msg === 'dependency back' && r.dependency === 'postgres');
  assert.is(down.length, 1, `${what}: one 'dependency down' line:\n${shown()}`);
  assert.is(back.length, 1, `${what}: one 'dependency back' line:\n${shown()}`);
  assert.ok(!lines.some((l) => l.includes('"stack"') || /unhandled|uncaught|escaped/i.test(l)), `${what}: no stacks, nothing unhandled:\n${shown()}`);
  const repeats = new Map<string, number>();
  for (const r of records) if (r.level === 'warn' || r.level === 'error') repeats.set(r.msg, (repeats.get(r.msg) ?? 0) + 1);
  const flooding = [...repeats].filter(([, n]) => n > 4);
  assert.equal(flooding, [], `${what}: no warning or error repeated like a poll's:\n${shown()}`);
  assert.ok(!records.some((r) => r.msg.startsWith('revocation check failed')), `${what}: the revocation poll leaves the outage to the store's one line`);
}

Faults('PostgreSQL stopped: store-backed requests answer 503 postgres_unavailable at once; a live conversation keeps talking; all works again once it is back', async (ctx) => {
  const sessionId = (await createSession(ctx)).body.id as string;
  const ws = await RealtimeTestClient.connect(ctx.node.url, { key: ctx.key, query: `session_id=${sessionId}` });
  await ws.waitFor('session.created');
  assert.is((await listSessions(ctx)).status, 200);

  await ctx.pg.halt('fast');
  const list = await timed(() => listSessions(ctx));
  assertUnavailable(list, 'GET /v1/sessions');
  assertUnavailable(await timed(() => createSession(ctx)), 'POST /v1/sessions');
  assertUnavailable(await timed(() => request(ctx.node.url, 'GET', `/v1/sessions/${sessionId}`, { key: ctx.key })), 'GET /v1/sessions/{id}');
  const ready = await timed(() => request(ctx.node.url, 'GET', '/readyz'));
  assert.is(ready.res.status, 503, ready.res.text);
  assert.match(ready.res.body.checks.store, /^error/);
  assert.ok(ready.ms < FAST_MS, `/readyz answered fast (${Math.round(ready.ms)} ms)`);
  assert.is((await request(ctx.node.url, 'GET', '/healthz')).status, 200, 'the process itself is alive');
  // A new realtime connection: told why (postgres_unavailable) and closed with 1013 try again later, not 4001.
  const late = await RealtimeTestClient.connect(ctx.node.url, { key: ctx.key });
  assert.is(await late.waitClose(FAST_MS), 1013, late.types().join(','));
  assert.is(late.ofType('error')[0]?.error?.code, 'postgres_unavailable');
  ctx.times.downListMs = Math.round(list.ms);
  ctx.times.downReadyzMs = Math.round(ready.ms);

  // The live conversation talks through the outage: a reply asked for now streams its audio (its
  // usage is kept by the session and written once the store is back), and goes on after.
  const from = ws.events.length;
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.output_audio.delta', { from, timeoutMs: 60_000 });
  // A few revocation polls (four a second) meet the outage: still one line.
  await new Promise((r) => setTimeout(r, 1500));
  const audio = ws.events.slice(from).filter((e) => e.type === 'response.output_audio.delta').length;
  assert.ok(audio > 1, `audio keeps streaming during the outage (${audio} deltas)`);
  assert.ok(ws.closeCode === null, 'the conversation is still open during the outage');

  await ctx.pg.resume();
  const backAt = performance.now();
  await until(() => listSessions(ctx), (r) => r.status === 200, 'the node answering again after PostgreSQL is back', 10_000);
  ctx.times.recoverMs = Math.round(performance.now() - backAt);
  assert.ok(ctx.times.recoverMs < FAST_MS, `recovered ${ctx.times.recoverMs} ms after PostgreSQL accepted connections`);
  assert.is((await request(ctx.node.url, 'GET', '/readyz')).status, 200);

  const spoken = ws.events.length;
  await ws.waitFor((e) => e.type === 'response.output_audio.delta' || e.type === 'response.done', { from: spoken, timeoutMs: 30_000 });
  assert.ok(ws.closeCode === null, 'the conversation goes on after the outage');
  await until(() => request(ctx.node.url, 'GET', `/v1/sessions/${sessionId}`, { key: ctx.key }), (r) => r.status === 200, 'the session readable');
  const ended = await request(ctx.node.url, 'DELETE', `/v1/sessions/${sessionId}`, { key: ctx.key });
  assert.is(ended.status, 200, ended.text);
  assert.is(ended.body.status, 'ended');
  await ws.waitClose(15_000);
  const usage = await request(ctx.node.url, 'GET', '/v1/usage', { key: ctx.key });
  const record = (usage.body.data as Array<{ session_id: string; audio_seconds_out: number }> | undefined)?.find((u) => u.session_id === sessionId);
  assert.ok(record && record.audio_seconds_out > 0, `the reply spoken during the outage is billed: ${usage.text.slice(0, 300)}`);
  const created = await createSession(ctx);
  assert.is(created.status, 200, `a new session after the outage: ${created.text}`);
  await request(ctx.node.url, 'DELETE', `/v1/sessions/${created.body.id}`, { key: ctx.key });
  await assertQuietLog(ctx, 'stopped and started');
});

for (const mode of ['fast', 'immediate'] as const) {
  Faults(`PostgreSQL ${mode === 'fast' ? 'restarted' : 'crashed and restarted'} under load: never a 500, only 200 or 503 postgres_unavailable, then 200 again`, async (ctx) => {
    const statuses: Array<{ status: number; code?: string; retryAfter: string | null; ms: number }> = [];
    let running = true;
    const load = (async () => {
      while (running) {
        const r = await timed(() => listSessions(ctx));
        statuses.push({ status: r.res.status, code: r.res.body?.error?.code, retryAfter: r.res.headers.get('retry-after'), ms: r.ms });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await until(async () => statuses.length, (n) => n >= 5, 'requests before the restart');
    const restartAt = performance.now();
    await ctx.pg.restart(mode);
    const upAt = performance.now();
    const seen = statuses.length;
    await until(async () => statuses.slice(seen), (s) => s.some((x) => x.status === 200), 'a 200 after the restart', 10_000);
    ctx.times[`${mode}RestartDownMs`] = Math.round(upAt - restartAt);
    ctx.times[`${mode}RecoverMs`] = Math.round(performance.now() - upAt);
    running = false;
    await load;
    const bad = statuses.filter((s) => !(s.status === 200 || (s.status === 503 && s.code === 'postgres_unavailable' && s.retryAfter === '2')));
    assert.equal(bad, [], 'every answer is a 200 or a 503 postgres_unavailable with Retry-After');
    const slowest = Math.max(...statuses.map((s) => s.ms));
    assert.ok(slowest < FAST_MS, `no request waited out the restart (slowest ${Math.round(slowest)} ms)`);
    ctx.times[`${mode}Unavailable`] = statuses.filter((s) => s.status === 503).length;
    // The idle pooled connections the restart dropped, and the requests that met it: one down line, one back line.
    await assertQuietLog(ctx, `${mode} restart`);
  });
}

Faults('a conversation closed while PostgreSQL is down ends once it is back: billed up to its close, with what it said, and its slot freed', async (ctx) => {
  // A session the socket made: closing the socket ends it.
  const ws = await RealtimeTestClient.connect(ctx.node.url, { key: ctx.key });
  const sessionId = (await ws.waitFor('session.created')).session.id as string;
  await ctx.pg.halt('fast');
  // A reply spoken during the outage: its usage cannot be committed until the store is back.
  const from = ws.events.length;
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.done', { from, timeoutMs: 60_000 });
  const closedAt = Date.now();
  ws.close();
  await ws.waitClose(FAST_MS);
  // The outage goes on well after the close: the end must not be billed up to when it is over.
  await new Promise((r) => setTimeout(r, 3000));
  await ctx.pg.resume();
  const session = await until(
    () => request(ctx.node.url, 'GET', `/v1/sessions/${sessionId}`, { key: ctx.key }),
    (r) => r.status === 200 && r.body.status === 'ended',
    'the session ended once PostgreSQL is back',
    15_000,
  );
  const endedAt = Date.parse(`${session.body.ended_at}Z`);
  assert.ok(endedAt <= closedAt + 1000, `billed up to its close (ended ${endedAt - closedAt} ms after it), not up to the store's return`);
  const usage = await request(ctx.node.url, 'GET', '/v1/usage', { key: ctx.key });
  const record = (usage.body.data as Array<{ session_id: string; audio_seconds_out: number }> | undefined)?.find((u) => u.session_id === sessionId);
  assert.ok(record && record.audio_seconds_out > 0, `the reply spoken during the outage is billed: ${usage.text.slice(0, 300)}`);
  // Its slot is free: the node takes as many sessions as before (WORKER_CAPACITY, 4 by default).
  const created: string[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await createSession(ctx);
    assert.is(r.status, 200, `session ${i + 1} of 4 after the outage: ${r.text}`);
    created.push(r.body.id as string);
  }
  for (const id of created) await request(ctx.node.url, 'DELETE', `/v1/sessions/${id}`, { key: ctx.key });
  assert.ok(logSince(ctx).some((l) => l.includes('the session ends as soon as it is back')), 'the deferred end is said once');
  await assertQuietLog(ctx, 'closed during the outage');
});

Faults('PostgreSQL hanging (every server process stopped): requests answer 503 within the connect and query timeouts, then 200 once it goes on', async (ctx) => {
  assert.is((await listSessions(ctx)).status, 200);
  ctx.pg.freeze();
  try {
    // Pooled connections time out on their query (QUERY_TIMEOUT_MS), new ones on connecting (CONNECT_TIMEOUT_MS).
    const list = await timed(() => listSessions(ctx));
    assert.is(list.res.status, 503, list.res.text);
    assert.is(list.res.body.error.code, 'postgres_unavailable');
    assert.is(list.res.headers.get('retry-after'), '2');
    assert.ok(list.ms < HANG_BOUND_MS, `failed within the timeouts (${Math.round(list.ms)} ms), not when the server woke`);
    const ready = await timed(() => request(ctx.node.url, 'GET', '/readyz'));
    assert.is(ready.res.status, 503, ready.res.text);
    assert.ok(ready.ms < HANG_BOUND_MS, `/readyz within the timeouts (${Math.round(ready.ms)} ms)`);
    ctx.times.hangListMs = Math.round(list.ms);
    ctx.times.hangReadyzMs = Math.round(ready.ms);
  } finally {
    ctx.pg.thaw();
  }
  const thawedAt = performance.now();
  await until(() => listSessions(ctx), (r) => r.status === 200, 'the node answering again after PostgreSQL goes on', 10_000);
  ctx.times.hangRecoverMs = Math.round(performance.now() - thawedAt);
  await assertQuietLog(ctx, 'hang');
});

Faults('the store maps only connection failures to postgres_unavailable: a query the server refuses stays its own error (a 500 at the edge)', async (ctx) => {
  const { logger, records } = memoryLogger('info');
  const store = new PostgresStore(await ctx.pg.createDatabase(), { log: logger });
  try {
    await store.migrate();
    const key = { id: 'key_1', userId: 'u', name: 'k', prefix: 'avs_p', hash: 'h'.repeat(64), createdAtUs: 1, revokedAtUs: null, lastUsedAtUs: null };
    await store.insertApiKey(key);
    const duplicate = await store.insertApiKey(key).then(() => null, (err: unknown) => err);
    assert.not.ok(duplicate instanceof AppError, 'a unique violation is not an outage');
    assert.is((duplicate as { code?: string }).code, '23505');
    assert.ok(store.health!.up, 'the server answered');

    await ctx.pg.halt('fast');
    for (let i = 0; i < 5; i++) {
      const err = await store.countApiKeys().then(() => null, (e: unknown) => e);
      assert.ok(err instanceof AppError && err.code === 'postgres_unavailable' && err.status === 503, String(err));
    }
    const ending = await store.endSession('sess_x', { status: 'ended', endReason: 'client_request', endedAtUs: 2 }, null, null).then(() => null, (e: unknown) => e);
    assert.ok(ending instanceof AppError && ending.code === 'postgres_unavailable', `a transaction too: ${String(ending)}`);
    assert.not.ok(store.health!.up);
    await ctx.pg.resume();
    assert.is(await store.countApiKeys(), 1);
    assert.ok(store.health!.up);
    // The back line waits until the store has answered for a moment (a restart flaps).
    await until(async () => records.filter((r) => r.msg === 'dependency back').length, (n) => n >= 1, 'the back line', 5_000);
    assert.equal(records.filter((r) => String(r.msg).startsWith('dependency')).map((r) => r.msg), ['dependency down', 'dependency back']);
  } finally {
    await store.close();
  }
  for (const [err, expected] of [
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), true],
    [Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }), true],
    [Object.assign(new Error('the database system is starting up'), { code: '57P03' }), true],
    [Object.assign(new Error('connection failure'), { code: '08006' }), true],
    [new Error('Connection terminated unexpectedly'), true],
    [new Error('timeout exceeded when trying to connect'), true],
    [new Error('Query read timeout'), true],
    [Object.assign(new Error('syntax error at or near "SELEC"'), { code: '42601' }), false],
    [Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }), false],
    [new TypeError("Cannot read properties of undefined (reading 'rows')"), false],
  ] as const) {
    assert.is(isConnectionError(err), expected, err.message);
  }
});

Faults.run();
