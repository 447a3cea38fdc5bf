/**
 * The endpoint benchmark's capacity run (benchmarks/lib/endpoint/capacity.ts, call-measures.ts):
 * on a server the test starts as a separate process (src/main.ts, the offline responder in place
 * of the language model, sessions limited by CPU only), one step of one full-agent call records
 * the server's CPU and resident memory (of its process tree, from /proc) and the idle baseline,
 * and the report draws its memory curve from the result; memory per session is the least-squares
 * slope; a target the bench did not start gets capacity reported unsupported, not failed.
 * Behaviour only: no figure is asserted beyond "more than nothing".
 */
import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnServer, waitWarm, type ServerProcess } from '../../harness/servers/process.js';
import { tempDir } from '../../harness/servers/server.js';
import { CAPACITY_SERVER_ENV, memoryPerSession, processTree, residentMb, type CapacityPoint } from '../../benchmarks/lib/call-measures.js';
import { CAPACITY_METRIC, CAPACITY_UNSUPPORTED_REASON, addCapacity, capacityCounts, capacityUnsupported, measureCapacity } from '../../benchmarks/lib/endpoint/capacity.js';
import { buildReport } from '../../benchmarks/lib/report/data.js';
import { machineInfo, type BenchOutput, type BenchResult } from '../../benchmarks/lib/harness.js';

const Capacity = suite<{ server: ServerProcess | null; dirs: string[] }>('endpoint benchmark capacity', { server: null, dirs: [] });

Capacity.after(async (ctx) => {
  if (ctx.server) {
    ctx.server.child.kill('SIGTERM');
    await ctx.server.exited;
  }
  for (const dir of ctx.dirs) fs.rmSync(dir, { recursive: true, force: true });
});

Capacity('sessions are stepped 1, 2, then by twos', () => {
  assert.equal(capacityCounts(10), [1, 2, 4, 6, 8, 10]);
  assert.is(capacityCounts().at(-1), Number(CAPACITY_SERVER_ENV.WORKER_CAPACITY));
});

Capacity('memory per session is the least-squares slope over the steps, or from idle with one step', () => {
  const steps = [
    { sessions: 1, rss_mb: 510 },
    { sessions: 2, rss_mb: 530 },
    { sessions: 4, rss_mb: 560 },
  ];
  // x̄ = 7/3, ȳ = 1600/3: Σ(x-x̄)(y-ȳ) = 230/3, Σ(x-x̄)² = 14/3 (the idle baseline is not used).
  assert.ok(Math.abs(memoryPerSession(steps, 400)! - 230 / 14) < 1e-9, String(memoryPerSession(steps, 400)));
  assert.is(memoryPerSession([{ sessions: 2, rss_mb: 460 }], 400), 30);
  assert.is(memoryPerSession([{ sessions: 2, rss_mb: 460 }], null), null);
  assert.is(memoryPerSession([], 400), null);
});

Capacity('a target the bench did not start: capacity is unsupported, saying why', () => {
  const out = capacityUnsupported({ params: { unsupported: [{ measure: 'websocket · first frame', reason: 'no image frames' }] }, metrics: [] });
  const unsupported = out.params.unsupported as Array<{ measure: string; reason: string }>;
  assert.is(unsupported.length, 1 + Object.keys(CAPACITY_METRIC).length);
  for (const m of Object.values(CAPACITY_METRIC)) assert.ok(unsupported.some((u) => u.measure === m && u.reason === CAPACITY_UNSUPPORTED_REASON), m);
});

Capacity('a step of one call records the server\'s CPU and resident memory, and the report draws them', async (ctx) => {
  const dataDir = tempDir('endpoint-capacity-');
  ctx.dirs.push(dataDir);
  ctx.server = await spawnServer({ DATA_DIR: dataDir, LLM_PROVIDER: 'offline', PRELOAD_MODELS: 'true', ...CAPACITY_SERVER_ENV });
  await waitWarm(ctx.server);
  const pid = ctx.server.child.pid!;
  assert.ok(processTree(pid).includes(pid));
  assert.ok(residentMb(pid) > 0);

  const lines: string[] = [];
  const c = await measureCapacity(ctx.server, { windowS: 2, counts: [1], log: (line) => lines.push(line) });
  const steps = c.params.capacity_steps as CapacityPoint[];
  assert.is(steps.length, 1, lines.join('\n'));
  assert.is(steps[0]!.sessions, 1);
  assert.ok(steps[0]!.cpu_percent > 0, JSON.stringify(steps[0]));
  assert.ok(steps[0]!.rss_mb > 0, JSON.stringify(steps[0]));
  assert.ok(steps[0]!.fps > 0, `no frame came: ${JSON.stringify(steps[0])}`);
  const idle = c.params.capacity_idle as { rss_mb: number };
  assert.ok(idle.rss_mb > 0);
  const names = c.metrics.map((m) => m.name);
  assert.ok(names.includes(CAPACITY_METRIC.sessions) && names.includes(CAPACITY_METRIC.idleMemory), names.join(', '));
  const most = c.metrics.find((m) => m.name === CAPACITY_METRIC.sessions)!.values![0];
  assert.ok(most === 0 || most === 1, String(most));
  // One step kept real time: CPU and memory per session come with it (the machine may be too loaded for it).
  if (most === 1) assert.ok(names.includes(CAPACITY_METRIC.cpu) && names.includes(CAPACITY_METRIC.memory), names.join(', '));
  assert.ok(lines.some((l) => /^capacity 1: .* MB resident/.test(l)), `progress: ${lines.join(' | ')}`);

  const resultsDir = tempDir('endpoint-capacity-results-');
  ctx.dirs.push(resultsDir);
  const out: BenchOutput = addCapacity({ params: { target: { label: 'this server (offline responder)' }, definitions: {} }, metrics: [], notes: [] }, c);
  const result: BenchResult = { benchmark: 'endpoint', description: 'capacity', date: new Date().toISOString(), commit: 'test', machine: machineInfo(), ...out, notes: out.notes ?? [] };
  fs.writeFileSync(path.join(resultsDir, 'endpoint.json'), JSON.stringify(result));
  const plots = buildReport(resultsDir).capacity;
  assert.equal(
    plots.map((p) => p.yLabel),
    ['server CPU (% of one core)', 'late frames in the window (count)', 'server resident memory (MB)'],
  );
  // The memory curve starts at the idle baseline, 0 sessions.
  assert.equal(plots[2]!.data[0], [0, 1]);
  assert.equal(plots[2]!.data[1], [idle.rss_mb, steps[0]!.rss_mb]);
});

Capacity.run();
