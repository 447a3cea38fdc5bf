/**
 * npm run bench [-- [name ...] [--runs N] [--target URL --key KEY]]: runs benchmarks/*.bench.ts
 * (or the named ones), prints each result as a Markdown table, writes
 * benchmarks/results/<name>-<timestamp>.json and rewrites benchmarks/results/SUMMARY.md with the
 * latest result of every benchmark.
 *
 * npm run bench -- report [--target URL --key KEY] [--replot] [--screenshot PNG]: measures an endpoint the way a user
 * feels it (endpoint.bench.ts: this server, started with its embedded models, or the target) and
 * writes benchmarks/results/report.html, one offline page of plots drawn from every result
 * recorded so far (lib/report/). --replot draws the page from the recorded results without
 * measuring anything; --screenshot also writes the page's headline as a PNG (headless Chromium).
 *
 * --target points the client-side benchmarks (those with `measuresTargets`) at any endpoint that
 * speaks the OpenAI Realtime protocol; the others refuse it, since they start servers of their own.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { currentCommit, machineInfo, markdownTable, type BenchResult, type Benchmark } from './lib/harness.js';
import { writeReport } from './lib/report/report.js';
import { screenshotReport } from './lib/report/screenshot.js';

const BENCH_DIR = import.meta.dirname;
const RESULTS_DIR = path.join(BENCH_DIR, 'results');
const ROOT = path.resolve(BENCH_DIR, '..');

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { runs: { type: 'string', default: '3' }, target: { type: 'string' }, key: { type: 'string' }, replot: { type: 'boolean', default: false }, screenshot: { type: 'string' } },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a positive integer');
  const available = fs
    .readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.bench.ts'))
    .map((f) => f.replace(/\.bench\.ts$/, ''))
    .sort();
  const target = targetOption(values.target, values.key);
  const report = positionals.includes('report');
  const named = positionals.filter((p) => p !== 'report');
  const chosen = named.length > 0 ? named : report ? (values.replot ? [] : ['endpoint']) : available;
  for (const name of chosen) {
    if (!available.includes(name)) throw new Error(`no benchmark '${name}'; available: ${available.join(', ')}, report`);
  }
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  for (const name of chosen) {
    const mod = (await import(pathToFileURL(path.join(BENCH_DIR, `${name}.bench.ts`)).href)) as { default: Benchmark };
    const bench = mod.default;
    if (target && !bench.measuresTargets) throw new Error(`'${name}' starts servers of its own and cannot measure --target; benchmarks that can: ${await targetBenchmarks(available)}`);
    process.stdout.write(`\n## ${bench.name}: ${bench.description}\n\n`);
    const output = await bench.run({ runs, target, log: (line) => process.stdout.write(`  ${line}\n`) });
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
  writeSummary();
  if (report) {
    const outFile = path.join(RESULTS_DIR, 'report.html');
    const { results, plots } = await writeReport({ resultsDir: RESULTS_DIR, outFile });
    process.stdout.write(`\nwrote ${path.relative(ROOT, outFile)}: ${plots.length} plots from ${results} results (open it in a browser; it works offline)\n`);
    if (values.screenshot) {
      await screenshotReport(outFile, path.resolve(values.screenshot));
      process.stdout.write(`wrote ${values.screenshot}: the report's headline\n`);
    }
  }
}

function targetOption(url: string | undefined, key: string | undefined): { url: string; key: string } | undefined {
  if (url === undefined && key === undefined) return undefined;
  if (url === undefined) throw new Error('--key needs --target URL (the base URL of an OpenAI Realtime endpoint, e.g. https://api.openai.com)');
  if (!/^(https?|wss?):\/\/[^\s]+$/i.test(url)) throw new Error(`--target must be an http(s) or ws(s) base URL, not '${url}'`);
  if (key === undefined || key === '') throw new Error('--target needs --key KEY (the API key the endpoint expects)');
  return { url: url.replace(/\/+$/, ''), key };
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
