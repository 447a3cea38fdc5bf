/**
 * WebRTC calls as a client sees them: the server in its own process, as `npm start` runs it
 * (embedded models: local Qwen GGUF, Piper, Whisper, Silero) and, beside it, with the offline
 * responder in place of the language model, so that the server's own share is visible.
 *
 * Latency, measured in headless Debian Chromium (playwright-core) on decoded output, page clock:
 *  - call POST → answer (the page's fetch);
 *  - answer applied → first decoded frame presented (requestVideoFrameCallback);
 *  - text turn (response.create sent) → output_audio_buffer.started (the server sends it with the
 *    first audio RTP packet), and → first avatar audio played out at the receiver (getStats
 *    totalAudioEnergy rising, every 10 ms);
 *  - voice turn: a spoken question played into a Web Audio microphone track; end of its last
 *    audible sample → output_audio_buffer.started, and → first avatar audio played out;
 *  - A/V offset at the receiver, two ways (positive: the picture is late). The streams: audio and
 *    video of one tick leave the server together with the same pts, so the offset is a frame's
 *    time from its last packet to the screen (requestVideoFrameCallback receiveTime → callback)
 *    minus the audio's jitter-buffer delay (getStats). What a viewer sees: onset of mouth motion in
 *    the presented frames (grey level of the mouth box leaving its idle range) minus onset of the
 *    avatar's audio (played-out blocks above silence); this includes the animation's own timing
 *    and the first sound of a word being audible before the mouth opens for its vowel.
 * Capacity, with light node-datachannel callers (no decoding, so the browser does not take the
 * server's CPU): the most calls at 25 fps with no late frame, both by the server's render loop
 * (its per-session `media session closed` log line) and at the receiver (frames arriving more than
 * one frame period after the stream's RTP clock says), for idle calls (the avatar listening) and
 * for calls whose avatars all talk at once; and server CPU per call (/proc, the server process).
 *
 * Environment: WEBRTC_BENCH_PROFILES=embedded,offline (which browser runs), WEBRTC_BENCH_CAPACITY=0
 * (skip capacity), WEBRTC_BENCH_DUMP=file (append each turn's raw page samples as JSON lines).
 */
import fs from 'node:fs';
import type { Page } from 'playwright-core';
import { spawnServer, type ServerProcess } from '../test/helpers/process.js';
import { tempDir } from '../test/helpers/server.js';
import { callIn, chromiumAvailable, eventsIn, launchBrowser, type CallStartResult, type PageSamples, type TestBrowser } from '../test/helpers/browser.js';
import { espeak } from '../test/helpers/speech.js';
import { frameTiming, RtcCaller } from './lib/rtc-caller.js';
import { median, summarise, type Benchmark, type Metric } from './lib/harness.js';

/** Calls per run in the browser; each has TEXT_TURNS text turns and VOICE_TURNS voice turns. */
const CALLS_PER_RUN = 2;
const TEXT_TURNS = 2;
const VOICE_TURNS = 2;
/** The default face's mouth in the 512x512 frame (landmarks 61, 291, 0, 17, with room for the jaw). */
const MOUTH_BOX = [190, 126, 68, 52];
/** Capacity: seconds measured per step, after the calls have settled. */
const WINDOW_S = 10;
const FRAME_MS = 40;
const QUESTIONS = ['What is the weather like today?', 'Can you tell me a short story?', 'How are you doing this morning?', 'What should I cook for dinner?'];

const PROFILES = [
  { name: 'embedded', label: 'embedded defaults (npm start: Qwen 0.5B GGUF, Piper, Whisper base, Silero)', env: {} as Record<string, string> },
  { name: 'offline', label: 'offline responder instead of the language model (same voice, recogniser, VAD)', env: { LLM_PROVIDER: 'offline' } as Record<string, string> },
];

interface Latencies {
  answer: number[];
  firstFrame: number[];
  textToStarted: number[];
  textToHeard: number[];
  voiceToStarted: number[];
  voiceToHeard: number[];
  voiceStoppedToStarted: number[];
  avOffset: number[];
  streamOffset: number[];
}

