/**
 * The soak benchmark's call mode (SOAK_MODE=call): one WebRTC call held for a long time (default
 * an hour) against the real server process as `npm start` runs it, with its embedded models
 * (SOAK_CALL_LLM=offline: the offline responder instead, to see the server alone):
 * headless Chromium (harness/clients/browser.ts) decodes the avatar's H.264 and Opus, and asks for
 * a spoken reply every SOAK_CALL_REPLY_EVERY_S. Every SOAK_CALL_SAMPLE_S: the server's RSS
 * (/proc/<pid>/status), its open file descriptors (/proc/<pid>/fd), and the A/V offset at the
 * receiver over a 3 s window taken while the avatar is silent between replies (a frame's time
 * from its last packet to the screen, median over the window, minus the audio's jitter-buffer
 * delay over the same window: both streams leave the server together, so this is how far the
 * picture trails the sound; taken in silence because the receiver's buffers settle differently
 * while a reply starts), plus the frames decoded and freezes since the last sample. The series
 * goes into the result file (params.series).
 *
 * Reported: the slopes over time (Theil-Sen over the second half, OLS beside it) of RSS (MiB/h),
 * descriptors (per hour) and A/V offset (ms/h): flat is good; start, end and extremes of each;
 * replies asked and completed; frames decoded and freezes; after hang-up, the descriptors and
 * slots left (the call's own must all be back).
 *
 * Environment: SOAK_CALL_MINUTES (default 60), SOAK_CALL_SAMPLE_S (default 15),
 * SOAK_CALL_REPLY_EVERY_S (default 30), SOAK_CALL_LLM (default: the embedded model; `offline`).
 */
import fs from 'node:fs';
import type { Page } from 'playwright-core';
import { callIn, chromiumAvailable, DEFAULT_FACE_MOUTH_BOX, launchBrowser, type PageSamples } from '../../harness/clients/browser.js';
import { viewerStats, type ViewerStats } from '../../harness/clients/impaired-link.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { tempDir } from '../../harness/servers/server.js';
import { olsSlope, secondHalf, theilSenSlope, type Point } from '../../harness/measures/slope.js';
import { sleep, startAvatarCall, until } from './call-measures.js';
import { median, summarise, type BenchContext, type BenchOutput, type Metric } from './harness.js';

const MINUTES = positiveNumber('SOAK_CALL_MINUTES', 60);
const SAMPLE_S = positiveNumber('SOAK_CALL_SAMPLE_S', 15);
const REPLY_EVERY_S = positiveNumber('SOAK_CALL_REPLY_EVERY_S', 30);
const OFFLINE = process.env.SOAK_CALL_LLM === 'offline';
/** The A/V window of each sample. */
const AV_WINDOW_MS = 3000;
const WARM_UP_TIMEOUT_MS = 180_000;

interface CallSample {
  atS: number;
  rssMiB: number;
  fds: number;
  avOffsetMs: number | null;
  fps: number;
  freezes: number;
}

export const CALL_SOAK_DESCRIPTION = `one WebRTC call held ${MINUTES} min with a reply every ${REPLY_EVERY_S} s: server RSS, file descriptors and receiver A/V offset over time (slopes)`;

