/**
 * Realtime latency as a user gets it, over a real WebSocket against the real server process (its
 * own process, real store, real media plane), for each language model setting:
 *  - `default`: the embedded defaults as `npm start` runs them (local Qwen GGUF, Piper/flite,
 *    Whisper base, Silero, Smart Turn);
 *  - `offline`: the rule-based offline responder in place of the model (the server alone).
 * REALTIME_BENCH_LLM=default|offline|both (default both) chooses; REALTIME_BENCH_VERBOSE=1 prints
 * how each voice turn ended (when, by the silence or the model, its probability) and every turn
 * the server ended with its transcript (a cut-in shows as the first words of a sentence).
 * REALTIME_BENCH_PARTS=turns,tools (default both) chooses the parts: `turns` the text and voice
 * turns below, `tools` the tool round trip; REALTIME_BENCH_PARTS=tools runs the tool round trip alone.
 *
 * Text turns: response.create → first response.output_audio.delta (and first image delta).
 *
 * Voice turns, for each turn detection (server_vad at 500 ms, semantic_vad eagerness auto): the
 * same recorded questions streamed in real time (20 ms appends, silence after), spoken by the
 * server's offline voices (Piper joe and flite's four speakers); some are sentences with a 300–600
 * ms pause in the middle (the whole sentence spoken, then silence put in at a word boundary, see
 * test/helpers/voices.ts). Per turn:
 *  - end of speech → first output_audio.delta (the figure users feel);
 *  - false cut-in: a turn ended (speech_stopped) in the middle of a paused question;
 *  - a breakdown: end-of-turn decision (end of speech → speech_stopped), transcription tail
 *    (speech_stopped → transcription.completed), then from the server's 'response timing' log:
 *    model first token and first clause (response start → first clause handed to the voice), voice first chunk
 *    (→ its first chunk queued on the avatar), first tick (→ first audio played out), and the
 *    rest (response.created → first delta at the client, minus those). A response that took an
 *    early reply (the model started on the pause's transcript before the turn ended) has its
 *    model steps counted from the response's start, so they shrink by the head start; how many
 *    did is in the notes.
 *
 * Tool round trip (REALTIME_BENCH_PARTS=tools): lib/tool-round-trip.ts says what it measures.
 */
import { spawnServer } from '../test/helpers/process.js';
import { tempDir } from '../test/helpers/server.js';
import type { RealtimeTestClient, ServerEvent } from '../test/helpers/realtime-client.js';
import { concatSamples, silence, toPcm16 } from '../test/helpers/speech.js';
import { pausedSpeech, testVoices, voiceSpeech } from '../test/helpers/voices.js';
import { median, summarise, type BenchContext, type BenchOutput, type Benchmark, type Metric } from './lib/harness.js';
import { connect, waitWarm, type ResponseTiming } from './lib/realtime-session.js';
import { TOOL_LLMS, runTools } from './lib/tool-round-trip.js';

const RATE_HZ = 24000;
const TEXT_TURNS = 10;
const APPEND_MS = 20;
const LEAD_MS = 300;
/** Silence streamed after the speech at most (past semantic_vad's 4 s ceiling). */
const TAIL_MS = 5000;

/** REALTIME_BENCH_VERBOSE=1: print how every voice turn ended, not only the slow ones. */
const VERBOSE = process.env.REALTIME_BENCH_VERBOSE === '1';

const TURN_DETECTIONS = {
  server_vad: { type: 'server_vad', silence_duration_ms: 500 },
  semantic_vad: { type: 'semantic_vad', eagerness: 'auto' },
} as const;
type TurnMode = keyof typeof TURN_DETECTIONS;

const TEXT_QUESTIONS = ['Hello, who are you?', 'What can you do for me?', 'Tell me about the weather.', 'How are you today?', 'What time is it?'];
const QUESTIONS = [
  'What is the capital of France?',
  'Can you tell me a joke about cats?',
  'How are you doing today?',
  'What should I cook for dinner tonight?',
  'Tell me something interesting about the moon.',
  'Where is the nearest train station?',
];
/** [words before the pause, the whole sentence, pause ms]. */
const PAUSED: Array<[string, string, number]> = [
  ['I would like to book a table for', 'I would like to book a table for two people tonight.', 400],
  ['Can you tell me about the', 'Can you tell me about the history of Rome?', 600],
  ['So what I was thinking is that', 'So what I was thinking is that we could go to the park.', 300],
  ['My favourite colour is', 'My favourite colour is blue, what is yours?', 500],
];

const PARTS = ['turns', 'tools'] as const;

interface Sample {
  label: string;
  audio: Int16Array;
  /** Where the speech ends in `audio` (samples), and where its pause begins and ends (null: none). */
  speechEnd: number;
  pause: [number, number] | null;
}

