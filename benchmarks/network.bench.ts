/**
 * What a viewer on a bad network sees: headless Chromium calls the server (its own process, as
 * `npm start` runs it, with the offline responder so the avatar talks without a language model)
 * through the impaired link of the tests (harness/clients/impaired-link.ts: a userspace UDP relay;
 * this kernel has no netem), one fresh call per profile and run, the avatar talking throughout.
 *
 * Per profile, over NETWORK_BENCH_SECONDS (default 20) after NETWORK_BENCH_SETTLE_S (default 6) of
 * the impairment (the sender's rate control needs a few seconds to find a narrow link), from the
 * receiver's getStats: decoded frames per second, freezes (Chromium's freezeCount: a frame shown
 * late by more than max(3 x the mean frame duration, 150 ms)) and their total time, the video and
 * audio jitter-buffer delay (mean over the window), audio concealment (concealed / received
 * samples), received video bitrate, the viewer's PLIs and NACKs, packets lost as the viewer saw
 * them against those the link dropped (the difference is what NACK resends repaired); from the
 * link: the mean wait in the bottleneck queue and its drops.
 *
 * Environment: NETWORK_BENCH_PROFILES=clean,loss,... (a subset), NETWORK_BENCH_SECONDS,
 * NETWORK_BENCH_SETTLE_S.
 */
import type { Page } from 'playwright-core';
import { callIn, chromiumAvailable, launchBrowser, type TestBrowser } from '../harness/clients/browser.js';
import { ImpairedLink, routeCallThrough, viewerStats, type Impairment, type ViewerStats } from '../harness/clients/impaired-link.js';
import type { ServerProcess } from '../harness/servers/process.js';
import { sleep, startAvatarCall, until, withServer } from './lib/call-measures.js';
import { summarise, type Benchmark, type Metric } from './lib/harness.js';

const SECONDS = Number(process.env.NETWORK_BENCH_SECONDS ?? 20);
const SETTLE_S = Number(process.env.NETWORK_BENCH_SETTLE_S ?? 6);

interface Profile {
  name: string;
  label: string;
  size: '512x512' | '1280x720';
  toBrowser: Impairment;
  toServer: Impairment;
}

const JITTER: Impairment = { delayMs: 30, jitterMs: 20 };
const PROFILES: Profile[] = [
  { name: 'clean', label: 'no impairment (the relay alone)', size: '512x512', toBrowser: {}, toServer: {} },
  { name: 'loss3', label: '3% random loss, 30 ± 20 ms jitter, 2% reordered, 1% duplicated (both ways)', size: '512x512', toBrowser: { lossPct: 3, ...JITTER, reorderPct: 2, duplicatePct: 1 }, toServer: { lossPct: 3, ...JITTER } },
  { name: 'loss5', label: '5% random loss, 30 ± 20 ms jitter, 2% reordered (both ways)', size: '512x512', toBrowser: { lossPct: 5, ...JITTER, reorderPct: 2 }, toServer: { lossPct: 5, ...JITTER } },
  { name: 'burst', label: 'bursty loss (1% of packets start a burst of ~6 lost, about 5% in all), 30 ± 20 ms jitter', size: '512x512', toBrowser: { burst: { startPct: 1, meanPackets: 6 }, ...JITTER }, toServer: { lossPct: 1, ...JITTER } },
  { name: 'cap500', label: '500 kbit/s to the viewer, 64 KiB queue, 512x512', size: '512x512', toBrowser: { rateKbps: 500, queueBytes: 65_536 }, toServer: {} },
  { name: 'cap300-720p', label: '300 kbit/s to the viewer, 64 KiB queue, 1280x720 (the encoder starts at 1 Mbit/s)', size: '1280x720', toBrowser: { rateKbps: 300, queueBytes: 65_536 }, toServer: {} },
];

interface Seen {
  fps: number;
  freezes: number;
  freezeS: number;
  framesDecoded: number;
  videoBufferMs: number;
  audioBufferMs: number;
  concealedPct: number;
  kbps: number;
  pli: number;
  nack: number;
  viewerLost: number;
  linkLost: number;
  queueWaitMs: number;
  queueDropPct: number;
}

