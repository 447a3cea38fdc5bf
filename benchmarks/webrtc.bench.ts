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
 *    video of one tick leave the server together with the same pts, so the offset is a frame's time
 *    from its last packet to the screen (requestVideoFrameCallback receiveTime → callback) minus
 *    the audio's jitter-buffer delay (getStats). What a viewer sees, per speech onset (the reply's
 *    first sound, and each phrase after a pause of 150 ms or more, over SPEAK_MS of each turn): the
 *    onset of the mouth opening in the presented frames (the grey level of the default face's mouth
 *    box in the framed 512x512 frame, harness/clients/browser.ts DEFAULT_FACE_MOUTH_BOX, darkening
 *    from its level before the turn) minus the speech onset in the played-out audio (blocks timed
 *    on the audio thread at their output), paired from 400 ms early to 600 ms late
 *    (harness/measures/onsets.ts); this includes the animation's own timing and the first sound of
 *    a word being audible before the mouth opens for its vowel.
 * Capacity, with light node-datachannel callers (no decoding, so the browser does not take the
 * server's CPU): the most calls at 25 fps with no late frame, both by the server's render loop
 * (its per-session `media session closed` log line) and at the receiver (frames arriving more than
 * one frame period after the stream's RTP clock says), for idle calls (the avatar listening) and
 * for calls whose avatars all talk at once; and server CPU per call (/proc, the server process).
 *
 * Environment: WEBRTC_BENCH_TURN=semantic_vad|server_vad (the calls' turn detection: a new
 * session's default, semantic_vad eagerness auto, unless server_vad at 500 ms is asked for, as
 * runs before 2026-12-02 had it), WEBRTC_BENCH_PROFILES=embedded,offline (which browser runs), WEBRTC_BENCH_CAPACITY=0
 * (skip capacity), WEBRTC_BENCH_DUMP=file (append each turn's raw page samples as JSON lines),
 * WEBRTC_BENCH_VERBOSE=1 (where each voice turn's time went: its steps from the end of speech by the
 * page's events, and what the server logged about it: `turn ended` with its speculativeTranscript /
 * earlyReply flags, `early reply taken`, `response timing`).
 */
import fs from 'node:fs';
import type { Page } from 'playwright-core';
import type { ServerProcess } from '../harness/servers/process.js';
import { callIn, chromiumAvailable, DEFAULT_FACE_MOUTH_BOX, eventsIn, launchBrowser, type PageSamples, type TestBrowser } from '../harness/clients/browser.js';
import { espeak } from '../harness/measures/speech.js';
import { AGENT_IDLE, AGENT_TALKING, CAPACITY_SERVER_ENV, audioOnset, describeOnsets, mostCalls, pageOnsets, sleep, startSampledCall, waitForEvent, withServer, type CapacityPoint } from './lib/call-measures.js';
import { noOffsets, offsetsByKind, type OnsetOffsets, type OnsetPair } from '../harness/measures/onsets.js';
import { median, summarise, type Benchmark, type Metric } from './lib/harness.js';

/** Calls per run in the browser; each has TEXT_TURNS text turns and VOICE_TURNS voice turns. */
const CALLS_PER_RUN = 2;
const TEXT_TURNS = 2;
const VOICE_TURNS = 2;
/** How long the avatar speaks in each turn before it is cancelled, ms: a few phrases. */
const SPEAK_MS = 4000;
/** Capacity: seconds measured per step, after the calls have settled. */
const WINDOW_S = 10;
/** The calls' turn detection (WEBRTC_BENCH_TURN, see the header). */
const TURN_DETECTIONS = { semantic_vad: { type: 'semantic_vad', eagerness: 'auto' }, server_vad: { type: 'server_vad', silence_duration_ms: 500 } } as const;
function turnDetection(): (typeof TURN_DETECTIONS)[keyof typeof TURN_DETECTIONS] {
  const name = process.env.WEBRTC_BENCH_TURN || 'semantic_vad';
  if (!Object.hasOwn(TURN_DETECTIONS, name)) throw new Error(`WEBRTC_BENCH_TURN: '${name}' is not one of ${Object.keys(TURN_DETECTIONS).join(', ')}`);
  return TURN_DETECTIONS[name as keyof typeof TURN_DETECTIONS];
}
const QUESTIONS = ['What is the weather like today?', 'Can you tell me a short story?', 'How are you doing this morning?', 'What should I cook for dinner?'];

const PROFILES = [
  { name: 'embedded', label: 'embedded defaults (npm start: Qwen 0.5B GGUF, Piper, Whisper tiny.en, Silero, Smart Turn)', env: {} as Record<string, string> },
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
  /** Mouth onset − speech onset at the receiver, by kind of speech onset (harness/measures/onsets.ts). */
  onsets: OnsetOffsets;
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
      const l: Latencies = { answer: [], firstFrame: [], textToStarted: [], textToHeard: [], voiceToStarted: [], voiceToHeard: [], voiceStoppedToStarted: [], onsets: noOffsets(), streamOffset: [] };
      for (let run = 0; run < ctx.runs; run++) {
        await withServer(profile.env, async (server) => {
          const browser = await launchBrowser({ microphone: 'silence' });
          try {
            for (let c = 0; c < CALLS_PER_RUN; c++) await oneCall(browser, server, l, ctx.log);
          } finally {
            await browser.close();
          }
        });
        ctx.log(`${profile.name} run ${run + 1}: answer p50 ${median(l.answer).toFixed(0)} ms, first frame ${median(l.firstFrame).toFixed(0)} ms, text → started ${median(l.textToStarted).toFixed(0)} ms, voice → started ${median(l.voiceToStarted).toFixed(0)} ms, A/V at the first sound ${median(l.onsets.firstSound).toFixed(0)} ms, after a pause ${median(l.onsets.afterPause).toFixed(0)} ms`);
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
        summarise(`${p}A/V offset at the receiver: mouth opening onset − the reply's first sound`, 'ms', l.onsets.firstSound),
        summarise(`${p}A/V offset at the receiver: mouth opening onset − a phrase's first sound after a pause`, 'ms', l.onsets.afterPause),
      );
      notes.push(`[${profile.name}] ${profile.label}.`);
      notes.push(`[${profile.name}] speech onsets without a mouth onset from 400 ms before to 600 ms after: ${l.onsets.missing}; bilabial starts left out: ${l.onsets.bilabial}.`);
    }
    let capacitySteps: CapacityPoint[] | undefined;
    if (process.env.WEBRTC_BENCH_CAPACITY !== '0') {
      const capacity = await measureCapacity(ctx.log);
      metrics.push(
        summarise('server CPU per idle call (avatar listening, 25 fps H.264 + Opus)', '% of a core', capacity.idleCpuPerCall),
        summarise('server CPU per talking call (at the largest all-talking step that kept time)', '% of a core', capacity.talkingCpuPerCall),
        summarise('most concurrent idle calls at 25 fps, no late frame', 'calls', [capacity.maxIdle]),
        summarise('most concurrent calls all talking at once at 25 fps, no late frame', 'calls', [capacity.maxTalking]),
      );
      notes.push(...capacity.notes);
      capacitySteps = capacity.steps;
    }
    notes.push('Goals (issue 9): answer ≤ 100 ms, first frame ≤ 300 ms, A/V offset within ±40 ms, ≥ 12 calls.');
    return {
      params: { calls_per_run: CALLS_PER_RUN, text_turns_per_call: TEXT_TURNS, voice_turns_per_call: VOICE_TURNS, runs: ctx.runs, video: '512x512 H.264 @ 25 fps', turn_detection: turnDetection(), capacity_window_s: WINDOW_S, ...(capacitySteps ? { capacity_steps: capacitySteps } : {}) },
      metrics,
      notes,
    };
  },
};

async function oneCall(browser: TestBrowser, server: ServerProcess, l: Latencies, log: (line: string) => void): Promise<void> {
  const page = await browser.newPage();
  try {
    const session = { type: 'realtime', audio: { input: { turn_detection: turnDetection() } } };
    const { started, first } = await startSampledCall(page, server, session, DEFAULT_FACE_MOUTH_BOX);
    l.answer.push(started.postMs);
    l.firstFrame.push(first.firstFrameAt - first.answeredAt);
    await sleep(1500); // idle frames: the mouth's resting range
    for (let i = 0; i < TEXT_TURNS; i++) {
      const from = (await eventsIn(page)).length;
      await callIn(page, 'send', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: QUESTIONS[i % QUESTIONS.length] }] } });
      await waitForEvent(page, 'conversation.item.done', from);
      const t0 = await callIn<number>(page, 'send', { type: 'response.create' });
      const turn = await measureTurn(page, t0, from, log);
      l.textToStarted.push(turn.startedAt - t0);
      if (turn.heardAt) l.textToHeard.push(turn.heardAt - t0);
      if (turn.onsets) offsetsByKind(turn.onsets, l.onsets);
      if (turn.streamOffset !== null) l.streamOffset.push(turn.streamOffset);
    }
    for (let i = 0; i < VOICE_TURNS; i++) {
      const from = (await eventsIn(page)).length;
      const since = Date.now();
      const speech = questionSpeech(QUESTIONS[(i + 1) % QUESTIONS.length]!);
      const endAt = await callIn<number>(page, 'speak', Array.from(speech.samples), speech.rateHz);
      const turn = await measureTurn(page, endAt, from, log);
      if (process.env.WEBRTC_BENCH_VERBOSE === '1') logVoiceTurn((await eventsIn(page)).slice(from), endAt, serverLogEntries(server.stdout(), since), log);
      l.voiceToStarted.push(turn.startedAt - endAt);
      if (turn.stoppedAt) l.voiceStoppedToStarted.push(turn.startedAt - turn.stoppedAt);
      if (turn.heardAt) l.voiceToHeard.push(turn.heardAt - endAt);
      if (turn.onsets) offsetsByKind(turn.onsets, l.onsets);
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
 * SPEAK_MS, cancels, and reads the onsets from the page's samples: every speech onset (the first
 * sound, each phrase after a pause) with its mouth onset (call-measures pageOnsets).
 */