interface VoiceTurn {
  /** The item of the turn that ended after the speech. */
  itemId: string | null;
  fromSpeechEndMs: number | null;
  falseCutIn: boolean;
  decisionMs: number | null;
  transcriptionTailMs: number | null;
  responseId: string | null;
  createdToDeltaMs: number | null;
}

const bench: Benchmark = {
  name: 'realtime',
  description: 'realtime latency as a user gets it: text turns (response.create → first audio) and voice turns (end of speech → first audio) under server_vad and semantic_vad, with false cut-ins and a breakdown; tool round trip (function_call_output + response.create → first audio), local model and a paced stand-in remote',
  async run(ctx) {
    const parts = chosen('REALTIME_BENCH_PARTS', PARTS);
    const out: BenchOutput = { params: { parts: parts.join(', ') }, metrics: [], notes: [] };
    for (const part of parts) {
      const r = part === 'turns' ? await runTurns(ctx) : await runTools(ctx, chosen('REALTIME_BENCH_TOOL_LLM', TOOL_LLMS));
      Object.assign(out.params, r.params);
      out.metrics.push(...r.metrics);
      out.notes!.push(...(r.notes ?? []));
    }
    return out;
  },
};

/** The names listed in env var `name` (comma-separated; 'both' or unset: all of `all`). */
function chosen<T extends string>(name: string, all: readonly T[]): T[] {
  const value = process.env[name];
  if (value === undefined || value === '' || value === 'both') return [...all];
  const names = value.split(',').map((x) => x.trim());
  for (const n of names) if (!all.includes(n as T)) throw new Error(`${name}: '${n}' is not one of ${all.join(', ')}`);
  return names as T[];
}

