/**
 * The endpoint benchmark's capacity run, on a target the bench started itself (endpoint.bench.ts):
 * light WebRTC callers (call-measures.ts capacityStep, harness/clients/rtc-caller.ts) under the
 * full-agent talking load (AGENT_TALKING: every avatar answers again as soon as its reply is done),
 * stepping the sessions 1, 2, 4, 6, 8 … until the first step that is not in real time (a late frame
 * at the server or a receiver, or a call under 24.5 fps), and BEYOND steps more for the curves (on
 * the 2-core machine with the embedded language model, one talking session already has a late frame
 * now and then: without them the curve was one point). It records:
 *  - `capacity · sessions in real time`: the most sessions of a step that kept real time (0: not
 *    even one);
 *  - `capacity · CPU per session`: the server's CPU at that step over its sessions, % of one core;
 *  - `capacity · memory per session`: the slope of the server's resident memory over sessions
 *    (least squares over every step measured, in real time or not: memory follows the sessions
 *    held; with only one step, the line from the idle baseline to it), MB;
 *  - `capacity · idle memory`: the server's resident memory with no session, just before the
 *    first step (after the other measures: a server that has served), MB;
 *  - params.capacity_steps (every step tried, CPU, late frames and resident memory, which the
 *    report draws as capacity curves), capacity_window_s, capacity_idle.
 * CPU and memory are of the server's whole process tree, read from /proc: a target the bench did
 * not start has none to read, so there capacity is reported under params.unsupported, never as a
 * failure (capacityUnsupported); a run that skips it (ENDPOINT_CAPACITY=0) lists it under
 * params.not_measured.
 */
import { summarise, type BenchOutput, type Metric } from '../harness.js';
import type { ServerProcess } from '../../../harness/servers/process.js';
import { AGENT_TALKING, idleUse, memoryPerSession, mostCalls, type CapacityPoint } from '../call-measures.js';

export const CAPACITY_METRIC = {
  sessions: 'capacity · sessions in real time',
  cpu: 'capacity · CPU per session',
  memory: 'capacity · memory per session',
  idleMemory: 'capacity · idle memory',
} as const;

export const CAPACITY_UNSUPPORTED_REASON = 'the bench did not start this target: it cannot read its CPU and memory';

/** The load's name in params.capacity_steps (a line of the report's capacity curves). */
const LOAD = 'full agent talking';
/** Steps taken after the first that is not in real time, for the curves (mostCallsEach). */
const BEYOND = 2;
/** Seconds of the idle baseline. */
const IDLE_S = 3;

/** Session counts stepped through: 1, 2, then every even count up to `most`. */
export function capacityCounts(most = 64): number[] {
  const out = [1, 2];
  for (let n = 4; n <= most; n += 2) out.push(n);
  return out;
}

export interface CapacityOptions {
  windowS: number;
  /** Session counts to step through (default capacityCounts()). */
  counts?: number[];
  log: (line: string) => void;
}

export interface CapacityResult {
  metrics: Metric[];
  params: Record<string, unknown>;
  notes: string[];
  definitions: Record<string, string>;
}

/** The capacity run on `server` (started by the bench with CAPACITY_SERVER_ENV, warmed up, no session open). */
export async function measureCapacity(server: ServerProcess, o: CapacityOptions): Promise<CapacityResult> {
  const counts = o.counts ?? capacityCounts();
  o.log(`capacity: full-agent calls all talking, ${o.windowS} s a step, sessions ${counts.slice(0, 5).join(', ')} … until a step is not in real time, and ${BEYOND} more for the curves`);
  // Sessions of the other measures may still be closing: let them go before the baseline.
  await new Promise((r) => setTimeout(r, 2000));
  const idle = await idleUse(server, IDLE_S);
  o.log(`capacity idle: ${idle.rssMb.toFixed(0)} MB resident, ${idle.cpuPct.toFixed(0)} % CPU`);
  const run = await mostCalls(server, AGENT_TALKING, counts, o.windowS, (line) => o.log(`capacity ${line}`), BEYOND);
  const points: CapacityPoint[] = run.points.map((p) => ({ ...p, load: LOAD }));
  // Memory grows with the sessions held whether or not they keep time: every step measured counts.
  const perSession = memoryPerSession(points, idle.rssMb);
  const metrics = [
    summarise(CAPACITY_METRIC.sessions, 'sessions', [run.most]),
    summarise(CAPACITY_METRIC.idleMemory, 'MB', [idle.rssMb]),
    ...(run.cpuPerCall === null ? [] : [summarise(CAPACITY_METRIC.cpu, '% of one core', [run.cpuPerCall])]),
    ...(perSession === null ? [] : [summarise(CAPACITY_METRIC.memory, 'MB', [perSession])]),
  ];
  const notes = [`Capacity, full-agent calls all talking (back-to-back replies), ${o.windowS} s a step: ${run.steps.join('; ')}.`];
  if (run.most === 0) notes.push('capacity: not even one session kept real time, so there is no CPU per session');
  if (points.length === 1) notes.push('capacity: memory per session from the idle baseline to the one step measured (least squares needs two)');
  return {
    metrics,
    params: {
      capacity_window_s: o.windowS,
      capacity_steps: points,
      capacity_idle: { rss_mb: round1(idle.rssMb), cpu_percent: round1(idle.cpuPct), seconds: IDLE_S },
      capacity_load: 'full agent (AGENT_TALKING): light WebRTC callers (node-datachannel, H.264 + Opus, oai-events), each asking for a long story again as soon as its reply is done',
    },
    notes,
    definitions: {
      [CAPACITY_METRIC.sessions]: `the most sessions at once, all talking, of a step that kept real time (no late frame at the server or a receiver, every call ≥ 24.5 fps over ${o.windowS} s); steps ${counts.slice(0, 5).join(', ')} … until the first that did not`,
      [CAPACITY_METRIC.cpu]: "the server process tree's CPU over that step's window, divided by its sessions (% of one core)",
      [CAPACITY_METRIC.memory]: "slope of the server process tree's resident memory (VmRSS, mean over each step's window) over sessions: least squares over every step measured; with only one step, from the idle baseline to it",
      [CAPACITY_METRIC.idleMemory]: "the server process tree's resident memory (VmRSS) with no session open, just before the first step (after the other measures)",
    },
  };
}

/** Adds a capacity run to the endpoint bench's output. */
export function addCapacity(out: BenchOutput, c: CapacityResult): BenchOutput {
  out.metrics.push(...c.metrics);
  Object.assign(out.params, c.params);
  out.params.definitions = { ...((out.params.definitions as Record<string, string> | undefined) ?? {}), ...c.definitions };
  out.notes = [...(out.notes ?? []), ...c.notes];
  return out;
}

/** A target the bench did not start: capacity reported unsupported, saying why. */
export function capacityUnsupported(out: BenchOutput): BenchOutput {
  const unsupported = (out.params.unsupported as Array<{ measure: string; reason: string }> | undefined) ?? [];
  out.params.unsupported = [...unsupported, ...Object.values(CAPACITY_METRIC).map((measure) => ({ measure, reason: CAPACITY_UNSUPPORTED_REASON }))];
  return out;
}

/** A started target whose run skipped capacity (ENDPOINT_CAPACITY=0): listed under params.not_measured. */
export function capacityNotMeasured(out: BenchOutput): BenchOutput {
  out.params.not_measured = [...((out.params.not_measured as string[] | undefined) ?? []), ...Object.values(CAPACITY_METRIC)];
  return out;
}

const round1 = (x: number) => Math.round(x * 10) / 10;
