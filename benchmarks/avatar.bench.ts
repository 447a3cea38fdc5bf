/**
 * Avatar-only sessions (docs/avatar-mode.md) as a plugin sees them: the server in its own process
 * as `npm start` runs it (no model runs in these sessions, so there is no offline variant), the
 * agent's speech (espeak-ng, 16 kHz, sent at once in 20 ms appends as a TTS faster than real
 * time does) in, the played audio and the frames out.
 *
 *  - WebSocket, JPEG frames and raw I420 frames: first append sent → first audio delta of the
 *    segment, → first frame of the segment (its pts at the segment's start), → first lip-synced
 *    frame (the mouth box of the decoded frame darkening from its level at rest), all on the
 *    client's clock; the lips against the audio in the stream, per speech onset (the segment's
 *    first sound and each phrase after a pause, from the audio deltas' PCM;
 *    harness/measures/onsets.ts): mouth onset frame pts − speech onset pts; a clear after 1.5 s:
 *    clear sent → the played audio silent (cut pts − the playout position the client had seen) and
 *    → the mouth still (pts); wire bytes per second and what a client pays to get RGB from each
 *    (JPEG decode by libjpeg-turbo via sharp, I420 → RGB in JavaScript).
 *  - WebRTC in headless Chromium (playwright-core), the speech sent on the data channel: first
 *    append sent → first avatar audio played at the receiver, → mouth opening in the presented
 *    frames; mouth onset − speech onset at the receiver (A/V offset, per speech onset as above,
 *    the audio timed on the page's audio thread at its output); a clear → the receiver's audio
 *    silent, → the mouth still.
 *  - WebRTC with the face drawn by the page (video_render: client; headless Chromium, software
 *    WebGL): full-agent calls with the embedded models, two text turns each, the page drawing with
 *    the server's /playground/face.js on the audio track's playout clock; mouth onset in the drawn
 *    frames' mouth_open − the reply's first sound played (the call's first reply apart), and each
 *    phrase after a pause; how late frames were drawn against their sound's playout.
 *  - Capacity with light WebRTC callers (harness/clients/rtc-caller.ts): the most avatar-only calls
 *    all talking at once at 25 fps with no late frame, and CPU per call, beside full-agent calls
 *    (each asking for a long story again as soon as its reply is done: the embedded language model
 *    and voice, as `npm start` runs them) on the same server, the two stepped in turn; CPU of
 *    WebSocket avatar-only sessions talking, JPEG against I420. Then full-agent calls with a
 *    hosted model's stand-in (harness/servers/remote-stand-in.ts, first token at 200 ms) and the
 *    embedded voice, the face drawn by the server (H.264) against drawn by the client
 *    (video_render: client: the motion stream on the data channel, its events the frames), stepped
 *    in turn on one server.
 *
 * Environment: AVATAR_BENCH_CAPACITY=0 skips capacity (=embedded or =hosted runs only that server's); AVATAR_BENCH_WEBRTC=0 skips the browser;
 * AVATAR_BENCH_LATENCY=0 skips the latency runs (capacity alone).
 */
import sharp from 'sharp';
import WebSocket from 'ws';
import type { Page } from 'playwright-core';
import type { ServerProcess } from '../harness/servers/process.js';
import { DEFAULT_FACE_MOUTH_BOX, PLAYOUT_BLOCK_MS, callIn, chromiumAvailable, eventsIn, launchBrowser, type PageSamples, type TestBrowser } from '../harness/clients/browser.js';
import { speak, toPcm16 } from '../harness/measures/speech.js';
import { motionFrames, RealtimeTestClient, type MotionEvent } from '../harness/clients/realtime-client.js';
import type { RtcCaller } from '../harness/clients/rtc-caller.js';
import { describePacing, startRemoteStandIn, type RemotePacing } from '../harness/servers/remote-stand-in.js';
import { AGENT_TALKING, CAPACITY_SERVER_ENV, audioOnset, startAvatarCall, cpuSeconds, describeOnsets, idleMouth, mostCallsEach, pageOnsets, sleep, startSampledCall, until, waitForEvent, withServer, type CapacityLoad, type CapacityPoint, type MouthFrame } from './lib/call-measures.js';
import { greyOpening, lipOnsets, noOffsets, offsetsByKind, pcmBlocks, type OnsetOffsets, type OnsetPair, type SoundBlock } from '../harness/measures/onsets.js';
import { MOTION_PARAMS } from '../src/realtime/server-events.js';
import { median, summarise, type Benchmark, type Metric } from './lib/harness.js';

const AGENT_RATE = 16_000;
const CHUNK_MS = 20;
const FRAME_MS = 40;
const SEGMENTS_PER_RUN = 3;
const WEBRTC_CALLS_PER_RUN = 2;
/** Speech before the clear, ms: past the onset, well before the sentence ends. */
const CLEAR_AFTER_MS = 1500;
const IDLE_MS = 1500;
const WINDOW_S = 10;
const SENTENCES = [
  'Hello, I am the face of your agent, and I will read this sentence aloud for you.',
  'Good morning, the weather today is mild with a light breeze from the west.',
  'Your order has shipped and should arrive on Thursday before noon.',
];
const [BOX_X, BOX_Y, BOX_W, BOX_H] = DEFAULT_FACE_MOUTH_BOX;
/** The avatar's output audio (audio/pcm, the session's default: PCM16 at 24 kHz), cut in blocks of STREAM_BLOCK_MS for its speech onsets. */
const OUTPUT_RATE = 24_000;
const STREAM_BLOCK_MS = 10;
/** Frames in the stream before this long ahead of the segment's first audio are the face at rest. */
const REST_BEFORE_MS = 200;

