/**
 * A bad network between a WebRTC viewer (Chromium) and the server, for tests and benchmarks: a
 * userspace UDP relay on loopback that loses (random and in bursts), delays with jitter,
 * reorders, duplicates and rate-limits (a token bucket with a byte-limited queue in front: the
 * bottleneck of a slow link) what passes through it, each direction on its own and seeded.
 *
 * Why a relay and not `tc netem` in a network namespace: the machines this runs on have kernels
 * without sch_netem ("Specified qdisc kind is unknown"), and tbf alone gives a rate cap but no
 * loss, jitter or reordering. A relay needs no root, works the same everywhere, shapes each
 * direction separately, can change its impairment during a call (connect clean, then impair), and
 * counts what it did (the test's ground truth).
 *
 * How the call goes through it: `routeCallThrough(page, link)` intercepts the page's
 * POST /v1/realtime/calls (playwright's page.route). The offer goes out with its candidate lines
 * removed, so the server cannot learn the browser's real address and check a direct path; the
 * answer comes back with its candidates replaced by one host candidate, the relay's browser-side
 * port. The browser's ICE checks reach the relay, which forwards them to the server's real
 * candidate from a socket of its own per browser address (a NAT mapping); the server takes that
 * socket as a peer-reflexive candidate and answers it, and the relay sends the answers back from
 * its browser-side port. Every packet of the call (STUN, DTLS, SRTP, SRTCP) takes that path.
 *
 * Invariants: each direction applies, in this order, loss (Gilbert-Elliott bursts, or random),
 * duplication, the rate cap's queue (tail drop when `queueBytes` are waiting), then delay with
 * jitter (independent per packet, so jitter alone reorders, as netem does) or, for `reorderPct`
 * of packets, no delay at all. The same seed and packet sequence give the same decisions.
 * close() stops every timer and socket.
 */
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { Rng } from '../random.js';

/** What one direction of the link does to the packets crossing it. All optional; {} is a clean wire. */
export interface Impairment {
  /** Random loss, percent of packets (used when `burst` is not set). */
  lossPct?: number;
  /**
   * Bursty loss (Gilbert-Elliott): each packet in the good state starts a burst with
   * probability `startPct`/100; a burst lasts `meanPackets` packets on average (geometric), and
   * loses `lossInBurstPct` of them (default 100).
   */
  burst?: { startPct: number; meanPackets: number; lossInBurstPct?: number };
  /** Fixed one-way delay, ms. */
  delayMs?: number;
  /** Each packet's delay is delayMs ± a uniform jitter of up to this, ms (never below 0). */
  jitterMs?: number;
  /** Percent of packets sent with no delay at all, ahead of the delayed ones (netem's reorder). */
  reorderPct?: number;
  /** Percent of packets sent twice. */
  duplicatePct?: number;
  /** Rate cap, kbit/s (token bucket): packets wait in a queue for their tokens. */
  rateKbps?: number;
  /** Bytes of the bucket (the burst that may pass at once); default 3000, two full packets. */
  bucketBytes?: number;
  /** Bytes that may wait in the rate cap's queue; more is dropped at the tail. Default 64 KiB. */
  queueBytes?: number;
  /**
   * Impair RTP only (SRTP media, whose first byte is 128..191 and second byte not an RTCP type):
   * STUN, DTLS (the data channel) and RTCP pass untouched. For outages that must take the media
   * and nothing else (ICE consent keeps the call up).
   */
  rtpOnly?: boolean;
}

export type Direction = 'toBrowser' | 'toServer';

export interface DirectionStats {
  /** Packets that entered the link. */
  packets: number;
  bytes: number;
  /** Lost by the loss model (random or burst). */
  lost: number;
  /** Dropped because the rate cap's queue was full. */
  queueDropped: number;
  duplicated: number;
  /** Sent ahead of the delayed packets (reorderPct). */
  reordered: number;
  delivered: number;
  deliveredBytes: number;
  /** Longest wait in the rate cap's queue, ms, and the waits of all packets that left it (for means over a window). */
  maxQueueMs: number;
  queueWaitMsTotal: number;
  queueLeft: number;
}