const bench: Benchmark = {
  name: 'webrtc',
  description: 'WebRTC calls: POST → answer, first frame, first audio (text and voice turns), A/V offset, CPU per call, most concurrent calls',
  async run(ctx) {
    if (!chromiumAvailable()) throw new Error('/usr/bin/chromium is missing (bash src/cli/setup.sh installs it)');
    const metrics: Metric[] = [];
    const notes: string[] = [];
    const only = process.env.WEBRTC_BENCH_PROFILES?.split(',');
    for (const profile of PROFILES.filter((p) => !only || only.includes(p.name))) {
      const l: Latencies = { answer: [], firstFrame: [], textToStarted: [], textToHeard: [], voiceToStarted: [], voiceToHeard: [], voiceStoppedToStarted: [], avOffset: [], streamOffset: [] };
      for (let run = 0; run < ctx.runs; run++) {
        await withServer(profile.env, async (server) => {
          const browser = await launchBrowser({ microphone: 'silence' });
          try {
            for (let c = 0; c < CALLS_PER_RUN; c++) await oneCall(browser, server, l, ctx.log);
          } finally {
            await browser.close();
          }
        });
        ctx.log(`${profile.name} run ${run + 1}: answer p50 ${median(l.answer).toFixed(0)} ms, first frame ${median(l.firstFrame).toFixed(0)} ms, text → started ${median(l.textToStarted).toFixed(0)} ms, voice → started ${median(l.voiceToStarted).toFixed(0)} ms, A/V ${median(l.avOffset).toFixed(0)} ms`);
      }
      const p = `[${profile.name}] `;
      metrics.push(
        summarise(`${p}call POST → SDP answer`, 'ms', l.answer),
        summarise(`${p}answer applied → first decoded frame presented`, 'ms', l.firstFrame),
        summarise(`${p}text turn: response.create → output_audio_buffer.started (first audio RTP)`, 'ms', l.textToStarted),
        summarise(`${p}text turn: response.create → first avatar audio played at the receiver`, 'ms', l.textToHeard),
        summarise(`${p}voice turn: end of user speech → output_audio_buffer.started (first audio RTP)`, 'ms', l.voiceToStarted),
        summarise(`${p}voice turn: end of user speech → first avatar audio played at the receiver`, 'ms', l.voiceToHeard),
        summarise(`${p}voice turn: speech_stopped (VAD) → output_audio_buffer.started`, 'ms', l.voiceStoppedToStarted),
        summarise(`${p}A/V offset of the streams at the receiver (video: last packet → presented, minus audio jitter-buffer delay)`, 'ms', l.streamOffset),
        summarise(`${p}mouth opening onset − avatar audio onset at the receiver`, 'ms', l.avOffset),
      );
      notes.push(`[${profile.name}] ${profile.label}.`);
    }
    if (process.env.WEBRTC_BENCH_CAPACITY !== '0') {
      const capacity = await measureCapacity(ctx.log);
      metrics.push(
        summarise('server CPU per idle call (avatar listening, 25 fps H.264 + Opus)', '% of a core', capacity.idleCpuPerCall),
        summarise('server CPU per talking call (at the largest all-talking step that kept time)', '% of a core', capacity.talkingCpuPerCall),
        summarise('most concurrent idle calls at 25 fps, no late frame', 'calls', [capacity.maxIdle]),
        summarise('most concurrent calls all talking at once at 25 fps, no late frame', 'calls', [capacity.maxTalking]),
      );
      notes.push(...capacity.notes);
    }
    notes.push('Goals (issue 9): answer ≤ 100 ms, first frame ≤ 300 ms, A/V offset within ±40 ms, ≥ 12 calls.');
    return {
      params: { calls_per_run: CALLS_PER_RUN, text_turns_per_call: TEXT_TURNS, voice_turns_per_call: VOICE_TURNS, runs: ctx.runs, video: '512x512 H.264 @ 25 fps', turn_detection: 'server_vad, silence 500 ms', capacity_window_s: WINDOW_S },
      metrics,
      notes,
    };
  },
};

