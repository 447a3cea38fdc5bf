/**
 * Realtime latency as a user gets it, over a real WebSocket against the real server process (its
 * own process, real store, real media plane), for each language model setting:
 *  - `default`: the embedded defaults as `npm start` runs them (local Qwen GGUF, Piper/flite,
 *    Whisper base, Silero, Smart Turn);
 *  - `offline`: the rule-based offline responder in place of the model (the server alone);
 *  - `remote`: a hosted model's stand-in (harness/servers/remote-stand-in.ts: a real
 *    OpenAI-compatible chat-completions server on 127.0.0.1, started by the bench, one for all of a
 *    setting's runs, answering the last question in a sentence or two, paced as a hosted model
 *    streams), the server started with LLM_PROVIDER=openai and LLM_BASE_URL at it, everything else
 *    embedded as `npm start` has it (the local GGUF still in models/weights, as a deployment with
 *    local weights has it). The notes say how many requests it had, and how many the server
 *    abandoned before their end (before or after their first token).
 *
 * Switches (environment):
 *  - REALTIME_BENCH_LLM=default|offline|remote, a comma list, or all (default both, which is
 *    default,offline): the language model settings;
 *  - REALTIME_BENCH_REMOTE_FIRST_TOKEN_MS=N (default 200), REALTIME_BENCH_REMOTE_TOKENS_PER_S=N
 *    (default 60): the remote stand-in's pacing, ms from a request to its first token, then
 *    tokens a second (one streamed word piece a token, every event paced);
 *  - REALTIME_BENCH_PARTS=turns,concurrent,tools (default all): `turns` the text and voice turns,
 *    `concurrent` the concurrent sessions (both on the same server per run), `tools` the tool
 *    round trip (its own servers); REALTIME_BENCH_PARTS=tools runs the tool round trip alone;
 *  - REALTIME_BENCH_MODES=server_vad,semantic_vad (default both): the voice turns' turn detections;
 *  - REALTIME_BENCH_LINE=silence,noise (default both): what the line carries around the speech;
 *  - REALTIME_BENCH_SPEAKERS=all|quick (default all): every speaker (21 voice turns per mode, about
 *    80 s), or the first three with one question of each kind each (9 turns, about 35 s a mode);
 *  - REALTIME_BENCH_CONCURRENT=N (default 4, the server's default WORKER_CAPACITY): sessions at once;
 *  - REALTIME_BENCH_VERBOSE=1: prints how every voice turn ended (by the silence or the model, its
 *    probability, what the server heard) and every turn the server ended with its transcript (a
 *    cut-in shows as the first words of a sentence); without it only the turns that waited more
 *    than 1.5 s for speech_stopped and the false cut-ins are printed.
 *
 * Text turns: response.create → first response.output_audio.delta (and first image delta).
 *
 * Voice turns (lib/voice-turns.ts says who speaks what, and how the line is streamed): for each
 * turn detection (server_vad at 500 ms, semantic_vad eagerness auto) × line (`silence`: digital
 * zeros; `noise`: a live microphone's seeded pink noise floor at -60 to -50 dBFS, streamed
 * before, under, between and after the speech until the reply's first audio), a new session hears
 * the same samples in real time: complete questions (many ending in a preposition), questions
 * with a 300–800 ms pause mid-sentence, and answers to be cut (a complete question, a 700–900 ms
 * gap, then more), spoken by every Piper voice fetched, flite's four speakers and four espeak-ng
 * variants, some slowed to 0.8 or hurried to 1.25, in a fixed rotation. Per mode
 * (lib/voice-turn-report.ts says how it is reported):
 *  - end of speech → first output_audio.delta (the figure users feel), p50/p95/max;
 *  - turns that waited > 1.5 s from the end of the speech to speech_stopped;
 *  - false cut-ins: a turn ended (speech_stopped) before the speech did, paused questions apart;
 *  - a breakdown: end-of-turn decision (end of speech → speech_stopped), transcription tail
 *    (speech_stopped → transcription.completed), then from the server's 'response timing' log:
 *    model first token and first clause (response start → first clause handed to the voice), voice first chunk
 *    (→ its first chunk queued on the avatar), first tick (→ first audio played out). A response
 *    that took an early reply (the model started on the pause's transcript before the turn ended)
 *    has its model steps counted from the response's start, so they shrink by the head start; how
 *    many did is in the notes;
 *  - answers to be cut, apart (not cut-ins): whether a reply's first audio came in the gap,
 *    whether it was then stopped (response.done cancelled, output_audio_buffer.cleared) or never
 *    started, and end of the whole speech → first audio of the reply to all of it;
 *  - per speaker (notes): p50 and worst end of speech → first audio.
 * A session that stops answering (input_audio_buffer.clear unanswered for 10 s: something before it
 * in its event order never finished) is reported with the server's log lines about it, and the
 * rest of its samples go to a new session.
 *
 * Concurrent sessions (REALTIME_BENCH_PARTS=concurrent): REALTIME_BENCH_CONCURRENT sessions, audio
 * only (output_modalities ['audio']), server_vad 500 ms, on the live-microphone line (digital
 * silence when REALTIME_BENCH_LINE leaves `noise` out), each streaming CONCURRENT_TURNS questions
 * of its own in real time at once, started 0–1 s apart (seeded); the same measures per turn.
 *
 * Tool round trip (REALTIME_BENCH_PARTS=tools): lib/tool-round-trip.ts says what it measures.
 */