/** RTP (not RTCP) by RFC 5761/7983 demultiplexing: first byte 128..191, payload type outside 64..95. */
function isRtp(packet: Buffer): boolean {
  if (packet.length < 12 || packet[0]! < 128 || packet[0]! > 191) return false;
  const pt = packet[1]! & 0x7f;
  return pt < 64 || pt > 95;
}

/** One direction: the loss model, the rate cap's queue and the delay line, then `deliver`. */
class Shaper {
  impairment: Impairment = {};
  readonly stats: DirectionStats = { packets: 0, bytes: 0, lost: 0, queueDropped: 0, duplicated: 0, reordered: 0, delivered: 0, deliveredBytes: 0, maxQueueMs: 0, queueWaitMsTotal: 0, queueLeft: 0 };
  private readonly rand: () => number;
  private inBurst = false;
  private queue: Array<{ data: Buffer; send: (b: Buffer) => void; at: number }> = [];
  private queuedBytes = 0;
  private tokens = 0;
  private tokensAt = performance.now();
  private pumpTimer: NodeJS.Timeout | null = null;
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(seed: number) {
    const rng = new Rng(seed);
    this.rand = () => rng.next();
  }

  set(impairment: Impairment): void {
    this.impairment = { ...impairment };
    this.tokens = this.bucketBytes();
    this.tokensAt = performance.now();
    this.pump();
  }

  push(data: Buffer, send: (b: Buffer) => void): void {
    if (this.closed) return;
    const imp = this.impairment;
    if (imp.rtpOnly && !isRtp(data)) {
      send(data);
      return;
    }
    this.stats.packets++;
    this.stats.bytes += data.length;
    if (this.lose()) {
      this.stats.lost++;
      return;
    }
    const copies = imp.duplicatePct && this.rand() * 100 < imp.duplicatePct ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) this.enqueue(data, send);
  }

  close(): void {
    this.closed = true;
    if (this.pumpTimer) clearTimeout(this.pumpTimer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.queue = [];
  }

  private lose(): boolean {
    const { burst, lossPct } = this.impairment;
    if (burst) {
      if (this.inBurst) {
        if (this.rand() < 1 / Math.max(1, burst.meanPackets)) this.inBurst = false;
      } else if (this.rand() * 100 < burst.startPct) this.inBurst = true;
      return this.inBurst && this.rand() * 100 < (burst.lossInBurstPct ?? 100);
    }
    return !!lossPct && this.rand() * 100 < lossPct;
  }

  private bucketBytes(): number {
    return this.impairment.bucketBytes ?? 3000;
  }

  private enqueue(data: Buffer, send: (b: Buffer) => void): void {
    if (!this.impairment.rateKbps) {
      this.delay(data, send);
      return;
    }
    if (this.queuedBytes + data.length > (this.impairment.queueBytes ?? 65_536)) {
      this.stats.queueDropped++;
      return;
    }
    this.queue.push({ data, send, at: performance.now() });
    this.queuedBytes += data.length;
    this.pump();
  }

  /** Sends what the bucket's tokens allow, then waits for the tokens of the next packet. */
  private pump(): void {
    if (this.pumpTimer) {
      clearTimeout(this.pumpTimer);
      this.pumpTimer = null;
    }
    const rate = this.impairment.rateKbps;
    const now = performance.now();
    if (!rate) {
      // The cap was lifted: whatever waited goes now.
      for (const p of this.queue.splice(0)) this.delay(p.data, p.send);
      this.queuedBytes = 0;
      return;
    }
    const bytesPerMs = rate / 8;
    this.tokens = Math.min(this.bucketBytes(), this.tokens + (now - this.tokensAt) * bytesPerMs);
    this.tokensAt = now;
    while (this.queue.length > 0 && this.tokens >= Math.min(this.queue[0]!.data.length, this.bucketBytes())) {
      const p = this.queue.shift()!;
      this.tokens -= p.data.length;
      this.queuedBytes -= p.data.length;
      this.stats.maxQueueMs = Math.max(this.stats.maxQueueMs, now - p.at);
      this.stats.queueWaitMsTotal += now - p.at;
      this.stats.queueLeft++;
      this.delay(p.data, p.send);
    }
    if (this.queue.length > 0 && !this.closed) {
      const needed = Math.min(this.queue[0]!.data.length, this.bucketBytes()) - this.tokens;
      this.pumpTimer = setTimeout(() => this.pump(), Math.max(1, Math.ceil(needed / bytesPerMs)));
    }
  }

  private delay(data: Buffer, send: (b: Buffer) => void): void {
    const { delayMs = 0, jitterMs = 0, reorderPct = 0 } = this.impairment;
    let ms = delayMs + (jitterMs ? (this.rand() * 2 - 1) * jitterMs : 0);
    if (reorderPct && this.rand() * 100 < reorderPct) {
      ms = 0;
      this.stats.reordered++;
    }
    const deliver = () => {
      this.stats.delivered++;
      this.stats.deliveredBytes += data.length;
      send(data);
    };
    if (ms < 0.5) {
      deliver();
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      deliver();
    }, ms);
    this.timers.add(timer);
  }
}

