/**
 * Usage in a fleet never loses what was delivered (issue 25). A real PostgreSQL and Redis on
 * loopback, one API node and one worker as processes of the real entry point (as in
 * fleet.test.ts); the worker answers with the offline responder. The client's socket goes through
 * the API node, so every end below is decided away from the worker that delivered the audio, and
 * usage is compared with what the client counted (audio bytes, image deltas):
 *
 *  - a DELETE on the API node the moment response.done reaches the client, many times over: each
 *    record holds every response, exactly as received (the worker commits a response's usage
 *    before its response.done goes out);
 *  - a DELETE on the API node mid-reply: billed up to the worker's last commit, never more than
 *    received, short of it by at most the commit period;
 *  - the worker killed with SIGKILL mid-reply: the janitor fails the session (worker_lost) billed
 *    exactly once with what the worker had committed: more than nothing, never more than the
 *    client received, short of it by at most the commit period (the loss is printed).
 */
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { USAGE_FLUSH_MS } from '../../src/sessions/usage-meter.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store, UsageRecord } from '../../src/store/store.js';
import { RedisWorkerRegistry } from '../../src/fleet/worker-registry.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { ask, converse, receivedBy } from '../../harness/measures/delivered.js';
import { startRedis, type RedisServer } from '../../harness/servers/redis-server.js';
import { request } from '../../harness/servers/server.js';
import { FLEET_TEST_TTL_MS, fleetNodeEnv } from '../../harness/servers/fleet-node.js';
import { until } from '../../harness/servers/wait.js';

const WORKER_TTL_MS = FLEET_TEST_TTL_MS;
/** What a remote end or a kill may leave unbilled: the commit period, and generous room for a loaded machine's store write. */
const LOSS_BOUND_S = USAGE_FLUSH_MS / 1000 + 1;

interface Ctx {
  pg: TestPostgres;
  redis: RedisServer;
  databaseUrl: string;
  store: Store;
  registry: RedisWorkerRegistry;
  api: ServerProcess;
  worker: ServerProcess;
  key: string;
  dirs: string[];
}

// Like every fleet test, it needs PostgreSQL and redis-server installed (setup.sh --fleet) and never skips.
const Usage = suite<Ctx>('fleet: usage never loses what was delivered', {} as Ctx);
const test = Usage;

function nodeEnv(ctx: Ctx, role: 'api' | 'worker', id: string): Record<string, string> {
  return fleetNodeEnv({ role, id, databaseUrl: ctx.databaseUrl, redisUrl: ctx.redis.url, dirs: ctx.dirs, capacity: 2, ttlMs: WORKER_TTL_MS, rtcPorts: [42400, 42499] });
}

Usage.before(async (ctx) => {
  ctx.dirs = [];
  [ctx.pg, ctx.redis] = await Promise.all([startPostgres(), startRedis()]);
  ctx.databaseUrl = await ctx.pg.createDatabase();
  ctx.worker = await spawnServer(nodeEnv(ctx, 'worker', 'w1'));
  assert.ok(ctx.worker.bootstrapKey, `the first node prints a key:\n${ctx.worker.stdout()}`);
  ctx.key = ctx.worker.bootstrapKey!;
  ctx.api = await spawnServer(nodeEnv(ctx, 'api', 'a1'));
  ctx.store = openStore(ctx.databaseUrl);
  ctx.registry = new RedisWorkerRegistry({ redis: ctx.redis.url });
});

Usage.after(async (ctx) => {
  const all = [ctx.api, ctx.worker].filter((p): p is ServerProcess => p !== undefined);
  if (process.env.FLEET_TEST_LOGS) for (const p of all) console.error(`--- ${p.url}\n${p.stdout().split('\n').filter((l) => /"level":"(error|warn)"/.test(l)).slice(0, 12).join('\n')}`);
  for (const p of all) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.all(all.map((p) => p.exited));
  await ctx.registry?.close();
  await ctx.store?.close();
  await Promise.all([ctx.pg?.stop(), ctx.redis?.stop()]);
  for (const dir of ctx.dirs ?? []) fs.rmSync(dir, { recursive: true, force: true });
});

async function usageOf(ctx: Ctx, sessionId: string): Promise<UsageRecord[]> {
  return (await ctx.store.listUsage('default', 0, Number.MAX_SAFE_INTEGER, 1000)).filter((u) => u.sessionId === sessionId);
}

/** Waits until the client has received at least `seconds` of audio from index `from`. */
async function untilAudio(ws: RealtimeTestClient, seconds: number, from: number): Promise<void> {
  await ws.waitFor(() => receivedBy(ws).audioSeconds >= seconds, { from, timeoutMs: 60_000 });
}