interface Segment {
  firstAudio: number;
  firstFrame: number;
  firstLipFrame: number | null;
  /** Each speech onset of the segment with its mouth onset, on the stream's pts (harness/measures/onsets.ts). */
  onsets: OnsetPair[] | null;
  clearToSilent: number;
  clearToMouthStill: number | null;
}

type Mode = 'jpeg' | 'i420';

const bench: Benchmark = {
  name: 'avatar',
  description: 'Avatar-only sessions: agent audio in → first audio and first lip-synced frame out (WebSocket JPEG and I420, WebRTC), barge-in, CPU per session and capacity beside full-agent calls',
  async run(ctx) {
    const metrics: Metric[] = [];
    const notes: string[] = [];
    const ws: Record<Mode, Segment[]> = { jpeg: [], i420: [] };
    const wire: Record<Mode, number[]> = { jpeg: [], i420: [] };
    const decode: Record<Mode, number[]> = { jpeg: [], i420: [] };
    const rtc: RtcFigures = { heard: [], mouth: [], onsets: noOffsets(), started: [], silent: [], rest: [] };
    const drawnStream: number[] = [];
    const drawn: DrawnFigures = { firstReply: [], laterReplies: [], afterPause: [], missing: 0, lateMs: [], fps: [], idleFps: [] };
    const webrtc = process.env.AVATAR_BENCH_WEBRTC !== '0';
    if (webrtc && !chromiumAvailable()) throw new Error('/usr/bin/chromium is missing (bash src/cli/setup.sh installs it)');
    const latency = process.env.AVATAR_BENCH_LATENCY !== '0';
    for (let run = 0; latency && run < ctx.runs; run++) {
      await withServer({}, async (server) => {
        for (const mode of ['jpeg', 'i420'] as const) {
          const session = await WsAvatar.open(server, mode);
          try {
            await sleep(IDLE_MS);
            for (let i = 0; i < SEGMENTS_PER_RUN; i++) ws[mode].push(await session.segment(SENTENCES[i % SENTENCES.length]!));
            wire[mode].push(session.wireBytesPerS());
            decode[mode].push(...(await session.rgbCostMs()));
          } finally {
            session.close();
          }
          const last = ws[mode].at(-1)!;
          ctx.log(`run ${run + 1} ${mode}: first audio ${last.firstAudio.toFixed(0)} ms, first frame ${last.firstFrame.toFixed(0)} ms, lips ${last.firstLipFrame?.toFixed(0)} ms, clear → silent ${last.clearToSilent.toFixed(0)} ms`);
        }
        if (webrtc) {
          const browser = await launchBrowser({ microphone: 'silence' });
          try {
            for (let c = 0; c < WEBRTC_CALLS_PER_RUN; c++) await rtcCall(browser, server, rtc, ctx.log);
          } finally {
            await browser.close();
          }
          ctx.log(`run ${run + 1} webrtc: heard ${median(rtc.heard).toFixed(0)} ms, mouth ${median(rtc.mouth).toFixed(0)} ms, A/V at the first sound ${median(rtc.onsets.firstSound).toFixed(0)} ms, after a pause ${median(rtc.onsets.afterPause).toFixed(0)} ms`);
          await wsDrawnStream(server, drawnStream, ctx.log);
          const drawing = await launchBrowser({ microphone: 'silence', webgl: true });
          try {
            for (let c = 0; c < WEBRTC_CALLS_PER_RUN; c++) await rtcDrawnCall(drawing, server, drawn, ctx.log);
          } finally {
            await drawing.close();
          }
        }
      });
    }
    for (const mode of latency ? (['jpeg', 'i420'] as const) : []) {
      const s = ws[mode];
      const p = `[websocket ${mode}] `;
      const defined = (xs: Array<number | null>) => xs.filter((x): x is number => x !== null);
      const streamOnsets = s.reduce((into, x) => (x.onsets ? offsetsByKind(x.onsets, into) : into), noOffsets());
      notes.push(`[websocket ${mode}] speech onsets without a mouth onset from 400 ms before to 600 ms after: ${streamOnsets.missing}; bilabial starts left out: ${streamOnsets.bilabial}.`);
      metrics.push(
        summarise(`${p}first append sent → first audio delta of the segment`, 'ms', s.map((x) => x.firstAudio)),
        summarise(`${p}first append sent → first frame of the segment`, 'ms', s.map((x) => x.firstFrame)),
        summarise(`${p}first append sent → first lip-synced frame (mouth moving)`, 'ms', defined(s.map((x) => x.firstLipFrame))),
        summarise(`${p}mouth onset − the segment's first sound in the stream (pts)`, 'ms', streamOnsets.firstSound),
        summarise(`${p}mouth onset − a phrase's first sound after a pause in the stream (pts)`, 'ms', streamOnsets.afterPause),
        summarise(`${p}clear → audio silent (cut pts − playout position seen)`, 'ms', s.map((x) => x.clearToSilent)),
        summarise(`${p}clear → mouth still (pts of the cut → first frame after which the mouth box stops changing)`, 'ms', defined(s.map((x) => x.clearToMouthStill))),
        summarise(`${p}bytes per second on the wire (events and frames)`, 'MB/s', wire[mode]),
        summarise(`${p}client cost to get an RGB frame (${mode === 'jpeg' ? 'JPEG decode, libjpeg-turbo via sharp' : 'I420 → RGB in JavaScript'})`, 'ms', decode[mode]),
      );
    }
    if (latency && webrtc) {
      metrics.push(
        summarise('[webrtc] first append sent (data channel) → output_audio_buffer.started', 'ms', rtc.started),
        summarise('[webrtc] first append sent → first avatar audio played at the receiver', 'ms', rtc.heard),
        summarise('[webrtc] first append sent → mouth opening in the presented frames', 'ms', rtc.mouth),
        summarise("[webrtc] A/V offset at the receiver: mouth opening onset − the segment's first sound", 'ms', rtc.onsets.firstSound),
        summarise("[webrtc] A/V offset at the receiver: mouth opening onset − a phrase's first sound after a pause", 'ms', rtc.onsets.afterPause),
        summarise('[webrtc] clear sent → receiver audio silent', 'ms', rtc.silent),
        summarise('[webrtc] clear sent → mouth still in the presented frames', 'ms', rtc.rest),
        summarise("[webrtc, face drawn by the page] A/V at the receiver: mouth onset in the drawn frames − a call's first reply's first sound played", 'ms', drawn.firstReply),
        summarise("[websocket, face drawn by the client] the same turns in the stream: mouth onset − sound onset (pts, every onset)", 'ms', drawnStream),
        summarise("[webrtc, face drawn by the page] same, a later reply's first sound", 'ms', drawn.laterReplies),
        summarise("[webrtc, face drawn by the page] same, a phrase's first sound after a pause", 'ms', drawn.afterPause),
        summarise('[webrtc, face drawn by the page] a frame drawn after its sound was due (the audio playout clock)', 'ms', drawn.lateMs),
        summarise('[webrtc, face drawn by the page] frames drawn a second while talking (software WebGL on the server\'s 2 cores)', 'fps', drawn.fps),
        summarise('[webrtc, face drawn by the page] same, idle before the first turn (no model running)', 'fps', drawn.idleFps),
      );
      notes.push(`[webrtc, face drawn by the page] full-agent calls with the embedded models, ${DRAWN_TURNS.length} text turns each; speech onsets without a mouth onset from 400 ms before to 600 ms after: ${drawn.missing}. The drawn frame's time is its animation frame's (the canvas is composited on the next); the sound's is the page's AudioWorklet at the output.`);
    }
    let capacitySteps: CapacityPoint[] | undefined;
    if (process.env.AVATAR_BENCH_CAPACITY !== '0') {
      const capacity = await measureCapacity(ctx.log);
      metrics.push(...capacity.metrics);
      notes.push(...capacity.notes);
      capacitySteps = capacity.steps;
    }
    notes.push(
      'Speech: espeak-ng at 16 kHz (resampled by the server), appended in 20 ms pieces all at once; every segment is cleared 1.5 s after its first audio.',
      'Goal (issue 23): first frame within 60 ms of the first audio; more avatar-only sessions than full sessions.',
    );
    return {
      params: { runs: ctx.runs, segments_per_run: SEGMENTS_PER_RUN, webrtc_calls_per_run: webrtc ? WEBRTC_CALLS_PER_RUN : 0, video: '512x512 @ 25 fps', capacity_window_s: WINDOW_S, ...(capacitySteps ? { capacity_steps: capacitySteps } : {}) },
      metrics,
      notes,
    };
  },
};

