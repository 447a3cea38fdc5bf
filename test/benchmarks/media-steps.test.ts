/**
 * The media benchmark's concurrency steps (benchmarks/lib/media-steps.ts), driven by fake step
 * runners and a fake clock: the session counts stepped through, a run that goes late stops two
 * steps past its first late step with the largest N before it, and the two guards (CPU saturated
 * for two steps, the time bound) end a run that never goes late, saying which ended it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { BEYOND, describeStop, nextSessions, stepSessions, type MediaStep } from '../../benchmarks/lib/media-steps.js';

/** A runner whose steps go late from `lateFrom` sessions on, at `cpuPerSession` % of a core each. */
function fakeRunner(lateFrom: number, cpuPerSession = 5): { run: (n: number) => Promise<MediaStep>; asked: number[] } {
  const asked: number[] = [];
  return {
    asked,
    run: async (n) => {
      asked.push(n);
      const late = n >= lateFrom ? 3 * (n - lateFrom + 1) : 0;
      return { sessions: n, late_frames: late, dropped: 0, cpu_percent: n * cpuPerSession, frames: n * 250 };
    },
  };
}

const CORES = 2;
const HOUR_MS = 3_600_000;

test('sessions step 1, 2, 4 … 16 by twos, then by ones', () => {
  const seq = [1];
  while (seq.length < 14) seq.push(nextSessions(seq.at(-1)!));
  assert.equal(seq, [1, 2, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19, 20, 21]);
  assert.is(nextSessions(0), 1);
});

test('a runner late from 23 sessions: the most is 22, first late 23, two steps past it, then stop', async () => {
  const fake = fakeRunner(23);
  const r = await stepSessions(fake.run, { cores: 64, boundMs: HOUR_MS });
  assert.is(r.most, 22);
  assert.is(r.firstLateAt, 23);
  assert.is(r.stoppedBy, 'late');
  assert.is(BEYOND, 2);
  assert.equal(fake.asked, [1, 2, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
  assert.equal(r.steps.map((s) => s.sessions), fake.asked);
  assert.match(describeStop(r, { cores: 64, boundMs: HOUR_MS }), /first late step at 23 sessions; 22 kept real time/);
});

test('late at the first step: the most is 0; a dropped event counts as late', async () => {
  const r = await stepSessions(fakeRunner(1).run, { cores: CORES, boundMs: HOUR_MS });
  assert.is(r.most, 0);
  assert.is(r.firstLateAt, 1);
  assert.equal(r.steps.map((s) => s.sessions), [1, 2, 4]);

  const dropsAt6 = async (n: number): Promise<MediaStep> => ({ sessions: n, late_frames: 0, dropped: n >= 6 ? 1 : 0, cpu_percent: 10, frames: 250 * n });
  const d = await stepSessions(dropsAt6, { cores: CORES, boundMs: HOUR_MS, beyond: 0 });
  assert.is(d.most, 4);
  assert.is(d.firstLateAt, 6);
  assert.equal(d.steps.map((s) => s.sessions), [1, 2, 4, 6]);
});

test('a machine that never goes late stops once the CPU is saturated for two steps, and says so', async () => {
  // 50 % of a core per session on 2 cores: 194 % (97 % of 200) is reached at 4 sessions.
  const fake = fakeRunner(Number.POSITIVE_INFINITY, 50);
  const r = await stepSessions(fake.run, { cores: CORES, boundMs: HOUR_MS });
  assert.is(r.stoppedBy, 'saturated');
  assert.is(r.firstLateAt, null);
  assert.equal(fake.asked, [1, 2, 4, 6], 'saturated at 4 and 6: stop');
  assert.is(r.most, 6);
  assert.match(describeStop(r, { cores: CORES, boundMs: HOUR_MS }), /no late step: stopped at 6 sessions .* 2 cores for 2 steps \(6 is a lower bound\)/);

  // One saturated step followed by one under the line does not stop it (the run must be in a row).
  const dips = async (n: number): Promise<MediaStep> => ({ sessions: n, late_frames: n >= 10 ? 1 : 0, dropped: 0, cpu_percent: n === 4 ? 199 : 100, frames: 250 * n });
  const d = await stepSessions(dips, { cores: CORES, boundMs: HOUR_MS, beyond: 0 });
  assert.is(d.stoppedBy, 'late');
  assert.is(d.most, 8);
});

test('a machine that never goes late or saturates stops at the time bound, and says so', async () => {
  let clock = 0;
  const fake = fakeRunner(Number.POSITIVE_INFINITY, 1);
  const timed = async (n: number) => {
    clock += 10_000; // each step takes 10 s
    return fake.run(n);
  };
  const r = await stepSessions(timed, { cores: CORES, boundMs: 60_000, now: () => clock });
  assert.is(r.stoppedBy, 'time');
  assert.is(r.firstLateAt, null);
  assert.equal(fake.asked, [1, 2, 4, 6, 8, 10], 'six 10 s steps fill the 60 s bound');
  assert.is(r.most, 10);
  assert.match(describeStop(r, { cores: CORES, boundMs: 60_000 }), /stopped after 60 s of steps at 10 sessions \(10 is a lower bound\)/);

  // Late before the bound: the steps past it are cut by the bound too, and the run still says late.
  clock = 0;
  const lateAt8 = fakeRunner(8, 1);
  const cut = await stepSessions(async (n) => ((clock += 10_000), lateAt8.run(n)), { cores: CORES, boundMs: 55_000, now: () => clock });
  assert.equal(lateAt8.asked, [1, 2, 4, 6, 8, 10]);
  assert.is(cut.stoppedBy, 'late');
  assert.is(cut.firstLateAt, 8);
  assert.is(cut.most, 6);
});

test.run();
