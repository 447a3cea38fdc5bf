/**
 * npm run bench [-- [name ...] [--runs N]]: runs benchmarks/*.bench.ts (or the named ones), prints
 * each result as a Markdown table, writes benchmarks/results/<name>-<timestamp>.json and rewrites
 * benchmarks/results/SUMMARY.md with the latest result of every benchmark.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { currentCommit, machineInfo, markdownTable, type BenchResult, type Benchmark } from './lib/harness.js';

const BENCH_DIR = import.meta.dirname;
const RESULTS_DIR = path.join(BENCH_DIR, 'results');
const ROOT = path.resolve(BENCH_DIR, '..');

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { runs: { type: 'string', default: '3' } },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a positive integer');
  const available = fs
    .readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.bench.ts'))
    .map((f) => f.replace(/\.bench\.ts$/, ''))
    .sort();
  const chosen = positionals.length > 0 ? positionals : available;
  for (const name of chosen) {
    if (!available.includes(name)) throw new Error(`no benchmark '${name}'; available: ${available.join(', ')}`);
  }
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  for (const name of chosen) {
    const mod = (await import(pathToFileURL(path.join(BENCH_DIR, `${name}.bench.ts`)).href)) as { default: Benchmark };
    const bench = mod.default;
    process.stdout.write(`\n## ${bench.name}: ${bench.description}\n\n`);
    const output = await bench.run({ runs, log: (line) => process.stdout.write(`  ${line}\n`) });
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
