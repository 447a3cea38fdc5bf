/**
 * A /healthz watcher for suites that attack a server (the fuzz suites): asks `/healthz` every
 * `intervalMs` while the suite runs and notes every answer that is not a 200 or came later than
 * `deadlineMs`, so that a request that blocks the event loop shows up. Each ask opens its own
 * connection (no keep-alive), so that a socket the server closes as it idles is never reused
 * mid-request: a failure here is the server's, not a client pool's race.
 *
 * A late answer is the server's fault only when its main thread was busy: the watcher reads that
 * thread's CPU time (/proc/<pid>/task/<pid>/stat) before and after each ask, and a late answer
 * fails when the thread ran for at least half the wait (it was working, not waiting for a core),
 * or when it took over HARD_CEILING_FACTOR x the deadline whatever the reason. An answer late
 * because a loaded machine did not give the process a core is counted apart (`lateUnderLoad`):
 * CI machines are loaded, and a test must not fail on that (a CI run saw /healthz at 2.4 s with
 * the machine running a benchmark beside the suite). In-process (`pid` this process), a stall of
 * the loop between two asks, when no ask is in flight to be late, is judged the same way.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';

export interface HealthWatch {
  /** Stops asking; resolves with what was seen. */
  stop(): Promise<{ asked: number; worstMs: number; failed: string[]; lateUnderLoad: string[] }>;
}

/** A late answer fails whatever the server's CPU says beyond this many deadlines. */
const HARD_CEILING_FACTOR = 5;
/** The share of a late answer's wait the server's main thread must have run for it to count as the server's. */
const BUSY_SHARE = 0.5;
const CLOCK_TICKS_PER_S = clockTicksPerSecond();

/** `pid`: the server's process (default this one: the suites that run the server in-process). */
export function watchHealth(baseUrl: string, deadlineMs: number, intervalMs = 100, pid = process.pid): HealthWatch {
  const seen = { asked: 0, worstMs: 0, failed: [] as string[], lateUnderLoad: [] as string[] };
  let running = true;
  const loop = (async () => {
    while (running) {
      const cpuBefore = mainThreadCpuMs(pid);
      const started = performance.now();
      const status = await askOnce(`${baseUrl}/healthz`, Math.max(deadlineMs * 5, 10_000));
      const ms = performance.now() - started;
      const cpuAfter = mainThreadCpuMs(pid);
      seen.asked++;
      seen.worstMs = Math.max(seen.worstMs, ms);
      if (status !== 200) seen.failed.push(`/healthz ${status} after ${Math.round(ms)} ms`);
      else if (ms > deadlineMs) {
        const busyMs = cpuBefore === null || cpuAfter === null ? ms : cpuAfter - cpuBefore;
        const line = `/healthz 200 after ${Math.round(ms)} ms (the server's main thread ran ${Math.round(busyMs)} ms of it)`;
        if (busyMs >= ms * BUSY_SHARE || ms > deadlineMs * HARD_CEILING_FACTOR) seen.failed.push(line);
        else seen.lateUnderLoad.push(line);
      }
      // In-process, a block between two asks shows as the wait overshooting: judged the same way.
      const waitCpuBefore = mainThreadCpuMs(pid);
      const waitStarted = performance.now();
      await new Promise((r) => setTimeout(r, intervalMs));
      const stallMs = performance.now() - waitStarted - intervalMs;
      if (pid === process.pid && stallMs > deadlineMs) {
        const cpu = mainThreadCpuMs(pid);
        const busyMs = waitCpuBefore === null || cpu === null ? stallMs : cpu - waitCpuBefore;
        const line = `the event loop stalled ${Math.round(stallMs)} ms between two asks (its thread ran ${Math.round(busyMs)} ms of it)`;
        if (busyMs >= stallMs * BUSY_SHARE || stallMs > deadlineMs * HARD_CEILING_FACTOR) seen.failed.push(line);
        else seen.lateUnderLoad.push(line);
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      if (seen.lateUnderLoad.length > 0) console.log(`  late /healthz answers while the machine was loaded (not the server's): ${seen.lateUnderLoad.slice(0, 3).join('; ')}`);
      return seen;
    },
  };
}

/** CPU time (user + system) of a process's main thread, ms; null if it cannot be read. */
function mainThreadCpuMs(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return null;
  }
}

function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/** The status of one GET on a connection of its own, or the error's code and message. */
function askOnce(url: string, timeoutMs: number): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', (err: NodeJS.ErrnoException) => resolve(`${err.code ?? ''} ${err.message}`));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(`${err.code ?? ''} ${err.message}`));
  });
}
