/**
 * Headless Debian Chromium (playwright-core, /usr/bin/chromium, installed by setup) as a real
 * WebRTC client for tests and benchmarks. The page is served from a small local server of its own
 * (another origin than the avatar server, as a web app would be) and holds `window.call`, a client
 * that posts its offer to /v1/realtime/calls the ways real clients do (multipart, raw SDP, JSON)
 * or to /v1/live/sessions as GPT-Live clients do,
 * applies the answer, keeps every data-channel event, and reads what the browser decoded
 * (getStats, pixels of the video element, audio level).
 *
 * Flags: those ../shared/design.md lists for this machine (no sandbox as root, no GPU, no
 * background networking), plus fake media devices: the microphone plays Chromium's beeps (a
 * speaker the VAD hears every second), silence (`microphone: 'silence'`: a caller who says
 * nothing), or given speech and pauses (`microphone: {speech}`, looped).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { encodeWav16 } from '../../src/assets/audio-file.js';
import type { FaceLandmarks } from '../../src/media/face-registration.js';
import { chooseFrame, frameLandmarks } from '../../src/media/framing.js';
import { concatSamples } from '../measures/speech.js';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

export function chromiumAvailable(): boolean {
  return fs.existsSync(CHROMIUM_PATH);
}

export interface TestBrowser {
  browser: Browser;
  /** A fresh page at the harness origin, with `window.call` ready. */
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/**
 * What Chromium's fake microphone plays, looped: its beeps, silence, or these samples (PCM16 mono
 * 24 kHz; numbers in `speech` are seconds of silence), written to a WAV that close() removes.
 */
export type FakeMicrophone = 'beeps' | 'silence' | { speech: Array<Int16Array | number> };

/**
 * A mouth box of the default face, in pixels of the 512x512 frame the server shows it in (framed
 * head and shoulders, framing.ts): [x, y, width, height], from the mouth corners and the upper lip
 * down to the chin, with a quarter of the mouth's width around it for the jaw and head motion.
 */
export const DEFAULT_FACE_MOUTH_BOX = mouthBox(JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '../../test/fixtures/faces/default.landmarks.json'), 'utf8')) as FaceLandmarks, 512, 512);

function mouthBox(face: FaceLandmarks, width: number, height: number): [number, number, number, number] {
  const lm = frameLandmarks(face.landmarks, chooseFrame(face, width, height), width, height);
  const [left, right] = [Math.min(lm[61]![0], lm[291]![0]), Math.max(lm[61]![0], lm[291]![0])];
  const margin = (right - left) / 4;
  const top = lm[0]![1] - margin;
  const bottom = lm[152]![1] + margin / 4;
  return [Math.round(left - margin), Math.round(top), Math.round(right - left + 2 * margin), Math.round(bottom - top)];
}

/**
 * Chromium with the flags of this machine and a fake microphone (see FakeMicrophone). With
 * `askForMicrophone`, the page's microphone request is left to the (headless) browser, which
 * refuses it: a person who says no. With `webgl`, WebGL2 works (software: SwiftShader through
 * ANGLE), as on a person's machine; without it a page finds none (--disable-webgl), so the
 * playground falls back to the server's video.
 */
export async function launchChromium(options: { microphone?: FakeMicrophone; askForMicrophone?: boolean; webgl?: boolean } = {}): Promise<{ browser: Browser; close(): Promise<void> }> {
  const microphone = options.microphone ?? 'beeps';
  const args = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--use-fake-device-for-media-stream',
    '--autoplay-policy=no-user-gesture-required',
    // Loopback candidates: without this, Chromium hides host addresses behind mDNS names.
    '--disable-features=WebRtcHideLocalIpsWithMdns',
  ];
  if (!options.askForMicrophone) args.push('--use-fake-ui-for-media-stream');
  // Chromium 156 gives pages WebGL2 even with --disable-gpu; without `webgl` none is wanted.
  args.push(...(options.webgl ? ['--use-angle=swiftshader', '--enable-unsafe-swiftshader'] : ['--disable-webgl']));
  let tempDir: string | null = null;
  if (microphone !== 'beeps') {
    tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'avatar-mic-'));
    const wav = path.join(tempDir, 'microphone.wav');
    fs.writeFileSync(wav, encodeWav16(concatSamples((microphone === 'silence' ? [1] : microphone.speech).map((p) => (typeof p === 'number' ? new Int16Array(Math.round(p * 24_000)) : p))), 24_000));
    args.push(`--use-file-for-fake-audio-capture=${wav}`);
  }
  // playwright gives each launch a fresh, temporary profile of its own.
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args });
  return {
    browser,
    async close() {
      await browser.close();
      if (tempDir) fs.rmSync(tempDir, { recursive: true, force: true });
    },
  };
}