import { responseTimings, spawnServer, waitWarm, type ResponseTiming, type ServerProcess } from '../harness/servers/process.js';
import { tempDir } from '../harness/servers/server.js';
import type { RealtimeTestClient, ServerEvent } from '../harness/clients/realtime-client.js';
import { closeSession, connect, type EndpointSession } from '../harness/clients/realtime-session.js';
import { median, seededRandom, summarise, type BenchContext, type BenchOutput, type Benchmark, type Metric } from './lib/harness.js';
import { SERVER_VAD, TEXT_QUESTIONS } from './lib/endpoint/websocket-measures.js';
import { describePacing, startRemoteStandIn, type RemotePacing, type RemoteStandIn } from '../harness/servers/remote-stand-in.js';
import { TOOL_LLMS, runTools } from './lib/tool-round-trip.js';
import { addEndings, explainTurns, noEndings, turnMetrics, turnNotes, type Endings } from './lib/voice-turn-report.js';
import {
  COMPLETE_QUESTIONS,
  LINES,
  NOISE_DBFS,
  PAUSED_QUESTIONS,
  SPEAKER_SETS,
  THEN_MORE,
  makeSamples,
  streamTurn,
  testSpeakers,
  type Line,
  type Sample,
  type SpeakerSet,
  type VoiceTurn,
} from './lib/voice-turns.js';

const TEXT_TURNS = 10;
/** Questions each concurrent session asks. */
const CONCURRENT_TURNS = 5;
/** Concurrent sessions start this far apart at most (ms, seeded). */
const CONCURRENT_SPREAD_MS = 1000;

/** REALTIME_BENCH_VERBOSE=1: print how every voice turn ended, not only the slow ones. */
const VERBOSE = process.env.REALTIME_BENCH_VERBOSE === '1';

const TURN_DETECTIONS = {
  server_vad: SERVER_VAD,
  semantic_vad: { type: 'semantic_vad', eagerness: 'auto' },
} as const;
type TurnMode = keyof typeof TURN_DETECTIONS;
const TURN_MODES = Object.keys(TURN_DETECTIONS) as TurnMode[];

const PARTS = ['turns', 'concurrent', 'tools'] as const;
type Part = (typeof PARTS)[number];

const LLMS = ['default', 'offline', 'remote'] as const;
type Llm = (typeof LLMS)[number];

/** What one mode's turns gathered over the runs. */
interface ModeTurns {
  turns: VoiceTurn[];
  endings: Endings;
}

/** What the voice parts run: modes, lines, speakers and concurrency, from the switches. */
interface VoicePlan {
  modes: TurnMode[];
  lines: Line[];
  speakerSet: SpeakerSet;
  samples: Sample[];
  sessions: number;
  /** The concurrent sessions' line: a live microphone when that line is chosen. */
  concurrentLine: Line;
}