async function measureTurn(
  page: Page,
  t0: number,
  from: number,
  log: (line: string) => void,
): Promise<{ startedAt: number; stoppedAt: number | null; heardAt: number | null; onsets: OnsetPair[] | null; streamOffset: number | null }> {
  const started = await waitForEvent(page, 'output_audio_buffer.started', from, 60_000);
  const stopped = (await eventsIn(page)).slice(from).find((e) => e.type === 'input_audio_buffer.speech_stopped');
  await sleep(SPEAK_MS);
  await callIn(page, 'send', { type: 'response.cancel' });
  await waitForEvent(page, 'response.done', from, 30_000);
  const s = await callIn<PageSamples>(page, 'takeSamples');
  await sleep(1500); // back to idle before the next turn, whose baseline comes from these frames
  if (process.env.WEBRTC_BENCH_DUMP) fs.appendFileSync(process.env.WEBRTC_BENCH_DUMP, JSON.stringify({ t0, startedAt: started.at, stoppedAt: stopped?.at, s, ev: (await eventsIn(page)).slice(from).filter((e) => !e.type.includes('delta')).map((e) => [e.type, Math.round(e.at - t0)]) }) + '\n');
  const heardAt = audioOnset(s, t0);
  // The face at rest: before the reply left the server (a voice turn's t0 is the end of the
  // user's speech, while the face was still listening).
  const onsets = pageOnsets(s, t0, started.at);
  log(`    turn onsets (mouth − sound, ${s.audioClock} clock): ${describeOnsets(onsets)}`);
  // Both streams leave the server together (audio and frame of one tick, same pts): the offset
  // at the receiver is how much longer a frame takes from its last packet to the screen than a
  // sample from its packet to playout.
  const videoDelays = s.frames.filter((f) => f.t > t0 && f.receivedAt > 0).map((f) => f.t - f.receivedAt);
  const audioBufferMs = s.samples.at(-1)?.audioBufferMs ?? 0;
  return {
    startedAt: started.at,
    stoppedAt: stopped?.at ?? null,
    heardAt,
    onsets,
    streamOffset: videoDelays.length > 10 && audioBufferMs > 0 ? median(videoDelays) - audioBufferMs : null,
  };
}