const bench: Benchmark = {
  name: 'network',
  description: 'a WebRTC viewer on an impaired link (loss, jitter, reordering, rate caps): fps, freezes, jitter buffer, audio concealment, PLI/NACK',
  async run(ctx) {
    if (!chromiumAvailable()) throw new Error('/usr/bin/chromium is missing (bash src/cli/setup.sh installs it)');
    const only = process.env.NETWORK_BENCH_PROFILES?.split(',');
    const profiles = PROFILES.filter((p) => !only || only.includes(p.name));
    const seen = new Map<string, Seen[]>(profiles.map((p) => [p.name, []]));
    await withServer({ LLM_PROVIDER: 'offline', RATE_LIMIT_PER_MINUTE: '0' }, async (server) => {
      const browser = await launchBrowser({ microphone: 'silence' });
      try {
        for (let run = 0; run < ctx.runs; run++) {
          for (const profile of profiles) {
            const s = await oneCall(browser, server, profile, run);
            seen.get(profile.name)!.push(s);
            ctx.log(`${profile.name} run ${run + 1}: ${s.fps.toFixed(1)} fps, ${s.freezes} freezes (${s.freezeS.toFixed(2)} s), video buffer ${s.videoBufferMs.toFixed(0)} ms, audio buffer ${s.audioBufferMs.toFixed(0)} ms, concealed ${s.concealedPct.toFixed(1)}%, ${s.kbps.toFixed(0)} kbit/s, PLI ${s.pli}, NACK ${s.nack}, lost ${s.viewerLost} at the viewer / ${s.linkLost} by the link, queue wait ${s.queueWaitMs.toFixed(0)} ms, queue drops ${s.queueDropPct.toFixed(1)}%`);
          }
        }
      } finally {
        await browser.close();
      }
    });
    const metrics: Metric[] = [];
    for (const profile of profiles) {
      const s = seen.get(profile.name)!;
      const p = `[${profile.name}] `;
      const pick = (f: (x: Seen) => number) => s.map(f);
      metrics.push(
        summarise(`${p}decoded frames per second`, 'fps', pick((x) => x.fps)),
        summarise(`${p}freezes in ${SECONDS} s`, 'count', pick((x) => x.freezes)),
        summarise(`${p}time frozen in ${SECONDS} s`, 's', pick((x) => x.freezeS)),
        summarise(`${p}video jitter-buffer delay`, 'ms', pick((x) => x.videoBufferMs)),
        summarise(`${p}audio jitter-buffer delay`, 'ms', pick((x) => x.audioBufferMs)),
        summarise(`${p}audio concealed`, '%', pick((x) => x.concealedPct)),
        summarise(`${p}video received`, 'kbit/s', pick((x) => x.kbps)),
        summarise(`${p}PLIs sent by the viewer`, 'count', pick((x) => x.pli)),
        summarise(`${p}NACKs sent by the viewer`, 'count', pick((x) => x.nack)),
        summarise(`${p}packets lost at the viewer (after resends)`, 'count', pick((x) => x.viewerLost)),
        summarise(`${p}packets dropped by the link (loss model)`, 'count', pick((x) => x.linkLost)),
        summarise(`${p}mean wait in the bottleneck queue`, 'ms', pick((x) => x.queueWaitMs)),
        summarise(`${p}dropped at the bottleneck queue`, '%', pick((x) => x.queueDropPct)),
      );
    }
    return {
      params: { seconds_measured: SECONDS, settle_s: SETTLE_S, runs: ctx.runs, codec: 'H.264', llm: 'offline responder', link: 'userspace UDP relay (harness/clients/impaired-link.ts)' },
      metrics,
      notes: [
        ...profiles.map((p) => `[${p.name}] ${p.label}.`),
        'Freezes are Chromium\'s freezeCount (a frame later than max(3 x mean frame duration, 150 ms)); jitter-buffer delays are jitterBufferDelay / jitterBufferEmittedCount over the window; concealment is concealedSamples / totalSamplesReceived over the window.',
        'Packets lost at the viewer are Chromium\'s packetsLost over the window (video), counted after NACK resends arrived; the link\'s drops are every packet the loss model took (audio, RTCP and STUN too).',
      ],
    };
  },
};

