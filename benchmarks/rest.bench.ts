/**
 * REST control-plane throughput and latency under concurrent load on loopback: the real server
 * entry point in its own process (SQLite file in a temp dir), a load generator in this one, so the
 * numbers include HTTP parsing, auth, the store and the worker pool, but not the client's CPU.
 *
 * Each run: CONCURRENCY clients, each doing create -> get -> end for SESSIONS_PER_CLIENT
 * sessions. Latency per request type over every request of every run; throughput (requests/s)
 * as the median across runs.
 */
import { spawnServer } from '../harness/servers/process.js';
import { request, tempDir } from '../harness/servers/server.js';
import { median, summarise, type Benchmark } from './lib/harness.js';

const CONCURRENCY = 16;
const SESSIONS_PER_CLIENT = 40;

const bench: Benchmark = {
  name: 'rest',
  description: 'REST session create/get/end under concurrent load on loopback',
  async run(ctx) {
    const latency: Record<'create' | 'get' | 'end', number[]> = { create: [], get: [], end: [] };
    const throughputs: number[] = [];
    for (let run = 0; run < ctx.runs; run++) {
      const proc = await spawnServer({
        DATA_DIR: tempDir('avatar-bench-'),
        LOG_LEVEL: 'warn',
        WORKER_CAPACITY: '1024',
        RATE_LIMIT_PER_MINUTE: '0',
      });
      const key = proc.bootstrapKey!;
      // Warm-up: JIT, prepared statements, connection pool.
      for (let i = 0; i < 20; i++) {
        const s = await request(proc.url, 'POST', '/v1/sessions', { key });
        await request(proc.url, 'DELETE', `/v1/sessions/${s.body.id}`, { key });
      }
      const timed = async (kind: keyof typeof latency, method: string, path: string) => {
        const t0 = performance.now();
        const res = await request(proc.url, method, path, { key });
        latency[kind].push(performance.now() - t0);
        if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${res.text}`);
        return res;
      };
      const started = performance.now();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = 0; i < SESSIONS_PER_CLIENT; i++) {
            const created = await timed('create', 'POST', '/v1/sessions');
            await timed('get', 'GET', `/v1/sessions/${created.body.id}`);
            await timed('end', 'DELETE', `/v1/sessions/${created.body.id}`);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const rps = (CONCURRENCY * SESSIONS_PER_CLIENT * 3) / seconds;
      throughputs.push(rps);
      ctx.log(`run ${run + 1}/${ctx.runs}: ${rps.toFixed(0)} requests/s`);
      proc.child.kill('SIGTERM');
      await proc.exited;
    }
    const rps = median(throughputs);
    return {
      params: { concurrency: CONCURRENCY, sessions_per_client: SESSIONS_PER_CLIENT, runs: ctx.runs, store: 'sqlite (WAL)' },
      metrics: [
        summarise('create', 'ms', latency.create),
        summarise('get', 'ms', latency.get),
        summarise('end', 'ms', latency.end),
        { ...summarise('all requests', 'ms', [...latency.create, ...latency.get, ...latency.end]), throughput_per_s: Math.round(rps) },
      ],
      notes: [`throughput is the median of ${ctx.runs} runs: ${throughputs.map((t) => t.toFixed(0)).join(', ')} requests/s`],
    };
  },
};

export default bench;