export interface ImpairedLinkOptions {
  /** Seed of the loss, jitter, reorder and duplicate decisions (each direction derives its own). */
  seed?: number;
  toBrowser?: Impairment;
  toServer?: Impairment;
}

/** The relay. Start it, route a page's call through it, impair it whenever. */
export class ImpairedLink {
  private readonly browserSide: dgram.Socket;
  /** One server-side socket per browser address (the browser may check from several). */
  private readonly mappings = new Map<string, dgram.Socket>();
  private readonly shapers: Record<Direction, Shaper>;
  private server: { address: string; port: number } | null = null;
  private closed = false;

  private constructor(browserSide: dgram.Socket, options: ImpairedLinkOptions) {
    this.browserSide = browserSide;
    const seed = options.seed ?? 1;
    this.shapers = { toBrowser: new Shaper(seed * 2 + 1), toServer: new Shaper(seed * 2 + 2) };
    this.shapers.toBrowser.set(options.toBrowser ?? {});
    this.shapers.toServer.set(options.toServer ?? {});
    browserSide.on('message', (msg, from) => this.fromBrowser(msg, from));
  }

  static async start(options: ImpairedLinkOptions = {}): Promise<ImpairedLink> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    return new ImpairedLink(socket, options);
  }

  /** The browser-side port: the only candidate the browser learns. */
  get port(): number {
    return (this.browserSide.address() as AddressInfo).port;
  }

  /** Changes one direction's impairment from now on (packets already queued keep their fate). */
  set(direction: Direction, impairment: Impairment): void {
    this.shapers[direction].set(impairment);
  }

  stats(): Record<Direction, DirectionStats> {
    return { toBrowser: { ...this.shapers.toBrowser.stats }, toServer: { ...this.shapers.toServer.stats } };
  }

  /**
   * The server's answer with its candidates replaced by the relay's browser-side port; notes the
   * server's real UDP candidate (IPv4, loopback first) as where to forward.
   */
  rewriteAnswer(sdp: string): string {
    const eol = sdp.includes('\r\n') ? '\r\n' : '\n';
    const candidates = sdp
      .split(eol)
      .filter((l) => l.startsWith('a=candidate:'))
      .map((l) => l.split(' '))
      .filter((f) => f[2]?.toLowerCase() === 'udp' && /^\d+\.\d+\.\d+\.\d+$/.test(f[4] ?? ''))
      .map((f) => ({ address: f[4]!, port: Number(f[5]) }));
    const chosen = candidates.find((c) => c.address === '127.0.0.1') ?? candidates[0];
    if (!chosen) throw new Error('the answer has no IPv4 UDP candidate to relay to');
    this.server = chosen;
    const ours = `a=candidate:1 1 UDP 2122260223 127.0.0.1 ${this.port} typ host`;
    const out: string[] = [];
    let placed = false;
    for (const line of sdp.split(eol)) {
      if (line.startsWith('a=candidate:')) {
        // One candidate per media section of a bundled answer is enough; the first section's is used.
        if (!placed) out.push(ours);
        placed = true;
        continue;
      }
      out.push(line);
    }
    if (!placed) throw new Error('the answer has no candidate lines');
    return out.join(eol);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.shapers.toBrowser.close();
    this.shapers.toServer.close();
    this.browserSide.close();
    for (const s of this.mappings.values()) s.close();
    this.mappings.clear();
  }

  private fromBrowser(msg: Buffer, from: dgram.RemoteInfo): void {
    const server = this.server;
    if (!server || this.closed) return;
    const key = `${from.address}:${from.port}`;
    let upstream = this.mappings.get(key);
    if (!upstream) {
      const socket = dgram.createSocket('udp4');
      socket.bind(0, '127.0.0.1');
      socket.on('message', (reply) => {
        if (!this.closed) this.shapers.toBrowser.push(reply, (b) => this.browserSide.send(b, from.port, from.address));
      });
      socket.on('error', () => undefined);
      this.mappings.set(key, socket);
      upstream = socket;
    }
    const out = upstream;
    this.shapers.toServer.push(msg, (b) => {
      if (!this.closed) out.send(b, server.port, server.address);
    });
  }
}