test('DELETE on the API node the moment response.done arrives, 8 times: each record holds every response, exactly as received', async (ctx) => {
  for (let i = 0; i < 8; i++) {
    const { ws, id } = await converse(ctx.api.url, ctx.key, i % 3 === 0);
    // The offline responder's shortest reply (a goodbye), twice.
    await ws.waitFor('response.done', { from: ask(ws, 'Bye.'), timeoutMs: 60_000 });
    let deleted = null as Promise<{ status: number }> | null;
    const onDone = (data: Buffer) => {
      if ((JSON.parse(data.toString()) as { type: string }).type !== 'response.done') return;
      ws.ws.off('message', onDone);
      deleted = request(ctx.api.url, 'DELETE', `/v1/sessions/${id}`, { key: ctx.key });
    };
    ws.ws.on('message', onDone);
    ask(ws, 'Goodbye.');
    await ws.waitClose(30_000);
    assert.ok(deleted, `round ${i}: the second response.done arrived`);
    assert.is((await deleted)!.status, 200);
    const got = receivedBy(ws);
    assert.is(got.responses, 2);
    const records = await usageOf(ctx, id);
    assert.is(records.length, 1, 'billed once');
    const [u] = records as [UsageRecord];
    const detail = `round ${i}: billed ${u.audioSecondsOut} s, ${u.framesOut} frames, ${u.outputTokens} tokens out; received ${JSON.stringify(got)}`;
    assert.ok(Math.abs(u.audioSecondsOut - got.audioSeconds) < 1 / 24_000, detail);
    assert.is(u.framesOut, got.frames, detail);
    assert.is(u.outputTokens, got.outputTokens, detail);
  }
});

test('DELETE on the API node mid-reply: billed up to the worker\'s last commit, never more than received', async (ctx) => {
  const { ws, id } = await converse(ctx.api.url, ctx.key);
  await untilAudio(ws, 1, ask(ws, 'Tell me a long story about the sea, the ships and the people on them.'));
  assert.is((await request(ctx.api.url, 'DELETE', `/v1/sessions/${id}`, { key: ctx.key })).status, 200);
  await ws.waitClose(30_000);
  const got = receivedBy(ws);
  const [u] = (await usageOf(ctx, id)) as [UsageRecord];
  const lossS = got.audioSeconds - u.audioSecondsOut;
  assert.ok(u.audioSecondsOut > 0, `billed ${u.audioSecondsOut} s`);
  assert.ok(lossS > -0.001 && lossS < LOSS_BOUND_S, `billed ${u.audioSecondsOut} s, received ${got.audioSeconds} s`);
  console.log(`  DELETE on the API node mid-reply: billed ${u.audioSecondsOut.toFixed(3)} s of ${got.audioSeconds.toFixed(3)} s received (unbilled ${(lossS * 1000).toFixed(0)} ms; bound ${USAGE_FLUSH_MS} ms + one write)`);
});

test('the worker killed with SIGKILL mid-reply, 3 times: worker_lost, billed exactly once with the delivered audio up to its last commit', async (ctx) => {
  const losses: number[] = [];
  for (let round = 0; round < 3; round++) {
    if (round > 0) ctx.worker = await spawnServer(nodeEnv(ctx, 'worker', `w${round + 1}`));
    const { ws, id } = await converse(ctx.api.url, ctx.key, true);
    await untilAudio(ws, 1 + round * 0.37, ask(ws, 'Tell me a long story about the sea, the ships and the people on them.'));
    ctx.worker.child.kill('SIGKILL');
    await ctx.worker.exited;
    await ws.waitClose(30_000);
    assert.not.ok(ws.types().includes('response.done'), 'the reply was still streaming when the worker died');
    const got = receivedBy(ws);
    const failed = await until(() => ctx.store.getSession(id), (s) => s?.status === 'failed', 'the janitor to fail the lost session', 30_000);
    assert.is(failed!.endReason, 'worker_lost');
    const records = await usageOf(ctx, id);
    assert.is(records.length, 1, 'billed exactly once');
    const [u] = records as [UsageRecord];
    const lossS = got.audioSeconds - u.audioSecondsOut;
    const detail = `round ${round}: billed ${u.audioSecondsOut} s and ${u.framesOut} frames; received ${got.audioSeconds} s and ${got.frames} frames`;
    assert.ok(u.audioSecondsOut > 0, `the audio delivered before the kill is billed: ${detail}`);
    assert.ok(lossS > -0.001, `never more than received: ${detail}`);
    assert.ok(lossS < LOSS_BOUND_S, `short of it by at most the commit period: ${detail}`);
    assert.ok(u.framesOut > 0 && u.framesOut <= got.frames, detail);
    // Final: the record does not change afterwards.
    await new Promise((r) => setTimeout(r, 2 * USAGE_FLUSH_MS));
    assert.equal(await usageOf(ctx, id), records);
    losses.push(lossS);
    console.log(`  worker SIGKILL mid-reply (${round + 1}): billed ${u.audioSecondsOut.toFixed(3)} s of ${got.audioSeconds.toFixed(3)} s received (lost ${(lossS * 1000).toFixed(0)} ms of audio, ${got.frames - u.framesOut} of ${got.frames} frames; bound ${USAGE_FLUSH_MS} ms + a tick + one write)`);
  }
  console.log(`  worker SIGKILL mid-reply: audio lost ${losses.map((l) => Math.round(l * 1000)).join(', ')} ms (max ${Math.round(Math.max(...losses) * 1000)} ms)`);
});

Usage.run();