export async function runCallSoak(ctx: BenchContext): Promise<BenchOutput> {
  if (!chromiumAvailable()) throw new Error('/usr/bin/chromium is missing (bash src/cli/setup.sh installs it)');
  const dataDir = tempDir('avatar-soak-call-');
  const server = await spawnServer({ DATA_DIR: dataDir, ...(OFFLINE ? { LLM_PROVIDER: 'offline' } : {}), PRELOAD_MODELS: 'true', RATE_LIMIT_PER_MINUTE: '0', LOG_LEVEL: 'info' });
  const pid = server.child.pid as number;
  let crashed: string | null = null;
  void server.exited.then((code) => (crashed = `the server exited (code ${code}) during the call soak`));
  const browser = await launchBrowser({ microphone: 'silence' });
  try {
    await waitForLog(server, 'models warmed up', WARM_UP_TIMEOUT_MS);
    const fdsIdle = countFds(pid);
    const page = await browser.newPage();
    await startAvatarCall(page, server, { type: 'realtime', audio: { input: { turn_detection: null } } });
    await until(() => viewerStats(page), (s) => (s.video?.framesDecoded ?? 0) > 10, 'the first frames', 30_000);
    const t0 = performance.now();
    const endAt = t0 + MINUTES * 60_000;
    const samples: CallSample[] = [];
    let asked = 0;
    let nextReplyAt = t0;
    let nextSampleAt = t0;
    let previous = await viewerStats(page);
    while (performance.now() < endAt) {
      if (crashed) throw new Error(crashed);
      const now = performance.now();
      if (now >= nextReplyAt) {
        asked++;
        await callIn(page, 'send', { type: 'response.create', response: { instructions: 'Say something kind.' } });
        nextReplyAt += REPLY_EVERY_S * 1000;
      }
      if (now >= nextSampleAt) {
        await until(() => speaking(page), (on) => !on, 'the avatar to finish its reply', 20_000).catch(() => undefined);
        const { offsetMs, stats } = await avOffset(page);
        const seconds = (stats.at - previous.at) / 1000;
        samples.push({
          atS: (performance.now() - t0) / 1000,
          rssMiB: readRssMiB(pid),
          fds: countFds(pid),
          avOffsetMs: offsetMs,
          fps: seconds > 0 ? (stats.video!.framesDecoded - previous.video!.framesDecoded) / seconds : 0,
          freezes: stats.video!.freezeCount - previous.video!.freezeCount,
        });
        previous = stats;
        const s = samples.at(-1)!;
        if (samples.length % Math.max(1, Math.round(60 / SAMPLE_S)) === 0) ctx.log(`${(s.atS / 60).toFixed(1)} min: RSS ${s.rssMiB.toFixed(1)} MiB, ${s.fds} fds, A/V ${s.avOffsetMs?.toFixed(0) ?? '-'} ms, ${s.fps.toFixed(1)} fps`);
        nextSampleAt += SAMPLE_S * 1000;
      }
      await sleep(Math.max(50, Math.min(nextReplyAt, nextSampleAt) - performance.now()));
    }
    const completed = await page.evaluate(`window.call.events.filter((e) => e.type === 'response.done').length`) as number;
    const errorEvents = (await page.evaluate(`window.call.events.filter((e) => e.type === 'error').map((e) => e.error && e.error.code + ': ' + e.error.message)`)) as string[];
    const errors = errorEvents.length;
    for (const e of errorEvents.slice(0, 5)) console.log(`  error event: ${e}`);
    const final = await viewerStats(page);
    await callIn(page, 'hangup');
    await page.close();
    // The call's sockets and pipelines must all be given back once it has ended.
    let fdsAfter = countFds(pid);
    for (let waited = 0; fdsAfter > fdsIdle && waited < 10_000; waited += 250) {
      await sleep(250);
      fdsAfter = countFds(pid);
    }
    const slots = await slotsUsed(server.url);
    if (crashed) throw new Error(crashed);
    return report(ctx, samples, { asked, completed, errors, fdsIdle, fdsAfter, slots, final });
  } catch (err) {
    throw new Error(`${(err as Error).message.slice(0, 500)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
  } finally {
    await browser.close();
    server.child.kill('SIGTERM');
    await server.exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Whether the avatar is speaking (output_audio_buffer.started not yet stopped or cleared). */
async function speaking(page: Page): Promise<boolean> {
  return (await page.evaluate(`(() => { const t = window.call.events.map((e) => e.type); const n = (x) => t.filter((y) => y === x).length; return n('output_audio_buffer.started') > n('output_audio_buffer.stopped') + n('output_audio_buffer.cleared'); })()`)) as boolean;
}

/** The receiver's A/V offset over AV_WINDOW_MS (see the header), and its stats at the end. */
async function avOffset(page: Page): Promise<{ offsetMs: number | null; stats: ViewerStats }> {
  const before = await viewerStats(page);
  await callIn(page, 'startSampling', DEFAULT_FACE_MOUTH_BOX);
  await sleep(AV_WINDOW_MS);
  const taken = await callIn<PageSamples>(page, 'takeSamples');
  await callIn(page, 'stopSampling');
  const after = await viewerStats(page);
  const delays = taken.frames.filter((f) => f.receivedAt > 0).map((f) => f.t - f.receivedAt);
  const emitted = after.audio!.jitterBufferEmittedCount - before.audio!.jitterBufferEmittedCount;
  const audioMs = emitted > 0 ? ((after.audio!.jitterBufferDelayS - before.audio!.jitterBufferDelayS) / emitted) * 1000 : null;
  return { offsetMs: delays.length >= 10 && audioMs !== null ? median(delays) - audioMs : null, stats: after };
}

function report(
  ctx: BenchContext,
  samples: CallSample[],
  end: { asked: number; completed: number; errors: number; fdsIdle: number; fdsAfter: number; slots: number | null; final: ViewerStats },
): BenchOutput {
  const series = (f: (s: CallSample) => number | null): Point[] => samples.flatMap((s) => (f(s) === null ? [] : [{ x: s.atS / 3600, y: f(s)! }]));
  const fit = (points: Point[]) => ({ ts: theilSenSlope(secondHalf(points)).slope, ols: olsSlope(secondHalf(points)).slope });
  const rss = series((s) => s.rssMiB);
  const fds = series((s) => s.fds);
  const av = series((s) => s.avOffsetMs);
  const [rssFit, fdFit, avFit] = [fit(rss), fit(fds), fit(av)];
  const span = (points: Point[], digits: number) => (points.length ? `${points[0]!.y.toFixed(digits)} → ${points.at(-1)!.y.toFixed(digits)} (min ${Math.min(...points.map((p) => p.y)).toFixed(digits)}, max ${Math.max(...points.map((p) => p.y)).toFixed(digits)})` : '-');
  const minutes = samples.length ? samples.at(-1)!.atS / 60 : 0;
  const rows: Array<[string, string]> = [
    ['call held', `${minutes.toFixed(1)} min, ${samples.length} samples every ${SAMPLE_S} s`],
    ['replies asked / completed / error events', `${end.asked} / ${end.completed} / ${end.errors}`],
    ['RSS slope, 2nd half (Theil-Sen / OLS)', `${rssFit.ts.toFixed(2)} / ${rssFit.ols.toFixed(2)} MiB/h`],
    ['RSS start → end', `${span(rss, 1)} MiB`],
    ['open fds slope, 2nd half (Theil-Sen / OLS)', `${fdFit.ts.toFixed(2)} / ${fdFit.ols.toFixed(2)} per hour`],
    ['open fds start → end', span(fds, 0)],
    ['A/V offset slope, 2nd half (Theil-Sen / OLS)', `${avFit.ts.toFixed(1)} / ${avFit.ols.toFixed(1)} ms/h`],
    ['A/V offset start → end (positive: the picture trails)', `${span(av, 0)} ms`],
    ['frames decoded, freezes (whole call)', `${end.final.video?.framesDecoded ?? 0}, ${end.final.video?.freezeCount ?? 0} (${(end.final.video?.totalFreezesDurationS ?? 0).toFixed(1)} s)`],
    ['fds before the call / after hang-up', `${end.fdsIdle} / ${end.fdsAfter}`],
    ['worker slots used after hang-up', end.slots === null ? 'metric not exported' : String(end.slots)],
  ];
  ctx.log('');
  ctx.log('| call soak | result |');
  ctx.log('|---|---|');
  for (const [name, value] of rows) ctx.log(`| ${name} | ${value} |`);
  const single = (name: string, unit: string, value: number): Metric => summarise(name, unit, [value]);
  return {
    params: {
      mode: 'call',
      minutes: MINUTES,
      sample_s: SAMPLE_S,
      reply_every_s: REPLY_EVERY_S,
      av_window_ms: AV_WINDOW_MS,
      video: '512x512 H.264 @ 25 fps',
      llm: OFFLINE ? 'offline responder' : 'embedded (npm start)',
      runs: 1,
      series: samples.map((s) => ({ t_s: Math.round(s.atS), rss_mib: Number(s.rssMiB.toFixed(1)), fds: s.fds, av_ms: s.avOffsetMs === null ? null : Math.round(s.avOffsetMs), fps: Number(s.fps.toFixed(1)), freezes: s.freezes })),
    },
    metrics: [
      summarise('server RSS over the call', 'MiB', rss.map((p) => p.y)),
      summarise('server open file descriptors over the call', 'count', fds.map((p) => p.y)),
      summarise('A/V offset at the receiver (picture behind sound)', 'ms', av.map((p) => p.y)),
      summarise('decoded fps per sample interval', 'fps', samples.map((s) => s.fps)),
      single('RSS slope, 2nd half (Theil-Sen)', 'MiB/h', rssFit.ts),
      single('open fds slope, 2nd half (Theil-Sen)', 'fds/h', fdFit.ts),
      single('A/V offset slope, 2nd half (Theil-Sen)', 'ms/h', avFit.ts),
      single('replies completed', 'count', end.completed),
      single('fds after hang-up minus before the call', 'count', end.fdsAfter - end.fdsIdle),
    ],
    notes: [
      ...rows.map(([name, value]) => `${name}: ${value}`),
      'Slopes are fitted over the second half of the samples (time in hours), Theil-Sen deciding, OLS beside it (see harness/measures/slope.ts). A short run (SOAK_CALL_MINUTES) shows the method, not an hour\'s slope.',
      'SOAK_MODE=call selects this mode; SOAK_CALL_MINUTES, SOAK_CALL_SAMPLE_S and SOAK_CALL_REPLY_EVERY_S change the run. One run regardless of --runs.',
    ],
  };
}

function readRssMiB(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb[1]) / 1024;
}

function countFds(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

async function slotsUsed(url: string): Promise<number | null> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('avatar_worker_slots{state="used"}'));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : null;
}

async function waitForLog(server: ServerProcess, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!server.stdout().includes(text)) {
    if (Date.now() > deadline) throw new Error(`the server did not log '${text}' within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

function positiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`);
  return n;
}
