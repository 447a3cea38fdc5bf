/**
 * What the call benchmarks (webrtc, avatar, endpoint) share: a server of their own, waiting on a
 * page's events, the onsets of the avatar's audio and mouth in a browser's samples
 * (harness/measures/onsets.ts), the server's CPU and resident memory, and capacity steps of light
 * WebRTC callers (harness/clients/rtc-caller.ts) under a given load.
 *
 * CPU and memory are the server's whole process tree as /proc shows it (the process the bench
 * started and every process under it; `npm start` runs one node process whose model workers are
 * threads, but a model run as a child process would count too): a figure for a process the bench
 * did not start cannot be read.
 */
import fs from 'node:fs';
import ndc from 'node-datachannel';
import type { Page } from 'playwright-core';
import { spawnServer, waitWarm, type ServerProcess } from '../../harness/servers/process.js';
import { tempDir } from '../../harness/servers/server.js';
import { callIn, eventsIn, PLAYOUT_BLOCK_MS, type CallStartResult, type PageSamples } from '../../harness/clients/browser.js';
import { greyOpening, lipOnsets, type OnsetPair } from '../../harness/measures/onsets.js';
import { frameTiming, RtcCaller } from '../../harness/clients/rtc-caller.js';

/** One frame at 25 fps: a frame later than this against its stream's clock is late. */
const FRAME_MS = 40;

