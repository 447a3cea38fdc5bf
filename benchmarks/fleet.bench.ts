/**
 * Fleet mode's control plane on this machine: session-creation throughput and placement latency
 * (and a WebSocket text turn's first audio, relayed through the API node to its worker)
 * through one API node with one and with two workers (real PostgreSQL and Redis on loopback, every
 * node its own process of the real entry point), beside the embedded default (one process, SQLite,
 * local slots) under the same load, which is fleet mode's overhead.
 *
 * Each run, per setup: CONCURRENCY clients create and end sessions (POST then DELETE /v1/sessions)
 * for SESSIONS_PER_CLIENT rounds. A create is where placement happens (the Redis script that
 * picks a worker) and its latency is the user's "how long until I have a session"; placement
 * alone is also timed against the same Redis from this process (the script a node runs, without
 * HTTP or the store). Throughput is sessions created and ended per second, the median across runs. On 2 cores the
 * nodes, PostgreSQL, Redis and the load generator share the CPU, so absolute rates are far below
 * a real fleet's; the comparison between setups is the point.
 */
import fs from 'node:fs';
import { RedisWorkerRegistry } from '../src/fleet/worker-registry.js';
import { RealtimeTestClient } from '../harness/clients/realtime-client.js';
import { startPostgres } from '../harness/servers/postgres-server.js';
import { spawnServer, type ServerProcess } from '../harness/servers/process.js';
import { startRedis } from '../harness/servers/redis-server.js';
import { request, tempDir } from '../harness/servers/server.js';
import { median, summarise, type Benchmark, type Metric } from './lib/harness.js';

const CONCURRENCY = 8;
/** WebSocket text turns per run and setup: response.create → first output_audio.delta at the client. */
const TURNS = 10;
const SESSIONS_PER_CLIENT = 25;
const TOKEN = 'fleet-bench-token-0123456789';
/** Enough slots that no create is refused: this measures placement, not refusal. */
const CAPACITY = 64;

interface Setup {
  name: string;
  workers: number;
}

const SETUPS: Setup[] = [
  { name: 'embedded', workers: 0 },
  { name: 'fleet, 1 worker', workers: 1 },
  { name: 'fleet, 2 workers', workers: 2 },
];

/** Drives create+end rounds against `url`; returns their latencies and rounds per second. */
async function load(url: string, key: string): Promise<{ create: number[]; end: number[]; perSecond: number }> {
  const create: number[] = [];
  const end: number[] = [];
  for (let i = 0; i < 10; i++) {
    const s = await request(url, 'POST', '/v1/sessions', { key });
    await request(url, 'DELETE', `/v1/sessions/${s.body.id}`, { key });
  }
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = 0; i < SESSIONS_PER_CLIENT; i++) {
        let t0 = performance.now();
        const s = await request(url, 'POST', '/v1/sessions', { key });
        create.push(performance.now() - t0);
        if (s.status !== 200) throw new Error(`create answered ${s.status}: ${s.text}`);
        t0 = performance.now();
        await request(url, 'DELETE', `/v1/sessions/${s.body.id}`, { key });
        end.push(performance.now() - t0);
      }
    }),
  );
  return { create, end, perSecond: (CONCURRENCY * SESSIONS_PER_CLIENT) / ((performance.now() - started) / 1000) };
}

/**
 * Text turns on one WebSocket (offline responder): response.create → first output_audio.delta at
 * the client, which in fleet mode crosses the API node's relay both ways.
 */
