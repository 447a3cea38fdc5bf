/**
 * The Redis worker registry against a real redis-server (harness/servers/redis-server.ts):
 * placement, global capacity under parallel callers on separate connections, release, expiry and
 * reaping exactly once, fleet capacity, the leadership lock, a worker reclaiming its sessions when
 * it registers again (and not after it was reaped), and Redis failing: down, restarted empty, or
 * blackholed (a TCP proxy that forwards nothing), every call fails fast with redis_unavailable and
 * nothing issued during the outage runs once Redis is back. Each test has its own key prefix.
 * Nothing here asserts a duration beyond "well under the hang it replaces": expiries are waited
 * for by polling with generous deadlines.
 */
import { Redis } from 'ioredis';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DependencyHealth } from '../../src/core/dependency-health.js';
import { AppError } from '../../src/core/errors.js';
import { memoryLogger } from '../../src/core/log.js';
import { RedisWorkerRegistry, type Placement } from '../../src/fleet/worker-registry.js';
import { startRedis, startTcpProxy, type RedisServer } from '../../harness/servers/redis-server.js';

let redis: RedisServer;
const opened: RedisWorkerRegistry[] = [];
let prefixCount = 0;

test.before(async () => {
  redis = await startRedis();
});

test.after.each(async () => {
  await Promise.all(opened.splice(0).map((r) => r.close()));
});

test.after(async () => {
  await redis?.stop();
});

/** A fresh key prefix per test; registries made with the same prefix see the same fleet. */
function newPrefix(): string {
  return `test:${process.pid}:${++prefixCount}:`;
}

/** A registry on its own connection (a separate "node"), closed after the test. */
function node(prefix: string, ttlMs?: number): RedisWorkerRegistry {
  const registry = new RedisWorkerRegistry({ redis: redis.url, prefix, ...(ttlMs === undefined ? {} : { ttlMs }) });
  opened.push(registry);
  return registry;
}

/** Polls `check` until it is true; fails after `timeoutMs` (generous: the machine may be busy). */
async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.unreachable(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function usedBy(registry: RedisWorkerRegistry): Promise<Record<string, number>> {
  const fleet = await registry.capacity();
  return Object.fromEntries(fleet.perWorker.map((w) => [w.id, w.used]));
}

test('place() picks the least loaded live worker (used/capacity, ties by id) and honours prefer', async () => {
  const r = node(newPrefix());
  await r.register({ id: 'w1', address: '10.0.0.1:9000', capacity: 2 });
  await r.register({ id: 'w2', address: '10.0.0.2:9000', capacity: 4 });
  await r.register({ id: 'w3', address: '10.0.0.3:9000', capacity: 4 });
  const on = async (sid: string, prefer?: string) => (await r.place(sid, prefer === undefined ? {} : { prefer }))?.workerId;
  assert.equal(await r.place('s1'), { workerId: 'w1', address: '10.0.0.1:9000' }, 'all empty: the smallest id');
  assert.is(await on('s2'), 'w2', 'w1 is half full');
  assert.is(await on('s3'), 'w3');
  assert.is(await on('s4'), 'w2', 'w2 and w3 both a quarter full: by id');
  assert.is(await on('s5', 'w1'), 'w1', 'the preferred worker when it has a slot');
  assert.is(await on('s6', 'w1'), 'w3', 'w1 full: the least loaded instead');
  assert.is(await on('s7', 'nobody'), 'w2', 'an unknown preferred worker is ignored (w2 and w3 half full: by id)');
  assert.equal(await usedBy(r), { w1: 2, w2: 3, w3: 2 });
  assert.equal(await r.leaseOf('s6'), { workerId: 'w3', address: '10.0.0.3:9000' });
  assert.is(await r.leaseOf('nope'), null);
});

test('a full fleet places nothing; capacity 0 takes no sessions', async () => {
  const r = node(newPrefix());
  assert.is(await r.place('s0'), null, 'no workers at all');
  await r.register({ id: 'a', address: 'a:1', capacity: 1 });
  await r.register({ id: 'b', address: 'b:1', capacity: 0 });
  assert.is((await r.place('s1'))?.workerId, 'a');
  assert.is(await r.place('s2'), null);
  assert.is(await r.place('s3', { prefer: 'b' }), null);
  assert.is(await r.leaseOf('s2'), null, 'a refused session holds no lease');
});

test('50 parallel place() calls from 5 connections against capacity 7: exactly 7 leases, none over capacity', async () => {
  const prefix = newPrefix();
  const nodes = Array.from({ length: 5 }, () => node(prefix));
  const capacities: Record<string, number> = { a: 3, b: 2, c: 1, d: 1 };
  for (const [id, capacity] of Object.entries(capacities)) await nodes[0]!.register({ id, address: `${id}:1`, capacity });
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => nodes[i % 5]!.place(`s${i}`)));
  const won = results.flatMap((p, i): [string, Placement][] => (p === null ? [] : [[`s${i}`, p]]));
  assert.is(won.length, 7);
  const fleet = await nodes[0]!.capacity();
  assert.is(fleet.used, 7);
  assert.is(fleet.capacity, 7);
  for (const w of fleet.perWorker) assert.is(w.used, capacities[w.id], `worker ${w.id}`);
  for (const [sid, placement] of won) assert.equal(await nodes[1]!.leaseOf(sid), placement);
  assert.is(await nodes[2]!.place('one-more'), null);
});