const bench: Benchmark = {
  name: 'realtime',
  description: 'realtime latency as a user gets it, with the embedded model, the offline responder or a paced remote stand-in: text turns (response.create → first audio) and voice turns (end of speech → first audio) under server_vad and semantic_vad on a silent and a live-microphone line, by many speakers, with waits, false cut-ins, answers to be cut and a breakdown; concurrent voice sessions; tool round trip (function_call_output + response.create → first audio), local model and a paced stand-in remote',
  async run(ctx) {
    const parts = chosen('REALTIME_BENCH_PARTS', PARTS);
    const out: BenchOutput = { params: { parts: parts.join(', ') }, metrics: [], notes: [] };
    const results: BenchOutput[] = [];
    if (parts.includes('turns') || parts.includes('concurrent')) results.push(await runTurns(ctx, parts));
    if (parts.includes('tools')) results.push(await runTools(ctx, chosen('REALTIME_BENCH_TOOL_LLM', TOOL_LLMS)));
    for (const r of results) {
      Object.assign(out.params, r.params);
      out.metrics.push(...r.metrics);
      out.notes!.push(...(r.notes ?? []));
    }
    return out;
  },
};

/** The names listed in env var `name` (comma-separated; 'both', 'all' or unset: all of `all`). */
function chosen<T extends string>(name: string, all: readonly T[]): T[] {
  const value = process.env[name];
  if (value === undefined || value === '' || value === 'both' || value === 'all') return [...all];
  const names = value.split(',').map((x) => x.trim());
  for (const n of names) if (!all.includes(n as T)) throw new Error(`${name}: '${n}' is not one of ${all.join(', ')}`);
  return names as T[];
}

/** REALTIME_BENCH_LLM (see the header): 'both' and unset are default,offline, 'all' every setting. */
function llmSettings(): Llm[] {
  const value = process.env.REALTIME_BENCH_LLM;
  if (value === undefined || value === '' || value === 'both') return ['default', 'offline'];
  return chosen('REALTIME_BENCH_LLM', LLMS);
}

/** The remote stand-in's pacing from REALTIME_BENCH_REMOTE_FIRST_TOKEN_MS and REALTIME_BENCH_REMOTE_TOKENS_PER_S. */
function remotePacing(): RemotePacing {
  const read = (name: string, fallback: string, min: number) => {
    const value = process.env[name] || fallback;
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || n > 100_000) throw new Error(`${name}: '${value}' is not a number from ${min} to 100000`);
    return n;
  };
  return { firstTokenMs: read('REALTIME_BENCH_REMOTE_FIRST_TOKEN_MS', '200', 0), tokensPerS: read('REALTIME_BENCH_REMOTE_TOKENS_PER_S', '60', 0.1) };
}

/** REALTIME_BENCH_CONCURRENT: sessions at once (default 4, the server's default WORKER_CAPACITY). */
function concurrentSessions(): number {
  const value = process.env.REALTIME_BENCH_CONCURRENT ?? '4';
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`REALTIME_BENCH_CONCURRENT: '${value}' is not a whole number from 1 to 64`);
  return n;
}

async function voicePlan(ctx: BenchContext): Promise<VoicePlan> {
  const lines = chosen('REALTIME_BENCH_LINE', LINES);
  const speakerSet = (process.env.REALTIME_BENCH_SPEAKERS || 'all') as SpeakerSet;
  if (!SPEAKER_SETS.includes(speakerSet)) throw new Error(`REALTIME_BENCH_SPEAKERS: '${speakerSet}' is not one of ${SPEAKER_SETS.join(', ')}`);
  const speakers = await testSpeakers(speakerSet);
  const samples = await makeSamples(speakers, speakerSet);
  const kinds = (k: Sample['kind']) => samples.filter((s) => s.kind === k).length;
  ctx.log(
    `${samples.length} voice samples (${kinds('complete')} complete, ${kinds('paused')} with a mid-sentence pause, ${kinds('then-more')} answers to be cut) by ${speakers.length} speakers: ${speakers.map((s) => s.voice.id).join(', ')}`,
  );
  return {
    modes: chosen('REALTIME_BENCH_MODES', TURN_MODES),
    lines,
    speakerSet,
    samples,
    sessions: concurrentSessions(),
    concurrentLine: lines.includes('noise') ? 'noise' : 'silence',
  };
}