/**
 * Where a voice turn's time went (WEBRTC_BENCH_VERBOSE): the steps after the end of speech by the
 * page's events, and the server's own account: whether the turn was answered from the pause's
 * speculative transcript and with its early reply (a transcript that arrives after
 * speech_stopped is still that pause's, but too late for the early reply), and the response's
 * critical path from its start.
 */
function logVoiceTurn(events: Array<{ type: string; at: number; [field: string]: any }>, endAt: number, serverLog: Array<Record<string, unknown>>, log: (line: string) => void): void {
  const stopped = events.find((e) => e.type === 'input_audio_buffer.speech_stopped');
  const first = (type: string) => events.find((e) => e.type === type && (e.item_id === undefined || e.item_id === stopped?.item_id));
  const step = (type: string, label: string) => {
    const at = first(type)?.at;
    return `${label} ${at === undefined ? '-' : Math.round(at - endAt)}`;
  };
  log(`    voice turn, ms from the end of speech: ${[
    step('input_audio_buffer.speech_stopped', 'speech_stopped'),
    step('conversation.item.input_audio_transcription.completed', 'transcript'),
    step('response.created', 'response.created'),
    step('output_audio_buffer.started', 'output_audio_buffer.started'),
  ].join(', ')}`);
  for (const entry of serverLog) {
    if (entry.msg === 'turn ended') log(`    server: turn ended by ${entry.endedBy}, speculativeTranscript ${entry.speculativeTranscript}, earlyReply ${entry.earlyReply}`);
    if (entry.msg === 'early reply taken') log(`    server: early reply taken, ${entry.readyChars} characters ready, ${entry.ageMs} ms old`);
    if (entry.msg === 'response timing') log(`    server: response timing (${entry.status}), ms from its start: first text ${entry.firstTextMs}, first clause ${entry.firstClauseMs}, first voice chunk ${entry.firstVoiceChunkMs}, first audio ${entry.firstAudioMs}`);
  }
}