test('one slot left and 10 parallel callers on 10 connections: exactly one wins', async () => {
  const prefix = newPrefix();
  const nodes = Array.from({ length: 10 }, () => node(prefix));
  await nodes[0]!.register({ id: 'a', address: 'a:1', capacity: 2 });
  await nodes[0]!.register({ id: 'b', address: 'b:1', capacity: 1 });
  assert.ok(await nodes[0]!.place('x1'));
  assert.ok(await nodes[0]!.place('x2'));
  const results = await Promise.all(nodes.map((n, i) => n.place(`race${i}`)));
  assert.is(results.filter((p) => p !== null).length, 1);
  const fleet = await nodes[0]!.capacity();
  assert.is(fleet.used, 3);
  assert.ok(fleet.perWorker.every((w) => w.used <= w.capacity));
});

test('release() frees the slot, atomically and idempotently', async () => {
  const r = node(newPrefix());
  await r.register({ id: 'a', address: 'a:1', capacity: 1 });
  assert.ok(await r.place('s1'));
  assert.is(await r.place('s2'), null);
  assert.is(await r.release('s1'), true);
  assert.is(await r.release('s1'), false, 'a second release does nothing');
  assert.is(await r.release('never-placed'), false);
  assert.is(await r.leaseOf('s1'), null);
  assert.is((await r.capacity()).used, 0);
  assert.is((await r.place('s2'))?.workerId, 'a', 'the freed slot is taken again');
  assert.is((await r.capacity()).used, 1);
});

test('place() is idempotent per session: the same worker, one slot', async () => {
  const prefix = newPrefix();
  const r = node(prefix);
  await r.register({ id: 'a', address: 'a:1', capacity: 2 });
  await r.register({ id: 'b', address: 'b:1', capacity: 2 });
  const first = await r.place('s1');
  assert.equal(await r.place('s1'), first);
  assert.equal(await r.place('s1', { prefer: first!.workerId === 'a' ? 'b' : 'a' }), first, 'prefer does not move a placed session');
  const again = await Promise.all(Array.from({ length: 5 }, () => node(prefix).place('s2')));
  assert.ok(again.every((p) => p !== null && p.workerId === again[0]!.workerId), 'parallel places of one session agree');
  assert.is((await r.capacity()).used, 2);
});