/** Text and voice turns and the concurrent sessions (see the header), one server per model setting and run. */
async function runTurns(ctx: BenchContext, parts: Part[]): Promise<BenchOutput> {
  const llms = llmSettings();
  const pacing = llms.includes('remote') ? remotePacing() : null;
  const plan = await voicePlan(ctx);
  const metrics: Metric[] = [];
  const notes: string[] = [];
  for (const llm of llms) {
    const remote = llm === 'remote' ? await startRemoteStandIn(pacing!) : null;
    if (remote) ctx.log(`remote stand-in at ${remote.server.baseUrl}: ${describePacing(remote.pacing)}`);
    try {
      await runSetting(ctx, llm, remote, parts, plan, metrics, notes);
    } finally {
      await remote?.server.close();
    }
    if (remote) notes.push(remoteNote(remote));
  }
  return {
    params: voiceParams(llms, parts, plan, ctx.runs, pacing),
    metrics,
    notes: [
      'Goals (issue 38): with the remote stand-in (first token 200 ms, 60 tokens/s) and the default turn detection (semantic_vad): end of speech → first audio delta p50 ≤ 450 ms, p95 ≤ 650 ms, no turn over 1 200 ms, no cut-in in mid-sentence pauses up to 600 ms; with the embedded models: p50 ≤ 650 ms, p95 ≤ 900 ms, none over 1 200 ms, no cut-in; four talking at once: p50 ≤ 900 ms, p95 ≤ 1 300 ms per turn.',
      ...notes,
    ],
  };
}

