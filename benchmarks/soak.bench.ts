/**
 * Soak: many short realtime sessions against the real server process, to show that sessions
 * leave nothing behind. The server runs as `npm start` runs it (src/main.ts, models preloaded),
 * with the offline responder as the language model and the default offline voice, so the replies
 * are short, deterministic speech; WORKER_CAPACITY is raised above the concurrency used.
 *
 * SOAK_SESSIONS sessions (default 500), SOAK_CONCURRENCY at a time (default 6), each over
 * WebSocket /v1/realtime?model=…: session.created, one text turn ("Goodbye.", whose reply is one
 * short spoken sentence) with audio, images too for every SOAK_IMAGE_EVERY-th session; every third
 * session is dropped mid-response (the socket terminated, no close frame, at the first audio
 * delta), the others wait for response.done and close normally.
 *
 * Meanwhile, every SAMPLE_INTERVAL_MS: the server's RSS (/proc/<pid>/status, so it is read even
 * when the event loop is busy) and its event-loop delay (GET /metrics: prom-client's
 * monitorEventLoopDelay histogram, which it resets on every scrape, so each scrape is one
 * interval's median and worst). After each completed session, RSS again, against sessions completed.
 *
 * Reported: sessions run, dropped, failed (with reasons); MiB per session, the slope of RSS
 * against sessions completed over the second half of the run (Theil-Sen, and OLS beside it);
 * event-loop delay p99 and max over the run; RSS start, peak, end; worker slots still used and
 * sessions still live in the store once every socket is closed (both must be 0); errors that
 * escaped every handler. One run whatever --runs says (a run is already hundreds of sessions).
 * A server crash ends the benchmark with its output.
 *
 * SOAK_MODE=call runs the call mode instead (benchmarks/lib/call-soak.ts): one WebRTC call held
 * for SOAK_CALL_MINUTES (default 60) with periodic replies, the server's RSS, open file
 * descriptors and the receiver's A/V offset sampled over time, and their slopes reported.
 */
import fs from 'node:fs';
import { spawnServer, type ServerProcess } from '../harness/servers/process.js';
import { RealtimeTestClient } from '../harness/clients/realtime-client.js';
import { tempDir } from '../harness/servers/server.js';
import { olsSlope, secondHalf, theilSenSlope, type Point } from '../harness/measures/slope.js';
import { percentile, summarise, type Benchmark, type Metric } from './lib/harness.js';
import { CALL_SOAK_DESCRIPTION, runCallSoak } from './lib/call-soak.js';

/** Which soak: 'sessions' (many short WebSocket sessions, below) or 'call' (one long WebRTC call). */
const MODE = process.env.SOAK_MODE ?? 'sessions';
if (MODE !== 'sessions' && MODE !== 'call') throw new Error(`SOAK_MODE must be 'sessions' or 'call', got '${MODE}'`);

/** Sessions in the run: enough that the second half is hundreds of sessions past warm-up. */
const SESSIONS = positiveInt('SOAK_SESSIONS', 500);
/**
 * Sessions open at once: about what a 2-core machine sustains with speech and images in real time
 * (the media benchmark ran 15 video streams alone; speech, the store and the client share it here).
 */
const CONCURRENCY = positiveInt('SOAK_CONCURRENCY', 6);
/** Every n-th session also asks for images (512x512 JPEG at 25 fps), the costliest output. */
const IMAGE_EVERY = positiveInt('SOAK_IMAGE_EVERY', 4);
/** Every n-th session is dropped at its first audio delta (a third, as the issue's soak did). */
const DROP_EVERY = 3;
/**
 * Slots: sessions end a moment after their socket closes, so the next connection may arrive
 * before the slot is back; a margin keeps that from reading as a refusal (1013).
 */
const WORKER_CAPACITY = CONCURRENCY * 4;
/** Sampling period of RSS and event-loop delay. */
const SAMPLE_INTERVAL_MS = 250;
/** The user turn: the offline responder answers it with one short sentence (about 2 s of speech). */
const USER_TEXT = 'Goodbye.';
/** Any one wait of a session (created, first audio, response.done): far above a 2 s reply. */
const SESSION_STEP_TIMEOUT_MS = 60_000;
/** How long the server may take to end the last sessions and free their slots after the last close. */
const DRAIN_TIMEOUT_MS = 30_000;
/** How long preloading the models may take before the run starts (Whisper, Piper, Silero). */
const WARM_UP_TIMEOUT_MS = 180_000;