/**
 * Mean grey levels of a 16x8 grid over `box` (pixels of a 512x512 frame) of the frame `selector`
 * (a <video> or <canvas>) shows now; null before its first frame.
 */
export function frameCells(page: Page, selector: string, box: number[]): Promise<number[] | null> {
  return page.evaluate(`(${FRAME_CELLS})(${JSON.stringify(selector)}, ${JSON.stringify(box)})`) as Promise<number[] | null>;
}

/** Page-side source of frameCells (the tests' TypeScript has no DOM types). */
const FRAME_CELLS = `(selector, [x0, y0, w, h]) => {
  const source = document.querySelector(selector);
  if (!source || (source instanceof HTMLVideoElement && !source.videoWidth)) return null;
  const c = document.createElement('canvas');
  c.width = 512; c.height = 512;
  const g = c.getContext('2d', { willReadFrequently: true });
  g.drawImage(source, 0, 0, 512, 512);
  const d = g.getImageData(x0, y0, w, h).data;
  const cells = new Array(128).fill(0), counts = new Array(128).fill(0);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    const i = (y * w + x) * 4, k = Math.floor(y * 8 / h) * 16 + Math.floor(x * 16 / w);
    cells[k] += 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2]; counts[k]++;
  }
  return cells.map((v, k) => v / counts[k]);
}`;

/**
 * Waits until `expression` (page-side JavaScript) is truthy. Polls with page.evaluate, which a
 * page's Content-Security-Policy does not block (waitForFunction's string predicates need eval).
 */
