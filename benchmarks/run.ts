/**
 * npm run bench [-- [name ...] [--runs N] [--target URL|self --key KEY ...]]: runs benchmarks/*.bench.ts
 * (or the named ones), prints each result as a Markdown table, writes
 * benchmarks/results/<name>-<timestamp>.json and rewrites benchmarks/results/SUMMARY.md with the
 * latest result of every benchmark.
 *
 * npm run bench -- report [--target URL|self --key KEY ...] [--replot] [--screenshot PNG]: measures endpoints the way a user
 * feels it (endpoint.bench.ts: this server, started with its embedded models, or the target) and
 * writes benchmarks/results/report.html, one offline page of plots drawn from every result
 * recorded so far (lib/report/). --replot draws the page from the recorded results without
 * measuring anything; --screenshot also writes the page's headline as a PNG (headless Chromium).
 *
 * --target points the client-side benchmarks (those with `measuresTargets`) at any endpoint that
 * speaks the OpenAI Realtime protocol; the others refuse it, since they start servers of their own.
 * Several --target (`self`: this server, started by the benchmark) are measured one after
 * another, so one command compares endpoints (lib/run-options.ts). A target that fails is reported
 * and the others are still measured; the command then exits non-zero.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { currentCommit, machineInfo, markdownTable, type BenchResult, type Benchmark } from './lib/harness.js';
import { writeReport } from './lib/report/report.js';
import { readRunOptions, type BenchTarget } from './lib/run-options.js';
import { screenshotReport } from './lib/report/screenshot.js';

const BENCH_DIR = import.meta.dirname;
const RESULTS_DIR = path.join(BENCH_DIR, 'results');
const ROOT = path.resolve(BENCH_DIR, '..');

async function main(): Promise<void> {
  const options = readRunOptions(process.argv.slice(2));
  const { runs, report, targets } = options;
  const available = fs
    .readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.bench.ts'))
    .map((f) => f.replace(/\.bench\.ts$/, ''))
    .sort();
  const named = options.names;
  const chosen = named.length > 0 ? named : report ? (options.replot ? [] : ['endpoint']) : available;
  for (const name of chosen) {
    if (!available.includes(name)) throw new Error(`no benchmark '${name}'; available: ${available.join(', ')}, report`);
  }
  const benches: Benchmark[] = [];
  for (const name of chosen) {
    const bench = ((await import(pathToFileURL(path.join(BENCH_DIR, `${name}.bench.ts`)).href)) as { default: Benchmark }).default;
    if (targets.some((t) => t !== null) && !bench.measuresTargets) throw new Error(`'${name}' starts servers of its own and cannot measure --target; benchmarks that can: ${await targetBenchmarks(available)}`);
    benches.push(bench);
  }
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const failed: string[] = [];
  for (const target of targets) {
    for (const bench of benches) {
      try {
        await runOne(bench, runs, target);
      } catch (err) {
        if (targets.length === 1) throw err;
        failed.push(`${bench.name} on ${target?.url ?? 'self'}: ${err instanceof Error ? err.message : String(err)}`);
        process.stderr.write(`bench ${bench.name} on ${target?.url ?? 'self'} failed: ${failed.at(-1)}\n`);
      }
    }
  }
  writeSummary();
  if (report) {
    const outFile = path.join(RESULTS_DIR, 'report.html');
    const { results, plots } = await writeReport({ resultsDir: RESULTS_DIR, outFile });
    process.stdout.write(`\nwrote ${path.relative(ROOT, outFile)}: ${plots.length} plots from ${results} results (open it in a browser; it works offline)\n`);
    if (options.screenshot) {
      await screenshotReport(outFile, path.resolve(options.screenshot));
      process.stdout.write(`wrote ${options.screenshot}: the report's headline\n`);
    }
  }
  if (failed.length > 0) throw new Error(`${failed.length} of ${targets.length * benches.length} runs failed:\n${failed.join('\n')}`);
}

/** One benchmark on one target: prints its table and writes its results file. */
async function runOne(bench: Benchmark, runs: number, target: BenchTarget): Promise<void> {
  process.stdout.write(`\n## ${bench.name}${target ? ` on ${target.url}` : ''}: ${bench.description}\n\n`);
  const output = await bench.run({ runs, target: target ?? undefined, log: (line) => process.stdout.write(`  ${line}\n`) });
  const date = new Date().toISOString();
  const result: BenchResult = {
    benchmark: bench.name,
    description: bench.description,
    date,
    commit: currentCommit(ROOT),
    machine: machineInfo(),
    ...output,
  };
  const file = path.join(RESULTS_DIR, `${bench.name}-${date.replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(`\n${markdownTable([result])}\n\n${(output.notes ?? []).map((n) => `- ${n}`).join('\n')}\nwrote ${path.relative(ROOT, file)}\n`);
}

async function targetBenchmarks(available: string[]): Promise<string> {
  const names: string[] = [];
  for (const name of available) {
    const mod = (await import(pathToFileURL(path.join(BENCH_DIR, `${name}.bench.ts`)).href)) as { default: Benchmark };
    if (mod.default.measuresTargets) names.push(name);
  }
  return names.join(', ') || 'none';
}

function writeSummary(): void {
  const latest = new Map<string, BenchResult>();
  for (const file of fs.readdirSync(RESULTS_DIR).filter((f) => f.endsWith('.json')).sort()) {
    const result = JSON.parse(fs.readFileSync(path.join(RESULTS_DIR, file), 'utf8')) as BenchResult;
    latest.set(result.benchmark, result); // files sort by timestamp: the last one wins
  }
  const results = [...latest.values()];
  const machine = results[0]?.machine;
  const text = [
    '# Benchmark summary (latest run of each)',
    '',
    machine ? `Machine: ${machine.cpus} × ${machine.cpu_model}, ${machine.memory_gib} GiB, ${machine.os}, Node ${machine.node}` : '',
    '',
    markdownTable(results),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(RESULTS_DIR, 'SUMMARY.md'), text);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
