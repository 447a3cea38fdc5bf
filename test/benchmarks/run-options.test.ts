/**
 * `npm run bench` (benchmarks/run.ts) refuses what it cannot do before measuring anything: a
 * --target for a benchmark that starts servers of its own (it names those that can measure one),
 * a --key without a --target, a --target that is not a URL, an unknown benchmark, keys that do not
 * pair with the targets. Several targets (`self`: this server) are measured one after another, each
 * with its own key; one that fails does not stop the others, and the command then exits non-zero.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readRunOptions } from '../../benchmarks/lib/run-options.js';

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

test('several targets: keys pair with the URLs in order (one key serves all), self is this server, and mistakes are refused', () => {
  assert.equal(readRunOptions(['report']).targets, [null], 'no --target: this server');
  assert.equal(readRunOptions(['report', '--target', 'self', '--target', 'https://api.openai.com/', '--key', 'sk-a']).targets, [null, { url: 'https://api.openai.com', key: 'sk-a' }]);
  assert.equal(readRunOptions(['--target', 'http://a:1', '--target', 'self', '--target', 'wss://b', '--key', 'k1', '--key', 'k2']).targets, [
    { url: 'http://a:1', key: 'k1' },
    null,
    { url: 'wss://b', key: 'k2' },
  ]);
  assert.equal(readRunOptions(['--target', 'http://a:1', '--target', 'http://b:2', '--key', 'k']).targets.map((t) => t?.key), ['k', 'k']);
  assert.throws(() => readRunOptions(['--target', 'http://a:1', '--target', 'http://b:2', '--target', 'http://c:3', '--key', 'k1', '--key', 'k2']), /2 --key for 3 --target URL/);
  assert.throws(() => readRunOptions(['--target', 'http://a:1', '--target', 'http://a:1', '--key', 'k']), /the same --target is given twice/);
  assert.throws(() => readRunOptions(['--target', 'self', '--key', 'k']), /--key needs --target URL/);
  assert.throws(() => readRunOptions(['--runs', '0']), /--runs takes a positive integer/);
});

test('two targets that cannot be measured: both are tried and named, and the command fails', () => {
  const r = bench('endpoint', '--runs', '1', '--target', 'http://127.0.0.1:9', '--target', 'http://127.0.0.1:10', '--key', 'k');
  assert.is.not(r.status, 0);
  assert.match(r.stderr, /2 of 2 runs failed/);
  assert.match(r.stderr, /endpoint on http:\/\/127\.0\.0\.1:9: /);
  assert.match(r.stderr, /endpoint on http:\/\/127\.0\.0\.1:10: /);
});

test.run();