async function withServer(env: Record<string, string>, body: (server: ServerProcess) => Promise<void>, extra: Record<string, string> = {}): Promise<void> {
  const server = await spawnServer({ DATA_DIR: tempDir('avatar-bench-'), PRELOAD_MODELS: 'true', ...env, ...extra });
  try {
    for (let waited = 0; !server.stdout().includes('models warmed up'); waited += 100) {
      if (waited > 180_000) throw new Error('the server did not finish warming up in 3 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
    await body(server);
  } catch (err) {
    throw new Error(`${(err as Error).message.slice(0, 500)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
}

async function oneCall(browser: TestBrowser, server: ServerProcess, l: Latencies, log: (line: string) => void): Promise<void> {
  const page = await browser.newPage();
  try {
    const started = await callIn<CallStartResult>(page, 'start', {
      baseUrl: server.url,
      key: server.bootstrapKey,
      form: 'multipart',
      audio: true,
      video: true,
      videoCodec: 'H264',
      channel: 'oai-events',
      microphone: 'synth',
      session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad', silence_duration_ms: 500 } } } },
    });
    if (started.status !== 201) throw new Error(`call refused: ${started.status} ${started.answer.slice(0, 200)}`);
    l.answer.push(started.postMs);
    await waitForEvent(page, 'session.created', 0);
    await callIn(page, 'startSampling', MOUTH_BOX);
    const first = await until(() => callIn<PageSamples>(page, 'takeSamples'), (s) => s.firstFrameAt > 0, 'the first frame');
    l.firstFrame.push(first.firstFrameAt - first.answeredAt);
    await sleep(1500); // idle frames: the mouth's resting range
    for (let i = 0; i < TEXT_TURNS; i++) {
      const from = (await eventsIn(page)).length;
      await callIn(page, 'send', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: QUESTIONS[i % QUESTIONS.length] }] } });
      await waitForEvent(page, 'conversation.item.done', from);
      const t0 = await callIn<number>(page, 'send', { type: 'response.create' });
      const turn = await measureTurn(page, t0, from);
      l.textToStarted.push(turn.startedAt - t0);
      if (turn.heardAt) l.textToHeard.push(turn.heardAt - t0);
      if (turn.avOffset !== null) l.avOffset.push(turn.avOffset);
      if (turn.streamOffset !== null) l.streamOffset.push(turn.streamOffset);
    }
    for (let i = 0; i < VOICE_TURNS; i++) {
      const from = (await eventsIn(page)).length;
      const speech = questionSpeech(QUESTIONS[(i + 1) % QUESTIONS.length]!);
      const endAt = await callIn<number>(page, 'speak', Array.from(speech.samples), speech.rateHz);
      const turn = await measureTurn(page, endAt, from);
      l.voiceToStarted.push(turn.startedAt - endAt);
      if (turn.stoppedAt) l.voiceStoppedToStarted.push(turn.startedAt - turn.stoppedAt);
      if (turn.heardAt) l.voiceToHeard.push(turn.heardAt - endAt);
      if (turn.avOffset !== null) l.avOffset.push(turn.avOffset);
      if (turn.streamOffset !== null) l.streamOffset.push(turn.streamOffset);
    }
    log(`  call: answer ${started.postMs.toFixed(0)} ms, first frame ${(first.firstFrameAt - first.answeredAt).toFixed(0)} ms`);
    await callIn(page, 'hangup');
  } finally {
    await page.close();
  }
}

/**
 * One turn from `t0` (page ms): waits for output_audio_buffer.started, lets the avatar speak
 * about two seconds, cancels, and reads the onsets from the page's samples.
 */
async function measureTurn(
  page: Page,
  t0: number,
  from: number,
): Promise<{ startedAt: number; stoppedAt: number | null; heardAt: number | null; avOffset: number | null; streamOffset: number | null }> {
  const started = await waitForEvent(page, 'output_audio_buffer.started', from, 60_000);
  const stopped = (await eventsIn(page)).slice(from).find((e) => e.type === 'input_audio_buffer.speech_stopped');
  await sleep(2000);
  await callIn(page, 'send', { type: 'response.cancel' });
  await waitForEvent(page, 'response.done', from, 30_000);
  const s = await callIn<PageSamples>(page, 'takeSamples');
  await sleep(1500); // back to idle before the next turn, whose baseline comes from these frames
  if (process.env.WEBRTC_BENCH_DUMP) fs.appendFileSync(process.env.WEBRTC_BENCH_DUMP, JSON.stringify({ t0, startedAt: started.at, stoppedAt: stopped?.at, s, ev: (await eventsIn(page)).slice(from).filter((e) => !e.type.includes('delta')).map((e) => [e.type, Math.round(e.at - t0)]) }) + '\n');
  const heardAt = audioOnset(s, t0);
  const mouthAt = heardAt === null ? null : mouthOnset(s, heardAt);
  // Both streams leave the server together (audio and frame of one tick, same pts): the offset
  // at the receiver is how much longer a frame takes from its last packet to the screen than a
  // sample from its packet to playout.
  const videoDelays = s.frames.filter((f) => f.t > t0 && f.receivedAt > 0).map((f) => f.t - f.receivedAt);
  const audioBufferMs = s.samples.at(-1)?.audioBufferMs ?? 0;
  return {
    startedAt: started.at,
    stoppedAt: stopped?.at ?? null,
    heardAt,
    avOffset: heardAt !== null && mouthAt !== null ? mouthAt - heardAt : null,
    streamOffset: videoDelays.length > 10 && audioBufferMs > 0 ? median(videoDelays) - audioBufferMs : null,
  };
}

/** First block of played-out samples after `t0` louder than silence: the avatar is heard. */
function audioOnset(s: PageSamples, t0: number): number | null {
  return s.loud.find((b) => b.t > t0)?.t ?? null;
}

/**
 * The presented frame where the mouth starts moving for the speech heard at `heardAt`: the first
 * frame from LEAD_MS before it whose mouth box leaves the range of the frames in the half second
 * before that (widened by a quarter of the range plus 1 grey level), two frames in a row (one
 * odd frame is not an onset). Looking from just before the audio keeps idle motion earlier in a
 * slow turn from counting, while a picture up to LEAD_MS early is still seen as early.
 */
function mouthOnset(s: PageSamples, heardAt: number): number | null {
  const LEAD_MS = 150;
  const from = heardAt - LEAD_MS;
  const idle = s.frames.filter((f) => f.t <= from && f.t > from - 500).map((f) => f.grey);
  if (idle.length < 8) return null;
  const lo = Math.min(...idle);
  const hi = Math.max(...idle);
  const margin = (hi - lo) / 4 + 1;
  const after = s.frames.filter((f) => f.t > from);
  const out = (g: number) => g < lo - margin || g > hi + margin;
  for (let i = 0; i + 1 < after.length; i++) if (out(after[i]!.grey) && out(after[i + 1]!.grey)) return after[i]!.t;
  return null;
}

/** A question spoken by espeak-ng, cut after its last audible sample (espeak pads ~300 ms). */
function questionSpeech(text: string): { samples: Float32Array; rateHz: number } {
  const { samples, rateHz } = espeak(text);
  let end = samples.length;
  while (end > 0 && Math.abs(samples[end - 1]!) < 0.01) end--;
  return { samples: samples.subarray(0, end), rateHz };
}

async function waitForEvent(page: Page, type: string, from: number, timeoutMs = 30_000): Promise<{ type: string; at: number; [field: string]: any }> {
  const events = await until(() => eventsIn(page), (ev) => ev.slice(from).some((e) => e.type === type), type, timeoutMs).catch(async (err: Error) => {
    const seen = (await eventsIn(page)).slice(from).map((e) => (e.type === 'error' ? `error(${JSON.stringify(e.error)})` : e.type));
    throw new Error(`${err.message}; events since: ${[...new Set(seen)].join(', ').slice(0, 600)}`);
  });
  return events.slice(from).find((e) => e.type === type)!;
}

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) the process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

interface Capacity {
  idleCpuPerCall: number[];
  talkingCpuPerCall: number[];
  maxIdle: number;
  maxTalking: number;
  notes: string[];
}

async function measureCapacity(log: (line: string) => void): Promise<Capacity> {
  const result: Capacity = { idleCpuPerCall: [], talkingCpuPerCall: [], maxIdle: 0, maxTalking: 0, notes: [] };
  await withServer(
    { LLM_PROVIDER: 'offline' },
    async (server) => {
      for (const talking of [false, true]) {
        const steps: string[] = [];
        for (const n of talking ? [1, 4, 8, 10, 12, 13, 14, 15, 16, 18, 20] : [1, 4, 8, 12, 16, 20, 24, 28, 32]) {
          const step = await capacityStep(server, n, talking);
          steps.push(`${n}: ${step.fps.toFixed(1)} fps, ${step.serverLate} late (server), ${step.receiverLate} late (receiver, worst ${step.worstMs.toFixed(0)} ms), ${step.cpuPct.toFixed(0)} % CPU${talking ? `, ${step.speaking} speaking at the end, ${step.replies} replies began in the window` : ''}`);
          log(`capacity ${talking ? 'talking' : 'idle'} ${steps.at(-1)}`);
          const kept = step.serverLate === 0 && step.receiverLate === 0 && step.fps >= 24.5;
          if (!kept) break;
          if (talking) result.maxTalking = n;
          else result.maxIdle = n;
          (talking ? result.talkingCpuPerCall : result.idleCpuPerCall).splice(0, Infinity, step.cpuPct / n);
        }
        result.notes.push(`Capacity, ${talking ? 'all avatars talking (back-to-back replies of the offline responder, Piper voice)' : 'idle calls (avatar listening)'}: ${steps.join('; ')}.`);
      }
    },
    { WORKER_CAPACITY: '64', LOG_LEVEL: 'info' },
  );
  return result;
}

async function capacityStep(server: ServerProcess, n: number, talking: boolean): Promise<{ fps: number; serverLate: number; receiverLate: number; worstMs: number; cpuPct: number; replies: number; speaking: number }> {
  const before = closedSummary(server);
  const callers: RtcCaller[] = [];
  try {
    for (let i = 0; i < n; i++) callers.push(await RtcCaller.call(server.url, server.bootstrapKey!, { type: 'realtime', audio: { input: { turn_detection: null } } }));
    // Talking: each avatar answers again as soon as its last reply is done.
    const asked = new Map<RtcCaller, number>();
    const keepTalking = () => {
      for (const c of callers) {
        const done = c.events.filter((e) => e.type === 'response.done').length;
        if ((asked.get(c) ?? 0) > done) continue;
        asked.set(c, done + 1);
        c.send({ type: 'response.create', response: { instructions: 'Tell me a long story about the sea.' } });
      }
    };
    let timer: NodeJS.Timeout | null = null;
    if (talking) {
      for (const c of callers) c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell me a long story about the sea and the ships on it.' }] } });
      keepTalking();
      timer = setInterval(keepTalking, 50);
    }
    await sleep(3000); // settle: first keyframes, first replies under way
    const cpu0 = cpuSeconds(server.child.pid!);
    const replies0 = callers.reduce((a, c) => a + c.events.filter((e) => e.type === 'output_audio_buffer.started').length, 0);
    const t0 = performance.now();
    await sleep(WINDOW_S * 1000);
    const t1 = performance.now();
    const cpuPct = ((cpuSeconds(server.child.pid!) - cpu0) / ((t1 - t0) / 1000)) * 100;
    if (timer) clearInterval(timer);
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
      replies,
      speaking,
    };
  } finally {
    for (const c of callers) c.close();
    await sleep(1000);
  }
}

/** Sessions that logged `media session closed` so far (stdout, or stderr with losses), and their late frames. */
function closedSummary(server: ServerProcess): { sessions: number; lateFrames: number } {
  const lines = [...server.stdout().matchAll(/"msg":"media session closed[^"]*"[^\n]*"lateFrames":(\d+)/g)];
  return { sessions: lines.length, lateFrames: lines.reduce((a, m) => a + Number(m[1]), 0) };
}

export default bench;