async function oneCall(browser: TestBrowser, server: ServerProcess, profile: Profile, run: number): Promise<Seen> {
  const link = await ImpairedLink.start({ seed: 100 + run });
  const page = await browser.newPage();
  let talking: NodeJS.Timeout | null = null;
  try {
    await routeCallThrough(page, link);
    await startAvatarCall(page, server, { type: 'realtime', output_size: profile.size, audio: { input: { turn_detection: null } } });
    await until(() => viewerStats(page), (s) => (s.video?.framesDecoded ?? 0) > 10, 'the first frames', 30_000);
    talking = keepTalking(page);
    await sleep(2000);
    link.set('toBrowser', profile.toBrowser);
    link.set('toServer', profile.toServer);
    await sleep(SETTLE_S * 1000);
    const l0 = link.stats().toBrowser;
    const first = await viewerStats(page);
    await sleep(SECONDS * 1000);
    const last = await viewerStats(page);
    const l1 = link.stats().toBrowser;
    return measure(first, last, l0, l1);
  } finally {
    if (talking) clearInterval(talking);
    await callIn(page, 'hangup').catch(() => undefined);
    await page.close();
    link.close();
  }
}

/** The avatar talks without pause: a new reply whenever the last one is done. */
function keepTalking(page: Page): NodeJS.Timeout {
  let asked = 0;
  const ask = async () => {
    const done = await page.evaluate(`window.call.events.filter((e) => e.type === 'response.done').length`).catch(() => asked) as number;
    if (done < asked) return;
    asked = done + 1;
    await callIn(page, 'send', { type: 'response.create', response: { instructions: 'Tell me a long story about the sea.' } }).catch(() => undefined);
  };
  void ask();
  return setInterval(() => void ask(), 500);
}

function measure(a: ViewerStats, b: ViewerStats, l0: ReturnType<ImpairedLink['stats']>['toBrowser'], l1: ReturnType<ImpairedLink['stats']>['toBrowser']): Seen {
  const va = a.video!;
  const vb = b.video!;
  const aa = a.audio!;
  const ab = b.audio!;
  const seconds = (b.at - a.at) / 1000;
  const perFrame = (delay: number, count: number) => (count > 0 ? (delay / count) * 1000 : 0);
  const offered = l1.packets - l0.packets;
  return {
    fps: (vb.framesDecoded - va.framesDecoded) / seconds,
    freezes: vb.freezeCount - va.freezeCount,
    freezeS: vb.totalFreezesDurationS - va.totalFreezesDurationS,
    framesDecoded: vb.framesDecoded - va.framesDecoded,
    videoBufferMs: perFrame(vb.jitterBufferDelayS - va.jitterBufferDelayS, vb.jitterBufferEmittedCount - va.jitterBufferEmittedCount),
    audioBufferMs: perFrame(ab.jitterBufferDelayS - aa.jitterBufferDelayS, ab.jitterBufferEmittedCount - aa.jitterBufferEmittedCount),
    concealedPct: ab.totalSamplesReceived > aa.totalSamplesReceived ? ((ab.concealedSamples - aa.concealedSamples) / (ab.totalSamplesReceived - aa.totalSamplesReceived)) * 100 : 100,
    kbps: ((vb.bytesReceived - va.bytesReceived) * 8) / seconds / 1000,
    pli: vb.pliCount - va.pliCount + vb.firCount - va.firCount,
    nack: vb.nackCount - va.nackCount,
    viewerLost: vb.packetsLost - va.packetsLost,
    linkLost: l1.lost - l0.lost,
    queueWaitMs: (l1.queueWaitMsTotal - l0.queueWaitMsTotal) / Math.max(1, l1.queueLeft - l0.queueLeft),
    queueDropPct: offered > 0 ? ((l1.queueDropped - l0.queueDropped) / offered) * 100 : 0,
  };
}

export default bench;