/**
 * Sends the page's next WebRTC call through `link`: POST /v1/realtime/calls goes out with the
 * offer's candidate lines removed and its 201 answer comes back with `link.rewriteAnswer`.
 */
export async function routeCallThrough(page: Page, link: ImpairedLink): Promise<void> {
  await page.route('**/v1/realtime/calls', async (route) => {
    const request = route.request();
    if (request.method() !== 'POST') return route.continue();
    const body = request.postDataBuffer()?.toString('utf8') ?? '';
    const response = await route.fetch({ postData: body.replace(/a=candidate:[^\r\n]*\r?\n/g, '') });
    const text = await response.text();
    await route.fulfill({ response, body: response.status() === 201 ? link.rewriteAnswer(text) : text });
  });
}

/** What the viewer's browser says about the call's received streams (getStats, cumulative). */
export interface ViewerStats {
  at: number;
  video: {
    framesDecoded: number;
    framesDropped: number;
    keyFramesDecoded: number;
    freezeCount: number;
    totalFreezesDurationS: number;
    pliCount: number;
    firCount: number;
    nackCount: number;
    packetsReceived: number;
    packetsLost: number;
    bytesReceived: number;
    jitterBufferDelayS: number;
    jitterBufferEmittedCount: number;
    width: number;
    height: number;
  } | null;
  audio: {
    packetsReceived: number;
    packetsLost: number;
    totalSamplesReceived: number;
    concealedSamples: number;
    silentConcealedSamples: number;
    jitterBufferDelayS: number;
    jitterBufferEmittedCount: number;
    totalAudioEnergy: number;
  } | null;
  /** The selected candidate pair's current round trip, seconds. */
  rttS: number | null;
}

/** Reads ViewerStats from the harness page's `window.call.pc` (harness/clients/browser.ts). */
export function viewerStats(page: Page): Promise<ViewerStats> {
  return page.evaluate(`(async () => {
    const out = { at: performance.now(), video: null, audio: null, rttS: null };
    const pc = window.call && window.call.pc;
    if (!pc) return out;
    (await pc.getStats()).forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'video') out.video = {
        framesDecoded: s.framesDecoded || 0, framesDropped: s.framesDropped || 0, keyFramesDecoded: s.keyFramesDecoded || 0,
        freezeCount: s.freezeCount || 0, totalFreezesDurationS: s.totalFreezesDuration || 0,
        pliCount: s.pliCount || 0, firCount: s.firCount || 0, nackCount: s.nackCount || 0,
        packetsReceived: s.packetsReceived || 0, packetsLost: s.packetsLost || 0, bytesReceived: s.bytesReceived || 0,
        jitterBufferDelayS: s.jitterBufferDelay || 0, jitterBufferEmittedCount: s.jitterBufferEmittedCount || 0,
        width: s.frameWidth || 0, height: s.frameHeight || 0 };
      if (s.type === 'inbound-rtp' && s.kind === 'audio') out.audio = {
        packetsReceived: s.packetsReceived || 0, packetsLost: s.packetsLost || 0, totalSamplesReceived: s.totalSamplesReceived || 0,
        concealedSamples: s.concealedSamples || 0, silentConcealedSamples: s.silentConcealedSamples || 0,
        jitterBufferDelayS: s.jitterBufferDelay || 0, jitterBufferEmittedCount: s.jitterBufferEmittedCount || 0,
        totalAudioEnergy: s.totalAudioEnergy || 0 };
      if (s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded') out.rttS = s.currentRoundTripTime ?? null;
    });
    return out;
  })()`) as Promise<ViewerStats>;
}
