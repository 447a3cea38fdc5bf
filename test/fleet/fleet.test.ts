/**
 * Fleet mode end to end: a real PostgreSQL and Redis (Debian's servers, on loopback in temporary
 * directories), two API nodes and two workers as separate processes of the real entry point
 * (src/main.ts), each worker with room for two sessions and its own WebRTC port range. Clients
 * speak only to the API nodes. The tests read placements from the registry in Redis and records
 * from the store, as an operator would. Workers answer with the offline responder (no model
 * weights needed); a killed worker is noticed within FLEET_WORKER_TTL_MS.
 */
import http from 'node:http';
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RedisWorkerRegistry } from '../../src/fleet/worker-registry.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { callIn, chromiumAvailable, launchBrowser, type CallStartResult, type TestBrowser } from '../../harness/clients/browser.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRedis, type RedisServer } from '../../harness/servers/redis-server.js';
import { request } from '../../harness/servers/server.js';
import { FLEET_TEST_TTL_MS, fleetNodeEnv } from '../../harness/servers/fleet-node.js';
import { until } from '../../harness/servers/wait.js';
import { MEDIA_UNSET } from '../../src/core/media-options.js';

const WORKER_CAPACITY = 2;
const WORKER_TTL_MS = FLEET_TEST_TTL_MS;
/** Each worker's WebRTC ports: media from a worker arrives from its own range. */
const RTC_PORTS: Record<string, [number, number]> = { w1: [42000, 42099], w2: [42100, 42199] };

interface Ctx {
  pg: TestPostgres;
  redis: RedisServer;
  databaseUrl: string;
  store: Store;
  registry: RedisWorkerRegistry;
  api: ServerProcess[];
  workers: Map<string, ServerProcess>;
  key: string;
  hook: { server: http.Server; url: string; events: string[] };
  dirs: string[];
}

const Fleet = suite<Ctx>('fleet: two API nodes and two workers', {} as Ctx);

function nodeEnv(ctx: Ctx, role: 'api' | 'worker', id: string): Record<string, string> {
  return fleetNodeEnv({
    role,
    id,
    databaseUrl: ctx.databaseUrl,
    redisUrl: ctx.redis.url,
    dirs: ctx.dirs,
    capacity: WORKER_CAPACITY,
    ttlMs: WORKER_TTL_MS,
    rtcPorts: RTC_PORTS[id],
    extra: { WEBHOOK_URL: ctx.hook.url, WEBHOOK_SECRET: 'w'.repeat(24), WEBHOOK_RETRY_BASE_MS: '200' },
  });
}

Fleet.before(async (ctx) => {
  ctx.dirs = [];
  ctx.workers = new Map();
  ctx.api = [];
  const events: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      events.push((JSON.parse(body) as { id: string }).id);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  ctx.hook = { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, events };
  [ctx.pg, ctx.redis] = await Promise.all([startPostgres(), startRedis()]);
  ctx.databaseUrl = await ctx.pg.createDatabase();
  // The first node on the empty store prints the bootstrap key; the others then start together.
  const w1 = await spawnServer(nodeEnv(ctx, 'worker', 'w1'));
  assert.ok(w1.bootstrapKey, `the first node prints a key:\n${w1.stdout()}`);
  ctx.key = w1.bootstrapKey!;
  ctx.workers.set('w1', w1);
  const [w2, a1, a2] = await Promise.all([spawnServer(nodeEnv(ctx, 'worker', 'w2')), spawnServer(nodeEnv(ctx, 'api', 'a1')), spawnServer(nodeEnv(ctx, 'api', 'a2'))]);
  ctx.workers.set('w2', w2);
  ctx.api = [a1, a2];
  ctx.store = openStore(ctx.databaseUrl);
  ctx.registry = new RedisWorkerRegistry({ redis: ctx.redis.url });
});