/** One model setting's runs (a server each), its metrics and notes added to `metrics` and `notes`. */
async function runSetting(ctx: BenchContext, llm: Llm, remote: RemoteStandIn | null, parts: Part[], plan: VoicePlan, metrics: Metric[], notes: string[]): Promise<void> {
  const text: { audio: number[]; image: number[] } = { audio: [], image: [] };
  const modes = new Map<string, ModeTurns>();
  const timings = new Map<string, ResponseTiming>();
  const gather = (tag: string, turns: VoiceTurn[], endings: Endings) => {
    const m = modes.get(tag) ?? { turns: [], endings: noEndings() };
    m.turns.push(...turns);
    addEndings(m.endings, endings);
    modes.set(tag, m);
  };
  for (let run = 0; run < ctx.runs; run++) {
    const server = await spawnServer({
      DATA_DIR: tempDir('avatar-bench-'),
      ...(llm === 'offline' ? { LLM_PROVIDER: 'offline' } : {}),
      ...(remote ? { LLM_PROVIDER: 'openai', LLM_BASE_URL: remote.server.baseUrl } : {}),
      LOG_LEVEL: 'info',
      PRELOAD_MODELS: 'true',
    });
    try {
      await waitWarm(server);
      // The warm-up asks the default model once: a stand-in never asked was never the server's model.
      if (remote && remote.counts().requests === 0) throw new Error('the server warmed up without asking the remote stand-in (LLM_BASE_URL not taken?)');
      const key = server.bootstrapKey as string;
      if (parts.includes('turns')) {
        const r = await textTurns(server.url, key);
        text.audio.push(...r.audio);
        text.image.push(...r.image);
        for (const line of plan.lines) {
          for (const mode of plan.modes) {
            const tag = modeTag(mode, line);
            const r = await voiceTurns(ctx, server, key, mode, line, plan.samples, `${llm} ${tag}`);
            gather(tag, r.turns, r.endings);
          }
        }
      }
      if (parts.includes('concurrent')) {
        const r = await concurrentTurns(ctx, server, key, plan, `${llm} ${concurrentTag(plan)}`);
        gather(concurrentTag(plan), r.turns, r.endings);
      }
      for (const [id, t] of responseTimings(server)) timings.set(id, t);
    } catch (err) {
      throw new Error(`${(err as Error).message.slice(0, 300)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    const voice = [...modes].map(([tag, m]) => `${tag} ${median(m.turns.map((t) => t.fromSpeechEndMs).filter((x): x is number => x !== null))} ms`);
    const asked = remote ? `; remote stand-in so far: ${countsText(remote)}` : '';
    ctx.log(`${llm} run ${run + 1}: ${text.audio.length > 0 ? `text first audio p50 ${median(text.audio)} ms; ` : ''}voice p50 (so far) ${voice.join(', ')}${asked}`);
  }
  const tag = `[${llm}]`;
  if (parts.includes('turns')) {
    metrics.push(summarise(`${tag} text: response.create → first output_audio.delta`, 'ms', text.audio));
    metrics.push(summarise(`${tag} text: response.create → first output_image.delta`, 'ms', text.image));
  }
  for (const [mode, m] of modes) {
    metrics.push(...turnMetrics(`${tag} ${mode}`, m.turns, timings));
    notes.push(...turnNotes(`${tag} ${mode}`, m.turns, m.endings));
  }
}

const countsText = (remote: RemoteStandIn) => {
  const c = remote.counts();
  return `${c.requests} requests, ${c.aborted} aborted before their end (${c.abortedBeforeFirstToken} before their first token, ${c.aborted - c.abortedBeforeFirstToken} after)`;
};

function remoteNote(remote: RemoteStandIn): string {
  return (
    `[remote]: a chat-completions server started by the bench on 127.0.0.1 in place of a hosted model (no internet here), paced: ${describePacing(remote.pacing)}; ${countsText(remote)}. ` +
    "Aborted after the first token: the server's start-up warm-up (it reads one token and stops, once a run), and replies still streaming when the bench cancels them after their first audio or the speaker goes on; before it: replies the server started and abandoned unheard"
  );
}

const modeTag = (mode: TurnMode, line: Line) => `${mode}, ${line}`;
const concurrentTag = (plan: VoicePlan) => `concurrent ×${plan.sessions} (server_vad, ${plan.concurrentLine}, audio only)`;

function voiceParams(llms: Llm[], parts: Part[], plan: VoicePlan, runs: number, pacing: RemotePacing | null): Record<string, unknown> {
  const speakers = new Map<string, string[]>();
  for (const s of plan.samples) speakers.set(s.speaker, [...(speakers.get(s.speaker) ?? []), s.label.slice(0, s.label.indexOf(':'))]);
  return {
    llm: llms.join(', '),
    runs,
    ...(pacing ? { remote_stand_in_pacing: { first_token_ms: pacing.firstTokenMs, tokens_per_s: pacing.tokensPerS } } : {}),
    ...(parts.includes('turns')
      ? {
          text_turns_per_run: TEXT_TURNS,
          voice_modes: plan.modes.flatMap((m) => plan.lines.map((l) => modeTag(m, l))),
          voice_turns_per_run_and_mode: plan.samples.length,
        }
      : {}),
    speaker_set: plan.speakerSet,
    speakers: [...speakers.values()].map((names) => [...new Set(names)].join(' / ')).join(', '),
    complete_questions: COMPLETE_QUESTIONS.join(' '),
    paused_questions: PAUSED_QUESTIONS.map(([, s, ms]) => `${ms} ms in "${s}"`).join('; '),
    answers_to_be_cut: THEN_MORE.map(([a, b, ms]) => `"${a}" ${ms} ms "${b}"`).join('; '),
    noise_line: `pink noise, ${NOISE_DBFS.join(' / ')} dBFS RMS by sample in turn, seeded per sample`,
    ...(parts.includes('concurrent') ? { concurrent_sessions: plan.sessions, concurrent_turns_per_session: CONCURRENT_TURNS, concurrent_line: plan.concurrentLine } : {}),
    turn_detection: TURN_DETECTIONS,
    video: '512x512 JPEG @ 25 fps (audio only in the concurrent sessions)',
  };
}

/** TEXT_TURNS measured text turns on one connection, after one unmeasured. */
async function textTurns(url: string, key: string): Promise<{ audio: number[]; image: number[] }> {
  const out: { audio: number[]; image: number[] } = { audio: [], image: [] };
  const { c } = await connect(url, key, TURN_DETECTIONS.server_vad);
  await textTurn(c, 'Hi there.'); // not measured: the first turn of a connection
  for (let i = 0; i < TEXT_TURNS; i++) {
    const r = await textTurn(c, TEXT_QUESTIONS[i % TEXT_QUESTIONS.length]!);
    out.audio.push(r.audioMs);
    out.image.push(r.imageMs);
  }
  await c.close();
  return out;
}

/** Every sample in turn on a new session of `mode` on `line`. */
function voiceTurns(ctx: BenchContext, server: ServerProcess, key: string, mode: TurnMode, line: Line, samples: Sample[], tag: string): Promise<ModeTurns> {
  return sessionTurns(ctx, server, () => connect(server.url, key, TURN_DETECTIONS[mode]), samples, line, tag);
}

/** plan.sessions audio-only sessions at once, each asking CONCURRENT_TURNS questions of its own (see the header). */
async function concurrentTurns(ctx: BenchContext, server: ServerProcess, key: string, plan: VoicePlan, tag: string): Promise<ModeTurns> {
  const pool = plan.samples.filter((s) => s.kind !== 'then-more');
  const stride = Math.max(1, Math.floor(pool.length / plan.sessions));
  const random = seededRandom(20260101);
  const offsets = Array.from({ length: plan.sessions }, () => Math.round(random() * CONCURRENT_SPREAD_MS));
  const sessions = await Promise.all(
    offsets.map(async (offset, s) => {
      await new Promise((r) => setTimeout(r, offset));
      const samples = Array.from({ length: CONCURRENT_TURNS }, (_, k) => pool[(s * stride + k) % pool.length]!);
      return sessionTurns(ctx, server, () => connectWhenFree(server.url, key), samples, plan.concurrentLine, `${tag} session ${s + 1}`);
    }),
  );
  const out: ModeTurns = { turns: sessions.flatMap((x) => x.turns), endings: noEndings() };
  for (const x of sessions) addEndings(out.endings, x.endings);
  return out;
}

/**
 * `samples` in turn on a session from `open`, each explained from the server's log once its
 * session has closed; a session that wedged is closed and the rest go to a new one.
 */
async function sessionTurns(ctx: BenchContext, server: ServerProcess, open: () => Promise<EndpointSession>, samples: Sample[], line: Line, tag: string): Promise<ModeTurns> {
  const out: ModeTurns = { turns: [], endings: noEndings() };
  let s: EndpointSession | null = null;
  let turns: VoiceTurn[] = [];
  const finish = async (session: EndpointSession) => {
    // Its socket is dropped where the server does not close it in 5 s (a wedged session may not).
    await closeSession(session);
    out.turns.push(...turns);
    addEndings(out.endings, explainTurns(ctx, tag, server.stdout(), session.c, turns, VERBOSE));
    turns = [];
  };
  for (const sample of samples) {
    s ??= await open();
    const turn = await streamTurn(s.c, sample, line);
    turns.push(turn);
    if (turn.wedged) {
      await finish(s);
      s = null;
    }
  }
  if (s) await finish(s);
  return out;
}

/**
 * An audio-only server_vad session, retried for a few seconds: the sessions of the voice turns
 * before have closed, but their worker slots are given back as the server ends them.
 */
async function connectWhenFree(url: string, key: string): Promise<EndpointSession> {
  for (let tries = 0; ; tries++) {
    try {
      return await connect(url, key, TURN_DETECTIONS.server_vad, { output_modalities: ['audio'] });
    } catch (err) {
      if (tries >= 20) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}


async function textTurn(c: RealtimeTestClient, text: string): Promise<{ audioMs: number; imageMs: number }> {
  const from = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  await c.waitFor('conversation.item.done', { from });
  const t0 = performance.now();
  const seen: Record<string, number> = {};
  const listener = (data: Buffer) => {
    const type = (JSON.parse(data.toString()) as ServerEvent).type;
    seen[type] ??= Math.round(performance.now() - t0);
  };
  c.ws.on('message', listener);
  c.send({ type: 'response.create' });
  // Only the start is measured: cancel once both have arrived instead of listening to the whole reply.
  await c.waitFor('response.output_audio.delta', { from, timeoutMs: 60_000 });
  await c.waitFor('response.output_image.delta', { from, timeoutMs: 60_000 });
  c.send({ type: 'response.cancel' });
  await c.waitFor('response.done', { from, timeoutMs: 60_000 });
  c.ws.off('message', listener);
  return { audioMs: seen['response.output_audio.delta']!, imageMs: seen['response.output_image.delta']! };
}

export default bench;
