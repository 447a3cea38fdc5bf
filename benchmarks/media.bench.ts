/**
 * The media plane at each output size (512x512, 720x720, 1280x720; MEDIA_BENCH_SIZES picks some),
 * 25 fps, through the native addon (real renderer, x264, Opus), the default face framed head and
 * shoulders for the size as the server frames it:
 *
 *   render ms/frame         median over runs of the renderer's own time per frame (manual pacing,
 *                           speech with head motion, 250 frames)
 *   CPU per stream          process CPU time over wall time for ONE real-time session with the
 *                           WebRTC outputs (H.264 + Opus) for 10 s, as % of one core: render +
 *                           colour conversion + encode + event delivery to JS
 *   max concurrent sessions the largest N (1, 2, 4, 6, then by 1) for which N real-time sessions run 10 s
 *                           side by side with no late frame, no refused buffer and no dropped event
 *
 * Speech is espeak-ng audio pushed in a loop so the mouth moves throughout.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseMotionTemplate } from '../src/assets/motion-template.js';
import { OUTPUT_SIZES, outputDimensions, type OutputSize } from '../src/core/video-size.js';
import { faceInputFromImage } from '../src/media/face-input.js';
import { MediaSession, type MediaSessionConfig } from '../src/media/media-session.js';
import { motionInputFromTemplate } from '../src/media/motion-input.js';
import { espeak, toPcm16 } from '../test/helpers/speech.js';
import { median, summarise, type Benchmark } from './lib/harness.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const FPS = 25;
const REALTIME_S = 10;
const MAX_SESSIONS_TRIED = 20;
/** What a WebRTC viewer needs: H.264 video and Opus audio (PCM deltas are for WebSocket clients). */
const WEBRTC_OUTPUTS = { h264: true, opus: true } as const;

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

/** Keeps `seconds` of speech queued ahead of the session clock. */
function keepTalking(session: MediaSession, voice: { pcm: Int16Array; rate: number }, seconds: number): () => void {
  const timer = setInterval(() => {
    if (session.stats().audioQueuedNs < seconds * 1e9) session.pushAudio(voice.pcm, voice.rate);
  }, 200);
  return () => clearInterval(timer);
}

const bench: Benchmark = {
  name: 'media',
  description: 'Avatar media plane at each output size, 25 fps: render time, CPU per stream, concurrent sessions on this machine',
  async run(ctx) {
    const voice = speech();
    const metrics = [];
    const notes: string[] = [];
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
        const s = await MediaSession.start({ ...base, outputs: WEBRTC_OUTPUTS, pacing: 'realtime', seed: run });
        s.on('event', () => {}); // deliver every event to JS, as the server will
        const stop = keepTalking(s, voice, 2);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, REALTIME_S * 1000));
        const cpu = process.cpuUsage(cpu0);
        const wallMs = performance.now() - t0;
        stop();
        const st = s.stats();
        await s.close();
        cpuPct.push(((cpu.user + cpu.system) / 1000 / wallMs) * 100);
        ctx.log(`${size} one stream: ${cpuPct.at(-1)!.toFixed(1)} % of a core, ${st.framesRendered} frames, ${st.lateFrames} late`);
      }

      // 3. Concurrent sessions: step N until one misses its deadlines.
      let maxOk = 0;
      const perN: string[] = [];
      for (let n = 1; n <= MAX_SESSIONS_TRIED; n += n < 2 ? 1 : n < 6 ? 2 : 1) {
        const sessions = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            MediaSession.start({ ...base, outputs: WEBRTC_OUTPUTS, pacing: 'realtime', seed: i }),
          ),
        );
        const stops = sessions.map((s) => {
          s.on('event', () => {});
          return keepTalking(s, voice, 2);
        });
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, REALTIME_S * 1000));
        const cpu = process.cpuUsage(cpu0);
        const wallMs = performance.now() - t0;
        stops.forEach((stop) => stop());
        const stats = sessions.map((s) => s.stats());
        await Promise.all(sessions.map((s) => s.close()));
        const late = stats.reduce((a, s) => a + s.lateFrames, 0);
        const refused = stats.reduce((a, s) => a + s.droppedBuffers + s.eventsDropped, 0);
        const frames = stats.reduce((a, s) => a + s.framesRendered, 0);
        const load = ((cpu.user + cpu.system) / 1000 / wallMs) * 100;
        perN.push(`${n}: ${late} late, ${refused} dropped, ${load.toFixed(0)} % CPU`);
        ctx.log(`${size} ${n} sessions: ${frames} frames, ${late} late, ${refused} dropped, ${load.toFixed(0)} % of one core`);
        if (late > 0 || refused > 0) break;
        maxOk = n;
      }
      metrics.push(
        summarise(`${size} render`, 'ms/frame', renderMs),
        summarise(`${size} render+encode CPU, one stream`, '% of a core', cpuPct),
        summarise(`${size} max concurrent sessions at 25 fps, no late frame`, 'sessions', [maxOk]),
      );
      notes.push(
        `${size}: render ms/frame median ${median(renderMs).toFixed(2)}; CPU per stream median ${median(cpuPct).toFixed(1)} % of a core`,
        `${size} concurrency steps: ${perN.join('; ')}`,
      );
    }

    return {
      params: { sizes: sizes().join(', '), fps: FPS, outputs: 'h264 (x264) + opus', realtime_window_s: REALTIME_S, runs: ctx.runs },
      metrics,
      notes,
    };
  },
};

export default bench;
