/**
 * `npm run render:clip [-- --face default|face1|PATH] [--size 512x512] [--text "…"] [--voice auto|piper|espeak]
 * [--out clips/<face>-<size>.mp4]`: a short spoken reply rendered by the real media session and
 * muxed to an MP4 (H.264 + AAC) for people to watch, the way a viewer of a call would see it.
 *
 * The face is framed head and shoulders for the size exactly as a session frames it
 * (faceInputFromImage, as render-strip.ts does: a standard face's landmarks from its test
 * fixture, a photo's found by the face models), moved by the default driving motion; the reply is
 * spoken by Piper (joe) when its model is fetched, else espeak-ng (`--voice` forces one), and
 * pushed with its phoneme timings as the server pushes it. The session runs with manual pacing
 * and raw outputs (I420 frames, 24 kHz PCM): LEAD_S of silence, the reply, TAIL_S of silence.
 * gst-launch-1.0 muxes them (rawvideoparse ! x264enc, wavparse ! voaacenc, mp4mux).
 *
 * Invariants: frames and audio are streamed to a temporary folder as the session emits them
 * (never held: a 10 s reply at 512x512 is ~100 MB of raw frames), a batch of frames at a time so
 * the addon's bounded event queue never overflows; every frame is written in order or the clip
 * fails (a missing frame is an error, not a shorter clip); the audio is placed by its session
 * time and cut or padded to the video's length and one AAC frame (AAC_FRAME_SAMPLES), so both
 * tracks start at 0 and last as long, to within an AAC frame (43 ms); the temporary folder is
 * removed whatever happens. Needs gst-launch-1.0 with the elements in CLIP_ELEMENTS
 * (missingClipTools says what is missing).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { wav16Header } from '../assets/audio-file.js';
import { parseMotionTemplate } from '../assets/motion-template.js';
import { DEFAULT_DRIVING_ID } from '../media/avatar-assets.js';
import { faceInputFromImage } from '../media/face-input.js';
import { FaceRegistry, type FaceLandmarks } from '../media/face-registration.js';
import { MediaSession, type FaceInput } from '../media/media-session.js';
import { motionInputFromTemplate } from '../media/motion-input.js';
import { modelPath, modelsDirFrom } from '../models/manifest.js';
import type { SpeechChunk, Voice } from '../providers/tts/base.js';
import { EspeakVoice } from '../providers/tts/espeak.js';
import { piperVoice } from '../providers/tts/piper.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FPS = 25;
const FRAME_NS = 1e9 / FPS;
/** The session's PCM output rate. */
const PCM_RATE_HZ = 24_000;
const LEAD_S = 0.4;
const TAIL_S = 0.5;
/** Frames rendered before waiting for their events (1 s: 38 MB of raw frames at 1280x720). */
const BATCH_FRAMES = 25;
/** A batch whose frames have not all arrived by then has lost some. */
const BATCH_TIMEOUT_MS = 30_000;
const WAV_HEADER_BYTES = 44;
/**
 * voaacenc encodes whole frames of 1024 samples and drops what is left at the end: this much
 * silence after the video's length keeps the audio track from ending before the video's.
 */
const AAC_FRAME_SAMPLES = 1024;
/** A mux that takes longer has hung (a 10 s clip at 1280x720 takes seconds). */
const GST_TIMEOUT_MS = 10 * 60_000;
const PIPER_MODEL = 'tts-piper-joe';
/** espeak-ng as the default voice speaks it (models/assets/catalog.json). */
const ESPEAK_SETTINGS = { voice: 'en-us+f2', pitch: 45 };

export const DEFAULT_TEXT = 'Hello! It is good to see you. Ask me anything, and I will answer you right away, with my own voice and face.';
export const CLIP_ELEMENTS = ['rawvideoparse', 'x264enc', 'h264parse', 'mp4mux', 'wavparse', 'audioconvert', 'audioresample', 'voaacenc', 'aacparse'];
export const VOICE_CHOICES = ['auto', 'piper', 'espeak'] as const;
export type VoiceChoice = (typeof VOICE_CHOICES)[number];

export interface ClipOptions {
  /** A standard face id (models/assets/faces/<id>.jpg) or a photo's path. */
  face: string;
  width: number;
  height: number;
  text: string;
  voice: VoiceChoice;
  /** The MP4 to write (its folder is made). */
  out: string;
  seed: number;
}

export interface ClipResult {
  out: string;
  frames: number;
  /** The reply's audio from its first to its last sample, seconds. */
  speechS: number;
  voice: string;
}