/** The agent's speech for `text`: PCM16 at AGENT_RATE, as CHUNK_MS pieces of base64. */
function speechChunks(text: string): string[] {
  const pcm = toPcm16(speak(text, AGENT_RATE));
  const step = (AGENT_RATE * CHUNK_MS) / 1000;
  const out: string[] = [];
  for (let i = 0; i < pcm.length; i += step) {
    const part = pcm.subarray(i, Math.min(pcm.length, i + step));
    out.push(Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64'));
  }
  return out;
}

interface Seen {
  at: number;
  event: { type: string; [field: string]: any };
}

interface Frame {
  at: number;
  ptsMs: number;
  grey: number;
}

/** A WebSocket avatar-only session that timestamps what arrives and reads each frame's mouth box. */
class WsAvatar {
  readonly events: Seen[] = [];
  readonly frames: Frame[] = [];
  private bytes = 0;
  private readonly openedAt = performance.now();
  private readonly pendingGreys: Promise<void>[] = [];
  /** A few frames kept to time the client's RGB conversion. */
  private readonly samples: Buffer[] = [];

  private constructor(
    private readonly ws: WebSocket,
    private readonly mode: Mode,
    /** Light: frames are counted, not read (a capacity run's client must not take the server's CPU). */
    light: boolean,
  ) {
    ws.on('message', (data: Buffer, isBinary) => {
      const at = performance.now();
      this.bytes += data.length;
      if (light && (isBinary || data.subarray(0, 40).toString().includes('output_image'))) return;
      if (isBinary) return this.onRaw(at, data);
      const event = JSON.parse(data.toString()) as Seen['event'];
      if (event.type === 'response.output_image.delta') return this.onJpeg(at, event);
      this.events.push({ at, event: event.type === 'response.output_audio.delta' ? { type: event.type, pts_ms: event.pts_ms, segment_id: event.segment_id, silent: isSilent(event.delta as string), blocks: streamBlocks(event.delta as string, event.pts_ms as number) } : event });
    });
  }

  static async open(server: ServerProcess, mode: Mode, light = false): Promise<WsAvatar> {
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/realtime?intent=avatar&video_format=${mode}`, { headers: { Authorization: `Bearer ${server.bootstrapKey}` } });
    const session = new WsAvatar(ws, mode, light);
    await session.waitFor((e) => e.type === 'session.created');
    session.send({ type: 'session.update', session: { audio: { input: { format: { type: 'audio/pcm', rate: AGENT_RATE } } } } });
    await session.waitFor((e) => e.type === 'session.updated');
    return session;
  }

  send(event: Record<string, unknown>): number {
    this.ws.send(JSON.stringify(event));
    return performance.now();
  }

  close(): void {
    this.ws.close();
  }

  wireBytesPerS(): number {
    return this.bytes / 1e6 / ((performance.now() - this.openedAt) / 1000);
  }

  /** One segment: sent at once, cleared CLEAR_AFTER_MS after its audio starts; then idle again. */
  async segment(text: string): Promise<Segment> {
    const from = this.events.length;
    const chunks = speechChunks(text);
    const t0 = this.send({ type: 'output_audio_buffer.append', audio: chunks[0] });
    for (const audio of chunks.slice(1)) this.send({ type: 'output_audio_buffer.append', audio });
    this.send({ type: 'output_audio_buffer.commit' });
    const started = await this.waitFor((e) => e.type === 'output_audio_buffer.started', from);
    const startedPts = started.event.pts_ms as number;
    const firstAudio = await this.waitFor((e) => e.type === 'response.output_audio.delta' && e.segment_id !== null, from);
    await this.waitFor((e) => e.type === 'response.output_audio.delta' && e.pts_ms >= startedPts + CLEAR_AFTER_MS, from);
    const seenPts = this.lastAudioPts();
    this.send({ type: 'output_audio_buffer.clear' });
    const stopped = await this.waitFor((e) => e.type === 'output_audio_buffer.stopped', from);
    const cutPts = startedPts + (stopped.event.played_ms as number);
    await this.waitFor((e) => e.type === 'response.output_audio.delta' && e.pts_ms >= cutPts + 1000, from);
    await Promise.all(this.pendingGreys.splice(0));
    const frames = this.frames.filter((f) => f.ptsMs > startedPts - IDLE_MS);
    const firstFrame = frames.find((f) => f.ptsMs >= startedPts)!;
    const grey = greyOpening(frames.map((f) => ({ t: f.ptsMs, grey: f.grey })), startedPts - IDLE_MS, startedPts - REST_BEFORE_MS);
    const blocks = this.events.slice(from).flatMap((e): SoundBlock[] => (e.event.type === 'response.output_audio.delta' ? e.event.blocks : []));
    const onsets = grey === null ? null : lipOnsets(blocks, STREAM_BLOCK_MS, startedPts - REST_BEFORE_MS, grey.series, grey.closedMax, grey.openMin);
    const onsetPts = onsets?.find((p) => p.kind === 'first sound')?.mouthAt ?? null;
    const onsetFrame = onsetPts === null ? null : frames.find((f) => f.ptsMs === onsetPts)!;
    const rest = mouthStill(frames.map((f) => ({ t: f.ptsMs, grey: f.grey })), startedPts, cutPts);
    const silentFrom = this.events.slice(from).find((s) => s.event.type === 'response.output_audio.delta' && s.event.pts_ms >= seenPts && s.event.silent);
    await sleep(IDLE_MS);
    return {
      firstAudio: firstAudio.at - t0,
      firstFrame: firstFrame.at - t0,
      firstLipFrame: onsetFrame ? onsetFrame.at - t0 : null,
      onsets,
      clearToSilent: (silentFrom?.event.pts_ms ?? cutPts) - (seenPts + FRAME_MS),
      clearToMouthStill: rest === null ? null : rest - cutPts,
    };
  }

  /** What it costs this client to turn a received frame into RGB, ms per frame. */
  async rgbCostMs(): Promise<number[]> {
    const out: number[] = [];
    for (const frame of this.samples) {
      const t = performance.now();
      if (this.mode === 'jpeg') await sharp(frame).raw().toBuffer();
      else i420ToRgb(frame.subarray(24), frame.readUInt16LE(8), frame.readUInt16LE(10));
      out.push(performance.now() - t);
    }
    return out;
  }

  private lastAudioPts(): number {
    for (let i = this.events.length - 1; i >= 0; i--) if (this.events[i]!.event.type === 'response.output_audio.delta') return this.events[i]!.event.pts_ms as number;
    return 0;
  }

  private onJpeg(at: number, event: Seen['event']): void {
    const jpeg = Buffer.from(event.delta as string, 'base64');
    if (this.samples.length < 20) this.samples.push(jpeg);
    const frame: Frame = { at, ptsMs: event.pts_ms as number, grey: 0 };
    this.frames.push(frame);
    this.pendingGreys.push(
      sharp(jpeg)
        .extract({ left: BOX_X, top: BOX_Y, width: BOX_W, height: BOX_H })
        .greyscale()
        .raw()
        .toBuffer()
        .then((px) => void (frame.grey = mean(px))),
    );
  }

  private onRaw(at: number, data: Buffer): void {
    if (this.samples.length < 20) this.samples.push(Buffer.from(data));
    const width = data.readUInt16LE(8);
    const y = data.subarray(24);
    let sum = 0;
    for (let row = BOX_Y; row < BOX_Y + BOX_H; row++) for (let col = BOX_X; col < BOX_X + BOX_W; col++) sum += y[row * width + col]!;
    // Limited-range luma to the 0..255 grey the JPEG path measures.
    const grey = ((sum / (BOX_W * BOX_H) - 16) * 255) / 219;
    this.frames.push({ at, ptsMs: Number(data.readBigUInt64LE(16)) / 1e6, grey });
  }

  async waitFor(pred: (e: Seen['event']) => boolean, from = 0, timeoutMs = 30_000): Promise<Seen> {
    const found = await until(
      async () => this.events.slice(from).find((s) => pred(s.event)) ?? null,
      (s) => s !== null,
      'an avatar event',
      timeoutMs,
    );
    return found!;
  }
}

/** A delta's PCM16 (OUTPUT_RATE) in blocks of STREAM_BLOCK_MS, each with its pts and RMS (full scale 1). */
function streamBlocks(base64: string, ptsMs: number): SoundBlock[] {
  const bytes = Buffer.from(base64, 'base64');
  const pcm = new Int16Array(bytes.length >> 1);
  for (let i = 0; i < pcm.length; i++) pcm[i] = bytes.readInt16LE(2 * i);
  return pcmBlocks(pcm, OUTPUT_RATE, ptsMs, STREAM_BLOCK_MS);
}

function isSilent(base64: string): boolean {
  return Buffer.from(base64, 'base64').every((b) => b === 0);
}

function mean(px: Buffer): number {
  let sum = 0;
  for (const v of px) sum += v;
  return sum / px.length;
}

/** BT.601 limited-range I420 → packed RGB, as a client without a native converter would do it. */
function i420ToRgb(planes: Buffer, width: number, height: number): Buffer {
  const rgb = Buffer.alloc(width * height * 3);
  const uOff = width * height;
  const vOff = uOff + (width / 2) * (height / 2);
  for (let row = 0; row < height; row++) {
    for (let col = 0; col < width; col++) {
      const c = 1.164 * (planes[row * width + col]! - 16);
      const ci = (row >> 1) * (width >> 1) + (col >> 1);
      const d = planes[uOff + ci]! - 128;
      const e = planes[vOff + ci]! - 128;
      const o = (row * width + col) * 3;
      rgb[o] = Math.max(0, Math.min(255, c + 1.596 * e));
      rgb[o + 1] = Math.max(0, Math.min(255, c - 0.392 * d - 0.813 * e));
      rgb[o + 2] = Math.max(0, Math.min(255, c + 2.017 * d));
    }
  }
  return rgb;
}

/**
 * The first frame from `cutT` on after which the mouth box stays still: three frame-to-frame
 * changes of its grey level in a row no larger than twice the largest change between the idle
 * frames before `onsetT` (plus half a grey level). Stillness, not a return to the idle grey: the
 * head keeps moving after a cut, and the box's grey drifts with it.
 */
function mouthStill(frames: MouthFrame[], onsetT: number, cutT: number): number | null {
  const idle = idleMouth(frames, onsetT);
  if (idle === null) return null;
  const idleStep = Math.max(...idle.slice(1).map((g, i) => Math.abs(g - idle[i]!)));
  const still = 2 * idleStep + 0.5;
  const after = frames.filter((f) => f.t >= cutT);
  for (let i = 0; i + 3 < after.length; i++) {
    if ([1, 2, 3].every((k) => Math.abs(after[i + k]!.grey - after[i + k - 1]!.grey) <= still)) return after[i]!.t;
  }
  return null;
}

interface RtcFigures {
  heard: number[];
  /** First append sent → the mouth onset paired with the first sound. */
  mouth: number[];
  /** Mouth onset − speech onset at the receiver, by kind (harness/measures/onsets.ts). */
  onsets: OnsetOffsets;
  started: number[];
  silent: number[];
  rest: number[];
}

async function rtcCall(browser: TestBrowser, server: ServerProcess, rtc: RtcFigures, log: (line: string) => void): Promise<void> {
  const page: Page = await browser.newPage();
  try {
    await startSampledCall(page, server, { type: 'avatar', audio: { input: { format: { type: 'audio/pcm', rate: AGENT_RATE } } } }, DEFAULT_FACE_MOUTH_BOX);
    await sleep(IDLE_MS);
    const from = (await page.evaluate(() => (globalThis as unknown as { call: { events: unknown[] } }).call.events.length)) as number;
    const chunks = speechChunks(SENTENCES[0]!);
    // 100 ms per data-channel message: fewer round trips into the page.
    const grouped: string[] = [];
    for (let i = 0; i < chunks.length; i += 5) grouped.push(joinBase64(chunks.slice(i, i + 5)));
    const t0 = await callIn<number>(page, 'send', { type: 'output_audio_buffer.append', audio: grouped[0] });
    for (const audio of grouped.slice(1)) await callIn(page, 'send', { type: 'output_audio_buffer.append', audio });
    await callIn(page, 'send', { type: 'output_audio_buffer.commit' });
    const startedEvent = await waitForEvent(page, 'output_audio_buffer.started', from);
    await sleep(CLEAR_AFTER_MS);
    const clearAt = await callIn<number>(page, 'send', { type: 'output_audio_buffer.clear' });
    await waitForEvent(page, 'output_audio_buffer.cleared', from);
    await sleep(1500);
    const s = await callIn<PageSamples>(page, 'takeSamples');
    rtc.started.push(startedEvent.at - t0);
    const heardAt = audioOnset(s, t0);
    if (heardAt !== null) {
      rtc.heard.push(heardAt - t0);
      // Onsets up to the clear (the cut's silence is no pause).
      const onsets = pageOnsets({ loud: s.loud.filter((b) => b.t < clearAt), frames: s.frames }, t0);
      log(`  webrtc onsets (mouth − sound, ${s.audioClock} clock): ${describeOnsets(onsets)}`);
      if (onsets) offsetsByKind(onsets, rtc.onsets);
      const mouthAt = onsets?.find((p) => p.kind === 'first sound')?.mouthAt ?? null;
      if (mouthAt !== null) rtc.mouth.push(mouthAt - t0);
      const lastLoud = s.loud.filter((b) => b.t > clearAt).at(-1);
      rtc.silent.push(lastLoud ? lastLoud.t - clearAt : 0);
      const rest = mouthStill(s.frames, heardAt, clearAt);
      if (rest !== null) rtc.rest.push(rest - clearAt);
    }
    await callIn(page, 'hangup');
  } finally {
    await page.close();
  }
}

/** A face the page draws: its mouth_open at or under this is closed, and an onset reaches half of DRAWN_OPEN_MIN within a few frames (onsets.ts). */
const DRAWN_CLOSED_MAX = 0.05;
const DRAWN_OPEN_MIN = 0.2;
const DRAWN_TURNS = ['Hello there, how are you today?', 'Tell me about the weather where you are.'];

interface DrawnFigures {
  /** Mouth onset − sound onset at the page, the call's first reply apart from its later ones. */
  firstReply: number[];
  laterReplies: number[];
  afterPause: number[];
  missing: number;
  /** How late after its due time (its sound's playout) each drawn frame was drawn, ms. */
  lateMs: number[];
  /** Frames drawn a second while the avatar talked, and while it was idle before the first turn (the server's models not running). */
  fps: number[];
  idleFps: number[];
}

/**
 * A full-agent call (the embedded models, as `npm start` runs them) whose face the page draws:
 * `video_render: "client"`, no video track, the page importing the server's /playground/face.js
 * and drawing with drawFaceOnCall on the audio track's playout clock. Each of DRAWN_TURNS is a text
 * turn on the data channel; its reply's played audio (the page's AudioWorklet, at the output) is
 * paired with the drawn frames' mouth_open (harness/measures/onsets.ts): the reply's first sound
 * and each phrase after a pause.
 */
async function rtcDrawnCall(browser: TestBrowser, server: ServerProcess, drawn: DrawnFigures, log: (line: string) => void): Promise<void> {
  const page: Page = await browser.newPage();
  try {
    await startAvatarCall(page, server, { video_render: 'client' }, { video: false, microphone: 'synth', faceModule: `${server.url}/playground/face.js` });
    await waitForEvent(page, 'session.created', 0);
    await until(() => page.evaluate(() => (globalThis as unknown as { call: { face: { frames: number } | null } }).call.face?.frames ?? 0), (n) => n > 10, 'the face drawn by the page');
    await callIn(page, 'startSampling', null, null, true);
    await callIn<PageSamples>(page, 'takeSamples');
    await sleep(IDLE_MS);
    const idle = (await callIn<PageSamples>(page, 'takeSamples')).drawn;
    if (idle.length > 1) drawn.idleFps.push(drawnPerSecond(idle));
    for (const [turn, text] of DRAWN_TURNS.entries()) {
      await callIn<PageSamples>(page, 'takeSamples');
      const from = (await eventsIn(page)).length;
      await callIn(page, 'send', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
      const t0 = await callIn<number>(page, 'send', { type: 'response.create' });
      await waitForEvent(page, 'output_audio_buffer.stopped', from, 60_000);
      await sleep(300);
      const s = await callIn<PageSamples>(page, 'takeSamples');
      const series = s.drawn.filter((d) => d.at >= t0 - REST_MS_DRAWN).map((d) => ({ t: d.at, opening: d.mouthOpen }));
      const pairs = lipOnsets(s.loud.filter((b) => b.t >= t0), PLAYOUT_BLOCK_MS, t0, series, DRAWN_CLOSED_MAX, DRAWN_OPEN_MIN);
      log(`  webrtc, face drawn by the page, reply ${turn + 1} (mouth − sound, ${s.audioClock} clock): ${describeOnsets(pairs)}`);
      for (const p of pairs) {
        if (p.offsetMs === null) drawn.missing++;
        else if (p.kind === 'first sound') (turn === 0 ? drawn.firstReply : drawn.laterReplies).push(Math.round(p.offsetMs));
        else drawn.afterPause.push(Math.round(p.offsetMs));
      }
      const talking = s.drawn.filter((d) => d.at >= (pairs[0]?.soundAt ?? Infinity) && !Number.isNaN(d.lateMs));
      drawn.lateMs.push(...talking.map((d) => d.lateMs));
      if (talking.length > 1) drawn.fps.push(drawnPerSecond(talking));
    }
    await callIn(page, 'hangup');
  } finally {
    await page.close();
  }
}
/** Frames drawn a second over two or more drawn frames (their times, ms). */
function drawnPerSecond(frames: ReadonlyArray<{ at: number }>): number {
  return ((frames.length - 1) * 1000) / (frames.at(-1)!.at - frames[0]!.at);
}

/** Drawn frames this long before a turn is asked for are its mouth's rest. */
const REST_MS_DRAWN = 500;

/**
 * The same turns over WebSocket (video_render: client), measured in the stream itself: the motion
 * frames' mouth_open against the reply audio's PCM, both on pts (the audio deltas carry pts_ms
 * in such a session). What the page adds or takes away is the page's figure less this one.
 */
async function wsDrawnStream(server: ServerProcess, into: number[], log: (line: string) => void): Promise<void> {
  const c = await RealtimeTestClient.connect(server.url, { key: server.bootstrapKey, query: 'model=gpt-realtime&video_render=client' });
  try {
    await c.waitFor('session.created');
    await sleep(IDLE_MS);
    for (const [turn, text] of DRAWN_TURNS.entries()) {
      const from = c.events.length;
      c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
      c.send({ type: 'response.create' });
      await c.waitFor('response.done', { from, timeoutMs: 60_000 });
      // The frames up to the reply's audio's end (the stream runs ahead of real time).
      await sleep(1000);
      const audio = c.events.slice(from).filter((e) => e.type === 'response.output_audio.delta');
      if (audio.length === 0) continue;
      const blocks = audio.flatMap((e) => {
        const pcm = Buffer.from(String(e.delta), 'base64');
        return pcmBlocks(new Int16Array(pcm.buffer, pcm.byteOffset, pcm.byteLength / 2), OUTPUT_RATE, Number(e.pts_ms), STREAM_BLOCK_MS);
      });
      const firstPts = Number(audio[0]!.pts_ms);
      const motion = c.events.slice(from).filter((e) => e.type === 'output_motion.delta') as unknown as MotionEvent[];
      const series = motionFrames(motion)
        .filter((f) => f.pts_ms >= firstPts - REST_MS_DRAWN)
        .map((f) => ({ t: f.pts_ms, opening: f.params[MOUTH_OPEN_INDEX]! / 1000 }));
      const pairs = lipOnsets(blocks, STREAM_BLOCK_MS, firstPts - REST_MS_DRAWN, series, DRAWN_CLOSED_MAX, DRAWN_OPEN_MIN);
      log(`  websocket, face drawn by the client, reply ${turn + 1} (mouth − sound in the stream, pts): ${describeOnsets(pairs)}`);
      into.push(...pairs.filter((p) => p.offsetMs !== null).map((p) => Math.round(p.offsetMs!)));
    }
  } finally {
    await c.close();
  }
}
/** Where mouth_open is among a motion frame's numbers (the server's MOTION_PARAMS). */
const MOUTH_OPEN_INDEX = MOTION_PARAMS.indexOf('mouth_open');

function joinBase64(parts: string[]): string {
  return Buffer.concat(parts.map((p) => Buffer.from(p, 'base64'))).toString('base64');
}

/** Avatar-only calls, talking: every call keeps about a second of the agent's speech queued, in segments of a sentence. */
const AVATAR_TALKING: CapacityLoad = {
  session: { type: 'avatar', audio: { input: { format: { type: 'audio/pcm', rate: AGENT_RATE } } } },
  start(callers: RtcCaller[]) {
    const sentence = speechChunks(SENTENCES[1]!);
    const perTick = 1000 / CHUNK_MS / 4; // 250 ms of speech every 250 ms
    const next = new Map<RtcCaller, number>(callers.map((c) => [c, 0]));
    const feed = () => {
      for (const c of callers) {
        let at = next.get(c)!;
        for (let i = 0; i < perTick; i++, at++) {
          if (at === sentence.length) {
            c.send({ type: 'output_audio_buffer.commit' });
            at = 0;
          }
          c.send({ type: 'output_audio_buffer.append', audio: sentence[at] });
        }
        next.set(c, at);
      }
    };
    feed();
    feed();
    feed();
    feed(); // a second ahead
    const timer = setInterval(feed, 250);
    return () => clearInterval(timer);
  },
};

async function measureCapacity(log: (line: string) => void): Promise<{ metrics: Metric[]; notes: string[]; steps: CapacityPoint[] }> {
  const metrics: Metric[] = [];
  const notes: string[] = [];
  const steps: CapacityPoint[] = [];
  const which = process.env.AVATAR_BENCH_CAPACITY ?? 'both';
  // As `npm start` runs: the full agents' replies come from the embedded language model and voice.
  if (which !== 'hosted') await withServer(
    {},
    async (server) => {
      // Stepped in turn, so that a drift in this VM's speed (a third between two runs here) hits both alike.
      const both = await mostCallsEach(server, { 'avatar-only': AVATAR_TALKING, 'full agent': AGENT_TALKING }, [1, 4, 6, 8, 10, 12, 14, 16, 20], WINDOW_S, (line) => log(`capacity ${line}`));
      const avatar = both['avatar-only']!;
      const agent = both['full agent']!;
      const wsCpu: Record<Mode, number> = { jpeg: await wsCpuPerSession(server, 'jpeg', 4), i420: await wsCpuPerSession(server, 'i420', 4) };
      metrics.push(
        summarise('most avatar-only calls talking at once at 25 fps, no late frame (WebRTC, H.264 + Opus)', 'calls', [avatar.most]),
        summarise('most full-agent calls talking at once at 25 fps, no late frame (same server: embedded Qwen 0.5B and Piper)', 'calls', [agent.most]),
        summarise('server CPU per avatar-only call talking (WebRTC)', '% of a core', avatar.cpuPerCall === null ? [] : [avatar.cpuPerCall]),
        summarise('server CPU per full-agent call talking (WebRTC)', '% of a core', agent.cpuPerCall === null ? [] : [agent.cpuPerCall]),
        summarise('server CPU per avatar-only WebSocket session talking, JPEG frames (4 at once)', '% of a core', [wsCpu.jpeg]),
        summarise('server CPU per avatar-only WebSocket session talking, I420 frames (4 at once)', '% of a core', [wsCpu.i420]),
      );
      notes.push(`Capacity, avatar-only calls all talking: ${avatar.steps.join('; ')}.`);
      notes.push(`Capacity, full-agent calls all talking (back-to-back replies): ${agent.steps.join('; ')}.`);
      steps.push(...avatar.points, ...agent.points);
    },
    CAPACITY_SERVER_ENV,
  );
  // A production deployment: the model hosted (its stand-in on loopback), the voice and the face here.
  if (which === 'embedded') return { metrics, notes, steps };
  const remote = await startRemoteStandIn(REMOTE_PACING);
  try {
    await withServer(
      { LLM_PROVIDER: 'openai', LLM_BASE_URL: remote.server.baseUrl },
      async (server) => {
        const drawnHere: CapacityLoad = { ...AGENT_TALKING, session: { ...AGENT_TALKING.session, video_render: 'client' } };
        const both = await mostCallsEach(server, { 'server-drawn': AGENT_TALKING, 'client-drawn': drawnHere }, [1, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48], WINDOW_S, (line) => log(`capacity (hosted model) ${line}`), 2);
        const server_ = both['server-drawn']!;
        const client = both['client-drawn']!;
        metrics.push(
          summarise(`most full-agent calls talking at once in real time, hosted model (${describePacing(REMOTE_PACING)}) and embedded voice, face drawn by the server (H.264)`, 'calls', [server_.most]),
          summarise('same, face drawn by the client (video_render: client, the motion stream)', 'calls', [client.most]),
          summarise('server CPU per full-agent call talking, hosted model, face drawn by the server', '% of a core', server_.cpuPerCall === null ? [] : [server_.cpuPerCall]),
          summarise('server CPU per full-agent call talking, hosted model, face drawn by the client', '% of a core', client.cpuPerCall === null ? [] : [client.cpuPerCall]),
        );
        notes.push(`Capacity with a hosted model (${describePacing(REMOTE_PACING)}), face drawn by the server: ${server_.steps.join('; ')}.`);
        notes.push(`Capacity with a hosted model, face drawn by the client: ${client.steps.join('; ')}.`);
        steps.push(...server_.points.map((p) => ({ ...p, load: 'hosted model, server-drawn' })), ...client.points.map((p) => ({ ...p, load: 'hosted model, client-drawn' })));
      },
      CAPACITY_SERVER_ENV,
    );
  } finally {
    await remote.server.close();
  }
  return { metrics, notes, steps };
}

/** The hosted model's stand-in in the capacity runs: the 200 ms to the first token. */
const REMOTE_PACING: RemotePacing = { firstTokenMs: 200, tokensPerS: 60 };

/** Server CPU per WebSocket avatar-only session, `n` at once, all talking, over WINDOW_S. */
async function wsCpuPerSession(server: ServerProcess, mode: Mode, n: number): Promise<number> {
  const sessions: WsAvatar[] = [];
  try {
    for (let i = 0; i < n; i++) sessions.push(await WsAvatar.open(server, mode, true));
    const sentence = speechChunks(SENTENCES[2]!);
    const feed = setInterval(() => {
      for (const s of sessions) for (let i = 0; i < 50; i++) s.send({ type: 'output_audio_buffer.append', audio: sentence[i % sentence.length] });
    }, 1000);
    await sleep(2000);
    const cpu0 = cpuSeconds(server.child.pid!);
    const t0 = performance.now();
    await sleep(WINDOW_S * 1000);
    const pct = ((cpuSeconds(server.child.pid!) - cpu0) / ((performance.now() - t0) / 1000)) * 100;
    clearInterval(feed);
    return pct / n;
  } finally {
    for (const s of sessions) s.close();
    await sleep(1000);
  }
}

export default bench;