test('a worker that stops heartbeating is not placed on, and reapDead() hands its sessions to exactly one of 3 concurrent callers', async () => {
  const prefix = newPrefix();
  const api = [node(prefix), node(prefix), node(prefix)];
  // Worker "a" registers with a long ttl so the set-up cannot race its expiry; its last heartbeat
  // then comes from a node with a 300 ms ttl, after which it stops. Worker "b" stays live throughout.
  const workerA = node(prefix, 60_000);
  const workerAShort = node(prefix, 300);
  const workerB = node(prefix, 60_000);
  await workerA.register({ id: 'a', address: 'a:1', capacity: 5 });
  await workerB.register({ id: 'b', address: 'b:1', capacity: 5 });
  for (const sid of ['a1', 'a2', 'a3']) assert.is((await api[0]!.place(sid, { prefer: 'a' }))?.workerId, 'a');
  assert.is((await api[0]!.place('b1', { prefer: 'b' }))?.workerId, 'b');
  assert.is(await workerAShort.heartbeat('a'), true);

  await waitFor('worker a to expire', async () => (await api[1]!.capacity()).perWorker.find((w) => w.id === 'a')?.live === false);
  const fleet = await api[1]!.capacity();
  assert.equal({ workers: fleet.workers, capacity: fleet.capacity, used: fleet.used }, { workers: 1, capacity: 5, used: 1 }, 'the dead worker counts for nothing');
  assert.is((await api[0]!.place('new1', { prefer: 'a' }))?.workerId, 'b', 'an expired worker is not placed on, even preferred');
  assert.is((await api[0]!.place('new2'))?.workerId, 'b');
  assert.is((await api[0]!.place('a1'))?.workerId, 'a', 'a session placed before keeps its lease until the reaper runs');

  const reaped = await Promise.all(api.map((n) => n.reapDead()));
  const claims = reaped.flat();
  assert.is(claims.length, 1, 'one caller gets worker a');
  assert.is(claims[0]!.workerId, 'a');
  assert.equal([...claims[0]!.sessionIds].sort(), ['a1', 'a2', 'a3']);
  assert.equal(await api[2]!.reapDead(), [], 'nothing left to reap');

  for (const sid of ['a1', 'a2', 'a3']) assert.is(await api[2]!.leaseOf(sid), null);
  assert.is((await api[2]!.leaseOf('b1'))?.workerId, 'b', 'the live worker keeps its sessions');
  assert.equal(await usedBy(api[2]!), { b: 3 });
  assert.is(await workerAShort.heartbeat('a'), false, 'a reaped worker learns it was dropped');
  await workerA.register({ id: 'a', address: 'a:1', capacity: 5 });
  assert.equal(await usedBy(api[2]!), { a: 0, b: 3 }, 'and registers again empty');
});

test('deregister() removes the worker with its leases and returns the sessions it held', async () => {
  const r = node(newPrefix());
  await r.register({ id: 'a', address: 'a:1', capacity: 3 });
  await r.register({ id: 'b', address: 'b:1', capacity: 3 });
  await r.place('s1', { prefer: 'a' });
  await r.place('s2', { prefer: 'a' });
  await r.place('s3', { prefer: 'b' });
  assert.equal((await r.deregister('a')).sort(), ['s1', 's2']);
  assert.equal(await r.deregister('a'), []);
  assert.is(await r.leaseOf('s1'), null);
  assert.is((await r.place('s4', { prefer: 'a' }))?.workerId, 'b');
  assert.is(await r.heartbeat('a'), false);
  assert.equal(await usedBy(r), { b: 2 });
});

test('capacity() totals count live workers only and list every registered worker by id', async () => {
  const prefix = newPrefix();
  const r = node(prefix);
  await r.register({ id: 'w2', address: 'h2:1', capacity: 2 });
  await r.register({ id: 'w1', address: 'h1:1', capacity: 3 });
  await node(prefix, 1).register({ id: 'w0', address: 'h0:1', capacity: 8 });
  assert.ok(await r.place('s1', { prefer: 'w1' }));
  assert.ok(await r.place('s2', { prefer: 'w1' }));
  assert.ok(await r.place('s3', { prefer: 'w2' }));
  await waitFor('worker w0 to expire', async () => (await r.capacity()).perWorker.find((w) => w.id === 'w0')?.live === false);
  assert.equal(await r.capacity(), {
    workers: 2,
    capacity: 5,
    used: 3,
    perWorker: [
      { id: 'w0', address: 'h0:1', capacity: 8, used: 0, live: false },
      { id: 'w1', address: 'h1:1', capacity: 3, used: 2, live: true },
      { id: 'w2', address: 'h2:1', capacity: 2, used: 1, live: true },
    ],
  });
});