export async function waitInPage(page: Page, expression: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Mean absolute change of a region between consecutive samples, over `samples` samples 80 ms apart. */
export async function regionMotion(page: Page, selector: string, box: number[], samples: number): Promise<number> {
  let previous: number[] | null = null;
  let total = 0;
  let n = 0;
  for (let i = 0; i < samples; i++) {
    const cells = await frameCells(page, selector, box);
    if (cells && previous) {
      total += cells.reduce((sum, v, k) => sum + Math.abs(v - previous![k]!), 0) / cells.length;
      n++;
    }
    previous = cells;
    await new Promise((r) => setTimeout(r, 80));
  }
  return n ? total / n : 0;
}

export async function launchBrowser(options: { microphone?: FakeMicrophone; webgl?: boolean } = {}): Promise<TestBrowser> {
  const { browser, close } = await launchChromium(options);
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(HARNESS_PAGE);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    browser,
    async newPage() {
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      return page;
    },
    async close() {
      await close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What `window.call.start()` takes. */
export interface CallStartOptions {
  baseUrl: string;
  key: string;
  /** How the offer is posted. */
  form: 'multipart' | 'sdp' | 'json' | 'live';
  /** The `session` config sent with it (multipart and JSON forms). */
  session?: Record<string, unknown>;
  audio: boolean;
  video: boolean;
  /** Restricts the video codecs the offer lists (setCodecPreferences). */
  videoCodec?: 'H264' | 'VP8';
  /** Data channel label; null for none. */
  channel: string | null;
  /**
   * Where the microphone track comes from: the (fake) capture device, or 'synth', a Web Audio
   * track that is silent until `window.call.speak()` plays speech into it at a known time.
   */
  microphone?: 'device' | 'synth';
  /**
   * The URL of the server's face module (`/playground/face.js`) for a call made with
   * `video_render: "client"`: the page draws the face with it on a canvas of its own, timed by the
   * audio track's playout (drawFaceOnCall), and takeSamples() hands over what it drew. Needs a
   * browser launched with `webgl`.
   */
  faceModule?: string;
}

/** The result of `window.call.start()`. */
export interface CallStartResult {
  status: number;
  answer: string;
  location: string | null;
  sessionId: string | null;
  contentType: string | null;
  postMs: number;
}

/** Blocks of PLAYOUT_BLOCK_MS in which the page measures the played-out audio's level. */
export const PLAYOUT_BLOCK_SAMPLES = 256;
export const PLAYOUT_BLOCK_MS = (PLAYOUT_BLOCK_SAMPLES / 48_000) * 1000;

/**
 * The page's AudioWorklet (audio thread): the RMS of every PLAYOUT_BLOCK_SAMPLES of its input,
 * posted with the context time of the block's first sample when over silence (0.002). A render
 * quantum without input (the track not flowing yet) counts as silent.
 */
const PLAYOUT_LEVEL = `class PlayoutLevel extends AudioWorkletProcessor {
  constructor() { super(); this.sum = 0; this.n = 0; this.start = 0; }
  process(inputs) {
    const x = inputs[0] && inputs[0][0];
    if (this.n === 0) this.start = currentTime;
    if (x) for (let i = 0; i < x.length; i++) this.sum += x[i] * x[i];
    this.n += 128;
    if (this.n >= ${PLAYOUT_BLOCK_SAMPLES}) {
      const rms = Math.sqrt(this.sum / this.n);
      if (rms > 0.002) this.port.postMessage({ time: this.start, rms });
      this.sum = 0; this.n = 0;
    }
    return true;
  }
}
registerProcessor('playout-level', PlayoutLevel);`;

const HARNESS_PAGE = `<!doctype html>
<html><body>
<video id="video" autoplay playsinline muted width="512" height="512"></video>
<canvas id="canvas" width="512" height="512"></canvas>
<script>
const call = {
  pc: null, dc: null, events: [], audioTrack: null, stream: new MediaStream(), answeredAt: 0, firstFrameAt: 0,
  synth: null, playout: null, samples: [], frames: [], loud: [], thumbs: [], sampler: null, audioClock: 'none', face: null,
  async start(o) {
    // A face the page draws (the session's video_render: client): the server's own module, imported as a third party's page does.
    const faceModule = o.faceModule ? await import(o.faceModule) : null;
    const pc = new RTCPeerConnection();
    this.pc = pc;
    if (o.audio) {
      let track;
      if (o.microphone === 'synth') {
        const ctx = new AudioContext({ sampleRate: 48000 });
        const dest = ctx.createMediaStreamDestination();
        // A constant zero keeps the track producing audio between utterances, as a microphone does.
        const floor = ctx.createConstantSource();
        floor.offset.value = 0;
        floor.connect(dest);
        floor.start();
        this.synth = { ctx, dest };
        track = dest.stream.getAudioTracks()[0];
      } else {
        track = (await navigator.mediaDevices.getUserMedia({ audio: true })).getAudioTracks()[0];
      }
      pc.addTransceiver(track, { direction: 'sendrecv' });
    }
    if (o.video) {
      const t = pc.addTransceiver('video', { direction: 'recvonly' });
      if (o.videoCodec) {
        const codecs = RTCRtpReceiver.getCapabilities('video').codecs.filter((c) => c.mimeType === 'video/' + o.videoCodec);
        t.setCodecPreferences(codecs);
      }
    }
    if (o.channel !== null) {
      const dc = pc.createDataChannel(o.channel, { ordered: true });
      this.dc = dc;
      dc.onmessage = (e) => { try { this.events.push({ at: performance.now(), ...JSON.parse(e.data) }); } catch { this.events.push({ type: '!unparsed', data: String(e.data).slice(0, 200) }); } };
    }
    if (faceModule) {
      const canvas = document.createElement('canvas');
      canvas.id = 'face';
      document.body.appendChild(canvas);
      this.face = faceModule.drawFaceOnCall(pc, this.dc, canvas, (why) => this.events.push({ type: '!face', why }));
    }
    pc.ontrack = (e) => {
      this.stream.addTrack(e.track);
      if (e.track.kind === 'video') {
        const v = document.getElementById('video');
        v.srcObject = new MediaStream([e.track]);
        v.requestVideoFrameCallback((now) => { this.firstFrameAt = now; });
      }
      if (e.track.kind === 'audio') {
        this.audioTrack = e.track;
        const a = new Audio();
        a.srcObject = new MediaStream([e.track]);
        a.play().catch(() => {});
        // The played-out level every 256 samples (5.3 ms), measured in an AudioWorklet on the
        // audio thread: each block's context time, turned into page time when it is output.
        const ctx = new AudioContext({ sampleRate: 48000 });
        const source = ctx.createMediaStreamSource(new MediaStream([e.track]));
        ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([${JSON.stringify(PLAYOUT_LEVEL)}], { type: 'text/javascript' }))).then(() => {
          const node = new AudioWorkletNode(ctx, 'playout-level');
          node.port.onmessage = (m) => {
            if (this.sampler) this.loud.push({ t: this.outputTime(ctx, m.data.time), rms: m.data.rms });
          };
          source.connect(node);
          node.connect(ctx.destination);
        });
        this.playout = ctx;
      }
    };
    await pc.setLocalDescription(await pc.createOffer());
    const sdp = pc.localDescription.sdp;
    let body, headers = { Authorization: 'Bearer ' + o.key };
    if (o.form === 'multipart') { body = new FormData(); body.set('sdp', sdp); if (o.session) body.set('session', JSON.stringify(o.session)); }
    else if (o.form === 'sdp') { body = sdp; headers['Content-Type'] = 'application/sdp'; }
    else if (o.form === 'live') { body = JSON.stringify({ session: o.session, transport: { type: 'webrtc', sdp } }); headers['Content-Type'] = 'application/json'; }
    else { body = JSON.stringify({ sdp, session: o.session }); headers['Content-Type'] = 'application/json'; }
    const t0 = performance.now();
    const res = await fetch(o.baseUrl + (o.form === 'live' ? '/v1/live/sessions' : '/v1/realtime/calls'), { method: 'POST', body, headers });
    let answer = await res.text();
    // GPT-Live answers JSON: {session: {id}, transport: {sdp}}.
    const live = o.form === 'live' && res.status === 201 ? JSON.parse(answer) : null;
    if (live) answer = live.transport.sdp;
    const postMs = performance.now() - t0;
    const result = { status: res.status, answer, location: res.headers.get('location'), sessionId: live ? live.session.id : res.headers.get('x-session-id'), contentType: res.headers.get('content-type'), postMs };
    if (res.status === 201) { await pc.setRemoteDescription({ type: 'answer', sdp: answer }); this.answeredAt = performance.now(); }
    return result;
  },
  /**
   * The page time (performance.now()) at which the sample of context time \`time\` (s) is output:
   * getOutputTimestamp() pairs the context time of the sample the output device renders now with
   * the page time it does (the output latency is inside that pair, not added again). Before the
   * output has started (performanceTime 0) the render clock plus outputLatency stands in, and
   * audioClock says so.
   */
  outputTime(ctx, time) {
    const ts = ctx.getOutputTimestamp();
    if (ts.performanceTime > 0) { this.audioClock = 'output'; return ts.performanceTime + (time - ts.contextTime) * 1000; }
    this.audioClock = 'render';
    return performance.now() + (time - ctx.currentTime + (ctx.outputLatency || 0)) * 1000;
  },
  /** Sends one event once the channel is open on this side (the server may see it open first); returns when it was sent (page ms). */
  async send(event) {
    if (this.dc.readyState === 'connecting') await new Promise((resolve, reject) => {
      this.dc.addEventListener('open', resolve, { once: true });
      setTimeout(() => reject(new Error('the data channel did not open within 20 s')), 20000);
    });
    this.dc.send(JSON.stringify(event));
    return performance.now();
  },
  types() { return this.events.map((e) => e.type); },
  /**
   * Plays speech (mono floats -1..1 at rateHz) into the 'synth' microphone; resolves when it has
   * played, with the page time its last sample went out (performance.now()).
   */
  speak(samples, rateHz) {
    const { ctx, dest } = this.synth;
    const buffer = ctx.createBuffer(1, samples.length, rateHz);
    buffer.copyToChannel(Float32Array.from(samples), 0);
    const src = ctx.createBufferSource();
    src.buffer = buffer;
    src.connect(dest);
    return new Promise((resolve) => { src.onended = () => resolve(performance.now()); src.start(); });
  },
  /**
   * Sampling for measurements: every 10 ms the received audio's energy and the decoded frame
   * count (getStats), every 256 played-out samples whether the received audio is audible, and on
   * every presented video frame the mouth box's mean grey level; with thumbs ({ everyMs, box:
   * [x, y, w, h], side, quality? }), a JPEG of that box of the frame at most every everyMs (a
   * strip of frames for a report; the whole frame every frame for a lip-sync measure: everyMs 0,
   * box 0,0,512,512). takeSamples() hands them over and clears them. With audioOnly, only the
   * played-out audio (a face the page draws has no video to sample, and the 10 ms getStats would
   * take the main thread it draws on).
   */
  startSampling(mouthBox, thumbs, audioOnly) {
    this.stopSampling();
    const v = document.getElementById('video'), c = document.getElementById('canvas'), g = c.getContext('2d', { willReadFrequently: true });
    const on = { stopped: false };
    if (audioOnly) { this.sampler = { on, timer: null }; return; }
    let lastThumb = -Infinity;
    const onFrame = (now, meta) => {
      if (on.stopped) return;
      g.drawImage(v, 0, 0, 512, 512);
      const d = g.getImageData(mouthBox[0], mouthBox[1], mouthBox[2], mouthBox[3]).data;
      let sum = 0;
      for (let i = 0; i < d.length; i += 4) sum += 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
      this.frames.push({ t: now, grey: sum / (d.length / 4), receivedAt: meta.receiveTime || 0 });
      if (thumbs && now - lastThumb >= thumbs.everyMs) {
        lastThumb = now;
        const t = document.createElement('canvas');
        t.width = t.height = thumbs.side;
        t.getContext('2d').drawImage(c, thumbs.box[0], thumbs.box[1], thumbs.box[2], thumbs.box[3], 0, 0, thumbs.side, thumbs.side);
        this.thumbs.push({ t: now, url: t.toDataURL('image/jpeg', thumbs.quality || 0.8) });
      }
      v.requestVideoFrameCallback(onFrame);
    };
    if (v.srcObject) v.requestVideoFrameCallback(onFrame);
    const last = { audio: [0, 0], video: [0, 0] };
    const timer = setInterval(async () => {
      const t = performance.now();
      const out = { t, energy: 0, frames: 0, audioBufferMs: 0, videoBufferMs: 0, audioBufferNowMs: null, videoBufferNowMs: null, statsAvMs: null };
      const playing = {};
      let outputDelayMs = 0;
      (await this.pc.getStats()).forEach((s) => {
        if (s.type === 'media-playout' && s.kind === 'audio' && s.totalSamplesCount > 0) outputDelayMs = (s.totalPlayoutDelay / s.totalSamplesCount) * 1000;
        if (s.type !== 'inbound-rtp' || (s.kind !== 'audio' && s.kind !== 'video')) return;
        if (typeof s.estimatedPlayoutTimestamp === 'number') playing[s.kind] = s.estimatedPlayoutTimestamp;
        const buffered = s.jitterBufferEmittedCount ? (s.jitterBufferDelay / s.jitterBufferEmittedCount) * 1000 : 0;
        // Since the last sample: the delay of what left the jitter buffer in these 10 ms.
        const [delay, count] = last[s.kind];
        const now = s.jitterBufferEmittedCount > count ? ((s.jitterBufferDelay - delay) / (s.jitterBufferEmittedCount - count)) * 1000 : null;
        last[s.kind] = [s.jitterBufferDelay || 0, s.jitterBufferEmittedCount || 0];
        if (s.kind === 'audio') { out.energy = s.totalAudioEnergy || 0; out.audioBufferMs = buffered; out.audioBufferNowMs = now; }
        else { out.frames = s.framesDecoded || 0; out.videoBufferMs = buffered; out.videoBufferNowMs = now; }
      });
      // The playground's A/V figure (playground/src/rtc.ts): picture behind its sound, ms.
      if (playing.audio !== undefined && playing.video !== undefined) out.statsAvMs = playing.audio - outputDelayMs - playing.video;
      this.samples.push(out);
    }, 10);
    this.sampler = { on, timer };
  },
  /** A JPEG data URL of the frame the video shows now, side x side pixels; null before its first frame. */
  snapshot(side) {
    const v = document.getElementById('video');
    if (!v.videoWidth) return null;
    const t = document.createElement('canvas');
    t.width = t.height = side;
    t.getContext('2d').drawImage(v, 0, 0, side, side);
    return t.toDataURL('image/jpeg', 0.92);
  },
  stopSampling() {
    if (!this.sampler) return;
    this.sampler.on.stopped = true;
    clearInterval(this.sampler.timer);
    this.sampler = null;
  },
  takeSamples() {
    const drawn = this.face ? this.face.drawn.splice(0) : [];
    const out = { samples: this.samples, frames: this.frames, loud: this.loud, thumbs: this.thumbs, drawn, firstFrameAt: this.firstFrameAt, answeredAt: this.answeredAt, audioClock: this.audioClock, now: performance.now() };
    this.samples = []; this.frames = []; this.loud = []; this.thumbs = [];
    return out;
  },
  async stats() {
    const out = { video: null, audio: null, state: this.pc ? this.pc.connectionState : 'none' };
    if (!this.pc) return out;
    (await this.pc.getStats()).forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'video') out.video = { framesDecoded: s.framesDecoded || 0, width: s.frameWidth || 0, height: s.frameHeight || 0, packets: s.packetsReceived, bytes: s.bytesReceived, codec: s.codecId, keyFrames: s.keyFramesDecoded, pli: s.pliCount, jitterBufferMs: s.jitterBufferEmittedCount ? (s.jitterBufferDelay / s.jitterBufferEmittedCount) * 1000 : null };
      if (s.type === 'inbound-rtp' && s.kind === 'audio') out.audio = { packets: s.packetsReceived, bytes: s.bytesReceived, level: s.audioLevel || 0, energy: s.totalAudioEnergy || 0, samples: s.totalSamplesReceived || 0, codec: s.codecId };
      if (s.type === 'codec') out['codec:' + s.id] = s.mimeType;
    });
    return out;
  },
  hangup() { this.stopSampling(); if (this.face) this.face.close(); this.pc.close(); if (this.synth) this.synth.ctx.close(); if (this.playout) this.playout.close(); },
};
window.call = call;
</script></body></html>`;

/** Calls `window.call[method](...args)` in the page (the harness client above). */
export function callIn<T>(
  page: Page,
  method: 'start' | 'send' | 'types' | 'stats' | 'hangup' | 'speak' | 'startSampling' | 'stopSampling' | 'takeSamples' | 'snapshot',
  ...args: unknown[]
): Promise<T> {
  return page.evaluate(([m, a]) => (globalThis as unknown as { call: Record<string, (...x: unknown[]) => unknown> }).call[m as string]!(...(a as unknown[])), [method, args] as const) as Promise<T>;
}

/** The events the page received on its data channel (each with `at`, the page's ms clock). */
export function eventsIn(page: Page): Promise<Array<{ type: string; at: number; [field: string]: any }>> {
  return page.evaluate(() => (globalThis as unknown as { call: { events: Array<{ type: string; at: number }> } }).call.events);
}

/** What `window.call.takeSamples()` returns (times are the page's performance.now(), ms). */
export interface PageSamples {
  /**
   * Every 10 ms: the received audio's total energy (as played out), the frames decoded so far, the
   * mean jitter-buffer delay of each stream so far (getStats), and of what left each buffer since
   * the sample before (null: nothing did, or getStats gave the same figures again: Chromium renews
   * them about every 50 ms; the first sample's covers the whole call so far), and the A/V figure
   * the playground shows (statsAvMs: the audio's estimatedPlayoutTimestamp less its output delay,
   * minus the video's; positive: the picture behind its sound; null until both streams have one).
   */
  samples: Array<{ t: number; energy: number; frames: number; audioBufferMs: number; videoBufferMs: number; audioBufferNowMs: number | null; videoBufferNowMs: number | null; statsAvMs: number | null }>;
  /**
   * Blocks of 256 played-out samples (PLAYOUT_BLOCK_MS, 5.3 ms at 48 kHz) of the received audio
   * louder than silence (RMS > 0.002); `t` is when the block's first sample is output (see
   * audioClock), measured on the audio thread: the page's main thread being busy does not move it.
   */
  loud: Array<{ t: number; rms: number }>;
  /**
   * The clock of `loud[].t`: 'output' (AudioContext.getOutputTimestamp: when the output device
   * plays it), 'render' (the output not started: render time plus outputLatency), 'none' (no audio yet).
   */
  audioClock: 'output' | 'render' | 'none';
  /** Every presented video frame: the mean grey level of the mouth box, and when its last packet arrived. */
  frames: Array<{ t: number; grey: number; receivedAt: number }>;
  /** JPEG data URLs of a box of the frame, when startSampling was given `thumbs` (`t` as in frames). */
  thumbs: Array<{ t: number; url: string }>;
  /**
   * A face the page draws (a call started with `faceModule`, the server's /playground/face.js):
   * each frame drawn, when (the animation frame's performance.now()), its pts on the audio's clock,
   * its mouth opening, and how late after its sound's playout it was drawn (NaN: not yet timed by
   * the audio clock). Empty otherwise.
   */
  drawn: Array<{ at: number; ptsMs: number; mouthOpen: number; lateMs: number }>;
  /** When the first video frame was presented (0: none yet). */
  firstFrameAt: number;
  /** When the answer was applied. */
  answeredAt: number;
  now: number;
}
