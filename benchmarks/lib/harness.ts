/**
 * The benchmark harness every benchmark uses. A benchmark is a `*.bench.ts` file whose default
 * export is a Benchmark; `npm run bench [name ...]` runs the named ones (all when none is named),
 * prints a table, and writes one JSON file per benchmark run to benchmarks/results/ plus a
 * Markdown summary (benchmarks/results/SUMMARY.md) of the latest run of each. Never part of npm test.
 *
 * Results format (JSON):
 *   { benchmark, description, date, commit, machine: {cpus, cpu_model, memory_gib, os, node},
 *     params: {...}, metrics: [{ name, unit, samples, p50, p95, p99, mean, min, max, throughput_per_s?, values? }],
 *     notes: [...] }
 * Latency metrics are in milliseconds; each metric is summarised over all samples of all runs.
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';

export interface Metric {
  name: string;
  unit: string;
  samples: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
  /** Operations per second over the measured interval, where the metric is a throughput. */
  throughput_per_s?: number;
  /**
   * The samples themselves (rounded like the summary; at most MAX_KEPT_VALUES, evenly thinned),
   * so a report can draw their distribution and re-plot without re-measuring. Absent in results
   * recorded before 2026-11-27.
   */
  values?: number[];
}

/** Samples kept per metric in a results file. */
export const MAX_KEPT_VALUES = 5000;

export interface BenchContext {
  /** Repeat count asked for on the command line (--runs N), default 3. */
  runs: number;
  /**
   * An endpoint to measure instead of a server the benchmark starts (--target URL --key KEY): any
   * server speaking the OpenAI Realtime protocol. Only benchmarks that measure from the client's
   * side read it (endpoint.bench.ts); the others refuse to run with it.
   */
  target?: { url: string; key: string };
  log(line: string): void;
}

export interface BenchOutput {
  params: Record<string, unknown>;
  metrics: Metric[];
  notes?: string[];
}

export interface Benchmark {
  name: string;
  description: string;
  /** Measures from the client's side, so it can measure any endpoint given as ctx.target. */
  measuresTargets?: boolean;
  run(ctx: BenchContext): Promise<BenchOutput>;
}

export interface BenchResult extends BenchOutput {
  benchmark: string;
  description: string;
  date: string;
  commit: string;
  machine: { cpus: number; cpu_model: string; memory_gib: number; os: string; node: string };
}

/** Nearest-rank percentile of unsorted samples. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

export function summarise(name: string, unit: string, samples: number[], throughputPerS?: number): Metric {
  const metric: Metric = {
    name,
    unit,
    samples: samples.length,
    p50: round(percentile(samples, 50)),
    p95: round(percentile(samples, 95)),
    p99: round(percentile(samples, 99)),
    mean: round(samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length)),
    min: round(Math.min(...samples)),
    max: round(Math.max(...samples)),
  };
  if (throughputPerS !== undefined) metric.throughput_per_s = round(throughputPerS, 1);
  metric.values = thin(samples, MAX_KEPT_VALUES).map((v) => round(v));
  return metric;
}

/** At most `n` of `values`, evenly spaced, in their order. */
function thin(values: number[], n: number): number[] {
  if (values.length <= n) return values;
  return Array.from({ length: n }, (_, i) => values[Math.floor((i * values.length) / n)]!);
}

export function machineInfo(): BenchResult['machine'] {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model ?? 'unknown',
    memory_gib: round(os.totalmem() / 2 ** 30, 1),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
  };
}

export function currentCommit(cwd: string): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd, encoding: 'utf8' }).trim();
    return dirty ? `${sha}-dirty` : sha;
  } catch {
    return 'unknown'; // not a git checkout (e.g. an exported tree): the result still stands
  }
}

export function markdownTable(results: BenchResult[]): string {
  const lines = [
    '| benchmark | metric | unit | p50 | p95 | p99 | throughput/s | samples | commit | date |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    for (const m of r.metrics) {
      lines.push(
        `| ${r.benchmark} | ${m.name} | ${m.unit} | ${m.p50} | ${m.p95} | ${m.p99} | ${m.throughput_per_s ?? ''} | ${m.samples} | ${r.commit} | ${r.date.slice(0, 10)} |`,
      );
    }
  }
  return lines.join('\n');
}

/** Uniform 0..1 from a seeded xorshift32: the same sequence every run. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x100000000;
  };
}
