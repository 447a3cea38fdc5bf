/**
 * Fleet faults of one node (issue 25): an API node killed mid-relay, and a node whose wall clock
 * jumps. A real PostgreSQL and Redis on loopback, two API nodes and two workers as processes of the
 * real entry point (as in fleet.test.ts); workers answer with the offline responder. Every node
 * loads test/helpers/clock-shift.ts, which moves its wall clock when the test writes its offset
 * file and signals it (SIGUSR2); until then the clocks are true.
 *
 *  - An API node killed (SIGKILL) while a reply streams through its relay: the client's socket
 *    closes, the session ends on its worker (the relay's end reached it) billed once with what was
 *    delivered, its slot is freed, and the other API node serves new connections. One frozen
 *    (SIGSTOP: a host gone without closing its sockets) is noticed by the worker's relay pings
 *    (worker-relay.ts) within about RELAY_SILENCE_MS, with the same end.
 *  - One worker's clock jumps forward an hour and the other's (the janitor's) back ten minutes
 *    mid-session: liveness (Redis's clock) is unaffected, nothing is failed or placed twice,
 *    and every timestamp and duration stays on the true timeline (never negative, never the jump).
 *    A worker that boots with its clock an hour ahead bills no hour extra; an API node whose clock
 *    steps back still serves its keys.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RedisWorkerRegistry } from '../../src/fleet/worker-registry.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRedis, type RedisServer } from '../../harness/servers/redis-server.js';
import { REPO_ROOT, request, tempDir } from '../../harness/servers/server.js';
import { FLEET_TEST_TTL_MS, fleetNodeEnv } from '../../harness/servers/fleet-node.js';
import { until } from '../../harness/servers/wait.js';

const WORKER_CAPACITY = 2;
/** These tests assert that no worker is ever taken for dead, on loaded CI machines too (harness/servers/fleet-node.ts). */
const WORKER_TTL_MS = FLEET_TEST_TTL_MS;
const CLOCK_SHIFT = path.join(REPO_ROOT, 'test/helpers/clock-shift.ts');
const HOUR_MS = 3_600_000;
const TEN_MINUTES_MS = 600_000;
/** Slack for timestamps written by another process than the one measuring (store round trips, a loaded machine). */
const SLACK_US = 3_000_000;
const JANITOR_LOCK = 'avatar:fleet:leader:janitor';

interface Node {
  id: string;
  role: 'api' | 'worker';
  proc: ServerProcess;
  /** Its clock-shift offset file. */
  clockFile: string;
  env: Record<string, string>;
}

interface Ctx {
  pg: TestPostgres;
  redis: RedisServer;
  redisClient: Redis;
  databaseUrl: string;
  store: Store;
  registry: RedisWorkerRegistry;
  nodes: Map<string, Node>;
  key: string;
  dirs: string[];
}

const Faults = suite<Ctx>('fleet: an API node killed mid-relay, a clock jump on one node', {} as Ctx);

