/**
 * How many of the machine's cores are idle now, for work that chooses its thread count per call
 * (Whisper: ggml's worker threads spin while they wait for each other, so two threads on a 2-core
 * machine whose other core is busy take 2-10x longer than one thread; measured in docs/development.md,
 * facts learned the hard way). The reading is system-wide (os.cpus() idle time, so another process's load
 * counts too), averaged over the last SAMPLE_MS: a background sample every SAMPLE_MS (unref'd,
 * ~50 µs each) keeps it fresh, and it stops when nobody holds it.
 */
import os from 'node:os';

/** How often the cores' times are read, and so the window the idle count is averaged over. */
export const SAMPLE_MS = 250;

interface Times {
  idle: number;
  total: number;
}

function cpuTimes(): Times {
  let idle = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    idle += t.idle;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
  }
  return { idle, total };
}

/** A shared sampler of idle cores; `hold()` starts it, the returned function stops holding it. */
class IdleCoreSampler {
  private holders = 0;
  private timer: NodeJS.Timeout | null = null;
  private last: Times = cpuTimes();
  private idleCores = os.availableParallelism();

  hold(): () => void {
    if (this.holders++ === 0) {
      this.last = cpuTimes();
      this.timer = setInterval(() => this.sample(), SAMPLE_MS);
      this.timer.unref();
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      if (--this.holders === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }

  /** Idle cores over the last sample window (all of them before the first sample). */
  get now(): number {
    return this.idleCores;
  }

  private sample(): void {
    const next = cpuTimes();
    const total = next.total - this.last.total;
    if (total > 0) this.idleCores = (os.cpus().length * (next.idle - this.last.idle)) / total;
    this.last = next;
  }
}

export const idleCores = new IdleCoreSampler();

/** Threads for a call that may use up to `most`: one per idle core, rounded, at least one. */
export function threadsForIdleCores(most: number, idle: number): number {
  return Math.max(1, Math.min(most, Math.round(idle)));
}