interface Sample {
  atMs: number;
  rssMiB: number;
}

interface LagSample {
  /** End of the interval, from the start of the run. */
  atMs: number;
  /** Sessions completed by then. */
  sessionsDone: number;
  /** The interval's median and worst delay. prom-client's histogram samples every 10 ms, so an
   * interval holds about 25 samples: its p99 is its maximum, and is not reported apart. */
  p50Ms: number;
  maxMs: number;
}

interface Outcome {
  ok: boolean;
  dropped: boolean;
  images: boolean;
  ms: number;
  reason?: string;
}

const bench: Benchmark = {
  name: 'soak',
  description: MODE === 'call' ? CALL_SOAK_DESCRIPTION : `${SESSIONS} realtime sessions over WebSocket, ${CONCURRENCY} at a time, a third dropped mid-response: RSS per session, event-loop delay, leaked slots`,
  async run(ctx) {
    if (MODE === 'call') return runCallSoak(ctx);
    const dataDir = tempDir('avatar-soak-');
    const server = await spawnServer({
      DATA_DIR: dataDir,
      LLM_PROVIDER: 'offline',
      PRELOAD_MODELS: 'true',
      WORKER_CAPACITY: String(WORKER_CAPACITY),
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'info',
    });
    const pid = server.child.pid as number;
    let crashed: string | null = null;
    void server.exited.then((code) => (crashed = `the server exited (code ${code}) during the soak`));
    try {
      await waitForLog(server, 'models warmed up', WARM_UP_TIMEOUT_MS);
      const key = server.bootstrapKey as string;
      // The delay histogram holds everything since the server started (model loading included)
      // until the first scrape resets it: this one is not part of the run.
      await scrape(server.url);
      const startedAt = performance.now();
      const samples: Sample[] = [];
      const lag: LagSample[] = [];
      const perSession: Point[] = [];
      const outcomes: Outcome[] = [];
      const sampler = startSampler(server.url, pid, startedAt, samples, lag, () => outcomes.length);
      const rssStartMiB = readRssMiB(pid);

      let next = 0;
      const worker = async () => {
        while (next < SESSIONS && crashed === null) {
          const i = next++;
          const outcome = await oneSession(server.url, key, i);
          outcomes.push(outcome);
          perSession.push({ x: outcomes.length, y: readRssMiB(pid) });
          if (outcomes.length % 50 === 0) ctx.log(progress(outcomes, samples, startedAt));
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      if (crashed) throw new Error(crashed);
      const runSeconds = (performance.now() - startedAt) / 1000;

      // Every socket is closed: the server must give back every slot and end every session.
      const drained = await waitForDrain(server.url);
      await sampler.stop();
      if (crashed) throw new Error(crashed);
      const rssEndMiB = readRssMiB(pid);
      const rssPeakMiB = Math.max(rssStartMiB, rssEndMiB, ...samples.map((s) => s.rssMiB));

      const half = secondHalf(perSession);
      const ts = theilSenSlope(half);
      const ols = olsSlope(half);
      const failed = outcomes.filter((o) => !o.ok);
      const dropped = outcomes.filter((o) => o.ok && o.dropped).length;
      const lagP50 = lag.map((l) => l.p50Ms);
      const lagMax = lag.map((l) => l.maxMs);
      const loggedErrors = countLogLines(server.stdout(), 'error');
      const loggedWarnings = countLogLines(server.stdout(), 'warn');
      const reasons = tally(failed.map((o) => o.reason ?? 'unknown'));

      const rows: Array<[string, string]> = [
        ['sessions run', String(outcomes.length)],
        ['dropped mid-response (as planned)', String(dropped)],
        ['failed', `${failed.length}${failed.length ? ` (${reasons})` : ''}`],
        ['with images', String(outcomes.filter((o) => o.images).length)],
        ['wall time', `${runSeconds.toFixed(0)} s (${(outcomes.length / runSeconds).toFixed(2)} sessions/s)`],
        ['MiB per session, 2nd half, Theil-Sen', ts.slope.toFixed(4)],
        ['MiB per session, 2nd half, OLS', ols.slope.toFixed(4)],
        ['RSS start / peak / end', `${rssStartMiB.toFixed(1)} / ${rssPeakMiB.toFixed(1)} / ${rssEndMiB.toFixed(1)} MiB`],
        ['event-loop delay: typical / p99 / max (10 ms = none; see the notes)', `${percentile(lagP50, 50).toFixed(1)} / ${percentile(lagMax, 99).toFixed(1)} / ${Math.max(...lagMax).toFixed(1)} ms`],
        ['worker slots used after every socket closed', String(drained.slotsUsed)],
        ['sessions still pending or active in the store', String(drained.liveSessions)],
        ['errors that escaped every handler (metric)', drained.escaped === null ? 'metric not exported' : String(drained.escaped)],
        ['server log lines at error / warn', `${loggedErrors} / ${loggedWarnings}`],
      ];
      ctx.log('');
      ctx.log('| soak | result |');
      ctx.log('|---|---|');
      for (const [name, value] of rows) ctx.log(`| ${name} | ${value} |`);

      const single = (name: string, unit: string, value: number): Metric => summarise(name, unit, [value]);
      return {
        params: {
          sessions: SESSIONS,
          concurrency: CONCURRENCY,
          drop_every: DROP_EVERY,
          image_every: IMAGE_EVERY,
          worker_capacity: WORKER_CAPACITY,
          llm: 'offline responder',
          voice: 'server default (offline)',
          user_text: USER_TEXT,
          sample_interval_ms: SAMPLE_INTERVAL_MS,
          malloc_arena_max: process.env.MALLOC_ARENA_MAX ?? 'glibc default',
          runs: 1,
        },
        metrics: [
          summarise('session: connect → response.done or drop', 'ms', outcomes.map((o) => o.ms), outcomes.length / runSeconds),
          summarise('event-loop delay, median of each 250 ms interval', 'ms', lagP50),
          summarise('event-loop delay, worst of each 250 ms interval', 'ms', lagMax),
          summarise('server RSS, sampled every 250 ms', 'MiB', samples.map((s) => s.rssMiB)),
          single('RSS growth per session, 2nd half (Theil-Sen)', 'MiB/session', ts.slope),
          single('RSS growth per session, 2nd half (OLS)', 'MiB/session', ols.slope),
          single('sessions failed', 'count', failed.length),
          single('worker slots used after all sockets closed', 'count', drained.slotsUsed),
          single('sessions pending or active after all sockets closed', 'count', drained.liveSessions),
        ],
        notes: [
          ...rows.map(([name, value]) => `${name}: ${value}`),
          `RSS is read from /proc after each completed session; the slope is fitted over sessions ${half[0]?.x ?? '-'}..${half.at(-1)?.x ?? '-'}.`,
          `Longest event-loop stalls (interval max, when, sessions done by then): ${worstStalls(lag)}.`,
          'Event-loop delay comes from prom-client (monitorEventLoopDelay, 10 ms resolution, about 25 samples per 250 ms interval): an idle loop reads about 10 ms, so 10 ms is no delay at all. Typical is the median of the intervals\' medians; p99 is the p99 of the intervals\' worst samples (an upper bound of the p99 of all samples); max is the worst sample of the run.',
          'One run regardless of --runs. SOAK_SESSIONS, SOAK_CONCURRENCY and SOAK_IMAGE_EVERY change the run; MALLOC_ARENA_MAX passes through to the server.',
        ],
      };
    } catch (err) {
      throw new Error(`${(err as Error).message.slice(0, 500)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  },
};

/** One session; never throws: a failure is an outcome with its reason. */
async function oneSession(url: string, key: string, i: number): Promise<Outcome> {
  const images = i % IMAGE_EVERY === 0;
  const dropped = i % DROP_EVERY === 1;
  const t0 = performance.now();
  let c: RealtimeTestClient | null = null;
  try {
    c = await RealtimeTestClient.connect(url, { key, query: 'model=gpt-realtime' });
    const timeoutMs = SESSION_STEP_TIMEOUT_MS;
    await c.waitFor('session.created', { timeoutMs });
    if (images) {
      c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
      await c.waitFor('session.updated', { timeoutMs });
    }
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: USER_TEXT }] } });
    c.send({ type: 'response.create' });
    if (dropped) {
      await c.waitFor((e) => e.type === 'response.output_audio.delta' || e.type === 'error', { timeoutMs });
      throwOnError(c);
      c.ws.terminate();
      return { ok: true, dropped, images, ms: performance.now() - t0 };
    }
    const done = await c.waitFor((e) => e.type === 'response.done' || e.type === 'error', { timeoutMs });
    throwOnError(c);
    const status = (done.response as { status?: string } | undefined)?.status;
    if (status !== 'completed') throw new Error(`response.done status ${status}`);
    if (!c.events.some((e) => e.type === 'response.output_audio.delta')) throw new Error('no audio in the reply');
    if (images && !c.events.some((e) => e.type === 'response.output_image.delta')) throw new Error('no image in the reply');
    await c.close();
    return { ok: true, dropped, images, ms: performance.now() - t0 };
  } catch (err) {
    c?.ws.terminate();
    return { ok: false, dropped, images, ms: performance.now() - t0, reason: (err as Error).message.slice(0, 120) };
  }
}

function throwOnError(c: RealtimeTestClient): void {
  const error = c.events.find((e) => e.type === 'error');
  if (error) throw new Error(`error event ${error.error?.code ?? error.code}: ${error.error?.message ?? error.message}`);
}

function readRssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) / 1024;
}

/** Samples RSS and the event-loop delay every SAMPLE_INTERVAL_MS until stopped. */
function startSampler(url: string, pid: number, t0: number, samples: Sample[], lag: LagSample[], sessionsDone: () => number): { stop(): Promise<void> } {
  let inFlight: Promise<void> | null = null;
  const tick = () => {
    try {
      samples.push({ atMs: performance.now() - t0, rssMiB: readRssMiB(pid) });
    } catch {
      return; // the process is gone: the crash is reported by the run
    }
    if (inFlight) return; // a scrape still waiting is itself a sign of delay; the next one reads it
    inFlight = scrape(url)
      .then((m) => {
        const p50 = m.get('nodejs_eventloop_lag_p50_seconds');
        const max = m.get('nodejs_eventloop_lag_max_seconds');
        if (p50 !== undefined && max !== undefined) lag.push({ atMs: performance.now() - t0, sessionsDone: sessionsDone(), p50Ms: p50 * 1000, maxMs: max * 1000 });
      })
      .catch(() => undefined)
      .finally(() => (inFlight = null));
  };
  const timer = setInterval(tick, SAMPLE_INTERVAL_MS);
  return {
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}

/** GET /metrics, parsed into name{labels} → value. */
async function scrape(url: string): Promise<Map<string, number>> {
  const res = await fetch(`${url}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const values = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

/**
 * Polls /metrics until no worker slot is used and no session is pending or active, or
 * DRAIN_TIMEOUT_MS passes; returns what it last saw (non-zero is a leak).
 */
async function waitForDrain(url: string): Promise<{ slotsUsed: number; liveSessions: number; escaped: number | null }> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  for (;;) {
    const m = await scrape(url);
    const slotsUsed = m.get('avatar_worker_slots{state="used"}') ?? Number.NaN;
    const liveSessions = (m.get('avatar_sessions{status="pending"}') ?? 0) + (m.get('avatar_sessions{status="active"}') ?? 0);
    const escapedKeys = [...m.keys()].filter((k) => k.startsWith('avatar_process_escaped_errors{'));
    const escaped = escapedKeys.length ? escapedKeys.reduce((n, k) => n + (m.get(k) ?? 0), 0) : null;
    if ((slotsUsed === 0 && liveSessions === 0) || Date.now() > deadline) return { slotsUsed, liveSessions, escaped };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function waitForLog(server: ServerProcess, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!server.stdout().includes(text)) {
    if (Date.now() > deadline) throw new Error(`the server did not log '${text}' within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function countLogLines(output: string, level: string): number {
  return output.split('\n').filter((l) => l.includes(`"level":"${level}"`)).length;
}

function worstStalls(lag: LagSample[]): string {
  return [...lag]
    .sort((a, b) => b.maxMs - a.maxMs)
    .slice(0, 5)
    .map((l) => `${l.maxMs.toFixed(0)} ms at ${(l.atMs / 1000).toFixed(1)} s (${l.sessionsDone} done)`)
    .join(', ');
}

function tally(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([r, n]) => `${n}× ${r}`).join('; ');
}

function progress(outcomes: Outcome[], samples: Sample[], t0: number): string {
  const failed = outcomes.filter((o) => !o.ok).length;
  const rss = samples.at(-1)?.rssMiB ?? Number.NaN;
  return `${outcomes.length}/${SESSIONS} sessions, ${failed} failed, RSS ${rss.toFixed(1)} MiB, ${((performance.now() - t0) / 1000).toFixed(0)} s`;
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return n;
}

export default bench;
