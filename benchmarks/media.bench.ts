/**
 * The media plane at each output size (512x512, 720x720, 1280x720; MEDIA_BENCH_SIZES picks some),
 * 25 fps, through the native addon (real renderer, x264, Opus), the default face framed head and
 * shoulders for the size as the server frames it:
 *
 *   render ms/frame         median over runs of the renderer's own time per frame (manual pacing,
 *                           speech with head motion, 250 frames)
 *   CPU per stream          process CPU time over wall time (getrusage of this process, every
 *                           thread: the same count as /proc/self/stat) for ONE real-time session
 *                           with the WebRTC outputs (H.264 + Opus) for the window (10 s, or
 *                           MEDIA_BENCH_WINDOW_S), as % of one core: render + colour conversion +
 *                           encode + event delivery to JS
 *   largest N before the    N real-time sessions side by side for the window, N stepped 1, 2,
 *   first late frame        4, 6, 8 … 16, then by ones, until
 *                           the first step with a late frame, a refused buffer or a dropped event,
 *                           and two steps more for the curve (lib/media-steps.ts); the largest N
 *                           before that step, and the CPU per stream there. No fixed ceiling: a
 *                           machine that never goes late is stopped when the CPU stays at 97 % of
 *                           every core for two steps, or after 10 minutes of steps per size; the
 *                           note says which, and N is then a lower bound. Every step is recorded
 *                           in params.capacity_steps (the report's capacity curves, a line per
 *                           size), the first late step per size in params.first_late_at
 *
 *   client-drawn face       at the first size: the same measures for sessions whose face the
 *                           client draws (video_render: client; outputs motion + Opus: the face
 *                           animated, not drawn or encoded): the face's own cost (the producer's
 *                           time per frame, manual pacing, and the motion events' formatting in
 *                           JS, as % of a core at 25 fps), CPU per stream and capacity, and the
 *                           motion stream's size on the wire (output_motion.delta events as the
 *                           server sends them, kb/s)
 *
 * Speech is espeak-ng audio pushed in a loop so the mouth moves throughout. A short run:
 * `MEDIA_BENCH_SIZES=512x512 MEDIA_BENCH_WINDOW_S=3 npm run bench -- media --runs 1`.
 */
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseMotionTemplate } from '../src/assets/motion-template.js';
import { OUTPUT_SIZES, outputDimensions, type OutputSize } from '../src/core/video-size.js';
import { faceInputFromImage } from '../src/media/face-input.js';
import { MediaSession, type MediaEventOf, type MediaSessionConfig } from '../src/media/media-session.js';
import { motionInputFromTemplate } from '../src/media/motion-input.js';
import type { AvatarOutput } from '../src/realtime/avatar-output.js';
import { MotionStream } from '../src/realtime/motion-stream.js';
import { newServerEventId, type ServerEventDraft } from '../src/realtime/protocol.js';
import { espeak, toPcm16 } from '../harness/measures/speech.js';
import { median, summarise, type Benchmark } from './lib/harness.js';
import { describeStop, stepSessions, type MediaStep, type StoppedBy } from './lib/media-steps.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const FPS = 25;
const REALTIME_S = 10;
/** How long the concurrency steps of one size may take in all. */
const STEPS_BOUND_MS = 10 * 60_000;
/** What a WebRTC viewer needs: H.264 video and Opus audio (PCM deltas are for WebSocket clients). */
const WEBRTC_OUTPUTS = { h264: true, opus: true } as const;
/** What a viewer that draws the face needs: its parameters each frame and Opus audio. */
const CLIENT_DRAWN_OUTPUTS = { motion: true, opus: true } as const;
type Outputs = typeof WEBRTC_OUTPUTS | typeof CLIENT_DRAWN_OUTPUTS;