const USAGE = `usage: npm run render:clip -- [--face default|face1|PATH] [--size WxH] [--text "…"] [--voice ${VOICE_CHOICES.join('|')}] [--out FILE.mp4] [--seed N]`;

/** The command line's options; throws with the usage on a mistake. */
export function parseClipArgs(argv: string[]): ClipOptions {
  const { values, positionals } = readArgs(argv);
  if (positionals.length > 0) throw new Error(`unexpected ${positionals.join(' ')}\n${USAGE}`);
  const size = /^(\d+)x(\d+)$/.exec(values.size);
  const [width, height] = size ? [Number(size[1]), Number(size[2])] : [0, 0];
  if (!size || [width, height].some((d) => d < 16 || d > 4096 || d % 2 !== 0)) throw new Error(`--size is WxH, each even from 16 to 4096, not '${values.size}'\n${USAGE}`);
  if (!(VOICE_CHOICES as readonly string[]).includes(values.voice)) throw new Error(`--voice is one of ${VOICE_CHOICES.join(', ')}, not '${values.voice}'\n${USAGE}`);
  if (values.text.trim() === '') throw new Error(`--text is empty\n${USAGE}`);
  const seed = Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed is a whole number, not '${values.seed}'\n${USAGE}`);
  const name = isStandardFace(values.face) ? values.face : path.basename(values.face).replace(/\.[^.]*$/, '');
  return {
    face: values.face,
    width,
    height,
    text: values.text,
    voice: values.voice as VoiceChoice,
    out: path.resolve(values.out ?? path.join(ROOT, 'clips', `${name}-${width}x${height}.mp4`)),
    seed,
  };
}

function readArgs(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        face: { type: 'string', default: 'default' },
        size: { type: 'string', default: '512x512' },
        text: { type: 'string', default: DEFAULT_TEXT },
        voice: { type: 'string', default: 'auto' },
        out: { type: 'string' },
        seed: { type: 'string', default: '0' },
      },
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${USAGE}`);
  }
}

/** What this machine lacks to mux a clip (gst-launch-1.0 or one of CLIP_ELEMENTS), or null. */
export function missingClipTools(): string | null {
  if (spawnSync('gst-launch-1.0', ['--version'], { stdio: 'ignore' }).status !== 0) return 'gst-launch-1.0 is not installed (GStreamer tools)';
  const missing = CLIP_ELEMENTS.filter((e) => spawnSync('gst-inspect-1.0', ['--exists', e], { stdio: 'ignore' }).status !== 0);
  return missing.length > 0 ? `GStreamer lacks ${missing.join(', ')}` : null;
}