/** Text and voice turns (see the header). */
async function runTurns(ctx: BenchContext): Promise<BenchOutput> {
  const modes = (process.env.REALTIME_BENCH_LLM ?? 'both') === 'both' ? ['default', 'offline'] : [process.env.REALTIME_BENCH_LLM as string];
  const samples = await makeSamples();
  ctx.log(`${samples.length} voice samples (${samples.filter((s) => s.pause).length} with a mid-sentence pause)`);
  const metrics: Metric[] = [];
  const notes: string[] = [];
  for (const llm of modes) {
    const text: { audio: number[]; image: number[] } = { audio: [], image: [] };
    const voice: Record<TurnMode, VoiceTurn[]> = { server_vad: [], semantic_vad: [] };
    const timings = new Map<string, ResponseTiming>();
    /** How each mode's turns ended ('model' or 'silence'), from the server's 'turn ended' log. */
    const endings: Record<TurnMode, string[]> = { server_vad: [], semantic_vad: [] };
    /** Responses that took the reply started before the end of the turn ('early reply taken'). */
    const early: Record<TurnMode, number> = { server_vad: 0, semantic_vad: 0 };
    for (let run = 0; run < ctx.runs; run++) {
      const server = await spawnServer({
        DATA_DIR: tempDir('avatar-bench-'),
        ...(llm === 'offline' ? { LLM_PROVIDER: 'offline' } : {}),
        LOG_LEVEL: 'info',
        PRELOAD_MODELS: 'true',
      });
      try {
        await waitWarm(server);
        const key = server.bootstrapKey as string;
        const c = await connect(server.url, key, TURN_DETECTIONS.server_vad);
        await textTurn(c, 'Hi there.'); // not measured: the first turn of a connection
        for (let i = 0; i < TEXT_TURNS; i++) {
          const r = await textTurn(c, TEXT_QUESTIONS[i % TEXT_QUESTIONS.length]!);
          text.audio.push(r.audioMs);
          text.image.push(r.imageMs);
        }
        await c.close();
        for (const mode of Object.keys(TURN_DETECTIONS) as TurnMode[]) {
          const v = await connect(server.url, key, TURN_DETECTIONS[mode]);
          for (const sample of samples) {
            const turn = await voiceTurn(v, sample);
            voice[mode].push(turn);
            if (turn.falseCutIn) ctx.log(`${llm} ${mode}: false cut-in on "${sample.label}"`);
          }
          await v.close();
          const sessionId = (v.events.find((e) => e.type === 'session.created') as { session?: { id?: string } } | undefined)?.session?.id;
          const ended = new Map<string, { endedBy: string; endOfTurnProbability: number | null }>();
          for (const m of server.stdout().matchAll(/^\{.*"msg":"turn ended".*\}$/gm)) {
            const r = JSON.parse(m[0]) as { sessionId: string; itemId: string; endedBy: string; endOfTurnProbability: number | null };
            if (r.sessionId !== sessionId) continue;
            endings[mode].push(r.endedBy);
            ended.set(r.itemId, r);
          }
          for (const m of server.stdout().matchAll(/^\{.*"msg":"early reply taken".*\}$/gm)) {
            if ((JSON.parse(m[0]) as { sessionId: string }).sessionId === sessionId) early[mode]++;
          }
          if (VERBOSE) {
            // Every turn the server ended, in order, with what it heard (a cut-in shows as the first part of a sentence).
            const heard = new Map<string, string>();
            for (const e of v.events) if (e.type === 'conversation.item.input_audio_transcription.completed') heard.set(e.item_id as string, e.transcript as string);
            for (const [id, r] of ended) ctx.log(`${llm} ${mode}: turn ended by ${r.endedBy} (p=${r.endOfTurnProbability?.toFixed(2)}), heard "${heard.get(id)}"`);
          }
          for (const [i, turn] of voice[mode].slice(-samples.length).entries()) {
            if ((turn.decisionMs ?? 0) <= 1500 && !VERBOSE) continue;
            const how = turn.itemId ? ended.get(turn.itemId) : undefined;
            ctx.log(`${llm} ${mode}: "${samples[i]!.label}" ended ${turn.decisionMs} ms after the speech (${how?.endedBy}, p=${how?.endOfTurnProbability?.toFixed(2)})`);
          }
        }
        for (const m of server.stdout().matchAll(/^\{.*"msg":"response timing".*\}$/gm)) {
          const r = JSON.parse(m[0]) as ResponseTiming & { responseId: string };
          timings.set(r.responseId, r);
        }
      } catch (err) {
        throw new Error(`${(err as Error).message.slice(0, 300)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
      ctx.log(
        `${llm} run ${run + 1}: text first audio p50 ${median(text.audio)} ms; voice p50 server_vad ${median(values(voice.server_vad, 'fromSpeechEndMs'))} ms, semantic_vad ${median(values(voice.semantic_vad, 'fromSpeechEndMs'))} ms`,
      );
    }
    const tag = `[${llm}]`;
    metrics.push(summarise(`${tag} text: response.create → first output_audio.delta`, 'ms', text.audio));
    metrics.push(summarise(`${tag} text: response.create → first output_image.delta`, 'ms', text.image));
    for (const mode of Object.keys(TURN_DETECTIONS) as TurnMode[]) {
      const turns = voice[mode];
      const t = `${tag} ${mode}`;
      metrics.push(summarise(`${t}: end of speech → first audio delta`, 'ms', values(turns, 'fromSpeechEndMs')));
      metrics.push(summarise(`${t}: end-of-turn decision (end of speech → speech_stopped)`, 'ms', values(turns, 'decisionMs')));
      metrics.push(summarise(`${t}: transcription tail (speech_stopped → transcription.completed)`, 'ms', values(turns, 'transcriptionTailMs')));
      const server = turns.map((x) => (x.responseId ? timings.get(x.responseId) : undefined)).filter((x): x is ResponseTiming => x !== undefined);
      const steps = server.filter((s) => s.firstTextMs !== null && s.firstClauseMs !== null && s.firstVoiceChunkMs !== null && s.firstAudioMs !== null);
      metrics.push(summarise(`${t}: model first token`, 'ms', steps.map((s) => s.firstTextMs!)));
      metrics.push(summarise(`${t}: model first clause`, 'ms', steps.map((s) => s.firstClauseMs!)));
      metrics.push(summarise(`${t}: voice first chunk`, 'ms', steps.map((s) => s.firstVoiceChunkMs! - s.firstClauseMs!)));
      metrics.push(summarise(`${t}: first tick (chunk queued → audio played out)`, 'ms', steps.map((s) => s.firstAudioMs! - s.firstVoiceChunkMs!)));
      const paused = turns.filter((_, i) => samples[i % samples.length]!.pause !== null);
      notes.push(`${t}: turns ended by the end-of-turn model ${endings[mode].filter((x) => x === 'model').length}, by silence ${endings[mode].filter((x) => x === 'silence').length}`);
      notes.push(`${t}: responses that took the reply started before the turn ended (early reply) ${early[mode]}, over ${turns.length} voice samples`);
      notes.push(
        `${t}: false cut-ins ${paused.filter((x) => x.falseCutIn).length} of ${paused.length} paused questions, ${turns.filter((x) => x.falseCutIn).length - paused.filter((x) => x.falseCutIn).length} of ${turns.length - paused.length} others; ${turns.filter((x) => x.fromSpeechEndMs === null).length} turns without a reply heard within ${TAIL_MS} ms`,
      );
    }
  }
  return {
    params: {
      llm: modes.join(', '),
      runs: ctx.runs,
      text_turns_per_run: TEXT_TURNS,
      voice_turns_per_run_and_mode: samples.length,
      voices: 'Piper joe (if fetched), flite slt, rms, awb, kal16',
      paused_questions: PAUSED.map(([, s, ms]) => `${ms} ms in "${s}"`).join('; '),
      turn_detection: TURN_DETECTIONS,
      video: '512x512 JPEG @ 25 fps',
    },
    metrics,
    notes: [
      'Goals (issue 12): voice p50 ≤ 600 ms and p95 ≤ 900 ms from the end of speech, no false cut-in on the paused questions; text p50 ≤ 250 ms with the local model.',
      ...notes,
    ],
  };
}

/** Each question once, each paused sentence once, spoken by the voices in turn. */
async function makeSamples(): Promise<Sample[]> {
  const voices = await testVoices();
  const out: Sample[] = [];
  const lead = silence(LEAD_MS, RATE_HZ);
  let n = 0;
  for (const q of QUESTIONS) {
    const voice = voices[n++ % voices.length]!;
    const speech = await voiceSpeech(voice, q, RATE_HZ);
    out.push({ label: `${voice.id}: ${q}`, audio: toPcm16(concatSamples([lead, speech])), speechEnd: lead.length + speech.length, pause: null });
  }
  for (const [prefix, sentence, ms] of PAUSED) {
    const voice = voices[n++ % voices.length]!;
    const { audio, pauseAt } = await pausedSpeech(voice, prefix, sentence, ms, RATE_HZ);
    const start = lead.length + pauseAt;
    out.push({
      label: `${voice.id}: ${sentence} (${ms} ms pause)`,
      audio: toPcm16(concatSamples([lead, audio])),
      speechEnd: lead.length + audio.length,
      pause: [start, start + (ms * RATE_HZ) / 1000],
    });
  }
  return out;
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

/** Streams `sample` in real time, then silence until the reply's first audio (or TAIL_MS). */
async function voiceTurn(c: RealtimeTestClient, sample: Sample): Promise<VoiceTurn> {
  const step = (RATE_HZ * APPEND_MS) / 1000;
  const start = performance.now();
  const wallOf = (sampleIndex: number) => start + (sampleIndex / RATE_HZ) * 1000;
  const speechEnd = wallOf(sample.speechEnd);
  let stoppedAt: number | null = null;
  let itemId: string | null = null;
  let transcribedAt: number | null = null;
  let createdAt: number | null = null;
  let responseId: string | null = null;
  let firstAudio: number | null = null;
  let falseCutIn = false;
  const listener = (data: Buffer) => {
    const now = performance.now();
    const e = JSON.parse(data.toString()) as ServerEvent & { response?: { id: string } };
    if (e.type === 'input_audio_buffer.speech_stopped') {
      // A turn that ends before the speech does cut the speaker off (in the pause, for the paused ones).
      if (now < speechEnd) falseCutIn = true;
      else if (stoppedAt === null) {
        stoppedAt = now;
        itemId = (e as { item_id?: string }).item_id ?? null;
      }
    }
    if (stoppedAt === null) return;
    if (e.type === 'conversation.item.input_audio_transcription.completed') transcribedAt ??= now;
    if (e.type === 'response.created' && createdAt === null) {
      createdAt = now;
      responseId = e.response?.id ?? null;
    }
    if (e.type === 'response.output_audio.delta' && createdAt !== null) firstAudio ??= now;
  };
  c.ws.on('message', listener);
  const total = sample.audio.length + (TAIL_MS * RATE_HZ) / 1000;
  for (let i = 0, n = 0; i < total && firstAudio === null; i += step, n++) {
    // Real-time pacing: a microphone delivers each 20 ms once they have been heard.
    const wait = start + (n + 1) * APPEND_MS - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const part = i < sample.audio.length ? sample.audio.subarray(i, Math.min(sample.audio.length, i + step)) : new Int16Array(step);
    c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
  }
  c.ws.off('message', listener);
  // Quiet the line before the next turn: stop the reply, and let the server settle.
  const from = c.events.length;
  c.send({ type: 'response.cancel' });
  await new Promise((r) => setTimeout(r, 300));
  c.send({ type: 'input_audio_buffer.clear' });
  await c.waitFor('input_audio_buffer.cleared', { from, timeoutMs: 10_000 });
  const ms = (a: number | null, b: number | null) => (a !== null && b !== null ? Math.round(b - a) : null);
  return {
    itemId,
    fromSpeechEndMs: ms(speechEnd, firstAudio),
    falseCutIn,
    decisionMs: ms(speechEnd, stoppedAt),
    transcriptionTailMs: ms(stoppedAt, transcribedAt),
    responseId,
    createdToDeltaMs: ms(createdAt, firstAudio),
  };
}

function values(turns: VoiceTurn[], key: 'fromSpeechEndMs' | 'decisionMs' | 'transcriptionTailMs'): number[] {
  return turns.map((t) => t[key]).filter((v): v is number => v !== null);
}

export default bench;