function nodeEnv(ctx: Ctx, role: 'api' | 'worker', id: string, clockFile: string): Record<string, string> {
  return fleetNodeEnv({
    role,
    id,
    databaseUrl: ctx.databaseUrl,
    redisUrl: ctx.redis.url,
    dirs: ctx.dirs,
    capacity: WORKER_CAPACITY,
    ttlMs: WORKER_TTL_MS,
    rtcPorts: id === 'w1' ? [42200, 42299] : [42300, 42399],
    extra: {
      // tsx first (the entry point's own --import tsx comes after NODE_OPTIONS), then the clock.
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import tsx --import ${CLOCK_SHIFT}`.trim(),
      CLOCK_SHIFT_FILE: clockFile,
    },
  });
}

async function startNode(ctx: Ctx, role: 'api' | 'worker', id: string): Promise<Node> {
  const dir = tempDir('avatar-clock-');
  ctx.dirs.push(dir);
  const clockFile = path.join(dir, 'offset-ms');
  fs.writeFileSync(clockFile, '0');
  const env = nodeEnv(ctx, role, id, clockFile);
  const node: Node = { id, role, proc: await spawnServer(env), clockFile, env };
  ctx.nodes.set(id, node);
  return node;
}

/** Restarts a stopped node with the same environment (its clock file as it is now). */
async function restartNode(ctx: Ctx, node: Node): Promise<void> {
  node.proc = await spawnServer(node.env);
}

/** Steps a running node's wall clock to `offsetMs` from the truth and waits until it has. */
async function jumpClock(node: Node, offsetMs: number): Promise<void> {
  fs.writeFileSync(node.clockFile, String(offsetMs));
  const acks = () => node.proc.stdout().split('\n').filter((l) => l === `clock-shift: offset ${offsetMs}`).length;
  const before = acks();
  node.proc.child.kill('SIGUSR2');
  await until(async () => acks(), (n) => n > before, `${node.id}'s clock to move by ${offsetMs} ms`, 10_000);
}

Faults.before(async (ctx) => {
  ctx.dirs = [];
  ctx.nodes = new Map();
  [ctx.pg, ctx.redis] = await Promise.all([startPostgres(), startRedis()]);
  ctx.databaseUrl = await ctx.pg.createDatabase();
  // w1 starts alone: it prints the bootstrap key and takes the janitor's lock first (and keeps it).
  const w1 = await startNode(ctx, 'worker', 'w1');
  assert.ok(w1.proc.bootstrapKey, `the first node prints a key:\n${w1.proc.stdout()}`);
  ctx.key = w1.proc.bootstrapKey!;
  await Promise.all([startNode(ctx, 'worker', 'w2'), startNode(ctx, 'api', 'a1'), startNode(ctx, 'api', 'a2')]);
  ctx.store = openStore(ctx.databaseUrl);
  ctx.registry = new RedisWorkerRegistry({ redis: ctx.redis.url });
  ctx.redisClient = new Redis(ctx.redis.url);
});

Faults.after(async (ctx) => {
  const all = [...(ctx.nodes?.values() ?? [])].map((n) => n.proc);
  if (process.env.FLEET_TEST_LOGS) for (const p of all) console.error(`--- ${p.url}\n${p.stdout().split('\n').filter((l) => /"level":"(error|warn)"/.test(l)).slice(0, 12).join('\n')}`);
  for (const p of all) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.all(all.map((p) => p.exited));
  ctx.redisClient?.disconnect();
  await ctx.registry?.close();
  await ctx.store?.close();
  await Promise.all([ctx.pg?.stop(), ctx.redis?.stop()]);
  for (const dir of ctx.dirs ?? []) fs.rmSync(dir, { recursive: true, force: true });
});

const node = (ctx: Ctx, id: string) => ctx.nodes.get(id)!;
const workerOf = async (ctx: Ctx, sessionId: string) => (await ctx.registry.leaseOf(sessionId))?.workerId ?? null;
const usageOf = async (ctx: Ctx, sessionId: string) => (await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000)).filter((u) => u.sessionId === sessionId);
/** The true time, in microseconds (this process's clock is never shifted). */
const trueNowUs = () => Date.now() * 1000;

/** Every worker's held set, as session id -> the workers holding it (a session placed twice shows two). */
async function holders(ctx: Ctx): Promise<Map<string, string[]>> {
  const byWorker = (await ctx.registry.capacity()).perWorker.map((w) => w.id);
  const out = new Map<string, string[]>();
  for (const w of byWorker) for (const s of await ctx.redisClient.smembers(`avatar:fleet:held:${w}`)) out.set(s, [...(out.get(s) ?? []), w]);
  return out;
}

/** Audio seconds in the response deltas a client received (PCM16 mono at 24 kHz). */
function receivedAudioSeconds(ws: RealtimeTestClient): number {
  const bytes = ws.ofType('response.output_audio.delta').reduce((n, e) => n + Buffer.from(String(e.delta), 'base64').length, 0);
  return bytes / 2 / 24_000;
}

async function converse(ws: RealtimeTestClient, text: string): Promise<void> {
  const from = ws.events.length;
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  ws.send({ type: 'response.create' });
  const done = await ws.waitFor('response.done', { from, timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
}

Faults('an API node frozen mid-relay (SIGSTOP: a host gone without closing its sockets): the worker notices the silence, ends the session billed once and frees its slot', async (ctx) => {
  const a1 = node(ctx, 'a1');
  const a2 = node(ctx, 'a2');
  const ws = await RealtimeTestClient.connect(a1.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const sessionId = (await ws.waitFor('session.created')).session.id as string;
  const worker = (await workerOf(ctx, sessionId))!;
  await converse(ws, 'Hello.');
  const frozenAt = Date.now();
  a1.proc.child.kill('SIGSTOP');
  try {
    // The other API node serves meanwhile.
    const other = await request(a2.proc.url, 'GET', '/v1/sessions', { key: ctx.key });
    assert.is(other.status, 200);
    // The worker's pings go unanswered: it drops the relay and the session ends as a closed connection.
    const ended = await until(() => ctx.store.getSession(sessionId), (s) => s?.status !== 'active', 'the worker to end the session of the frozen relay', 40_000);
    const endedMs = Date.now() - frozenAt;
    assert.is(ended!.status, 'ended');
    assert.is(ended!.endReason, 'client_disconnected');
    await until(() => workerOf(ctx, sessionId), (w) => w === null, 'the slot to be freed', 10_000);
    assert.is((await usageOf(ctx, sessionId)).length, 1, 'billed once');
    assert.ok(ended!.durationSeconds! <= (Date.now() - frozenAt) / 1000 + 60, `duration ${ended!.durationSeconds} s`);
    a1.proc.child.kill('SIGCONT');
    const resumedAt = Date.now();
    // Resumed, the API node finds its relay closed and tells the client.
    assert.is(await ws.waitClose(15_000), 1011, 'the client is told its session is gone');
    console.log(`  API node frozen mid-relay: session ended on ${worker} after ${endedMs} ms of silence; the client, on the frozen node, is closed 1011 ${Date.now() - resumedAt} ms after it resumes`);
  } finally {
    a1.proc.child.kill('SIGCONT');
  }
});

Faults('an API node killed mid-relay: the client sees its socket close, the session ends on its worker billed once with what was delivered, the other API node serves', async (ctx) => {
  const a1 = node(ctx, 'a1');
  const a2 = node(ctx, 'a2');
  const openedAt = Date.now();
  const ws = await RealtimeTestClient.connect(a1.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const sessionId = (await ws.waitFor('session.created')).session.id as string;
  const worker = (await workerOf(ctx, sessionId))!;
  assert.match(worker, /^w[12]$/);
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me a long story about the sea, the ships and the people on them.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.output_audio.delta', { timeoutMs: 60_000 });
  const killedAt = Date.now();
  a1.proc.child.kill('SIGKILL');
  await a1.proc.exited;
  await ws.waitClose(15_000);
  const clientClosedMs = Date.now() - killedAt;
  assert.not.ok(ws.types().includes('response.done'), 'the reply was still streaming when the API node died');
  const received = receivedAudioSeconds(ws);

  // The relay's end reached the worker: it ended the socket's own session as a closed connection.
  const ended = await until(() => ctx.store.getSession(sessionId), (s) => s?.status !== 'active', 'the relayed session to end on its worker', 15_000);
  const sessionEndedMs = Date.now() - killedAt;
  assert.is(ended!.status, 'ended');
  assert.is(ended!.endReason, 'client_disconnected');
  assert.ok(ended!.durationSeconds! > 0 && ended!.durationSeconds! <= (Date.now() - openedAt) / 1000 + 3, `duration ${ended!.durationSeconds} s`);
  // Its slot is free, and the worker runs no orphan of it.
  await until(() => workerOf(ctx, sessionId), (w) => w === null, 'the slot to be freed', 10_000);
  assert.equal((await ctx.registry.capacity()).used, 0, 'no slot held anywhere');
  const usage = await usageOf(ctx, sessionId);
  assert.is(usage.length, 1, 'billed exactly once');
  assert.is(usage[0]!.endReason, 'client_disconnected');
  // What the worker sent covers at least what reached the client through the relay.
  assert.ok(usage[0]!.audioSecondsOut > 0, `the audio spoken before the API node died is billed (${usage[0]!.audioSecondsOut} s; the client received ${received.toFixed(3)} s)`);
  assert.ok(usage[0]!.audioSecondsOut + 0.001 >= received, `billed ${usage[0]!.audioSecondsOut} s, received ${received.toFixed(3)} s`);

  // A new connection through the other API node works, on a worker with a free slot.
  const again = await RealtimeTestClient.connect(a2.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const next = (await again.waitFor('session.created')).session.id as string;
  const recoveredMs = Date.now() - killedAt;
  await converse(again, 'Hello again.');
  const placed = await holders(ctx);
  assert.equal(placed.get(next)?.length, 1, 'the new session is placed once');
  assert.not.ok(placed.has(sessionId), 'the dead relay\'s session holds no slot');
  await again.close();
  await until(() => ctx.store.getSession(next), (s) => s?.status === 'ended', 'the new session to end');
  assert.is((await usageOf(ctx, next)).length, 1);
  console.log(`  API node SIGKILL mid-relay: client closed ${ws.closeCode} after ${clientClosedMs} ms; session ended on ${worker} after ${sessionEndedMs} ms (billed ${usage[0]!.audioSecondsOut.toFixed(3)} s of audio, the client got ${received.toFixed(3)} s); a new session through a2 at +${recoveredMs} ms`);
  ctx.nodes.delete('a1');
});

/** Sessions opened through a2 for the clock tests: one on each worker. */
interface Running {
  ws: RealtimeTestClient;
  id: string;
  worker: string;
  openedAtUs: number;
}

async function openOnEachWorker(ctx: Ctx): Promise<Running[]> {
  const a2 = node(ctx, 'a2');
  const out: Running[] = [];
  for (let i = 0; i < 2; i++) {
    const openedAtUs = trueNowUs();
    const ws = await RealtimeTestClient.connect(a2.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
    const id = (await ws.waitFor('session.created')).session.id as string;
    out.push({ ws, id, worker: (await workerOf(ctx, id))!, openedAtUs });
  }
  const state = await Promise.all(out.map(async (r) => JSON.stringify([r.worker, (await ctx.store.getSession(r.id))?.status, (await ctx.store.getSession(r.id))?.endReason])));
  assert.equal(out.map((r) => r.worker).sort(), ['w1', 'w2'], `least loaded first: one session on each worker: ${state.join(' ')}`);
  return out;
}

let running: Running[] = [];

Faults('a clock jump on two workers (w2 +1 h, w1, the janitor, -10 min) mid-session: liveness holds, nothing fails or is placed twice, conversations go on', async (ctx) => {
  assert.is(await ctx.redisClient.get(JANITOR_LOCK), 'w1', 'w1, whose clock goes back, is the janitor');
  running = await openOnEachWorker(ctx);
  for (const r of running) await converse(r.ws, 'Hello before the jump.');
  await jumpClock(node(ctx, 'w2'), HOUR_MS);
  await jumpClock(node(ctx, 'w1'), -TEN_MINUTES_MS);
  const jumpedAt = Date.now();
  // Watch liveness for several heartbeats and reconciliation passes (a ttl is 3 s, a pass 2 s).
  while (Date.now() - jumpedAt < 3 * WORKER_TTL_MS + 2000) {
    const cap = await ctx.registry.capacity();
    assert.equal(cap.perWorker.map((w) => [w.id, w.live]), [['w1', true], ['w2', true]], 'both workers stay live (the registry reads Redis\'s clock)');
    await new Promise((r) => setTimeout(r, 250));
  }
  for (const r of running) await converse(r.ws, 'Hello after the jump.');
  for (const r of running) {
    const s = (await ctx.store.getSession(r.id))!;
    assert.is(s.status, 'active', `${r.id} on ${r.worker} is still live`);
    assert.equal(await workerOf(ctx, r.id), r.worker, 'still placed where it was');
  }
  const placed = await holders(ctx);
  assert.ok([...placed.values()].every((ws) => ws.length === 1), 'no session held by two workers');
  assert.equal((await ctx.registry.capacity()).used, 2);
  assert.equal((await ctx.store.listSessionsByStatus(['failed'])).length, 0, 'nothing failed');
});

Faults('after the jump, each session\'s last_seen (what a lost session is billed up to) stays on the true timeline', async (ctx) => {
  assert.ok(running.length === 2, 'the previous test opened the sessions');
  // Each worker heartbeats its sessions' last_seen every 2 s (and the API node that made them every
  // 10 s): every value read over a few passes must lie between the session's start and now.
  const stopAt = Date.now() + 5000;
  while (Date.now() < stopAt) {
    for (const r of running) {
      const s = (await ctx.store.getSession(r.id))!;
      const now = trueNowUs();
      assert.ok(s.lastSeenUs! >= s.startedAtUs!, `${r.worker}: last_seen ${((s.lastSeenUs! - now) / 1e6).toFixed(1)} s from now is before the session started (${((s.startedAtUs! - now) / 1e6).toFixed(1)} s)`);
      assert.ok(s.lastSeenUs! <= now + SLACK_US, `${r.worker}: last_seen is ${((s.lastSeenUs! - now) / 1e6).toFixed(1)} s in the future`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
});

Faults('after the janitor\'s clock went back, it still reconciles: a lease without a session is freed', async (ctx) => {
  const ghost = 'sess_clockghostclockghostcl';
  assert.ok(await ctx.registry.place(ghost));
  const placedAt = Date.now();
  try {
    await until(() => ctx.registry.leaseOf(ghost), (l) => l === null, 'the janitor to free the ghost lease (two reconciliation passes)', 20_000);
    console.log(`  janitor with its clock 10 min back freed a ghost lease in ${Date.now() - placedAt} ms`);
  } finally {
    await ctx.registry.release(ghost);
  }
});

Faults('sessions that ran across the jumps end with their true durations, billed once', async (ctx) => {
  assert.ok(running.length === 2, 'the first clock test opened the sessions');
  for (const r of running) {
    await r.ws.close();
    const closedAtUs = trueNowUs();
    const s = await until(() => ctx.store.getSession(r.id), (x) => x?.status === 'ended', `${r.id} to end on ${r.worker}`, 15_000);
    const trueSeconds = (closedAtUs - r.openedAtUs) / 1e6;
    assert.is(s!.endReason, 'client_disconnected');
    assert.ok(s!.endedAtUs! >= s!.startedAtUs!, `${r.worker}: ended_at is before started_at`);
    assert.ok(Math.abs(s!.endedAtUs! - closedAtUs) <= SLACK_US, `${r.worker}: ended_at is ${(s!.endedAtUs! - closedAtUs) / 1e6} s off the true end`);
    assert.ok(s!.durationSeconds! >= trueSeconds - 3 && s!.durationSeconds! <= trueSeconds + 3, `${r.worker}: duration ${s!.durationSeconds} s, true ${trueSeconds.toFixed(1)} s`);
    const usage = await usageOf(ctx, r.id);
    assert.is(usage.length, 1, 'billed once');
    assert.is(usage[0]!.durationSeconds, s!.durationSeconds);
    assert.ok(usage[0]!.audioSecondsOut > 0);
  }
});

Faults('a worker killed after its clock jumped ahead is failed by the janitor (clock back) billed up to about its last heartbeat: no jump, no loss', async (ctx) => {
  const a2 = node(ctx, 'a2');
  const w2 = node(ctx, 'w2');
  // w1 takes the first session (least loaded, ties by id): a REST session fills it halfway, the socket's lands on w2.
  const filler = (await request(a2.proc.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} })).body.id as string;
  try {
    await runAndLoseW2(ctx, w2);
  } finally {
    await request(a2.proc.url, 'DELETE', `/v1/sessions/${filler}`, { key: ctx.key });
  }
});

async function runAndLoseW2(ctx: Ctx, w2: Node): Promise<void> {
  const a2 = node(ctx, 'a2');
  const openedAtUs = trueNowUs();
  const ws = await RealtimeTestClient.connect(a2.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const id = (await ws.waitFor('session.created')).session.id as string;
  assert.is(await workerOf(ctx, id), 'w2');
  await converse(ws, 'Hello.');
  // Let it run a few of w2's heartbeats.
  await new Promise((r) => setTimeout(r, 4000));
  const killedAtUs = trueNowUs();
  w2.proc.child.kill('SIGKILL');
  await w2.proc.exited;
  assert.is(await ws.waitClose(15_000), 1011);
  const failed = await until(() => ctx.store.getSession(id), (s) => s?.status === 'failed', 'the janitor to fail the lost session', 30_000);
  assert.is(failed!.endReason, 'worker_lost');
  const ranSeconds = (killedAtUs - openedAtUs) / 1e6;
  const billed = failed!.durationSeconds!;
  assert.ok(billed >= ranSeconds - WORKER_TTL_MS / 1000 - 3, `billed ${billed} s of the ${ranSeconds.toFixed(1)} s it ran (up to about its last heartbeat)`);
  assert.ok(billed <= ranSeconds + 3, `billed ${billed} s, ran ${ranSeconds.toFixed(1)} s`);
  assert.is((await usageOf(ctx, id)).length, 1, 'billed once');
}

Faults('a worker that boots with its clock an hour ahead bills no hour extra for the sessions it ends', async (ctx) => {
  const a2 = node(ctx, 'a2');
  const w2 = node(ctx, 'w2');
  // Its offset file still says +1 h: it boots with that clock (performance.timeOrigin included).
  if (w2.proc.child.exitCode === null && w2.proc.child.signalCode === null) {
    w2.proc.child.kill('SIGTERM');
    await w2.proc.exited;
  }
  await restartNode(ctx, w2);
  await until(() => ctx.registry.capacity(), (c) => c.perWorker.some((w) => w.id === 'w2' && w.live), 'w2 to register again', 20_000);
  const filler = (await request(a2.proc.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} })).body.id as string;
  const openedAtUs = trueNowUs();
  const ws = await RealtimeTestClient.connect(a2.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const id = (await ws.waitFor('session.created')).session.id as string;
  try {
    assert.is(await workerOf(ctx, id), 'w2');
    await converse(ws, 'Hello.');
    await ws.close();
    const closedAtUs = trueNowUs();
    const s = await until(() => ctx.store.getSession(id), (x) => x?.status === 'ended', 'the session to end on w2', 15_000);
    const trueSeconds = (closedAtUs - openedAtUs) / 1e6;
    assert.ok(s!.durationSeconds! <= trueSeconds + 3, `billed ${s!.durationSeconds} s for a session of ${trueSeconds.toFixed(1)} s (ended by a worker whose clock is 1 h ahead)`);
    assert.ok(Math.abs(s!.endedAtUs! - closedAtUs) <= SLACK_US, `ended_at is ${((s!.endedAtUs! - closedAtUs) / 1e6).toFixed(1)} s off the true end`);
  } finally {
    await ws.close();
    await request(a2.proc.url, 'DELETE', `/v1/sessions/${filler}`, { key: ctx.key });
  }
});

Faults('a janitor whose clock is an hour ahead ends no session early (deadlines are an hour: MAX_SESSION_SECONDS 3600)', async (ctx) => {
  const a2 = node(ctx, 'a2');
  const rest = (await request(a2.proc.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} })).body.id as string;
  // Hand the janitor's lock to w2 (booted an hour ahead): w1 sees another holder and stands down, w2 renews it.
  await ctx.redisClient.set(JANITOR_LOCK, 'w2', 'PX', 3000);
  try {
    await new Promise((r) => setTimeout(r, 4000));
    assert.is(await ctx.redisClient.get(JANITOR_LOCK), 'w2', 'w2 holds the janitor lock');
    const s = (await ctx.store.getSession(rest))!;
    assert.is(s.status, 'active', `a session made ${((trueNowUs() - s.startedAtUs!) / 1e6).toFixed(1)} s ago is ${s.status} (${s.endReason}, billed ${s.durationSeconds} s)`);
  } finally {
    await ctx.redisClient.set(JANITOR_LOCK, 'w1', 'PX', 3000);
    await request(a2.proc.url, 'DELETE', `/v1/sessions/${rest}`, { key: ctx.key });
  }
});

Faults('an API node whose clock steps back ten minutes still serves its keys (no rate-limit lockout)', async (ctx) => {
  const a2 = node(ctx, 'a2');
  assert.is((await request(a2.proc.url, 'GET', '/v1/sessions', { key: ctx.key })).status, 200);
  await jumpClock(a2, -TEN_MINUTES_MS);
  try {
    const res = await request(a2.proc.url, 'GET', '/v1/sessions', { key: ctx.key });
    assert.is(res.status, 200, res.text);
    const ws = await RealtimeTestClient.connect(a2.proc.url, { key: ctx.key, query: 'model=gpt-realtime' });
    await ws.waitFor('session.created');
    await ws.close();
  } finally {
    await jumpClock(a2, 0);
  }
});

Faults.run();
