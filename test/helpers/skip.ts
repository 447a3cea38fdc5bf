/**
 * Tests that need something a machine may lack (a model, Chromium, a converted Whisper) are
 * registered as skipped when it is missing, never run as a pass that checked nothing: uvu counts
 * them under Skipped, and each prints one line, `skipped: <suite> › <test>: <reason>`, which
 * test/run.ts lists at the end of the run. In CI (which has every dependency) any skip fails the run.
 *
 *   const modelTest = needs(Suite, 'LipSync', haveModel ? null : 'the Piper voice is not fetched (npm run setup)');
 *   modelTest('the mouth follows the voice', async () => { … });
 *
 *   const Calls = suiteNeeding<Ctx>('WebRTC calls', chromiumMissing, {} as Ctx); // hooks too: never run when skipped
 */
import { suite, type Callback, type Test } from 'uvu';

/** The line's prefix test/run.ts looks for. */
export const SKIP_LINE_PREFIX = 'skipped: ';

/** Prints the line that names a skipped test and why. */
export function announceSkip(suiteName: string, testName: string, reason: string): void {
  process.stdout.write(`${SKIP_LINE_PREFIX}${suiteName} › ${testName}: ${reason}\n`);
}

/**
 * `test` itself when `reason` is null; otherwise a registrar that registers each test it is given
 * as skipped (test.skip, counted by uvu) and says why. The suite's hooks still run: guard them
 * with the same condition, or use suiteNeeding().
 */
export function needs<T>(test: Test<T>, suiteName: string, reason: string | null): (name: string, fn: Callback<T>) => void {
  if (reason === null) return test;
  return (name, fn) => {
    announceSkip(suiteName, name, reason);
    test.skip(name, fn);
  };
}

/**
 * A uvu suite whose every test needs the same thing: the suite itself when `reason` is null;
 * otherwise one whose tests are all registered as skipped (saying why) and whose hooks never run
 * (a hook that launches the missing browser would fail the file).
 */
export function suiteNeeding<T>(name: string, reason: string | null, state?: T): Test<T> {
  const real = suite<T>(name, state);
  if (reason === null) return real;
  const skip = (testName: string, fn: Callback<T>) => {
    announceSkip(name, testName, reason);
    real.skip(testName, fn);
  };
  const noHook = Object.assign((_hook: Callback<T>) => {}, { each: (_hook: Callback<T>) => {} });
  return Object.assign(skip, {
    only: skip,
    skip: real.skip,
    before: noHook,
    after: noHook,
    run: () => real.run(),
  }) as Test<T>;
}
