/**
 * The fleet when Redis falters, end to end: a real PostgreSQL and Redis on loopback, one API node
 * and two workers as separate processes of the real entry point (src/main.ts), each worker with
 * room for two sessions; worker w2 and the API node each reach Redis through a TCP proxy the test
 * can switch to a blackhole (harness/servers/redis-server.ts), a partition of that node alone.
 * Workers answer with the offline responder. Faults, in order:
 *
 *  1. Redis killed (then restarted, empty): everything that needs Redis is refused at once with
 *     503 redis_unavailable and Retry-After (creates, WebSocket upgrades that place or look up a
 *     session), /readyz says not ready at once, /metrics still answers, a DELETE still ends the
 *     session (the store is the authority), and a live conversation keeps talking through it and
 *     after it. When Redis is back nothing refused during the outage has run, and creates work
 *     again, never "All workers are busy" while there is room.
 *  2. Redis restarted empty with the fleet full: the workers register again with the sessions they
 *     run, every one of them keeps talking and none ends as worker_lost, and a create beyond the
 *     real capacity is refused.
 *  3. The API node cut off from Redis (blackhole: connected, nothing answers): the same fast
 *     refusals, bounded by the command timeout instead of at once.
 *  4. w2 cut off from Redis (blackhole) but still serving: the janitor reaps it after its ttl and
 *     fails its sessions once (worker_lost, one usage record each); its clients are closed; nothing
 *     new is placed on it; when the partition heals it registers again without those sessions.
 *
 *  5. A worker started while Redis is down waits for it and joins when it is back.
 *
 * Every node's output is then read: no unhandled Redis client error, and the outage logged a few
 * times per node (down, back), never once per retry. Durations are asserted only against the hang
 * they replace (seconds, against outages of several); the measured ones are printed
 * (REDIS_FAULTS_VERBOSE=1) for the fault table in docs/fleet.md.
 */
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RedisWorkerRegistry } from '../../src/fleet/worker-registry.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRedis, startTcpProxy, type RedisServer, type TcpProxy } from '../../harness/servers/redis-server.js';
import { request, type TestResponse } from '../../harness/servers/server.js';
import { FLEET_TEST_TTL_MS, fleetNodeEnv } from '../../harness/servers/fleet-node.js';
import { until } from '../../harness/servers/wait.js';

const WORKER_CAPACITY = 2;
/** Long enough that a loaded machine's stalls are not taken for a lost worker (the default is 5 s). */
const WORKER_TTL_MS = FLEET_TEST_TTL_MS;
/** Each worker's WebRTC ports, apart from the other fleet suites' (no call is made here, but a worker binds its range). */
const RTC_PORTS: Record<string, [number, number]> = { w1: [42600, 42699], w2: [42700, 42799], w3: [42800, 42899] };
/** "Fails fast": well under the outage it would otherwise wait for (each outage here lasts longer). */
const FAST_MS = 3000;

interface Ctx {
  pg: TestPostgres;
  redis: RedisServer;
  proxy: TcpProxy;
  /** The API node's way to Redis. */
  apiProxy: TcpProxy;
  databaseUrl: string;
  store: Store;
  registry: RedisWorkerRegistry;
  api: ServerProcess;
  workers: Map<string, ServerProcess>;
  key: string;
  dirs: string[];
  measured: Record<string, number>;
}

const Faults = suite<Ctx>('fleet: Redis down, restarted empty, or cut off from one worker', {} as Ctx);

function nodeEnv(ctx: Ctx, role: 'api' | 'worker', id: string, redisUrl: string): Record<string, string> {
  return fleetNodeEnv({ role, id, databaseUrl: ctx.databaseUrl, redisUrl, dirs: ctx.dirs, capacity: WORKER_CAPACITY, ttlMs: WORKER_TTL_MS, rtcPorts: RTC_PORTS[id], extra: { LOG_LEVEL: 'info' } });
}