test('leadership: one holder at a time, only the holder renews or releases, and a lapsed lock passes on', async () => {
  const prefix = newPrefix();
  const [a, b, c] = [node(prefix), node(prefix), node(prefix)];
  const contenders = await Promise.all(Array.from({ length: 10 }, (_, i) => node(prefix).acquireLeadership('race', `n${i}`, 60_000)));
  assert.is(contenders.filter(Boolean).length, 1, 'exactly one of 10 parallel contenders');

  assert.is(await a.acquireLeadership('outbox', 'A', 60_000), true);
  assert.is(await b.acquireLeadership('outbox', 'B', 60_000), false);
  assert.is(await a.acquireLeadership('outbox', 'A', 60_000), true, 'the holder acquiring again keeps it');
  assert.is(await b.renewLeadership('outbox', 'B', 60_000), false, 'a non-holder cannot renew');
  assert.is(await a.renewLeadership('outbox', 'A', 60_000), true);
  assert.is(await b.releaseLeadership('outbox', 'B'), false, 'a non-holder cannot release');
  assert.is(await c.acquireLeadership('outbox', 'C', 60_000), false, 'still held by A');
  assert.is(await a.releaseLeadership('outbox', 'A'), true);
  assert.is(await a.releaseLeadership('outbox', 'A'), false);

  assert.is(await b.acquireLeadership('outbox', 'B', 300), true);
  // B stops renewing: C gets the lock once it lapses, and B can no longer renew it.
  await waitFor('the lapsed lock to pass to C', () => c.acquireLeadership('outbox', 'C', 60_000));
  assert.is(await b.renewLeadership('outbox', 'B', 300), false);
  assert.is(await b.acquireLeadership('outbox', 'B', 300), false);
  assert.is(await a.acquireLeadership('other', 'A', 60_000), true, 'locks are independent by name');
});

test('a client passed in is used and left open by close(); scripts are loaded again after SCRIPT FLUSH', async () => {
  const client = new Redis(redis.url);
  try {
    const r = new RedisWorkerRegistry({ redis: client, prefix: newPrefix() });
    await r.register({ id: 'a', address: 'a:1', capacity: 2 });
    assert.ok(await r.place('s1'));
    await client.script('FLUSH');
    assert.is((await r.place('s2'))?.workerId, 'a');
    await r.close();
    assert.is(await client.ping(), 'PONG');
  } finally {
    await client.quit();
  }
});

test('a worker registering again reclaims the sessions it runs in the same step, unless another worker holds them', async () => {
  const prefix = newPrefix();
  const r = node(prefix);
  await r.register({ id: 'b', address: 'b:1', capacity: 2 });
  assert.ok(await r.place('elsewhere', { prefer: 'b' }));
  // An empty registry (Redis restarted without its data): worker a comes back with what it runs.
  const back = await r.register({ id: 'a', address: 'a:1', capacity: 3 }, { reclaim: ['s1', 's2', 'elsewhere', 's1'] });
  assert.equal(back, { wasReaped: false, reclaimed: ['s1', 's2'] });
  assert.equal(await usedBy(r), { a: 2, b: 1 }, 'its used slots count from the moment it is registered');
  assert.is((await r.leaseOf('s1'))?.workerId, 'a');
  assert.is((await r.leaseOf('elsewhere'))?.workerId, 'b', 'a session leased to another worker stays there');
  assert.is((await r.place('n1', { prefer: 'a' }))?.workerId, 'a');
  assert.is((await r.place('n2', { prefer: 'a' }))?.workerId, 'b', 'a is full: 2 reclaimed + 1 placed');
  assert.equal(await r.register({ id: 'a', address: 'a:1', capacity: 3 }, { reclaim: ['s1'] }), { wasReaped: false, reclaimed: ['s1'] }, 'idempotent');
  assert.equal(await usedBy(r), { a: 3, b: 2 });
});

test('a reaped worker registering again reclaims nothing and learns it was reaped, once', async () => {
  const prefix = newPrefix();
  const api = node(prefix);
  const short = node(prefix, 1);
  await api.register({ id: 'a', address: 'a:1', capacity: 2 });
  assert.ok(await api.place('s1', { prefer: 'a' }));
  assert.is(await short.heartbeat('a'), true, 'its last heartbeat, good for 1 ms');
  await waitFor('worker a to expire', async () => (await api.capacity()).perWorker.find((w) => w.id === 'a')?.live === false);
  assert.equal(await api.reapDead(), [{ workerId: 'a', sessionIds: ['s1'] }]);
  assert.is(await short.heartbeat('a'), false);
  assert.equal(await api.register({ id: 'a', address: 'a:1', capacity: 2 }, { reclaim: ['s1'] }), { wasReaped: true, reclaimed: [] });
  assert.equal(await usedBy(api), { a: 0 }, 'the reaped sessions were handed to be failed: not its own again');
  assert.equal(await api.register({ id: 'a', address: 'a:1', capacity: 2 }, { reclaim: ['s2'] }), { wasReaped: false, reclaimed: ['s2'] }, 'the tombstone is read once');
});

