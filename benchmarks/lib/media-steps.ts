/**
 * The media benchmark's concurrency steps (media.bench.ts): N real-time sessions side by side, N
 * stepped 1, 2, 4, 6, 8, then by twos up to 16 and by ones after (nextSessions: coarse while far
 * from the knee, ±1 near it on a fast machine), until the first step with a late frame, a refused
 * buffer or a dropped event, and BEYOND steps more so that the curve shows the knee. No fixed
 * ceiling: two guards end a run on a machine that never goes late, and say which ended it:
 *  - saturated: the process's CPU was at least SATURATED_SHARE of every core for SATURATED_STEPS
 *    steps in a row (the next step can only be late; the run ends there without a late step);
 *  - time: the steps have taken `boundMs` (checked before each step; a step under way finishes).
 * Invariants: steps are taken in increasing N, each once; `most` is the largest N of a step kept
 * in real time before the first that was not (0: not even one session); `firstLateAt` is null
 * when no step went late (a guard ended the run); the steps after the first late one change
 * neither. Pure: the step runner and the clock are passed in (test/benchmarks/media-steps.test.ts
 * drives it with fakes).
 */

/** One step of N sessions, as measured (recorded in params.capacity_steps with its load's name). */
export interface MediaStep {
  sessions: number;
  /** Frames rendered after their deadline, all sessions together. */
  late_frames: number;
  /** Buffers a pipeline refused and events lost on the way to JavaScript, all sessions together. */
  dropped: number;
  /** The process's CPU over the step's window, % of one core. */
  cpu_percent: number;
  frames: number;
}

export type StoppedBy = 'late' | 'saturated' | 'time';

export interface MediaSteps {
  steps: MediaStep[];
  /** The largest N kept in real time before the first late step (0: not even one). */
  most: number;
  /** N of the first step with a late frame or a loss; null when a guard ended the run first. */
  firstLateAt: number | null;
  stoppedBy: StoppedBy;
}

export interface StepOptions {
  /** Cores the process may use (os.availableParallelism()). */
  cores: number;
  /** How long the steps may take in all, ms (checked before each step). */
  boundMs: number;
  /** Steps taken after the first late one (default BEYOND). */
  beyond?: number;
  /** The clock, ms (default performance.now). */
  now?: () => number;
  /** Told after each step. */
  onStep?: (step: MediaStep) => void;
}

/** Steps after the first late one, for the curve past the knee. */
export const BEYOND = 2;
/** CPU at this share of every core counts as saturated. */
export const SATURATED_SHARE = 0.97;
/** Saturated steps in a row that end a run. */
export const SATURATED_STEPS = 2;

/** The session count after `n`: 1, 2, 4, 6, 8 … 16 by twos, then by ones. */
export function nextSessions(n: number): number {
  if (n < 1) return 1;
  if (n < 2) return 2;
  if (n < 16) return n + 2 - (n % 2);
  return n + 1;
}

/** Whether a step kept real time: no late frame, no refused buffer, no dropped event. */
export function inRealTime(step: MediaStep): boolean {
  return step.late_frames === 0 && step.dropped === 0;
}

/** Runs `runStep` at each session count from 1 until the first late step and BEYOND more, or a guard. */
export async function stepSessions(runStep: (sessions: number) => Promise<MediaStep>, o: StepOptions): Promise<MediaSteps> {
  const now = o.now ?? (() => performance.now());
  const beyond = o.beyond ?? BEYOND;
  const saturatedPct = SATURATED_SHARE * o.cores * 100;
  const started = now();
  const steps: MediaStep[] = [];
  let most = 0;
  let firstLateAt: number | null = null;
  let saturatedRun = 0;
  for (let n = 1; ; n = nextSessions(n)) {
    if (now() - started >= o.boundMs) return { steps, most, firstLateAt, stoppedBy: firstLateAt === null ? 'time' : 'late' };
    const step = await runStep(n);
    steps.push(step);
    o.onStep?.(step);
    if (firstLateAt !== null) {
      if (steps.filter((s) => s.sessions > firstLateAt!).length >= beyond) return { steps, most, firstLateAt, stoppedBy: 'late' };
      continue;
    }
    if (!inRealTime(step)) {
      firstLateAt = n;
      if (beyond === 0) return { steps, most, firstLateAt, stoppedBy: 'late' };
      continue;
    }
    most = n;
    saturatedRun = step.cpu_percent >= saturatedPct ? saturatedRun + 1 : 0;
    if (saturatedRun >= SATURATED_STEPS) return { steps, most, firstLateAt, stoppedBy: 'saturated' };
  }
}

/** One line saying how a run ended, for the bench's notes. */
export function describeStop(r: MediaSteps, o: Pick<StepOptions, 'cores' | 'boundMs'>): string {
  switch (r.stoppedBy) {
    case 'late':
      return `first late step at ${r.firstLateAt} sessions; ${r.most} kept real time before it`;
    case 'saturated':
      return `no late step: stopped at ${r.steps.at(-1)?.sessions} sessions with the CPU at ≥ ${Math.round(SATURATED_SHARE * 100)} % of ${o.cores} cores for ${SATURATED_STEPS} steps (${r.most} is a lower bound)`;
    case 'time':
      return `no late step: stopped after ${Math.round(o.boundMs / 1000)} s of steps at ${r.steps.at(-1)?.sessions ?? 0} sessions (${r.most} is a lower bound)`;
  }
}