Faults.before(async (ctx) => {
  ctx.dirs = [];
  ctx.workers = new Map();
  ctx.measured = {};
  [ctx.pg, ctx.redis] = await Promise.all([startPostgres(), startRedis()]);
  [ctx.proxy, ctx.apiProxy] = await Promise.all([startTcpProxy(ctx.redis.port), startTcpProxy(ctx.redis.port)]);
  ctx.databaseUrl = await ctx.pg.createDatabase();
  const w1 = await spawnServer(nodeEnv(ctx, 'worker', 'w1', ctx.redis.url));
  assert.ok(w1.bootstrapKey, `the first node prints a key:\n${w1.stdout()}`);
  ctx.key = w1.bootstrapKey!;
  ctx.workers.set('w1', w1);
  const [w2, a1] = await Promise.all([spawnServer(nodeEnv(ctx, 'worker', 'w2', ctx.proxy.url)), spawnServer(nodeEnv(ctx, 'api', 'a1', ctx.apiProxy.url))]);
  ctx.workers.set('w2', w2);
  ctx.api = a1;
  ctx.store = openStore(ctx.databaseUrl);
  ctx.registry = new RedisWorkerRegistry({ redis: ctx.redis.url });
});

Faults.after(async (ctx) => {
  const all = [ctx.api, ...ctx.workers.values()].filter(Boolean);
  if (process.env.REDIS_FAULTS_VERBOSE) console.error('measured (ms):', JSON.stringify(ctx.measured));
  // REDIS_FAULTS_LOGS=dir: every node's whole output, one file each.
  const logs = process.env.REDIS_FAULTS_LOGS;
  if (logs) for (const [i, p] of all.entries()) fs.writeFileSync(`${logs}/node-${i}.log`, p.stdout());
  for (const p of all) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all(all.map((p) => p.exited));
  await ctx.registry?.close();
  await ctx.store?.close();
  await ctx.proxy?.close();
  await ctx.apiProxy?.close();
  await Promise.all([ctx.pg?.stop(), ctx.redis?.stop()]);
  for (const dir of ctx.dirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A request and how long it took to be answered. */
async function timed(run: () => Promise<TestResponse>): Promise<TestResponse & { ms: number }> {
  const started = Date.now();
  const res = await run();
  return Object.assign(res, { ms: Date.now() - started });
}

const createSession = (ctx: Ctx) => request(ctx.api.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} });
const endSession = (ctx: Ctx, id: string) => request(ctx.api.url, 'DELETE', `/v1/sessions/${id}`, { key: ctx.key });
const workerOf = async (ctx: Ctx, sessionId: string) => (await ctx.registry.leaseOf(sessionId))?.workerId ?? null;
/** The registry as the test reads it; null while the test's own client cannot reach Redis yet. */
const capacity = (ctx: Ctx) => ctx.registry.capacity().catch(() => null);

function assertRedisUnavailable(res: TestResponse & { ms: number }, what: string): void {
  assert.is(res.status, 503, `${what}: ${res.text}`);
  assert.is(res.body.error.code, 'redis_unavailable', what);
  assert.is(res.headers.get('retry-after'), '2', what);
  assert.ok(res.ms < FAST_MS, `${what} answered in ${res.ms} ms`);
}

/** Every conversation opened, closed after each test whatever its outcome (the next starts from an empty fleet). */
const open = new Set<RealtimeTestClient>();
Faults.after.each(async () => {
  await Promise.all([...open].map((ws) => ws.close()));
  open.clear();
});

/** A conversation over the API node: a WebSocket session placed on a worker. */
async function converse(ctx: Ctx): Promise<{ ws: RealtimeTestClient; id: string }> {
  const ws = await RealtimeTestClient.connect(ctx.api.url, { key: ctx.key, query: 'model=gpt-realtime' });
  open.add(ws);
  const id = (await ws.waitFor('session.created', { timeoutMs: 30_000 })).session.id as string;
  await answers(ws);
  return { ws, id };
}

/** One text turn answered to the end: the session is alive and talking. */
async function answers(ws: RealtimeTestClient): Promise<void> {
  const from = ws.events.length;
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Are you still there?' }] } });
  ws.send({ type: 'response.create', response: { output_modalities: ['text'] } });
  const done = await ws.waitFor('response.done', { from, timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
}

async function readyz(ctx: Ctx): Promise<TestResponse & { ms: number }> {
  return timed(() => request(ctx.api.url, 'GET', '/readyz'));
}

Faults('Redis killed: requests that need it fail fast with redis_unavailable, live sessions keep talking; back (empty): creates work again', async (ctx) => {
  const live = await converse(ctx);
  const rest = (await createSession(ctx)).body.id as string;
  assert.ok(rest);
  assert.is((await readyz(ctx)).status, 200);

  const killedAt = Date.now();
  await ctx.redis.kill();
  const notReady = await until(() => readyz(ctx), (r) => r.status === 503, '/readyz to say not ready', 10_000);
  ctx.measured.readyzNotReadyAfterKill = Date.now() - killedAt;
  assert.ok(notReady.ms < FAST_MS);
  assert.is(notReady.body.status, 'not_ready');
  assert.match(notReady.body.checks.fleet, /^redis unavailable/);
  assert.is(notReady.body.workers, null);

  const create = await timed(() => createSession(ctx));
  assertRedisUnavailable(create, 'a create');
  ctx.measured.createRefusedMs = create.ms;
  const upgrade = Date.now();
  const refused = await RealtimeTestClient.connect(ctx.api.url, { key: ctx.key, query: 'model=gpt-realtime' });
  assert.is(await refused.waitClose(FAST_MS), 1013, 'a WebSocket that must place its session: try again later');
  assert.is(refused.ofType('error')[0]?.error?.code, 'redis_unavailable');
  const attach = await RealtimeTestClient.connect(ctx.api.url, { key: ctx.key, query: `session_id=${rest}` });
  assert.is(await attach.waitClose(FAST_MS), 1013, 'a WebSocket that must look its session up: try again later');
  assert.is(attach.ofType('error')[0]?.error?.code, 'redis_unavailable');
  ctx.measured.upgradesRefusedMs = Date.now() - upgrade;
  const metrics = await timed(() => request(ctx.api.url, 'GET', '/metrics'));
  assert.is(metrics.status, 200, 'metrics answer without the fleet figures');
  assert.ok(metrics.ms < FAST_MS, `/metrics in ${metrics.ms} ms`);
  // The store ends the session; its worker learns it from the store, its slot is freed later.
  const deleted = await timed(() => endSession(ctx, rest));
  assert.equal([deleted.status, deleted.body.status], [200, 'ended'], deleted.text);
  assert.ok(deleted.ms < FAST_MS, `DELETE in ${deleted.ms} ms`);

  // Live through the outage, well past a worker ttl (their heartbeats all fail meanwhile).
  await answers(live.ws);
  await new Promise((resolve) => setTimeout(resolve, 3 * WORKER_TTL_MS));
  await answers(live.ws);
  const during = await timed(() => createSession(ctx));
  assertRedisUnavailable(during, 'a create later in the outage');

  const restartedAt = Date.now();
  await ctx.redis.restart();
  const answered: TestResponse[] = [];
  const created = await until(
    async () => {
      const res = await createSession(ctx);
      answered.push(res);
      return res;
    },
    (r) => r.status === 200,
    'a create to succeed once Redis is back',
    30_000,
  );
  ctx.measured.createWorksAfterRestart = Date.now() - restartedAt;
  for (const r of answered.slice(0, -1)) assert.equal([r.status, r.body.error.code], [503, 'redis_unavailable'], 'never "All workers are busy" while there is room');
  await until(() => readyz(ctx), (r) => r.status === 200, '/readyz to say ready again', 10_000);
  ctx.measured.readyAfterRestart = Date.now() - restartedAt;

  // Nothing refused during the outage ran late: the fleet holds the live conversation and the new session only.
  await until(() => workerOf(ctx, live.id).catch(() => null), (w) => w !== null, 'the live session to be reclaimed by its worker', 10_000);
  const fleet = await capacity(ctx);
  assert.is(fleet?.used, 2, JSON.stringify(fleet));
  assert.is((await ctx.store.countSessionsByStatus()).active, 2);
  await answers(live.ws);
  assert.is((await ctx.store.getSession(live.id))!.status, 'active');
  await endSession(ctx, created.body.id);
  await live.ws.close();
  await until(() => ctx.store.getSession(live.id), (s) => s?.status === 'ended', 'the conversation to end');
});

Faults('Redis restarted empty with the fleet full: every session keeps talking, none is lost, and nothing is placed beyond the real capacity', async (ctx) => {
  await until(() => capacity(ctx), (c) => c?.used === 0 && c.workers === 2, 'an empty fleet');
  const talks: Array<{ ws: RealtimeTestClient; id: string }> = [];
  for (let i = 0; i < 2 * WORKER_CAPACITY; i++) talks.push(await converse(ctx));
  const placed = await Promise.all(talks.map((t) => workerOf(ctx, t.id)));
  assert.equal([...placed].sort(), ['w1', 'w1', 'w2', 'w2']);
  // Full before the restart. Within a ttl of an outage the API node answers redis_unavailable instead
  // (the previous test restarted Redis; a request past the 1 s bound on a loaded machine is one too).
  const fullBefore = async () => {
    const res = await createSession(ctx);
    assert.is(res.status, 503, `nothing is placed beyond capacity: ${res.text}`);
    return res;
  };
  await until(fullBefore, (r) => r.body.error.code === 'no_worker_available', 'the full fleet to answer no_worker_available before the restart', 10_000);

  const restartedAt = Date.now();
  await ctx.redis.kill();
  await ctx.redis.restart();
  // Until the workers are back, every refusal is redis_unavailable or no room; never a placement beyond capacity.
  const refusals: string[] = [];
  const fleet = await until(
    async () => {
      const res = await createSession(ctx);
      assert.is(res.status, 503, `nothing is placed beyond the real capacity: ${res.text}`);
      refusals.push(res.body.error.code);
      const cap = await capacity(ctx);
      for (const w of cap?.perWorker ?? []) assert.ok(w.used <= w.capacity, JSON.stringify(cap));
      return cap;
    },
    (c) => c?.workers === 2 && c.used === 4,
    'both workers to register again with their sessions',
    30_000,
  );
  ctx.measured.reclaimedAfterRestart = Date.now() - restartedAt;
  assert.equal(fleet!.perWorker.map((w) => [w.id, w.used]), [['w1', 2], ['w2', 2]]);
  assert.ok(refusals.every((c) => c === 'redis_unavailable' || c === 'no_worker_available'), refusals.join(','));
  for (const [i, t] of talks.entries()) assert.is(await workerOf(ctx, t.id), placed[i], 'each session is leased to the worker running it');
  // Once the fleet is settled, a refusal means what it says.
  const full = await until(() => createSession(ctx), (r) => r.status === 503 && r.body.error.code === 'no_worker_available', 'the full fleet to answer no_worker_available', 10_000);
  assert.ok(Number(full.headers.get('retry-after')) >= 1);

  for (const t of talks) await answers(t.ws);
  // Past every reconciliation pass that could have failed them (two passes, a ttl of staleness).
  await new Promise((resolve) => setTimeout(resolve, 2 * WORKER_TTL_MS + 4000));
  for (const t of talks) {
    assert.is((await ctx.store.getSession(t.id))!.status, 'active', 'not failed as worker_lost');
    await answers(t.ws);
  }
  for (const t of talks) await t.ws.close();
  for (const t of talks) await until(() => ctx.store.getSession(t.id), (s) => s?.status === 'ended', 'the conversations to end');
  const usage = await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000);
  assert.is(usage.filter((u) => u.endReason === 'worker_lost').length, 0, 'no session lost to a Redis restart');
});

Faults('the API node cut off from Redis (blackholed): creates, upgrades and /readyz answer within about a second, live sessions keep talking', async (ctx) => {
  const live = await converse(ctx);
  const cutAt = Date.now();
  ctx.apiProxy.blackhole(true);
  const create = await timed(() => createSession(ctx));
  assertRedisUnavailable(create, 'a create against a silent Redis');
  ctx.measured.blackholeCreateRefusedMs = create.ms;
  const notReady = await until(() => readyz(ctx), (r) => r.status === 503, '/readyz to say not ready', 10_000);
  ctx.measured.blackholeReadyzNotReady = Date.now() - cutAt;
  assert.ok(notReady.ms < FAST_MS);
  assert.match(notReady.body.checks.fleet, /^redis unavailable/);
  const upgrade = await RealtimeTestClient.connect(ctx.api.url, { key: ctx.key, query: 'model=gpt-realtime' });
  assert.is(await upgrade.waitClose(FAST_MS), 1013);
  assert.is(upgrade.ofType('error')[0]?.error?.code, 'redis_unavailable');
  const metrics = await timed(() => request(ctx.api.url, 'GET', '/metrics'));
  assert.is(metrics.status, 200);
  assert.ok(metrics.ms < FAST_MS, `/metrics in ${metrics.ms} ms`);
  await answers(live.ws);
  const healedAt = Date.now();
  ctx.apiProxy.blackhole(false);
  const created = await until(() => createSession(ctx), (r) => r.status === 200, 'a create to succeed once the API node reaches Redis again', 30_000);
  ctx.measured.blackholeCreateWorksAfterHeal = Date.now() - healedAt;
  await until(() => readyz(ctx), (r) => r.status === 200, '/readyz to say ready again', 10_000);
  await answers(live.ws);
  await endSession(ctx, created.body.id);
});

Faults('w2 cut off from Redis but serving: reaped after its ttl, its sessions failed once and closed, nothing placed on it; healed, it registers again without them', async (ctx) => {
  await until(() => capacity(ctx), (c) => c?.used === 0 && c.workers === 2, 'an empty fleet');
  const talks: Array<{ ws: RealtimeTestClient; id: string }> = [];
  for (let i = 0; i < 2 * WORKER_CAPACITY; i++) talks.push(await converse(ctx));
  const on = async (w: string) => {
    const out: typeof talks = [];
    for (const t of talks) if ((await workerOf(ctx, t.id)) === w) out.push(t);
    return out;
  };
  const [cut, kept] = [await on('w2'), await on('w1')];
  assert.equal([cut.length, kept.length], [2, 2]);

  const cutAt = Date.now();
  ctx.proxy.blackhole(true);
  for (const t of cut) await t.ws.waitClose(30_000);
  ctx.measured.cutOffSessionsClosed = Date.now() - cutAt;
  await until(() => capacity(ctx), (c) => c?.workers === 1 && c.perWorker.every((w) => w.id === 'w1'), 'w2 to be reaped', 30_000);
  for (const t of cut) {
    const s = await ctx.store.getSession(t.id);
    assert.equal([s!.status, s!.endReason], ['failed', 'worker_lost']);
  }
  const usage = await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000);
  for (const t of cut) assert.is(usage.filter((u) => u.sessionId === t.id).length, 1, 'billed exactly once');
  assert.ok(ctx.workers.get('w2')!.stdout().includes('no heartbeat answered within the ttl'), 'w2 noticed its registration may have lapsed');

  // The other worker's sessions are untouched; nothing new goes to w2.
  for (const t of kept) await answers(t.ws);
  assert.is((await createSession(ctx)).body.error.code, 'no_worker_available', 'w1 is full and w2 is not placed on');
  await kept[0]!.ws.close();
  await until(() => capacity(ctx), (c) => c?.used === 1, 'the slot to be freed');
  const next = await createSession(ctx);
  assert.is(next.status, 200, next.text);
  assert.is(await workerOf(ctx, next.body.id), 'w1');

  const healedAt = Date.now();
  ctx.proxy.blackhole(false);
  const back = (await until(() => capacity(ctx), (c) => c?.workers === 2, 'w2 to register again', 30_000))!;
  ctx.measured.cutOffWorkerBack = Date.now() - healedAt;
  assert.is(back.perWorker.find((w) => w.id === 'w2')!.used, 0, 'without the sessions that were failed');
  await until(async () => ctx.workers.get('w2')!.stdout(), (out) => out.includes('this worker was reaped'), 'w2 to learn it was reaped', 10_000);
  for (const t of cut) assert.is((await ctx.store.getSession(t.id))!.endReason, 'worker_lost', 'ended once, as the janitor ended it');
  const after = await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000);
  for (const t of cut) assert.is(after.filter((u) => u.sessionId === t.id).length, 1, 'still billed exactly once');
  await endSession(ctx, next.body.id);
  await kept[1]!.ws.close();
});