/** Renders the reply and writes the MP4. */
export async function renderClip(o: ClipOptions, log: (line: string) => void = () => {}): Promise<ClipResult> {
  const lacking = missingClipTools();
  if (lacking) throw new Error(`cannot mux a clip: ${lacking}`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'render-clip-'));
  try {
    const face = await loadFace(o.face, o.width, o.height);
    const { chunks, voice } = await speak(o.text, o.voice);
    log(`rendering ${o.width}x${o.height}, voice ${voice}`);
    const frames = path.join(dir, 'frames.i420');
    const audio = path.join(dir, 'speech.wav');
    const rendered = await renderToFiles(o, face, chunks, frames, audio);
    fs.mkdirSync(path.dirname(o.out), { recursive: true });
    await mux(frames, audio, o.width, o.height, o.out);
    return { out: o.out, frames: rendered.frames, speechS: rendered.speechS, voice };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function isStandardFace(face: string): boolean {
  return /^[a-z0-9_-]+$/i.test(face) && fs.existsSync(path.join(ROOT, `models/assets/faces/${face}.jpg`));
}

/** The face framed for the output: a standard face with its fixture's landmarks, or a photo registered anew. */
async function loadFace(face: string, width: number, height: number): Promise<FaceInput> {
  const standard = isStandardFace(face);
  if (!standard && !fs.existsSync(face)) throw new Error(`--face: no standard face '${face}' (models/assets/faces/) and no such file`);
  const photo = fs.readFileSync(standard ? path.join(ROOT, `models/assets/faces/${face}.jpg`) : face);
  const fixture = path.join(ROOT, `test/fixtures/faces/${face}.landmarks.json`);
  let landmarks: FaceLandmarks;
  if (standard && fs.existsSync(fixture)) landmarks = JSON.parse(fs.readFileSync(fixture, 'utf8')) as FaceLandmarks;
  else {
    const cache = await mkdtemp(path.join(os.tmpdir(), 'render-clip-faces-'));
    const registry = new FaceRegistry(cache);
    try {
      landmarks = await registry.register(photo);
    } finally {
      await registry.close();
      await rm(cache, { recursive: true, force: true });
    }
  }
  return faceInputFromImage(photo, landmarks, { width, height });
}

/** The reply's chunks (PCM and phoneme timings) from the chosen voice. */
async function speak(text: string, choice: VoiceChoice): Promise<{ chunks: SpeechChunk[]; voice: string }> {
  const modelsDir = modelsDirFrom(process.env);
  const model = modelPath(modelsDir, PIPER_MODEL);
  const config = modelPath(modelsDir, `${PIPER_MODEL}-config`);
  let voice: Voice;
  if (choice !== 'espeak' && model && config) voice = await piperVoice('joe', { model, config }, Math.min(4, os.availableParallelism()));
  else if (choice === 'piper') throw new Error(`--voice piper: the Piper model ${PIPER_MODEL} is not fetched (npm run setup:models)`);
  else voice = new EspeakVoice('espeak', ESPEAK_SETTINGS);
  const chunks: SpeechChunk[] = [];
  for await (const chunk of voice.speak(text, { speed: 1 })) chunks.push(chunk);
  if (chunks.length === 0) throw new Error('--text: the voice spoke nothing');
  return { chunks, voice: voice.engine === 'piper' ? 'Piper (joe)' : `espeak-ng (${ESPEAK_SETTINGS.voice})` };
}

/** Plays the reply through a manual-paced session, writing every I420 frame and the PCM as they come. */
async function renderToFiles(o: ClipOptions, face: FaceInput, chunks: SpeechChunk[], framesFile: string, wavFile: string): Promise<{ frames: number; speechS: number }> {
  const motion = motionInputFromTemplate(parseMotionTemplate(fs.readFileSync(path.join(ROOT, `models/assets/driving/${DEFAULT_DRIVING_ID}.pkl`))));
  const video = fs.openSync(framesFile, 'w');
  const wav = new WavFile(wavFile);
  const session = new MediaSession({ width: o.width, height: o.height, fps: FPS, outputs: { i420: true, pcm: true }, pacing: 'manual', pipelinesDir: path.join(ROOT, 'pipelines'), seed: o.seed, face, motion });
  const sink = { frames: 0, failure: null as Error | null };
  session.on('i420', (e) => {
    if (sink.failure) return;
    if (e.frameIndex !== sink.frames) sink.failure = new Error(`frame ${sink.frames} is missing (frame ${e.frameIndex} came instead)`);
    else {
      fs.writeSync(video, e.data);
      sink.frames++;
    }
  });
  session.on('pcm', (e) => wav.place(e.ptsNs, e.data));
  session.on('media_error', (e) => (sink.failure ??= new Error(`media pipeline error: ${e.message}`)));
  let failed = true;
  try {
    const lead = Math.round(LEAD_S * FPS);
    await advance(session, sink, lead);
    let startNs = Number.NaN;
    let endNs = 0;
    for (const chunk of chunks) {
      const at = session.pushAudio(chunk.pcm, chunk.sampleRateHz, { phonemes: chunk.phonemes });
      if (Number.isNaN(startNs)) startNs = at.startPtsNs;
      endNs = at.endPtsNs;
    }
    const total = Math.ceil(endNs / FRAME_NS) + Math.round(TAIL_S * FPS);
    while (sink.frames < total) await advance(session, sink, Math.min(BATCH_FRAMES, total - sink.frames));
    failed = false;
    return { frames: total, speechS: (endNs - startNs) / 1e9 };
  } finally {
    try {
      // After a failure, the error that caused it is the one to report, not the drain's.
      await (failed ? session.close().catch(() => {}) : session.close());
    } finally {
      fs.closeSync(video);
      wav.finish(Math.round((sink.frames * PCM_RATE_HZ) / FPS) + AAC_FRAME_SAMPLES);
    }
  }
}

/** Renders `n` frames and waits until their events are written. */
async function advance(session: MediaSession, sink: { frames: number; failure: Error | null }, n: number): Promise<void> {
  const want = sink.frames + n;
  session.advance(n);
  const deadline = Date.now() + BATCH_TIMEOUT_MS;
  while (sink.frames < want && !sink.failure) {
    const dropped = session.stats().eventsDropped;
    if (dropped > 0) throw new Error(`${dropped} events were dropped on the way to JavaScript`);
    if (Date.now() > deadline) throw new Error(`frames ${sink.frames}..${want - 1} did not arrive within ${BATCH_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 5));
  }
  if (sink.failure) throw sink.failure;
}

/** Mono 16-bit PCM at PCM_RATE_HZ written by session time; the RIFF header is written at the end. */
class WavFile {
  readonly #fd: number;
  /** Samples written so far. */
  #samples = 0;

  constructor(file: string) {
    this.#fd = fs.openSync(file, 'w');
    fs.writeSync(this.#fd, Buffer.alloc(WAV_HEADER_BYTES));
  }

  /** Writes `data` (16-bit LE samples) where `ptsNs` puts it: a gap before it is filled with silence, an overlap dropped. */
  place(ptsNs: number, data: Buffer): void {
    const at = Math.round((ptsNs * PCM_RATE_HZ) / 1e9);
    if (at > this.#samples) this.#write(Buffer.alloc((at - this.#samples) * 2));
    const skip = Math.max(0, this.#samples - at) * 2;
    if (skip < data.length) this.#write(data.subarray(skip));
  }

  /** Cuts or pads the audio to `samples`, writes the header, closes the file. */
  finish(samples: number): void {
    if (samples > this.#samples) this.#write(Buffer.alloc((samples - this.#samples) * 2));
    fs.ftruncateSync(this.#fd, WAV_HEADER_BYTES + samples * 2);
    fs.writeSync(this.#fd, wav16Header(samples * 2, PCM_RATE_HZ), 0, WAV_HEADER_BYTES, 0);
    fs.closeSync(this.#fd);
  }

  #write(buf: Buffer): void {
    fs.writeSync(this.#fd, buf, 0, buf.length, WAV_HEADER_BYTES + this.#samples * 2);
    this.#samples += buf.length / 2;
  }
}

/** H.264 (x264 at constant quality) and AAC (voaacenc) in an MP4, the index at the front so it plays while it downloads. */
function mux(frames: string, wav: string, width: number, height: number, out: string): Promise<void> {
  const chroma = Math.ceil(width / 2) * Math.ceil(height / 2);
  const luma = width * height;
  return gstLaunch([
    'filesrc', `location=${frames}`, '!',
    'rawvideoparse', `width=${width}`, `height=${height}`, 'format=i420', `framerate=${FPS}/1`,
    `plane-strides=<${width},${Math.ceil(width / 2)},${Math.ceil(width / 2)}>`, `plane-offsets=<0,${luma},${luma + chroma}>`, `frame-size=${luma + 2 * chroma}`, '!',
    'x264enc', 'speed-preset=medium', 'pass=qual', '!', 'h264parse', '!', 'mp4mux', 'name=mux', 'faststart=true', '!', 'filesink', `location=${out}`,
    'filesrc', `location=${wav}`, '!', 'wavparse', '!', 'audioconvert', '!', 'audioresample', '!', 'voaacenc', 'bitrate=96000', '!', 'aacparse', '!', 'mux.',
  ]);
}

/**
 * Runs a gst-launch-1.0 pipeline (`-q`, each argument one token) to its end. gst-launch-1.0 1.22
 * does not always exit after an error (about half the time it hangs after "Freeing pipeline"), so
 * the first ERROR line it prints ends it: killed, and the promise rejects with what it said.
 */
export function gstLaunch(args: string[], timeoutMs = GST_TIMEOUT_MS): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('gst-launch-1.0', ['-q', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let said = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      said += text;
      if (said.includes('ERROR')) child.kill('SIGKILL');
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0 && !said.includes('ERROR')) resolve();
      else reject(new Error(`gst-launch-1.0 ${timedOut ? `ran past ${timeoutMs / 1000} s` : 'failed'}: ${said.trim().split('\n').slice(0, 3).join(' ') || `exit ${code}`}`));
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const started = performance.now();
  Promise.resolve()
    .then(() => renderClip(parseClipArgs(process.argv.slice(2)), (line) => console.log(`render:clip: ${line}`)))
    .then((r) => {
      const s = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`render:clip: wrote ${path.relative(process.cwd(), r.out)}: ${(r.frames / FPS).toFixed(1)} s (${r.frames} frames, speech ${r.speechS.toFixed(1)} s, ${r.voice}) in ${s} s`);
    })
    .catch((err: Error) => {
      console.error(`render:clip: ${err.message}`);
      process.exit(1);
    });
}
