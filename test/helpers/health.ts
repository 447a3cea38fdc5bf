/**
 * A /healthz watcher for suites that attack a server in this process (the fuzz suites): asks
 * `/healthz` every `intervalMs` while the suite runs and notes every answer that is not a 200 or
 * came later than `deadlineMs`, so that a request that blocks the event loop shows up. Each ask
 * opens its own connection (no keep-alive), so that a socket the server closes as it idles is
 * never reused mid-request: a failure here is the server's, not a client pool's race.
 */
import http from 'node:http';

export interface HealthWatch {
  /** Stops asking; resolves with what was seen. */
  stop(): Promise<{ asked: number; worstMs: number; failed: string[] }>;
}

export function watchHealth(baseUrl: string, deadlineMs: number, intervalMs = 100): HealthWatch {
  const seen = { asked: 0, worstMs: 0, failed: [] as string[] };
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const status = await askOnce(`${baseUrl}/healthz`, Math.max(deadlineMs * 5, 10_000));
      const ms = performance.now() - started;
      seen.asked++;
      seen.worstMs = Math.max(seen.worstMs, ms);
      if (status !== 200 || ms > deadlineMs) seen.failed.push(`/healthz ${status} after ${Math.round(ms)} ms`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
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
