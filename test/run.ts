/**
 * Runs every test file under test/ with uvu's CLI (tsx preloaded), streams its output, and closes
 * with one plain line, `tests: N passed, N failed, N skipped`, that CI tools read. Exits non-zero
 * when a test fails or when no test ran.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const uvu = path.join(root, 'node_modules/uvu/bin.js');
const child = spawn(process.execPath, [uvu, '-r', 'tsx', 'test', '\\.test\\.ts$', ...process.argv.slice(2)], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
let output = '';
child.stdout.on('data', (chunk: Buffer) => {
  output += chunk.toString();
  process.stdout.write(chunk);
});
child.on('exit', (code, signal) => {
  const count = (label: string) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(output)?.[1] ?? 0);
  const total = count('Total');
  const passed = count('Passed');
  const skipped = count('Skipped');
  // uvu's Total counts the tests that ran (skipped ones are not in it).
  const failed = total - passed;
  process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  if (signal) process.exit(1);
  process.exit(code !== 0 || failed > 0 || total === 0 ? 1 : 0);
});
