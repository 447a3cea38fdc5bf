/**
 * What a user of any realtime avatar endpoint feels, measured from the client's side only, so that
 * any two endpoints that speak the OpenAI Realtime protocol compare on the same speech, the same
 * questions and the same measures (lib/endpoint/measure.ts says what each one is):
 *  - websocket · connect → session.created, text turn → first text / first audio / response.done,
 *    first frame, voice turn → first audio (with its breakdown: `voice turn › end-of-turn
 *    decision`, `› transcription tail`, `› reply to first audio`), barge-in → silent;
 *  - webrtc · first frame, text turn → first audio played, A/V offset (headless Chromium);
 *  - params.capabilities (image frames out, input images, semantic_vad, transcription events) and
 *    params.unsupported: what the target does not do is reported, never a failure.
 *
 * The target: `npm run bench -- endpoint --target URL --key KEY` (ctx.target: any base URL, e.g.
 * https://api.openai.com); without it the bench starts this server as `npm start` runs it, with
 * its embedded default models, warmed up, on a fresh data folder (or with the offline responder in
 * place of the language model: ENDPOINT_LLM=offline), and records the models its log says it
 * selected. The speech is recorded once (lib/endpoint/speech.ts) and kept in
 * benchmarks/results/endpoint-speech/ (ENDPOINT_SPEECH_DIR), so later runs and other targets hear
 * the same bytes; its files and their sha256 are in params.speech.
 *
 * Counts, per --runs (default 3), on one target: CONNECTS connections, TEXT_TURNS text turns,
 * FRAMES first frames, every recorded sample once as a voice turn, BARGE_INS barge-ins, WEBRTC_CALLS
 * calls of WEBRTC_TURNS text turns. Environment: ENDPOINT_MODEL (the ?model= asked for, default
 * gpt-realtime), ENDPOINT_WEBRTC=0 (no WebRTC), ENDPOINT_MOUTH_BOX=x,y,w,h (the target's mouth in
 * its 512x512 frame, for the A/V offset; known for this server's default face),
 * ENDPOINT_TRANSCRIPTION_MODEL (default whisper-1).
 */
import path from 'node:path';
import { spawnServer, type ServerProcess } from '../test/helpers/process.js';
import { tempDir } from '../test/helpers/server.js';
import { DEFAULT_FACE_MOUTH_BOX } from '../test/helpers/browser.js';
import type { Benchmark, BenchContext, BenchOutput } from './lib/harness.js';
import { waitWarm } from './lib/realtime-session.js';
import { measureEndpoint, type MeasureEndpointOptions } from './lib/endpoint/measure.js';
import { baseOf } from './lib/endpoint/session.js';

export { measureEndpoint, METRIC, type MeasureEndpointOptions } from './lib/endpoint/measure.js';

const CONNECTS = 3;
const TEXT_TURNS = 5;
const FRAMES = 2;
const BARGE_INS = 1;
const WEBRTC_CALLS = 1;
const WEBRTC_TURNS = 3;
/** Samples the voice turns take each run: every recorded one ('quick': three speakers). */
const VOICE_TURNS = 3;
export const SPEECH_DIR = process.env.ENDPOINT_SPEECH_DIR || path.join(import.meta.dirname, 'results', 'endpoint-speech');

const bench: Benchmark = {
  name: 'endpoint',
  description: 'any OpenAI Realtime endpoint from the client side: connect, text and voice turns to first audio (with a breakdown), first frame, barge-in, WebRTC first frame and first audio played, and what the target supports',
  measuresTargets: true,
  async run(ctx) {
    if (ctx.target) {
      return measureEndpoint({ ...options(ctx), url: ctx.target.url, key: ctx.target.key, label: hostOf(ctx.target.url), startedByBench: false, mouthBox: mouthBox() });
    }
    const offline = process.env.ENDPOINT_LLM === 'offline';
    if (process.env.ENDPOINT_LLM && !offline && process.env.ENDPOINT_LLM !== 'default') throw new Error(`ENDPOINT_LLM: '${process.env.ENDPOINT_LLM}' is not 'default' or 'offline'`);
    ctx.log(`starting this server (${offline ? 'offline responder in place of the language model' : 'embedded default models'}), warming up its models`);
    const server = await spawnServer({ DATA_DIR: tempDir('avatar-bench-'), PRELOAD_MODELS: 'true', LOG_LEVEL: 'info', ...(offline ? { LLM_PROVIDER: 'offline' } : {}) });
    try {
      await waitWarm(server);
      return await measureEndpoint({
        ...options(ctx),
        url: server.url,
        key: server.bootstrapKey as string,
        label: offline ? 'this server (offline responder)' : 'this server (embedded models)',
        startedByBench: true,
        mouthBox: mouthBox() ?? DEFAULT_FACE_MOUTH_BOX,
        params: { llm: offline ? 'offline responder (LLM_PROVIDER=offline)' : 'embedded defaults (npm start)', models: selectedModels(server) },
      });
    } catch (err) {
      throw new Error(`${(err as Error).message.slice(0, 500)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  },
};

function options(ctx: BenchContext): Omit<MeasureEndpointOptions, 'url' | 'key' | 'label'> {
  const webrtc = process.env.ENDPOINT_WEBRTC !== '0';
  return {
    connects: CONNECTS * ctx.runs,
    textTurns: TEXT_TURNS * ctx.runs,
    frames: FRAMES * ctx.runs,
    voiceTurns: VOICE_TURNS * ctx.runs,
    bargeIns: BARGE_INS * ctx.runs,
    webrtcCalls: webrtc ? WEBRTC_CALLS * ctx.runs : 0,
    webrtcTurns: WEBRTC_TURNS,
    speechDir: SPEECH_DIR,
    log: ctx.log,
  };
}

/** A target's label: its host (a URL that does not parse: its base as given). */
function hostOf(url: string): string {
  try {
    return new URL(baseOf(url)).host;
  } catch {
    return baseOf(url);
  }
}

/** ENDPOINT_MOUTH_BOX=x,y,w,h, or null. */
function mouthBox(): number[] | null {
  const value = process.env.ENDPOINT_MOUTH_BOX;
  if (!value) return null;
  const box = value.split(',').map(Number);
  if (box.length !== 4 || box.some((x) => !Number.isFinite(x) || x < 0)) throw new Error(`ENDPOINT_MOUTH_BOX: '${value}' is not x,y,w,h in pixels of a 512x512 frame`);
  return box;
}

/**
 * What the started server's log says it selected: its '… provider selected' lines, by what they
 * select, and what its warm-up found missing ('warm-up: … is not available').
 */
export function selectedModels(server: Pick<ServerProcess, 'stdout'>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const line of server.stdout().split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue; // a line cut short
    }
    const { msg, time: _time, level: _level, ...fields } = entry;
    const selected = /^(.*) provider selected$/.exec(String(msg));
    if (selected) out[selected[1]!] = fields;
    const unavailable = /^warm-up: (.*) is not available$/.exec(String(msg));
    if (unavailable) missing.push(`${unavailable[1]}: ${String(fields.err ?? '')}`.slice(0, 200));
  }
  if (missing.length > 0) out.not_available = missing;
  return out;
}

export default bench;

export type { BenchOutput };