/** The server's JSON log lines in `output` stamped at `sinceMs` (epoch ms) or later; its banner and other plain lines skipped. */
function serverLogEntries(output: string, sinceMs: number): Array<Record<string, unknown>> {
  const entries: Array<Record<string, unknown>> = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (Date.parse(String(entry.time)) >= sinceMs) entries.push(entry);
    } catch {
      // a line still being written (its rest not read yet): not this turn's
    }
  }
  return entries;
}

/** A question spoken by espeak-ng, cut after its last audible sample (espeak pads ~300 ms). */
function questionSpeech(text: string): { samples: Float32Array; rateHz: number } {
  const { samples, rateHz } = espeak(text);
  let end = samples.length;
  while (end > 0 && Math.abs(samples[end - 1]!) < 0.01) end--;
  return { samples: samples.subarray(0, end), rateHz };
}

interface Capacity {
  idleCpuPerCall: number[];
  talkingCpuPerCall: number[];
  maxIdle: number;
  maxTalking: number;
  notes: string[];
  /** Every step tried, for the report's capacity curves. */
  steps: CapacityPoint[];
}

async function measureCapacity(log: (line: string) => void): Promise<Capacity> {
  const result: Capacity = { idleCpuPerCall: [], talkingCpuPerCall: [], maxIdle: 0, maxTalking: 0, notes: [], steps: [] };
  await withServer(
    { LLM_PROVIDER: 'offline' },
    async (server) => {
      const idle = await mostCalls(server, AGENT_IDLE, [1, 4, 8, 12, 16, 20, 24, 28, 32], WINDOW_S, (line) => log(`capacity idle ${line}`));
      const talking = await mostCalls(server, AGENT_TALKING, [1, 4, 8, 10, 12, 13, 14, 15, 16, 18, 20], WINDOW_S, (line) => log(`capacity talking ${line}`));
      result.maxIdle = idle.most;
      result.maxTalking = talking.most;
      result.idleCpuPerCall = idle.cpuPerCall === null ? [] : [idle.cpuPerCall];
      result.talkingCpuPerCall = talking.cpuPerCall === null ? [] : [talking.cpuPerCall];
      result.notes.push(`Capacity, idle calls (avatar listening): ${idle.steps.join('; ')}.`);
      result.notes.push(`Capacity, all avatars talking (back-to-back replies of the offline responder, Piper voice): ${talking.steps.join('; ')}.`);
      result.steps.push(...idle.points.map((p) => ({ ...p, load: 'idle (avatar listening)' })), ...talking.points.map((p) => ({ ...p, load: 'all talking' })));
    },
    CAPACITY_SERVER_ENV,
  );
  return result;
}

export default bench;
