/**
 * `npm run bench` (benchmarks/run.ts) refuses what it cannot do before measuring anything: a
 * --target for a benchmark that starts servers of its own (it names those that can measure one),
 * a --key without a --target, a --target that is not a URL, an unknown benchmark.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const ROOT = path.resolve(import.meta.dirname, '../..');

function bench(...args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'benchmarks/run.ts', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stderr: r.stderr };
}

test('--target is refused by a benchmark that starts its own servers, naming the ones that measure a target', () => {
  const r = bench('rest', '--target', 'http://127.0.0.1:9', '--key', 'k');
  assert.is.not(r.status, 0);
  assert.match(r.stderr, /'rest' starts servers of its own and cannot measure --target; benchmarks that can: .*endpoint/);
});

test('--key without --target, a --target that is not a URL, and an unknown benchmark are refused with what to do', () => {
  assert.match(bench('endpoint', '--key', 'k').stderr, /--key needs --target URL/);
  assert.match(bench('endpoint', '--target', 'localhost:8000', '--key', 'k').stderr, /--target must be an http\(s\) or ws\(s\) base URL/);
  assert.match(bench('endpoint', '--target', 'http://127.0.0.1:9').stderr, /--target needs --key KEY/);
  assert.match(bench('nosuch').stderr, /no benchmark 'nosuch'; available: .*report/);
});

test.run();