Faults('a worker started while Redis is down waits for it (without a log line per attempt) and joins once it is back', async (ctx) => {
  await ctx.redis.kill();
  const starting = spawnServer(nodeEnv(ctx, 'worker', 'w3', ctx.redis.url));
  await new Promise((resolve) => setTimeout(resolve, 5000));
  await ctx.redis.restart();
  const w3 = await starting;
  ctx.workers.set('w3', w3);
  await until(() => capacity(ctx), (c) => c?.workers === 3, 'all three workers registered', 30_000);
  const created = await until(() => createSession(ctx), (r) => r.status === 200, 'a create once the fleet is back', 30_000);
  await endSession(ctx, created.body.id);
});

Faults('every node logged the outages once per change, with no unhandled Redis client error', async (ctx) => {
  for (const node of [ctx.api, ...ctx.workers.values()]) {
    const out = node.stdout();
    assert.not.ok(out.includes('Unhandled error event'), `${node.url}: an ioredis client without an error listener`);
    const changes = out.split('\n').filter((l) => /"msg":"dependency (down|back)"/.test(l) && l.includes('"dependency":"redis"'));
    assert.ok(changes.length >= 2, `${node.url} logged the outage: ${changes.length} lines`);
    assert.ok(changes.length <= 8, `${node.url}: ${changes.length} down/back lines for three or four outages:\n${changes.join('\n')}`);
    assert.not.match(out, /"msg":"(heartbeat failed|janitor pass failed|outbox lock failed|announcing a session end failed)"[^\n]*redis/i, 'no warning per retry');
  }
});

Faults.run();