export /** Runs `body` with a server of its own (as `npm start` runs it, plus `env`), warmed up; stops it after. */
async function withServer(env: Record<string, string>, body: (server: ServerProcess) => Promise<void>, extra: Record<string, string> = {}): Promise<void> {
  const server = await spawnServer({ DATA_DIR: tempDir('avatar-bench-'), PRELOAD_MODELS: 'true', ...env, ...extra });
  try {
    await waitWarm(server);
    await body(server);
  } catch (err) {
    throw new Error(`${(err as Error).message.slice(0, 500)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
}


/**
 * Calls `server` from the page as a WebRTC client does (multipart offer: Opus both ways, H.264
 * video, the `oai-events` channel) with `session`; throws unless the call is created (201).
 */
export async function startAvatarCall(page: Page, server: Pick<ServerProcess, 'url' | 'bootstrapKey'>, session: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<CallStartResult> {
  const started = await callIn<CallStartResult>(page, 'start', {
    baseUrl: server.url,
    key: server.bootstrapKey,
    form: 'multipart',
    audio: true,
    video: true,
    videoCodec: 'H264',
    channel: 'oai-events',
    session,
    ...extra,
  });
  if (started.status !== 201) throw new Error(`call refused: ${started.status} ${started.answer.slice(0, 200)}`);
  return started;
}

/**
 * A call from the harness page (H.264, Opus from a silent Web Audio microphone, the `oai-events`
 * channel) with `session`: waits for session.created, samples the mouth box of each presented
 * frame from then on, and resolves once the first frame is shown (its samples say when).
 */
export async function startSampledCall(page: Page, server: ServerProcess, session: Record<string, unknown>, mouthBox: readonly number[]): Promise<{ started: CallStartResult; first: PageSamples }> {
  const started = await startAvatarCall(page, server, session, { microphone: 'synth' });
  await waitForEvent(page, 'session.created', 0);
  await callIn(page, 'startSampling', mouthBox);
  const first = await until(() => callIn<PageSamples>(page, 'takeSamples'), (s) => s.firstFrameAt > 0, 'the first frame');
  return { started, first };
}

/** First block of played-out samples after `t0` louder than silence: the avatar is heard. */
export function audioOnset(s: PageSamples, t0: number): number | null {
  return s.loud.find((b) => b.t > t0)?.t ?? null;
}

/** A frame's time and the mean grey level of its mouth box. */
export interface MouthFrame {
  t: number;
  grey: number;
}

/** The idle face: the frames in the half second before this long ahead of a time. */
const IDLE_LEAD_MS = 150;

/**
 * The mouth box's grey levels in the half second before IDLE_LEAD_MS ahead of `at`: the idle
 * face before it; null when fewer than 8 frames were presented then.
 */
export function idleMouth(frames: MouthFrame[], at: number): number[] | null {
  const from = at - IDLE_LEAD_MS;
  const idle = frames.filter((f) => f.t <= from && f.t > from - 500).map((f) => f.grey);
  return idle.length < 8 ? null : idle;
}

/** The face at rest before a reply: the frames this long before it is asked for (nothing of the reply exists yet). */
const REST_MS = 1000;

/**
 * A turn's lip-sync onsets at a page (harness/measures/onsets.ts): every speech onset of the
 * played-out audio after `t0` (when the reply was asked for: the reply's first sound and each
 * phrase after a pause) paired with the onsets of the mouth box's darkening from its level in the
 * REST_MS before `restTo` (default `t0`). Null with fewer than 8 frames at rest. (This replaces a
 * measure that took its resting range from just before the sound and so could not see a picture
 * more than 150 ms early.) A voice turn's `t0` is the end of the user's speech, and the listening
 * face moves its head in the half second before the reply starts: a level taken before `t0` reads
 * that slow drift of the box's grey as an opening 300–400 ms early. Such a turn passes `restTo` =
 * when the reply started to leave the server (`output_audio_buffer.started`), before which no frame
 * of it can be on screen.
 */
export function pageOnsets(s: Pick<PageSamples, 'loud' | 'frames'>, t0: number, restTo = t0): OnsetPair[] | null {
  const grey = greyOpening(s.frames, restTo - REST_MS, restTo);
  return grey === null ? null : lipOnsets(s.loud, PLAYOUT_BLOCK_MS, t0, grey.series, grey.closedMax, grey.openMin);
}

/** A line for a log: each onset's kind and offset (or why none). */
export function describeOnsets(pairs: OnsetPair[] | null): string {
  if (pairs === null) return 'no resting frames before the turn';
  if (pairs.length === 0) return 'no speech onset';
  return pairs.map((p) => `${p.kind} ${p.offsetMs === null ? 'no mouth onset' : `${p.offsetMs > 0 ? '+' : ''}${Math.round(p.offsetMs)} ms${p.bilabial ? ' (bilabial)' : ''}`}`).join(', ');
}


export async function waitForEvent(page: Page, type: string, from: number, timeoutMs = 30_000): Promise<{ type: string; at: number; [field: string]: any }> {
  const events = await until(() => eventsIn(page), (ev) => ev.slice(from).some((e) => e.type === type), type, timeoutMs).catch(async (err: Error) => {
    const seen = (await eventsIn(page)).slice(from).map((e) => (e.type === 'error' ? `error(${JSON.stringify(e.error)})` : e.type));
    throw new Error(`${err.message}; events since: ${[...new Set(seen)].join(', ').slice(0, 600)}`);
  });
  return events.slice(from).find((e) => e.type === type)!;
}

export async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) the process has used, from /proc. */
export function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

/** `pid` and every live process under it (children, grandchildren …), from the parent pids in /proc/<pid>/stat. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // it exited while we looked
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const out: number[] = [];
  for (const queue = [pid]; queue.length > 0; ) {
    const p = queue.shift()!;
    out.push(p);
    queue.push(...(children.get(p) ?? []));
  }
  return out;
}

/** Resident memory (VmRSS) of `pid` and every process under it, MB (pages shared between them count once per process). */
export function residentMb(pid: number): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      kb += Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // it exited while we looked
    }
  }
  return kb / 1024;
}

/** CPU seconds used so far by `pid` and every live process under it, per pid. */
function treeCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const p of processTree(pid)) {
    try {
      out.set(p, cpuSeconds(p));
    } catch {
      // it exited while we looked
    }
  }
  return out;
}

/** CPU seconds the tree used between `before` (treeCpu) and now: a process started since counts whole, one gone since is lost. */
function treeCpuSince(pid: number, before: Map<number, number>): number {
  let s = 0;
  for (const [p, now] of treeCpu(pid)) s += now - (before.get(p) ?? 0);
  return s;
}

/**
 * The process tree of `pid` over the next `seconds`: its CPU (% of one core) and its mean resident
 * memory (MB, a sample each second, the last one at the end).
 */
async function treeUseOver(pid: number, seconds: number): Promise<{ cpuPct: number; rssMb: number }> {
  const cpu0 = treeCpu(pid);
  const t0 = performance.now();
  const rss: number[] = [];
  for (let s = 0; s < seconds; s++) {
    await sleep(Math.min(1, seconds - s) * 1000);
    rss.push(residentMb(pid));
  }
  return { cpuPct: (treeCpuSince(pid, cpu0) / ((performance.now() - t0) / 1000)) * 100, rssMb: rss.reduce((a, b) => a + b, 0) / rss.length };
}

/** The server's process tree with no session: its CPU (% of one core) over `seconds`, and its mean resident memory (MB, sampled each second). */
export function idleUse(server: ServerProcess, seconds: number): Promise<{ cpuPct: number; rssMb: number }> {
  return treeUseOver(server.child.pid!, seconds);
}

/**
 * Memory per session: the least-squares slope of resident memory over sessions, over `points`
 * (two or more); with one, the line from the idle baseline (0 sessions) to it; null with none.
 * MB per session.
 */
export function memoryPerSession(points: Array<Pick<CapacityPoint, 'sessions' | 'rss_mb'>>, idleMb: number | null): number | null {
  const pts = points.length === 1 && idleMb !== null ? [{ sessions: 0, rss_mb: idleMb }, points[0]!] : points;
  if (pts.length < 2) return null;
  const mx = pts.reduce((a, p) => a + p.sessions, 0) / pts.length;
  const my = pts.reduce((a, p) => a + p.rss_mb, 0) / pts.length;
  const sxx = pts.reduce((a, p) => a + (p.sessions - mx) ** 2, 0);
  if (sxx === 0) return null;
  return pts.reduce((a, p) => a + (p.sessions - mx) * (p.rss_mb - my), 0) / sxx;
}


/**
 * What the calls of a capacity step do: the session they open, and the load started on them once
 * they are all connected (returns how to stop it).
 */
export interface CapacityLoad {
  session: Record<string, unknown>;
  start(callers: RtcCaller[]): () => void;
}

export interface CapacityStep {
  fps: number;
  serverLate: number;
  receiverLate: number;
  worstMs: number;
  cpuPct: number;
  /** The server's resident memory (process tree), mean of a sample each second of the window, MB. */
  rssMb: number;
  /** Spoken replies or segments that began in the window (output_audio_buffer.started). */
  replies: number;
  /** Calls whose avatar was speaking at the end of the window. */
  speaking: number;
}

/**
 * `n` light callers (RtcCaller) at once under `load`: over `windowS` seconds after a 3 s settle,
 * the slowest call's frame rate, late frames by the server's render loop (its per-session
 * `media session closed` line) and at the receivers, the server's CPU (% of one core) and its
 * resident memory (MB), both of its whole process tree.
 */
export async function capacityStep(server: ServerProcess, n: number, load: CapacityLoad, windowS: number): Promise<CapacityStep> {
  const before = closedSummary(server);
  const callers: RtcCaller[] = [];
  try {
    for (let i = 0; i < n; i++) callers.push(await RtcCaller.call(server.url, server.bootstrapKey!, load.session));
    const stop = load.start(callers);
    await sleep(3000); // settle: first keyframes, first replies under way
    const replies0 = callers.reduce((a, c) => a + c.events.filter((e) => e.type === 'output_audio_buffer.started').length, 0);
    const t0 = performance.now();
    const { cpuPct, rssMb } = await treeUseOver(server.child.pid!, windowS);
    const t1 = performance.now();
    stop();
    const replies = callers.reduce((a, c) => a + c.events.filter((e) => e.type === 'output_audio_buffer.started').length, 0) - replies0;
    const speaking = callers.filter((c) => {
      const count = (type: string) => c.events.filter((e) => e.type === type).length;
      return count('output_audio_buffer.started') > count('output_audio_buffer.stopped') + count('output_audio_buffer.cleared');
    }).length;
    const timing = callers.map((c) => frameTiming(c.frames, t0, t1, FRAME_MS));
    for (const c of callers) c.close();
    // Each session logs its render loop's late frames when it closes.
    let serverLate = 0;
    let closedSessions = 0;
    for (let waited = 0; closedSessions < n && waited < 20_000; waited += 100) {
      await sleep(100);
      const now = closedSummary(server);
      closedSessions = now.sessions - before.sessions;
      serverLate = now.lateFrames - before.lateFrames;
    }
    return {
      fps: Math.min(...timing.map((t) => t.fps)),
      serverLate,
      receiverLate: timing.reduce((a, t) => a + t.late, 0),
      worstMs: Math.max(...timing.map((t) => t.worstMs)),
      cpuPct,
      rssMb,
      replies,
      speaking,
    };
  } finally {
    for (const c of callers) c.close();
    await sleep(1000);
  }
}

/** Full-agent calls, idle: the avatar listens (no turn detection, nothing said). */
export const AGENT_IDLE: CapacityLoad = { session: { type: 'realtime', audio: { input: { turn_detection: null } } }, start: () => () => undefined };

/** Full-agent calls, talking: each avatar answers again as soon as its last reply is done (a model and a voice run). */
export const AGENT_TALKING: CapacityLoad = {
  session: AGENT_IDLE.session,
  start(callers: RtcCaller[]) {
    const asked = new Map<RtcCaller, number>();
    const keepTalking = () => {
      for (const c of callers) {
        const done = c.events.filter((e) => e.type === 'response.done').length;
        if ((asked.get(c) ?? 0) > done) continue;
        asked.set(c, done + 1);
        c.send({ type: 'response.create', response: { instructions: 'Tell me a long story about the sea.' } });
      }
    };
    for (const c of callers) c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me a long story about the sea and the ships on it.' }] } });
    keepTalking();
    const timer = setInterval(keepTalking, 50);
    return () => clearInterval(timer);
  },
};

/** A capacity run's server: sessions limited by CPU only, and the log lines capacityStep reads. */
export const CAPACITY_SERVER_ENV = { WORKER_CAPACITY: '64', LOG_LEVEL: 'info' };

export interface MostCalls {
  /** The most calls that kept time (0: not even the first step). */
  most: number;
  /** Server CPU per call at that step, % of a core (null if no step kept time). */
  cpuPerCall: number | null;
  /** One line per step tried. */
  steps: string[];
  /** Each step tried, as the report draws it (capacity curves: sessions vs CPU and late frames). */
  points: CapacityPoint[];
}

/** One capacity step of one load, recorded in a result's `params.capacity_steps`. */
export interface CapacityPoint {
  load: string;
  sessions: number;
  /** Server CPU over the window, % of one core. */
  cpu_percent: number;
  /** Late frames in the window: the server's render loop and the receivers together. */
  late_frames: number;
  server_late_frames: number;
  receiver_late_frames: number;
  fps: number;
  /** Server resident memory (process tree) over the window, mean of a sample a second, MB. */
  rss_mb: number;
}

/** Whether a step kept real time: no late frame at the server or a receiver, and at least 24.5 fps on every call. */
export function inRealTime(p: Pick<CapacityPoint, 'late_frames' | 'fps'>): boolean {
  return p.late_frames === 0 && p.fps >= 24.5;
}

/**
 * Capacity steps of `ns` calls under each of `loads`, taken in turn at every step count (so that
 * the loads are compared under the same conditions, the machine's speed drifting as it may), each
 * load until one of its steps does not keep time (a late frame at the server or a receiver, or
 * under 24.5 fps): per load, the most calls that did, the server CPU per call there, and a line
 * per step. `beyond` more steps are taken after the first that did not keep time (they change
 * neither figure), so a capacity curve shows the load past its knee, unless the frame rate has
 * already fallen under 20 fps (clearly overloaded). At the end no caller is open, and
 * node-datachannel's cleanup() frees what closed peer connections still hold: without it the
 * bench's process never exits.
 */
export async function mostCallsEach(server: ServerProcess, loads: Record<string, CapacityLoad>, ns: number[], windowS: number, log: (line: string) => void, beyond = 0): Promise<Record<string, MostCalls>> {
  const out: Record<string, MostCalls & { stopped: boolean; failed: number }> = {};
  for (const name of Object.keys(loads)) out[name] = { most: 0, cpuPerCall: null, steps: [], points: [], stopped: false, failed: 0 };
  try {
    for (const n of ns) {
      for (const [name, load] of Object.entries(loads)) {
        const result = out[name]!;
        if (result.stopped) continue;
        const step = await capacityStep(server, n, load, windowS);
        result.steps.push(`${n}: ${step.fps.toFixed(1)} fps, ${step.serverLate} late (server), ${step.receiverLate} late (receiver, worst ${step.worstMs.toFixed(0)} ms), ${step.cpuPct.toFixed(0)} % CPU, ${step.rssMb.toFixed(0)} MB resident, ${step.speaking} speaking at the end, ${step.replies} began speaking in the window`);
        log(`${name} ${result.steps.at(-1)!}`);
        result.points.push({ load: name, sessions: n, cpu_percent: Math.round(step.cpuPct * 10) / 10, late_frames: step.serverLate + step.receiverLate, server_late_frames: step.serverLate, receiver_late_frames: step.receiverLate, fps: Math.round(step.fps * 10) / 10, rss_mb: Math.round(step.rssMb * 10) / 10 });
        if (!inRealTime({ late_frames: step.serverLate + step.receiverLate, fps: step.fps })) {
          result.failed++;
          result.stopped = result.failed > beyond || step.fps < 20;
        } else if (result.failed === 0) {
          result.most = n;
          result.cpuPerCall = step.cpuPct / n;
        }
      }
      if (Object.values(out).every((r) => r.stopped)) break;
    }
  } finally {
    ndc.cleanup(); // every caller is closed (capacityStep)
  }
  return out;
}

/** mostCallsEach for one load. */
export async function mostCalls(server: ServerProcess, load: CapacityLoad, ns: number[], windowS: number, log: (line: string) => void, beyond = 0): Promise<MostCalls> {
  return (await mostCallsEach(server, { calls: load }, ns, windowS, (line) => log(line.replace(/^calls /, '')), beyond))['calls']!;
}

/** Sessions that logged `media session closed` so far (stdout, or stderr with losses), and their late frames. */
export function closedSummary(server: ServerProcess): { sessions: number; lateFrames: number } {
  const lines = [...server.stdout().matchAll(/"msg":"media session closed[^"]*"[^\n]*"lateFrames":(\d+)/g)];
  return { sessions: lines.length, lateFrames: lines.reduce((a, m) => a + Number(m[1]), 0) };
}