async function textTurns(url: string, key: string): Promise<number[]> {
  const c = await RealtimeTestClient.connect(url, { key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  const out: number[] = [];
  for (let i = 0; i < TURNS + 2; i++) {
    const from = c.events.length;
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there, how are you?' }] } });
    await c.waitFor('conversation.item.done', { from });
    const t0 = performance.now();
    c.send({ type: 'response.create' });
    await c.waitFor('response.output_audio.delta', { from, timeoutMs: 60_000 });
    if (i >= 2) out.push(performance.now() - t0); // the first two warm the voice up
    c.send({ type: 'response.cancel' });
    await c.waitFor('response.done', { from, timeoutMs: 60_000 });
  }
  await c.close();
  return out;
}

const bench: Benchmark = {
  name: 'fleet',
  description: 'fleet mode: session creation through an API node with 1 and 2 workers (PostgreSQL, Redis) against the embedded default',
  async run(ctx) {
    const results = new Map<string, { create: number[]; end: number[]; rates: number[]; turns: number[] }>();
    const placement: number[] = [];
    for (const setup of SETUPS) results.set(setup.name, { create: [], end: [], rates: [], turns: [] });
    for (let run = 0; run < ctx.runs; run++) {
      for (const setup of SETUPS) {
        const dirs: string[] = [];
        const dir = () => {
          const d = tempDir('avatar-bench-');
          dirs.push(d);
          return d;
        };
        const base = { LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '0', WORKER_CAPACITY: String(CAPACITY), LLM_PROVIDER: 'offline' };
        const procs: ServerProcess[] = [];
        const stops: Array<() => Promise<void>> = [];
        let api: ServerProcess;
        if (setup.workers === 0) {
          api = await spawnServer({ ...base, DATA_DIR: dir() });
          procs.push(api);
        } else {
          const [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
          stops.push(() => pg.stop(), () => redis.stop());
          const fleetEnv = { ...base, DATABASE_URL: await pg.createDatabase(), REDIS_URL: redis.url, FLEET_TOKEN: TOKEN };
          const first = await spawnServer({ ...fleetEnv, DATA_DIR: dir(), NODE_ROLE: 'worker', NODE_ID: 'w1' });
          procs.push(first);
          const rest = await Promise.all([
            ...Array.from({ length: setup.workers - 1 }, (_, i) => spawnServer({ ...fleetEnv, DATA_DIR: dir(), NODE_ROLE: 'worker', NODE_ID: `w${i + 2}` })),
            spawnServer({ ...fleetEnv, DATA_DIR: dir(), NODE_ROLE: 'api', NODE_ID: 'a1' }),
          ]);
          procs.push(...rest);
          api = rest.at(-1)!;
          if (setup.workers === 2) {
            // Placement alone: the registry's script against this Redis, one call at a time.
            const registry = new RedisWorkerRegistry({ redis: redis.url, prefix: 'bench:' });
            await registry.register({ id: 'x1', address: 'http://x1', capacity: 1000 });
            await registry.register({ id: 'x2', address: 'http://x2', capacity: 1000 });
            for (let i = 0; i < 400; i++) {
              const t0 = performance.now();
              await registry.place(`sess_${run}_${i}`);
              if (i >= 50) placement.push(performance.now() - t0);
              await registry.release(`sess_${run}_${i}`);
            }
            await registry.close();
          }
        }
        const out = await load(api.url, procs[0]!.bootstrapKey!);
        const r = results.get(setup.name)!;
        r.create.push(...out.create);
        r.end.push(...out.end);
        r.rates.push(out.perSecond);
        r.turns.push(...(await textTurns(api.url, procs[0]!.bootstrapKey!)));
        ctx.log(`run ${run + 1}/${ctx.runs}, ${setup.name}: ${out.perSecond.toFixed(0)} sessions created and ended per second, create p50 ${median(out.create).toFixed(1)} ms`);
        for (const p of procs) p.child.kill('SIGTERM');
        await Promise.all(procs.map((p) => p.exited));
        for (const stop of stops) await stop();
        for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
      }
    }
    const metrics: Metric[] = [];
    for (const setup of SETUPS) {
      const r = results.get(setup.name)!;
      metrics.push(summarise(`create, ${setup.name}`, 'ms', r.create, Math.round(median(r.rates))));
      metrics.push(summarise(`end, ${setup.name}`, 'ms', r.end));
      metrics.push(summarise(`WebSocket text turn → first audio, ${setup.name}`, 'ms', r.turns));
    }
    metrics.push(summarise('placement alone (Redis script), 2 workers', 'ms', placement));
    const rate = (name: string) => median(results.get(name)!.rates);
    const createP50 = (name: string) => median(results.get(name)!.create);
    return {
      params: { concurrency: CONCURRENCY, sessions_per_client: SESSIONS_PER_CLIENT, runs: ctx.runs, worker_capacity: CAPACITY },
      metrics,
      notes: [
        `sessions created and ended per second (median of ${ctx.runs} runs): embedded ${rate('embedded').toFixed(0)}, fleet with 1 worker ${rate('fleet, 1 worker').toFixed(0)}, with 2 workers ${rate('fleet, 2 workers').toFixed(0)}`,
        `fleet mode's overhead on a create (p50): ${(createP50('fleet, 1 worker') - createP50('embedded')).toFixed(1)} ms (PostgreSQL instead of SQLite, placement in Redis, the end announced to every node)`,
        `a WebSocket text turn (offline responder) to its first audio: p50 ${median(results.get('embedded')!.turns).toFixed(1)} ms embedded, ${median(results.get('fleet, 1 worker')!.turns).toFixed(1)} ms relayed through the API node to 1 worker`,
        'every process shares these 2 cores: the load generator, PostgreSQL, Redis and each node',
      ],
    };
  },
};

export default bench;
