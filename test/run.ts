/**
 * Runs every test file under test/ with uvu's CLI (tsx preloaded), streams its output, and closes
 * with one plain line, `tests: N passed, N failed, N skipped`, that CI tools read. Exits non-zero
 * when a test fails or when no test ran. Each failure uvu printed (its `FAIL` line and the lines up
 * to the stack's end) is printed again just before that line, so a CI log that keeps only its tail
 * still says which test failed and why.
 *
 * A test whose dependency is missing (a model, Chromium) is registered as skipped and prints a
 * `skipped: <suite> › <test>: <reason>` line (test/helpers/skip.ts); those lines are listed again
 * after the summary. Where every dependency must be present, a skip is a failure: with CI set (CI=true,
 * as CI services set it, or TEST_FAIL_ON_SKIP=1, which .ci/run exports) a run with any skipped test
 * fails, naming them. Skips are what uvu counted (its Skipped), so a file that skips without a
 * line still fails CI.
 *
 * uvu runs every file in one process, which ends only when nothing keeps it alive. Something left
 * open by a test (a socket, a timer, a native peer connection) would hold CI until its own limit,
 * so once uvu has printed its summary the process gets EXIT_GRACE_MS to end; after that it is
 * killed and the run fails, saying so.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const uvu = path.join(root, 'node_modules/uvu/bin.js');
const child = spawn(process.execPath, [uvu, '-r', 'tsx', 'test', '\\.test\\.ts$', ...process.argv.slice(2)], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const EXIT_GRACE_MS = 30_000;
/** Whether a skipped test fails the run: in CI, which has every dependency. */
const FAIL_ON_SKIP = truthy(process.env.CI) || truthy(process.env.TEST_FAIL_ON_SKIP);
let output = '';
let lingered = false;
let exitTimer: NodeJS.Timeout | null = null;
child.stdout.on('data', (chunk: Buffer) => {
  output += chunk.toString();
  process.stdout.write(chunk);
  if (!exitTimer && /Duration:\s+[\d.]+ms/.test(output)) {
    exitTimer = setTimeout(() => {
      lingered = true;
      process.stdout.write(`\nthe test process did not end ${EXIT_GRACE_MS / 1000} s after its summary: a test left a handle open\n`);
      child.kill('SIGKILL');
    }, EXIT_GRACE_MS);
  }
});
child.on('exit', (code, signal) => {
  if (exitTimer) clearTimeout(exitTimer);
  // uvu colours its summary (Skipped's number among others): read it without the escapes.
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  const count = (label: string) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? 0);
  const total = count('Total');
  const passed = count('Passed');
  const skipped = count('Skipped');
  // uvu's Total counts the tests that ran (skipped ones are not in it).
  const failed = total - passed;
  const failures = failureBlocks(output);
  if (failures.length > 0) process.stdout.write(`\nfailures (repeated from above):\n\n${failures.join('\n\n')}\n`);
  const skips = skipLines(output);
  if (skips.length > 0) process.stdout.write(`\nskipped tests (a dependency is missing):\n${skips.map((l) => `  ${l}`).join('\n')}\n`);
  process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  const skipFails = FAIL_ON_SKIP && skipped > 0;
  if (skipFails) {
    const unnamed = skipped > skips.length ? ` (${skipped - skips.length} without a reason printed)` : '';
    process.stdout.write(`${skipped} test(s) skipped${unnamed}, and a skip fails the run where every dependency must be present (CI / TEST_FAIL_ON_SKIP)\n`);
  }
  if (signal || lingered) process.exit(1);
  process.exit(code !== 0 || failed > 0 || total === 0 || skipFails ? 1 : 0);
});

function truthy(value: string | undefined): boolean {
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

/** The lines that name skipped tests: test/helpers/skip.ts's, and the older `<what>: skipping …` notes. */
function skipLines(text: string): string[] {
  const lines = text.replace(/\x1b\[[0-9;]*m/g, '').split('\n').map((l) => l.trim());
  return [...new Set(lines.filter((l) => l.startsWith('skipped: ') || /^[^{]{1,80}: skipping\b/.test(l)))];
}

/** The blocks uvu prints for failed tests: from a `FAIL` line to the last line of its stack. */
function failureBlocks(text: string): string[] {
  const lines = text.replace(/\x1b\[[0-9;]*m/g, '').split('\n');
  const blocks: string[] = [];
  lines.forEach((first, i) => {
    if (!/^\s*FAIL\s/.test(first)) return;
    const block = [first];
    let inStack = false;
    for (const line of lines.slice(i + 1, i + 40)) {
      if (/^\s+at /.test(line)) inStack = true;
      else if (inStack) break;
      block.push(line);
    }
    blocks.push(block.join('\n').trimEnd());
  });
  return blocks;
}