/** The sizes to measure: MEDIA_BENCH_SIZES (comma-separated) or all. */
function sizes(): OutputSize[] {
  const asked = process.env.MEDIA_BENCH_SIZES?.split(',').map((s) => s.trim()) ?? [...OUTPUT_SIZES];
  const unknown = asked.filter((s) => !(OUTPUT_SIZES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new Error(`MEDIA_BENCH_SIZES: unknown ${unknown.join(', ')} (one of ${OUTPUT_SIZES.join(', ')})`);
  return asked as OutputSize[];
}

async function baseConfig(size: OutputSize): Promise<Omit<MediaSessionConfig, 'outputs' | 'pacing'>> {
  const { width, height } = outputDimensions(size);
  const landmarks = JSON.parse(fs.readFileSync(path.join(ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8'));
  const face = await faceInputFromImage(fs.readFileSync(path.join(ROOT, 'models/assets/faces/default.jpg')), landmarks, { width, height });
  const motion = motionInputFromTemplate(parseMotionTemplate(fs.readFileSync(path.join(ROOT, 'models/assets/driving/default.pkl'))));
  return { width, height, fps: FPS, pipelinesDir: path.join(ROOT, 'pipelines'), face, motion };
}

function speech(): { pcm: Int16Array; rate: number } {
  const audio = espeak('The quick brown fox jumps over the lazy dog, and then it rests for a while before it runs again.');
  return { pcm: toPcm16(audio.samples), rate: audio.rateHz };
}

/** Seconds each real-time measure runs (one stream, each concurrency step): MEDIA_BENCH_WINDOW_S or REALTIME_S. */
function stepWindowS(): number {
  const given = process.env.MEDIA_BENCH_WINDOW_S;
  if (given === undefined) return REALTIME_S;
  const s = Number(given);
  if (!Number.isFinite(s) || s < 1 || s > 600) throw new Error(`MEDIA_BENCH_WINDOW_S: seconds from 1 to 600, not '${given}'`);
  return s;
}

type SessionBase = Awaited<ReturnType<typeof baseConfig>>;

/**
 * N real-time sessions with the WebRTC outputs (seeds from `seed`), all talking, side by side for
 * `windowS`, every event delivered to JS as the server does; CPU is this process's over the window.
 */
async function realtimeStep(base: SessionBase, voice: { pcm: Int16Array; rate: number }, n: number, windowS: number, seed = 0, outputs: Outputs = WEBRTC_OUTPUTS): Promise<MediaStep & { motion_bytes: number }> {
  const sessions = await Promise.all(
    Array.from({ length: n }, (_, i) => MediaSession.start({ ...base, outputs, pacing: 'realtime', seed: seed + i })),
  );
  let motionBytes = 0;
  const stops = sessions.map((s) => {
    s.on('event', () => {});
    // The motion stream as the server sends it: the events, stamped (the data channel's or socket's bytes).
    motionStream(s, (e) => (motionBytes += Buffer.byteLength(JSON.stringify({ ...e, event_id: newServerEventId() }))));
    return keepTalking(s, voice, 2);
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, windowS * 1000));
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  stops.forEach((stop) => stop());
  const stats = sessions.map((s) => s.stats());
  await Promise.all(sessions.map((s) => s.close()));
  return {
    sessions: n,
    late_frames: stats.reduce((a, s) => a + s.lateFrames, 0),
    dropped: stats.reduce((a, s) => a + s.droppedBuffers + s.eventsDropped, 0),
    cpu_percent: Math.round(((cpu.user + cpu.system) / 1000 / wallMs) * 1000) / 10,
    frames: stats.reduce((a, s) => a + s.framesRendered, 0),
    motion_bytes: motionBytes,
  };
}

/** The server's motion stream (realtime/motion-stream.ts) over a media session's motion events: frames only, no face. */
function motionStream(source: Pick<EventEmitter, 'on'>, emit: (e: ServerEventDraft) => void): void {
  const avatar = { fps: FPS, clientFace: null, on: (event: string, listener: never) => void (event === 'motion' && source.on('motion', listener)) };
  new MotionStream(avatar as unknown as AvatarOutput, emit).start();
}

/** Keeps `seconds` of speech queued ahead of the session clock. */
function keepTalking(session: MediaSession, voice: { pcm: Int16Array; rate: number }, seconds: number): () => void {
  const timer = setInterval(() => {
    if (session.stats().audioQueuedNs < seconds * 1e9) session.pushAudio(voice.pcm, voice.rate);
  }, 200);
  return () => clearInterval(timer);
}

const bench: Benchmark = {
  name: 'media',
  description: 'Avatar media plane at each output size, 25 fps: render time, CPU per stream, concurrent sessions until the first late frame on this machine',
  async run(ctx) {
    const voice = speech();
    const windowS = stepWindowS();
    const cores = os.availableParallelism();
    const metrics = [];
    const notes: string[] = [];
    const capacitySteps: Array<MediaStep & { load: string }> = [];
    const firstLate: Record<string, number | null> = {};
    const stoppedBy: Record<string, StoppedBy> = {};
    for (const size of sizes()) {
      const base = await baseConfig(size);

      // 1. Render ms/frame, manual pacing (no waiting on the clock).
      const renderMs: number[] = [];
      for (let run = 0; run < ctx.runs; run++) {
        const s = new MediaSession({ ...base, outputs: { pcm: true }, pacing: 'manual', seed: run });
        for (let i = 0; i < 4; i++) s.pushAudio(voice.pcm, voice.rate);
        s.advance(250);
        const st = s.stats();
        renderMs.push(st.renderNsTotal / st.framesRendered / 1e6);
        await s.close();
      }
      ctx.log(`${size} render: ${renderMs.map((m) => m.toFixed(2)).join(', ')} ms/frame`);

      // 2. CPU per stream: one real-time session with the WebRTC outputs.
      const cpuPct: number[] = [];
      for (let run = 0; run < ctx.runs; run++) {
        const st = await realtimeStep(base, voice, 1, windowS, run);
        cpuPct.push(st.cpu_percent);
        ctx.log(`${size} one stream: ${st.cpu_percent.toFixed(1)} % of a core, ${st.frames} frames, ${st.late_frames} late`);
      }

      // 3. Concurrent sessions: step N until the first late step (and BEYOND more), or a guard.
      const steps = await stepSessions((n) => realtimeStep(base, voice, n, windowS), {
        cores,
        boundMs: STEPS_BOUND_MS,
        onStep: (st) => ctx.log(`${size} ${st.sessions} sessions: ${st.frames} frames, ${st.late_frames} late, ${st.dropped} dropped, ${st.cpu_percent.toFixed(0)} % of one core`),
      });
      const atMost = steps.steps.find((st) => st.sessions === steps.most);
      capacitySteps.push(...steps.steps.map((st) => ({ load: `${size} media sessions`, ...st })));
      metrics.push(
        summarise(`${size} render`, 'ms/frame', renderMs),
        summarise(`${size} render+encode CPU, one stream`, '% of a core', cpuPct),
        summarise(`${size} largest N before the first late frame`, 'sessions', [steps.most]),
        ...(atMost ? [summarise(`${size} CPU per stream at the largest N`, '% of a core', [atMost.cpu_percent / atMost.sessions])] : []),
      );
      firstLate[size] = steps.firstLateAt;
      stoppedBy[size] = steps.stoppedBy;
      notes.push(
        `${size}: render ms/frame median ${median(renderMs).toFixed(2)}; CPU per stream median ${median(cpuPct).toFixed(1)} % of a core` +
          (atMost ? `; ${(atMost.cpu_percent / atMost.sessions).toFixed(1)} % per stream with ${atMost.sessions} side by side` : ''),
        `${size} concurrency steps (${describeStop(steps, { cores, boundMs: STEPS_BOUND_MS })}): ${steps.steps.map((st) => `${st.sessions}: ${st.late_frames} late, ${st.dropped} dropped, ${st.cpu_percent.toFixed(0)} % CPU`).join('; ')}`,
      );
    }

    // 4. A face the client draws, at the first size: CPU per stream, the motion stream's size, capacity.
    {
      const size = sizes()[0]!;
      const base = await baseConfig(size);
      // The face's own cost: the producer animating without drawing, and each frame's event made in JS.
      const facePct: number[] = [];
      for (let run = 0; run < ctx.runs; run++) {
        const s = new MediaSession({ ...base, outputs: { motion: true }, pacing: 'manual', seed: run });
        const frames: MediaEventOf<'motion'>[] = [];
        s.on('motion', (e) => frames.push(e));
        for (let i = 0; i < 4; i++) s.pushAudio(voice.pcm, voice.rate);
        s.advance(250);
        await new Promise((r) => setImmediate(r)); // the events reach JS
        const st = s.stats();
        await s.close();
        const t0 = performance.now();
        const replay = new EventEmitter();
        motionStream(replay, (e) => JSON.stringify({ ...e, event_id: newServerEventId() }));
        for (const f of frames) replay.emit('motion', f);
        const jsMsPerFrame = frames.length > 0 ? (performance.now() - t0) / frames.length : 0;
        const msPerFrame = st.renderNsTotal / st.framesRendered / 1e6 + jsMsPerFrame;
        // ms a frame × frames a second = ms of CPU a second; a tenth of that is % of a core.
        facePct.push(Math.round(((msPerFrame * FPS) / 10) * 100) / 100);
        ctx.log(`${size} client-drawn face: ${(st.renderNsTotal / st.framesRendered / 1e6).toFixed(3)} ms/frame animating + ${jsMsPerFrame.toFixed(3)} ms/frame for the event (${frames.length} events) = ${facePct.at(-1)} % of a core`);
      }
      const cpuPct: number[] = [];
      const kbps: number[] = [];
      for (let run = 0; run < ctx.runs; run++) {
        const st = await realtimeStep(base, voice, 1, windowS, run, CLIENT_DRAWN_OUTPUTS);
        cpuPct.push(st.cpu_percent);
        kbps.push(Math.round((st.motion_bytes * 8) / windowS / 100) / 10);
        ctx.log(`${size} client-drawn stream: ${st.cpu_percent.toFixed(1)} % of a core, motion ${kbps.at(-1)} kb/s, ${st.frames} frames, ${st.late_frames} late`);
      }
      const steps = await stepSessions((n) => realtimeStep(base, voice, n, windowS, 0, CLIENT_DRAWN_OUTPUTS), {
        cores,
        boundMs: STEPS_BOUND_MS,
        onStep: (st) => ctx.log(`${size} ${st.sessions} client-drawn sessions: ${st.late_frames} late, ${st.dropped} dropped, ${st.cpu_percent.toFixed(0)} % of one core`),
      });
      const atMost = steps.steps.find((st) => st.sessions === steps.most);
      capacitySteps.push(...steps.steps.map((st) => ({ load: `${size} client-drawn sessions`, ...st })));
      metrics.push(
        summarise(`${size} client-drawn face: the face's own CPU (animation + its events)`, '% of a core', facePct),
        summarise(`${size} client-drawn face CPU, one stream (animation + Opus)`, '% of a core', cpuPct),
        summarise(`${size} client-drawn motion stream`, 'kb/s', kbps),
        summarise(`${size} client-drawn: largest N before the first late frame`, 'sessions', [steps.most]),
      );
      notes.push(
        `${size} client-drawn face: the face's own CPU median ${median(facePct)} % of a core; CPU per stream median ${median(cpuPct).toFixed(1)} % of a core (animation + Opus + event delivery; no drawing or video encoding), motion stream ${median(kbps)} kb/s` +
          (atMost ? `; ${steps.most} side by side before the first late frame (${(atMost.cpu_percent / atMost.sessions).toFixed(1)} % per stream)` : ''),
        `${size} client-drawn concurrency steps (${describeStop(steps, { cores, boundMs: STEPS_BOUND_MS })}): ${steps.steps.map((st) => `${st.sessions}: ${st.late_frames} late, ${st.dropped} dropped, ${st.cpu_percent.toFixed(0)} % CPU`).join('; ')}`,
      );
      firstLate[`${size} client-drawn`] = steps.firstLateAt;
      stoppedBy[`${size} client-drawn`] = steps.stoppedBy;
    }

    return {
      params: {
        sizes: sizes().join(', '),
        fps: FPS,
        outputs: 'h264 (x264) + opus',
        realtime_window_s: windowS,
        capacity_window_s: windowS,
        runs: ctx.runs,
        cores,
        first_late_at: firstLate,
        steps_stopped_by: stoppedBy,
        capacity_steps: capacitySteps,
      },
      metrics,
      notes,
    };
  },
};

export default bench;
