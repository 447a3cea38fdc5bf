/**
 * What a user of any realtime avatar endpoint feels, measured from the client's side only, so that
 * any two endpoints that speak the OpenAI Realtime protocol compare on the same speech, the same
 * questions and the same measures (lib/endpoint/measure.ts says what each one is):
 *  - websocket · connect → session.created, text turn → first text / first audio / response.done,
 *    first frame, voice turn → first audio (with its breakdown: `voice turn › end-of-turn
 *    decision`, `› transcription tail`, `› reply to first audio`), barge-in → silent;
 *  - websocket · lip sync r and onsets, by both mouth methods, one turn on each of four faces (the
 *    two standard ones and two uploads made from them: lib/endpoint/lip-faces.ts), every decoded
 *    image delta against the reply's audio on the server's pts (params.websocket_lip_sync);
 *  - webrtc · first frame, text turn → first audio played, A/V offset, lip sync r and lag (the face
 *    found and tracked on the decoded frames; params.lip_sync) (headless Chromium); then lip sync
 *    r and onsets at the receiver by both methods, one call on each of the same four faces
 *    (params.webrtc_lip_sync);
 *  - capacity · sessions in real time, CPU per session, memory per session, idle memory
 *    (lib/endpoint/capacity.ts), only on a server the bench started (it reads the server's CPU and
 *    memory from /proc): full-agent calls all talking, sessions 1, 2, 4, 6 … until a step is not
 *    in real time, after the other measures; on a --target, reported under params.unsupported;
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
 * its 512x512 frame for the A/V offset, in place of the box found on the decoded frames),
 * ENDPOINT_TRANSCRIPTION_MODEL (default whisper-1), ENDPOINT_CAPACITY=0 (no capacity run: quick
 * runs, tests), ENDPOINT_CAPACITY_WINDOW_S (seconds measured per capacity step, default 10),
 * ENDPOINT_LIP_FACES (which transports measure lip sync on the four faces: unset or 1 both, 0
 * neither, websocket or webrtc that one; ENDPOINT_WEBRTC=0 leaves WebRTC's out too),
 * ENDPOINT_ONLY=lip-sync (the capability probe and those lip-sync turns alone: no other measure,
 * no other WebRTC call, no capacity run). The lip-sync turns are --runs per face and transport,
 * the faces taken in turn, so that their onsets have percentiles.
 */
import path from 'node:path';
import { spawnServer, waitWarm, type ServerProcess } from '../harness/servers/process.js';
import { tempDir } from '../harness/servers/server.js';
import type { Benchmark, BenchContext, BenchOutput } from './lib/harness.js';
import { measureEndpoint, type MeasureEndpointOptions } from './lib/endpoint/measure.js';
import { baseOf } from '../harness/clients/realtime-session.js';
import { addCapacity, capacityNotMeasured, capacityUnsupported, measureCapacity } from './lib/endpoint/capacity.js';
import { CAPACITY_SERVER_ENV } from './lib/call-measures.js';

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
  description: 'any OpenAI Realtime endpoint from the client side: connect, text and voice turns to first audio (with a breakdown), first frame, barge-in, WebRTC first frame and first audio played, what the target supports, and (on a server it started) capacity with CPU and memory per session',
  measuresTargets: true,
  async run(ctx) {
    if (ctx.target) {
      return capacityUnsupported(await measureEndpoint({ ...options(ctx), url: ctx.target.url, key: ctx.target.key, label: hostOf(ctx.target.url), startedByBench: false, mouthBox: mouthBox() }));
    }
    const capacityWindowS = onlyLipSync() ? null : capacityWindow();
    const offline = process.env.ENDPOINT_LLM === 'offline';
    if (process.env.ENDPOINT_LLM && !offline && process.env.ENDPOINT_LLM !== 'default') throw new Error(`ENDPOINT_LLM: '${process.env.ENDPOINT_LLM}' is not 'default' or 'offline'`);
    ctx.log(`starting this server (${offline ? 'offline responder in place of the language model' : 'embedded default models'}), warming up its models`);
    // A capacity run needs sessions limited by CPU only (WORKER_CAPACITY), and the log lines it reads.
    const server = await spawnServer({ DATA_DIR: tempDir('avatar-bench-'), PRELOAD_MODELS: 'true', LOG_LEVEL: 'info', ...(capacityWindowS === null ? {} : CAPACITY_SERVER_ENV), ...(offline ? { LLM_PROVIDER: 'offline' } : {}) });
    try {
      await waitWarm(server);
      const out = await measureEndpoint({
        ...options(ctx),
        url: server.url,
        key: server.bootstrapKey as string,
        label: offline ? 'this server (offline responder)' : 'this server (embedded models)',
        startedByBench: true,
        mouthBox: mouthBox(),
        params: { llm: offline ? 'offline responder (LLM_PROVIDER=offline)' : 'embedded defaults (npm start)', models: selectedModels(server), ...(capacityWindowS === null ? {} : { server_env: CAPACITY_SERVER_ENV }) },
      });
      if (capacityWindowS === null) return capacityNotMeasured(out);
      return addCapacity(out, await measureCapacity(server, { windowS: capacityWindowS, log: ctx.log }));
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
  const lip = lipFaceTransports(process.env.ENDPOINT_LIP_FACES);
  const faces = { lipSyncFaces: lip.websocket, webrtcLipFaces: webrtc && lip.webrtc, lipTurns: ctx.runs };
  if (onlyLipSync()) return { connects: 0, textTurns: 0, frames: 0, voiceTurns: 0, bargeIns: 0, webrtcCalls: 0, ...faces, speechDir: SPEECH_DIR, log: ctx.log };
  return {
    ...faces,
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

/** ENDPOINT_LIP_FACES: the transports that measure lip sync on the four faces (unset or 1: both; 0: neither; websocket, webrtc: that one). */
export function lipFaceTransports(value: string | undefined): { websocket: boolean; webrtc: boolean } {
  if (!value || value === '1') return { websocket: true, webrtc: true };
  if (value === '0') return { websocket: false, webrtc: false };
  if (value === 'websocket' || value === 'webrtc') return { websocket: value === 'websocket', webrtc: value === 'webrtc' };
  throw new Error(`ENDPOINT_LIP_FACES: '${value}' is not 1, 0, websocket or webrtc`);
}

/** ENDPOINT_ONLY=lip-sync: the four-face lip-sync turns alone (any other value is refused). */
function onlyLipSync(): boolean {
  const value = process.env.ENDPOINT_ONLY;
  if (value && value !== 'lip-sync') throw new Error(`ENDPOINT_ONLY: '${value}' is not 'lip-sync'`);
  return value === 'lip-sync';
}

/** ENDPOINT_CAPACITY=0: null (no capacity run); else ENDPOINT_CAPACITY_WINDOW_S, seconds a capacity step is measured (default 10). */
function capacityWindow(): number | null {
  if (process.env.ENDPOINT_CAPACITY === '0') return null;
  const value = process.env.ENDPOINT_CAPACITY_WINDOW_S;
  if (!value) return 10;
  const s = Number(value);
  if (!Number.isFinite(s) || s < 1 || s > 600) throw new Error(`ENDPOINT_CAPACITY_WINDOW_S: '${value}' is not a number of seconds from 1 to 600`);
  return s;
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