/** Runs `op` and returns the error it rejects with (fails if it resolves) and how long it took. */
async function failure(op: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await op();
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
  assert.unreachable('expected a rejection');
  throw new Error('unreachable');
}

function assertRedisUnavailable(error: unknown): void {
  assert.instance(error, AppError);
  assert.is((error as AppError).code, 'redis_unavailable');
  assert.is((error as AppError).status, 503);
  assert.is((error as AppError).headers['Retry-After'], '2');
}

test('Redis down then restarted empty: calls fail fast with redis_unavailable, nothing runs late, one log line each way', async () => {
  const own = await startRedis();
  const { logger, records } = memoryLogger('info');
  const health = new DependencyHealth('redis', logger);
  const r = new RedisWorkerRegistry({ redis: own.url, prefix: newPrefix(), ttlMs: 1500, health });
  try {
    await r.register({ id: 'a', address: 'a:1', capacity: 4 });
    assert.ok(await r.place('before'));
    await own.kill();
    await waitFor('the registry to see Redis gone', async () => !health.up);
    const attempts = await Promise.all(['place', 'leaseOf', 'capacity', 'heartbeat', 'publish', 'lock'].map((what) =>
      failure(() => (what === 'place' ? r.place('during') : what === 'leaseOf' ? r.leaseOf('before') : what === 'capacity' ? r.capacity() : what === 'heartbeat' ? r.heartbeat('a') : what === 'publish' ? r.publishSessionEnded('x') : r.acquireLeadership('janitor', 'n1', 3000))),
    ));
    for (const { error, ms } of attempts) {
      assertRedisUnavailable(error);
      assert.ok(ms < 3000, `failed in ${ms} ms`);
    }
    assert.is(r.up, false);
    assert.is(r.recovering, true);
    await own.restart();
    await waitFor('the registry to answer again', async () => (await r.capacity().catch(() => null)) !== null);
    assert.ok(health.up);
    assert.is(await r.leaseOf('during'), null, 'the place() refused during the outage never ran');
    assert.is(r.recovering, true, 'for a ttl after Redis is back, workers are still registering again');
    await waitFor('the recovery ttl to pass', async () => !r.recovering);
    const outages = records.filter((rec) => rec.msg === 'dependency down' || rec.msg === 'dependency back').map((rec) => rec.msg);
    assert.equal(outages, ['dependency down', 'dependency back'], 'one line when it went, one when it came back');
  } finally {
    await r.close();
    await own.stop();
  }
});

test('Redis blackholed (connected, never answering): calls fail within the command timeout, and work again once it answers', async () => {
  const proxy = await startTcpProxy(redis.port);
  const health = new DependencyHealth('redis', memoryLogger('info').logger);
  const r = new RedisWorkerRegistry({ redis: proxy.url, prefix: newPrefix(), health });
  try {
    await r.register({ id: 'a', address: 'a:1', capacity: 4 });
    proxy.blackhole(true);
    const first = await failure(() => r.place('held'));
    assertRedisUnavailable(first.error);
    assert.ok(first.ms < 3000, `the first call failed in ${first.ms} ms`);
    assert.is(health.up, false);
    const next = await failure(() => r.capacity());
    assertRedisUnavailable(next.error);
    assert.ok(next.ms < 3000, `a later call failed in ${next.ms} ms`);
    proxy.blackhole(false);
    await waitFor('the registry to answer again', async () => (await r.capacity().catch(() => null)) !== null);
    assert.ok(health.up);
    assert.is((await r.place('after'))?.workerId, 'a');
  } finally {
    await r.close();
    await proxy.close();
  }
});

test('bad arguments are refused before reaching Redis', async () => {
  const r = node(newPrefix());
  const rejects = async (p: Promise<unknown>, pattern: RegExp) => {
    try {
      await p;
    } catch (error) {
      assert.match((error as Error).message, pattern);
      return;
    }
    assert.unreachable('expected a rejection');
  };
  await rejects(r.register({ id: 'a', address: 'a:1', capacity: 1.5 }), /capacity/);
  await rejects(r.register({ id: '', address: 'a:1', capacity: 1 }), /id/);
  await rejects(r.acquireLeadership('x', 'A', 0), /ttlMs/);
  assert.throws(() => new RedisWorkerRegistry({ redis: redis.url, ttlMs: -1 }), /ttlMs/);
});

test.run();