Fleet.after(async (ctx) => {
  const all = [...ctx.api, ...ctx.workers.values()];
  if (process.env.FLEET_TEST_LOGS) for (const p of all) console.error(`--- ${p.url}\n${p.stdout().split('\n').filter((l) => /"level":"(error|warn)"/.test(l)).filter((l) => !l.includes("reading an ended session")).slice(0, 8).join('\n')}`);
  for (const p of all) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all(all.map((p) => p.exited));
  await ctx.registry?.close();
  await ctx.store?.close();
  await Promise.all([ctx.pg?.stop(), ctx.redis?.stop()]);
  ctx.hook?.server.close();
  for (const dir of ctx.dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const createSession = (ctx: Ctx, node: ServerProcess) => request(node.url, 'POST', '/v1/sessions', { key: ctx.key, json: {} });
const endSession = (ctx: Ctx, node: ServerProcess, id: string) => request(node.url, 'DELETE', `/v1/sessions/${id}`, { key: ctx.key });
const workerOf = async (ctx: Ctx, sessionId: string) => (await ctx.registry.leaseOf(sessionId))?.workerId ?? null;

Fleet('sessions created through either API node land on either worker; the full fleet answers 503 with Retry-After', async (ctx) => {
  const [a1, a2] = ctx.api as [ServerProcess, ServerProcess];
  const ids: string[] = [];
  for (let i = 0; i < 2 * WORKER_CAPACITY; i++) {
    const res = await createSession(ctx, i % 2 ? a2 : a1);
    assert.is(res.status, 200, res.text);
    ids.push(res.body.id);
  }
  const placed = await Promise.all(ids.map((id) => workerOf(ctx, id)));
  assert.equal([...placed].sort(), ['w1', 'w1', 'w2', 'w2'], 'least loaded first: two sessions on each worker');
  const full = await createSession(ctx, a2);
  assert.is(full.status, 503, full.text);
  assert.is(full.body.error.code, 'no_worker_available');
  assert.ok(Number(full.headers.get('retry-after')) >= 1);
  const health = await request(a1.url, 'GET', '/readyz');
  assert.equal(health.body.workers, { capacity: 4, used: 4 }, 'readiness shows the fleet-wide slots');
  const metrics = (await request(a2.url, 'GET', '/metrics')).text;
  assert.match(metrics, /^avatar_fleet_workers\{state="live"\} 2$/m);
  for (const w of ['w1', 'w2']) assert.match(metrics, new RegExp(`^avatar_fleet_worker_slots\\{worker="${w}",state="used"\\} 2$`, 'm'));
  assert.match(metrics, /^avatar_worker_slots\{state="free"\} 0$/m);
  for (const [i, id] of ids.entries()) assert.is((await endSession(ctx, i % 2 ? a1 : a2, id)).body.status, 'ended');
  assert.equal((await ctx.registry.capacity()).used, 0);
});

Fleet('parallel creates on both API nodes never exceed the fleet: exactly one wins the last slot', async (ctx) => {
  const [a1, a2] = ctx.api as [ServerProcess, ServerProcess];
  const held: string[] = [];
  for (let i = 0; i < 2 * WORKER_CAPACITY - 1; i++) held.push((await createSession(ctx, a1)).body.id);
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => createSession(ctx, i % 2 ? a2 : a1)));
  const won = results.filter((r) => r.status === 200);
  assert.is(won.length, 1, `statuses: ${results.map((r) => r.status).join(',')}`);
  assert.ok(results.every((r) => r.status === 200 || (r.status === 503 && r.body.error.code === 'no_worker_available')));
  held.push(won[0]!.body.id);
  const cap = await ctx.registry.capacity();
  assert.equal([cap.used, cap.capacity], [4, 4]);
  assert.ok(cap.perWorker.every((w) => w.used <= w.capacity));
  assert.is((await ctx.store.countSessionsByStatus()).active, 4, 'the refused creates left no session behind');
  for (const id of held) await endSession(ctx, a2, id);
});

Fleet('a WebSocket conversation through an API node runs on a worker; DELETE on the other API node closes it there', async (ctx) => {
  const [a1, a2] = ctx.api as [ServerProcess, ServerProcess];
  const rest = (await createSession(ctx, a1)).body.id as string;
  const ws = await RealtimeTestClient.connect(a1.url, { key: ctx.key, query: `session_id=${rest}` });
  const created = await ws.waitFor('session.created');
  assert.is(created.session.id, rest);
  assert.match((await workerOf(ctx, rest)) ?? '', /^w[12]$/);
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.output_audio.delta', { timeoutMs: 60_000 });
  const done = await ws.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  // The worker records the response's usage just after response.done (a store write of its own).
  await until(() => ctx.store.getUsageCounters(rest), (c) => c.audioSecondsOut > 0, "the worker's usage counters");
  assert.is((await endSession(ctx, a2, rest)).body.status, 'ended');
  assert.is(await ws.waitClose(15_000), 4010, 'the worker closed the session ended on another node');
  const usage = await ctx.store.getUsageForSession(rest);
  assert.ok(usage!.audioSecondsOut > 0, 'usage counts the audio the worker spoke');
});

Fleet('a WebRTC call from Chromium through an API node gets its media from the worker the session was placed on', async (ctx) => {
  if (!chromiumAvailable()) throw new Error('Chromium is not installed: run bash src/cli/setup.sh');
  const [a1, a2] = ctx.api as [ServerProcess, ServerProcess];
  const browser: TestBrowser = await launchBrowser({ microphone: 'silence' });
  try {
    const page = await browser.newPage();
    const res = await callIn<CallStartResult>(page, 'start', { baseUrl: a1.url, key: ctx.key, form: 'multipart', audio: true, video: true, channel: 'oai-events', session: { type: 'realtime' } });
    assert.is(res.status, 201, res.answer);
    const sessionId = res.sessionId!;
    const worker = (await workerOf(ctx, sessionId))!;
    const [lo, hi] = RTC_PORTS[worker]!;
    const ports = [...res.answer.matchAll(/a=candidate:\S+ \d+ udp \d+ \S+ (\d+) typ host/gi)].map((m) => Number(m[1]));
    assert.ok(ports.length > 0 && ports.every((p) => p >= lo && p <= hi), `the answer's candidates are ${worker}'s ports ${lo}-${hi}: ${ports.join(',')}`);
    const stats = await until(() => callIn<any>(page, 'stats'), (s) => s.video?.framesDecoded > 10 && s.audio?.packets > 10, 'decoded video and received audio', 60_000);
    assert.equal([stats.video.width, stats.video.height], [512, 512]);
    const remotePort = await page.evaluate(async () => {
      const pc = (globalThis as any).call.pc;
      const report = await pc.getStats();
      let pair: any = null;
      report.forEach((s: any) => {
        if (s.type === 'candidate-pair' && s.state === 'succeeded' && s.nominated) pair = s;
      });
      return pair ? (report.get(pair.remoteCandidateId) as any).port : null;
    });
    assert.ok(remotePort >= lo && remotePort <= hi, `media comes from ${worker}'s port range (${remotePort})`);
    assert.is((await ctx.store.getSession(sessionId))!.status, 'active');
    const callId = res.location!.split('/').pop()!;
    const hangup = await request(a2.url, 'POST', `/v1/realtime/calls/${callId}/hangup`, { key: ctx.key });
    assert.is(hangup.status, 200, hangup.text);
    assert.is(hangup.body.session_id, sessionId);
    await until(() => ctx.store.getSession(sessionId), (s) => s?.status === 'ended', 'the call ended on its worker');
    await page.close();
  } finally {
    await browser.close();
  }
});

Fleet('the janitor reconciles Redis with the store: a slot without a session is freed, a live session without a worker fails', async (ctx) => {
  // A node that died between placing a session and storing it leaves a lease with no session.
  const ghost = 'sess_ghostghostghostghostghos';
  assert.ok(await ctx.registry.place(ghost));
  // A session live in the store that no worker holds (its worker's failure was never recorded).
  const now = Date.now() * 1000;
  const orphan = 'sess_orphanorphanorphanorpha';
  await ctx.store.insertSession({
    id: orphan, userId: 'default', apiKeyId: null, origin: 'rest', model: 'gpt-5.2', voice: 'default', face: null, driving: null,
    instructions: 'x', video: true, media: MEDIA_UNSET,
    status: 'active', endReason: null, createdAtUs: now, startedAtUs: now, endedAtUs: null, durationSeconds: null,
    deadlineUs: now + 3_600_000_000, lastSeenUs: now, currentTranscript: '',
  });
  await until(() => ctx.registry.leaseOf(ghost), (l) => l === null, 'the ghost slot to be freed');
  const failed = await until(() => ctx.store.getSession(orphan), (s) => s?.status === 'failed', 'the orphan to fail');
  assert.is(failed!.endReason, 'worker_lost');
  assert.ok(await ctx.store.getUsageForSession(orphan));
});

Fleet('kill -9 of an API node loses no record: its sessions stay in the store, and its relayed socket ends with usage', async (ctx) => {
  const a1 = ctx.api[0]!;
  const a2 = ctx.api[1]!;
  const rest = (await createSession(ctx, a1)).body.id as string;
  const ws = await RealtimeTestClient.connect(a1.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const owned = (await ws.waitFor('session.created')).session.id as string;
  a1.child.kill('SIGKILL');
  await a1.exited;
  await ws.waitClose(15_000);
  // The worker saw the relay drop: the socket's own session ends as a closed connection does.
  const ended = await until(() => ctx.store.getSession(owned), (s) => s?.status === 'ended', 'the relayed session to end');
  assert.is(ended!.endReason, 'client_disconnected');
  assert.ok(await ctx.store.getUsageForSession(owned));
  // The REST session made through the dead node is intact and served by the other one.
  const got = await request(a2.url, 'GET', `/v1/sessions/${rest}`, { key: ctx.key });
  assert.equal([got.status, got.body.status], [200, 'active']);
  assert.is((await endSession(ctx, a2, rest)).body.status, 'ended');
  ctx.api = [a2];
});

Fleet('kill -9 of a worker mid-conversation: its sessions end as failed exactly once with usage, and new sessions go to the other worker', async (ctx) => {
  const a2 = ctx.api.at(-1)!;
  const ws = await RealtimeTestClient.connect(a2.url, { key: ctx.key, query: 'model=gpt-realtime' });
  const sessionId = (await ws.waitFor('session.created')).session.id as string;
  const victim = (await workerOf(ctx, sessionId))!;
  const survivor = victim === 'w1' ? 'w2' : 'w1';
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me about yourself.' }] } });
  ws.send({ type: 'response.create' });
  await ws.waitFor('response.output_audio.delta', { timeoutMs: 60_000 });
  const proc = ctx.workers.get(victim)!;
  proc.child.kill('SIGKILL');
  await proc.exited;
  assert.is(await ws.waitClose(15_000), 1011, 'the client is told the session failed');
  const failed = await until(() => ctx.store.getSession(sessionId), (s) => s?.status === 'failed', 'the janitor to fail the lost session', 30_000);
  assert.is(failed!.endReason, 'worker_lost');
  assert.ok(failed!.durationSeconds! >= 0);
  const usage = await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000);
  assert.is(usage.filter((u) => u.sessionId === sessionId).length, 1, 'exactly one usage record');
  assert.is(usage.find((u) => u.sessionId === sessionId)!.endReason, 'worker_lost');
  await until(() => ctx.registry.capacity(), (c) => c.workers === 1 && c.perWorker.every((w) => w.id === survivor), 'the dead worker to leave the registry');
  const next = await createSession(ctx, a2);
  assert.is(next.status, 200, next.text);
  assert.is(await workerOf(ctx, next.body.id), survivor);
  await endSession(ctx, a2, next.body.id);
  // Every usage record reached the webhook, each once, from whichever node held the outbox.
  const all = await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000);
  await until(async () => ctx.hook.events.length, (n) => n >= all.length, 'webhook deliveries', 30_000);
  assert.is(new Set(ctx.hook.events).size, ctx.hook.events.length, 'no usage event delivered twice');
  // The receiver has the last delivery a moment before its sender records it as delivered.
  const outbox = await until(() => ctx.store.countOutbox(), (c) => c.pending === 0, 'the outbox to record every delivery', 10_000);
  assert.equal(outbox, { pending: 0, delivered: all.length, dead: 0 });
});

Fleet.run();
