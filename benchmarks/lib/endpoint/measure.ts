/**
 * measureEndpoint: the client-side measures of one endpoint that speaks the OpenAI Realtime
 * protocol (endpoint.bench.ts runs it; test/benchmarks/endpoint-target.test.ts calls it directly),
 * the same speech, questions and measures for every target. In order:
 *
 *  1. capabilities (websocket-measures.ts probeCapabilities): what the target does decides what
 *     the other sessions ask for (image frames only where taken);
 *  2. connect → session.created, `connects` dedicated connections, plus every session opened below;
 *  3. text turns on one session, after one unmeasured turn (a connection's first turn warms what
 *     the target keeps per session): → first text, → first audio, → response.done;
 *  4. first frame, `frames` new sessions (only where the target sends image frames);
 *  5. voice turns: the recorded speech (speech.ts) streamed in real time on one server_vad session;
 *     end of speech → first audio, and its breakdown: end-of-turn decision (→ speech_stopped),
 *     transcription tail (speech_stopped → transcription.completed, where the target sends it) and
 *     reply to first audio (the rest: from the later of speech_stopped and a transcript that came
 *     before the audio, to the first audio delta), so the three add up to the whole;
 *  6. barge-in, `bargeIns` sessions;
 *  7. lip sync over WebSocket (websocket-lip-sync.ts), one text turn on each of four faces (lip-faces.ts:
 *     the two standard ones and two uploads), where the target sends image frames: both methods'
 *     figures per face go to params.websocket_lip_sync, and r and the onsets to the `websocket · lip
 *     sync r` and `· lip onset` metrics (method B's named so);
 *  8. WebRTC (webrtc-measures.ts), `webrtcCalls` calls, when asked and possible; the lip-sync
 *     figures of its first turn (r, lag, closed and open shares) go to params.lip_sync and the
 *     metrics `webrtc · lip sync r` (unit r) and `· lip sync lag`, its trace to params.lip_sync_trace,
 *     the A/V offset by turn within a call to settings.webrtc.onsets_by_turn; then, where asked
 *     (`webrtcLipFaces`), one call on each of the four faces, measured at the receiver as over
 *     WebSocket: params.webrtc_lip_sync, and the metrics `webrtc · lip sync r (four faces)` and
 *     `webrtc · lip onset` (method B's named so).
 * The uploads of the four faces are sent once, before the first lip-sync turn, and named by both
 * transports.
 * Between turns and sessions the client waits a seeded 300–1000 ms, so that turns do not fall in
 * step with a target's own clocks (an avatar's 40 ms frame tick) the same way every time.
 *
 * What the target cannot do is reported under params.unsupported ({measure, reason}), never as a
 * failure (a measure the run did not ask for, a count of 0, is under params.not_measured); a
 * measure that ran but got no sample (a turn with no reply) is counted in the notes.
 * A failure of the target itself (the key refused, no session) throws with a plain message.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { seededRandom, summarise, type BenchOutput, type Metric } from '../harness.js';
import type { VoiceTurn } from '../voice-turns.js';
import { openSession, closeSession, shownUrl, type EndpointTarget } from '../../../harness/clients/realtime-session.js';
import { endpointSpeech, type EndpointSpeech } from './speech.js';
import { AV_AFTER_PAUSE, AV_FIRST_SOUND, measureWebRtc, type RtcLipSync } from './webrtc-measures.js';
import { describeFigures, type LipSyncFigures } from '../../../harness/measures/lip-figures.js';
import { FaceRegistry } from '../../../src/media/face-registration.js';
import { lipTurns, showFaces, type LipTurn, type ShownFace } from './lip-faces.js';
import { lipSyncTurn, type WsLipSync } from './websocket-lip-sync.js';
import {
  INSTRUCTIONS,
  SERVER_VAD,
  TEXT_QUESTIONS,
  TRANSCRIPTION,
  bargeIn,
  firstFrame,
  probeCapabilities,
  textSession,
  textTurn,
  voiceTurns,
  type Capabilities,
  type SessionPlan,
} from './websocket-measures.js';

export const METRIC = {
  connect: 'websocket · connect → session.created',
  textAudio: 'websocket · text turn → first audio',
  textText: 'websocket · text turn → first text',
  textDone: 'websocket · text turn → response.done',
  voiceAudio: 'websocket · voice turn → first audio',
  frame: 'websocket · first frame',
  bargeIn: 'websocket · barge-in → silent',
  decision: 'voice turn › end-of-turn decision',
  transcription: 'voice turn › transcription tail',
  reply: 'voice turn › reply to first audio',
  rtcFrame: 'webrtc · first frame',
  rtcAudio: 'webrtc · text turn → first audio played',
  rtcAv: AV_FIRST_SOUND,
  rtcAvPause: AV_AFTER_PAUSE,
  rtcPacing: 'webrtc · frame interval',
  rtcLipR: 'webrtc · lip sync r',
  rtcLipLag: 'webrtc · lip sync lag',
  wsLipR: 'websocket · lip sync r',
  wsLipRB: 'websocket · lip sync r (method B)',
  wsOnset: 'websocket · lip onset (first sound)',
  wsOnsetPause: 'websocket · lip onset (after a pause)',
  wsOnsetB: 'websocket · lip onset (first sound, method B)',
  wsOnsetPauseB: 'websocket · lip onset (after a pause, method B)',
  rtcFacesR: 'webrtc · lip sync r (four faces)',
  rtcFacesRB: 'webrtc · lip sync r (four faces, method B)',
  rtcOnset: 'webrtc · lip onset (first sound)',
  rtcOnsetPause: 'webrtc · lip onset (after a pause)',
  rtcOnsetB: 'webrtc · lip onset (first sound, method B)',
  rtcOnsetPauseB: 'webrtc · lip onset (after a pause, method B)',
} as const;

/** The metrics of one transport's four-face lip sync: r and the onsets, by method A and B. */
interface FaceMetrics {
  r: string;
  rB: string;
  onset: string;
  onsetPause: string;
  onsetB: string;
  onsetPauseB: string;
}
const WS_FACES: FaceMetrics = { r: METRIC.wsLipR, rB: METRIC.wsLipRB, onset: METRIC.wsOnset, onsetPause: METRIC.wsOnsetPause, onsetB: METRIC.wsOnsetB, onsetPauseB: METRIC.wsOnsetPauseB };
const RTC_FACES: FaceMetrics = { r: METRIC.rtcFacesR, rB: METRIC.rtcFacesRB, onset: METRIC.rtcOnset, onsetPause: METRIC.rtcOnsetPause, onsetB: METRIC.rtcOnsetB, onsetPauseB: METRIC.rtcOnsetPauseB };

/** Metrics not in milliseconds. */
const UNIT: Record<string, string> = { [METRIC.rtcLipR]: 'r', [METRIC.wsLipR]: 'r', [METRIC.wsLipRB]: 'r', [METRIC.rtcFacesR]: 'r', [METRIC.rtcFacesRB]: 'r' };

export interface MeasureEndpointOptions {
  /** Base URL of the target (http(s) or ws(s)). */
  url: string;
  key: string;
  /** How the target is named in results (never its key). */
  label: string;
  /** The model asked for in the WebSocket URL's query (default ENDPOINT_MODEL or gpt-realtime). */
  model?: string;
  /** Whether the benchmark started the target itself. */
  startedByBench?: boolean;
  connects?: number;
  textTurns: number;
  frames?: number;
  voiceTurns: number;
  bargeIns?: number;
  /** Whether to run WebSocket lip-sync turns on each of the four faces (lip-faces.ts; default false). */
  lipSyncFaces?: boolean;
  /** Whether to run WebRTC lip-sync calls on each of the four faces (default false). */
  webrtcLipFaces?: boolean;
  /** Lip-sync turns (WebSocket) and calls (WebRTC) per face, the four faces in turn (default 1). */
  lipTurns?: number;
  /** WebRTC calls (0: none); each has `webrtcTurns` text turns. */
  webrtcCalls?: number;
  webrtcTurns?: number;
  /** The face's mouth box in a 512x512 frame, for the WebRTC A/V offset; null: found on the decoded frames. */
  mouthBox?: readonly number[] | null;
  /** Where the recorded speech is kept (speech.ts). */
  speechDir: string;
  seed?: number;
  /** More params to record (the started server's models, its language model setting). */
  params?: Record<string, unknown>;
  log: (line: string) => void;
}

export const DEFAULT_SEED = 20261127;
/** The speech folder is recorded relative to the checkout when it lies inside it. */
const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');

interface Unsupported {
  measure: string;
  reason: string;
}

export async function measureEndpoint(o: MeasureEndpointOptions): Promise<BenchOutput> {
  const target: EndpointTarget = { url: o.url, key: o.key, model: o.model ?? process.env.ENDPOINT_MODEL ?? 'gpt-realtime' };
  const counts = { connects: o.connects ?? 5, textTurns: o.textTurns, frames: o.frames ?? 3, voiceTurns: o.voiceTurns, bargeIns: o.bargeIns ?? 2, webrtcCalls: o.webrtcCalls ?? 0, webrtcTurns: o.webrtcTurns ?? 2 };
  const seed = o.seed ?? DEFAULT_SEED;
  const pause = pauses(seed);
  const log = o.log;
  const samples: Record<string, number[]> = Object.fromEntries(Object.values(METRIC).map((m) => [m, []]));
  const add = (metric: string, ms: number | null) => {
    if (ms !== null && Number.isFinite(ms)) samples[metric]!.push(ms);
  };
  const unsupported: Unsupported[] = [];
  /** Measures this run did not ask for (counts of 0): not the target's doing. */
  const notMeasured: string[] = [];
  const notes: string[] = [];

  log(`${o.label}: probing what the target does`);
  const t0 = performance.now();
  const caps: Capabilities = await probeCapabilities(target);
  const plan: SessionPlan = { modalities: caps.image_frames_out ? ['audio', 'image'] : ['audio'] };
  log(`  image frames out ${caps.image_frames_out}, input images ${caps.input_images}, semantic_vad ${caps.semantic_vad} (${Math.round(performance.now() - t0)} ms)`);

  log(`${o.label}: ${counts.connects} connections`);
  for (let i = 0; i < counts.connects; i++) {
    const s = await openSession(target);
    add(METRIC.connect, s.createdAt - s.openedAt);
    await closeSession(s);
    await pause();
  }

  log(`${o.label}: ${counts.textTurns} text turns (after one unmeasured)`);
  const failedTurns: string[] = [];
  if (counts.textTurns > 0) {
    const s = await textSession(target, plan);
    add(METRIC.connect, s.createdAt - s.openedAt);
    try {
      await textTurn(s, 'Hi there.');
      for (let i = 0; i < counts.textTurns; i++) {
        await pause();
        const question = TEXT_QUESTIONS[i % TEXT_QUESTIONS.length]!;
        const t = await textTurn(s, question);
        add(METRIC.textText, t.firstTextMs);
        add(METRIC.textAudio, t.firstAudioMs);
        add(METRIC.textDone, t.doneMs);
        if (t.status !== 'completed') failedTurns.push(`"${question}": ${t.status}`);
        log(`  text turn ${i + 1}: first text ${t.firstTextMs ?? '-'} ms, first audio ${t.firstAudioMs ?? '-'} ms, done ${t.doneMs ?? '-'} ms (${t.status})`);
      }
    } finally {
      await closeSession(s);
    }
  }
  if (failedTurns.length > 0) notes.push(`text turns not completed: ${failedTurns.join('; ')}`);

  const frameModes: string[] = [];
  if (!caps.image_frames_out) unsupported.push({ measure: METRIC.frame, reason: caps.reasons.image_frames_out ?? 'no image frames' });
  else if (counts.frames > 0) {
    log(`${o.label}: ${counts.frames} first frames`);
    for (let i = 0; i < counts.frames; i++) {
      await pause();
      const f = await firstFrame(target, plan);
      add(METRIC.connect, f.connectMs);
      add(METRIC.frame, f.frameMs);
      frameModes.push(f.frameMs === null ? 'none' : f.idle ? 'idle' : 'with the reply');
      log(`  first frame ${f.frameMs ?? '-'} ms after session.created (${frameModes.at(-1)})`);
    }
    if (samples[METRIC.frame]!.length === 0) {
      caps.image_frames_out = false;
      caps.reasons.image_frames_out = 'output_modalities with image accepted, but no image frame came within 30 s of a greeting';
      unsupported.push({ measure: METRIC.frame, reason: caps.reasons.image_frames_out });
    }
  }

  // The speech is read (or recorded) only once the target has taken a session: a refused key fails first.
  const speech: EndpointSpeech | null = counts.voiceTurns > 0 || counts.bargeIns > 0 ? await endpointSpeech(o.speechDir, log) : null;
  const voiceSamples = speech === null ? [] : Array.from({ length: counts.voiceTurns }, (_, i) => speech.samples[i % speech.samples.length]!);
  let turns: VoiceTurn[] = [];
  if (voiceSamples.length > 0) {
    log(`${o.label}: ${voiceSamples.length} voice turns (recorded speech, real time, server_vad ${SERVER_VAD.silence_duration_ms} ms)`);
    const r = await voiceTurns(target, plan, voiceSamples, log);
    for (const ms of r.connectMs) add(METRIC.connect, ms);
    turns = r.turns;
    for (const t of turns) {
      add(METRIC.voiceAudio, t.fromSpeechEndMs);
      add(METRIC.decision, t.decisionMs);
      add(METRIC.transcription, t.transcriptionTailMs);
      add(METRIC.reply, replyMs(t));
    }
    caps.transcription_events = turns.some((t) => t.transcriptionTailMs !== null);
    if (!caps.transcription_events) {
      caps.reasons.transcription_events = `no conversation.item.input_audio_transcription.completed for the turns' items (transcription ${JSON.stringify(TRANSCRIPTION)} asked for)`;
      unsupported.push({ measure: METRIC.transcription, reason: caps.reasons.transcription_events });
    }
    const unanswered = turns.filter((t) => t.fromSpeechEndMs === null);
    if (unanswered.length > 0) notes.push(`voice turns with no reply audio within 5 s of the end of speech: ${unanswered.map((t) => `"${t.sample.label}" (${t.decisionMs === null ? 'no speech_stopped' : `speech_stopped at ${t.decisionMs} ms`})`).join('; ')}`);
    const wedged = turns.filter((t) => t.wedged).length;
    if (wedged > 0) notes.push(`${wedged} voice turn(s) left a session that did not answer input_audio_buffer.clear within 10 s`);
  }

  const stops: string[] = [];
  if (counts.bargeIns > 0) {
    log(`${o.label}: ${counts.bargeIns} barge-ins`);
    for (let i = 0; i < counts.bargeIns; i++) {
      await pause();
      const b = await bargeIn(target, plan, speech!.samples[i % speech!.samples.length]!);
      add(METRIC.connect, b.connectMs);
      add(METRIC.bargeIn, b.silentMs);
      stops.push(b.how);
      log(`  barge-in: silent ${b.silentMs ?? '-'} ms after the speech began (${b.how})`);
    }
    if (samples[METRIC.bargeIn]!.length === 0) unsupported.push({ measure: METRIC.bargeIn, reason: `the target's audio was never stopped by the user's speech: ${stops[0]}` });
    else if (samples[METRIC.bargeIn]!.length < counts.bargeIns) notes.push(`barge-ins not stopped: ${counts.bargeIns - samples[METRIC.bargeIn]!.length} of ${counts.bargeIns}`);
  }

  /** Each face's figures into a transport's metrics (FaceMetrics); what was not measured, with why, into the notes. */
  const addFaces = (rows: Array<{ face: string; missing: string | null; figures: LipSyncFigures | null }>, m: FaceMetrics, transport: string) => {
    for (const x of rows) {
      const why = x.missing && `${transport} lip sync, ${x.face}: ${x.missing}`;
      if (why && !notes.includes(why)) notes.push(why);
      if (!x.figures) continue;
      add(m.r, x.figures.r);
      x.figures.onsets.firstSound.forEach((ms) => add(m.onset, ms));
      x.figures.onsets.afterPause.forEach((ms) => add(m.onsetPause, ms));
      const b = x.figures.method_b;
      if (!b) continue;
      add(m.rB, b.r);
      b.onsets.firstSound.forEach((ms) => add(m.onsetB, ms));
      b.onsets.afterPause.forEach((ms) => add(m.onsetPauseB, ms));
    }
  };
  const rtcFaces = o.webrtcLipFaces ?? false;
  const shown: ShownFace[] = o.lipSyncFaces || rtcFaces ? await showFaces(target) : [];
  const rounds = Math.max(1, o.lipTurns ?? 1);
  const lipRounds = lipTurns(shown, rounds);

  let wsLipSync: WsLipSync[] | null = null;
  if (!o.lipSyncFaces) notMeasured.push(...Object.values(WS_FACES));
  else if (!caps.image_frames_out) unsupported.push({ measure: METRIC.wsLipR, reason: caps.reasons.image_frames_out ?? 'no image frames' });
  else {
    log(`${o.label}: WebSocket lip sync, ${rounds} turn(s) on each of four faces`);
    wsLipSync = await websocketLipSync(target, lipRounds, log);
    addFaces(wsLipSync, WS_FACES, 'websocket');
  }

  let webrtc: Record<string, unknown> = { calls: 0 };
  let lipSyncTrace: unknown = null;
  let lipSync: LipSyncFigures | null = null;
  let rtcLipSync: RtcLipSync[] | null = null;
  if (counts.webrtcCalls > 0 || rtcFaces) {
    log(`${o.label}: ${counts.webrtcCalls} WebRTC call(s) in Chromium${rtcFaces ? `, then ${rounds} on each of four faces` : ''}`);
    const httpBase = shownUrl(o.url).replace(/^ws/i, 'http');
    const r = await measureWebRtc({ url: httpBase, key: o.key, calls: counts.webrtcCalls, textTurns: counts.webrtcTurns, mouthBox: o.mouthBox ?? null, faces: rtcFaces ? lipRounds : [], log });
    if (r.unsupported) for (const m of [METRIC.rtcFrame, METRIC.rtcAudio, METRIC.rtcAv, METRIC.rtcAvPause, METRIC.rtcPacing, METRIC.rtcLipR, ...(rtcFaces ? [METRIC.rtcFacesR] : [])]) unsupported.push({ measure: m, reason: r.unsupported });
    else {
      if (rtcFaces) {
        rtcLipSync = r.faces;
        addFaces(r.faces, RTC_FACES, 'webrtc');
        for (const x of r.faces) logFigures(log, x.face, x.figures);
      }
      for (const ms of r.firstFrameMs) add(METRIC.rtcFrame, ms);
      for (const ms of r.firstAudioPlayedMs) add(METRIC.rtcAudio, ms);
      for (const ms of r.onsets.firstSound) add(METRIC.rtcAv, ms);
      for (const ms of r.onsets.afterPause) add(METRIC.rtcAvPause, ms);
      if (r.onsets.missing + r.onsets.bilabial > 0) notes.push(`webrtc A/V offset: ${r.onsets.missing} speech onset(s) without a mouth onset from 400 ms before to 600 ms after, ${r.onsets.bilabial} bilabial start(s) left out`);
      for (const ms of r.frameIntervalsMs) add(METRIC.rtcPacing, ms);
      if (r.lipSync) {
        add(METRIC.rtcLipR, r.lipSync.r);
        add(METRIC.rtcLipLag, r.lipSync.lag_ms);
        const share = (x: number | null) => (x === null ? '-' : `${Math.round(100 * x)} %`);
        log(`  webrtc lip sync: r ${r.lipSync.r} at ${r.lipSync.lag_ms} ms, closed in ${share(r.lipSync.closed_share)} of ${r.lipSync.silent_frames} silent frames, open in ${share(r.lipSync.open_share)} of ${r.lipSync.loud_frames} loud ones; r ${r.lipSync.r_audio_shifted_400ms} against audio shifted 400 ms; best within ±300 ms: r ${r.lipSync.wide.r} at ${r.lipSync.wide.lag_ms} ms; face found in ${share(r.lipSync.face_found_share)} of ${r.lipSync.frames_measured} frames`);
        const b = r.lipSync.method_b;
        if (b) log(`  webrtc lip sync, method B (pixels): r ${b.r} at ${b.lag_ms} ms, closed in ${share(b.closed_share)}, open in ${share(b.open_share)}; controls: r ${b.r_audio_shifted_400ms} (audio 400 ms later), ${b.r_audio_earlier_400ms} (earlier), ${b.r_audio_reversed} (reversed); A's controls: ${r.lipSync.r_audio_earlier_400ms} (earlier), ${r.lipSync.r_audio_reversed} (reversed)`);
        else notes.push('webrtc lip sync: method B (pixels) not measured: the first frame with a face could not be registered again');
        if (Math.abs(r.lipSync.wide.lag_ms) > 40 && r.lipSync.wide.r > r.lipSync.r + 0.1) notes.push(`webrtc lip sync: the mouth follows the sound best ${Math.abs(r.lipSync.wide.lag_ms)} ms ${r.lipSync.wide.lag_ms < 0 ? 'ahead of' : 'behind'} it (r ${r.lipSync.wide.r}, against ${r.lipSync.r} within ±40 ms)`);
      }
      if (r.frameIntervalsMs.length > 0) {
        const late = r.frameIntervalsMs.filter((ms) => ms > 60).length;
        const frozen = r.frameIntervalsMs.filter((ms) => ms > 200);
        notes.push(`webrtc frame pacing: ${r.frameIntervalsMs.length} intervals, ${late} late (> 60 ms), ${frozen.length} freezes (> 200 ms${frozen.length ? `, longest ${Math.max(...frozen)} ms` : ''})`);
      }
      for (const [measure, reason] of Object.entries(r.missing)) unsupported.push({ measure, reason });
    }
    notes.push(...r.notes);
    if (r.lipSyncTrace) lipSyncTrace = r.lipSyncTrace;
    lipSync = r.lipSync;
    webrtc = { calls: counts.webrtcCalls, text_turns_per_call: counts.webrtcTurns, offer: 'multipart; Opus send/receive; H.264 receive-only video; oai-events channel', mouth_box: r.mouthBox, onsets_by_turn: r.onsetsByTurn, face_calls: r.faces.length };
  }
  if (counts.webrtcCalls === 0) notMeasured.push(METRIC.rtcFrame, METRIC.rtcAudio, METRIC.rtcAv, METRIC.rtcAvPause, METRIC.rtcPacing);
  if (!rtcFaces) notMeasured.push(...Object.values(RTC_FACES));
  if (counts.voiceTurns === 0) notMeasured.push(METRIC.voiceAudio, METRIC.decision, METRIC.transcription, METRIC.reply);
  if (counts.bargeIns === 0) notMeasured.push(METRIC.bargeIn);
  if (counts.textTurns === 0) notMeasured.push(METRIC.textText, METRIC.textAudio, METRIC.textDone);

  const metrics: Metric[] = Object.entries(samples)
    .filter(([, v]) => v.length > 0)
    .map(([name, v]) => summarise(name, UNIT[name] ?? 'ms', v));
  return {
    params: {
      target: { label: o.label, url: shownUrl(o.url), model: target.model, started_by_bench: o.startedByBench ?? false },
      ...(o.params ?? {}),
      seed,
      lip_sync: lipSync,
      websocket_lip_sync: wsLipSync,
      webrtc_lip_sync: rtcLipSync,
      lip_sync_trace: lipSyncTrace,
      capabilities: {
        image_frames_out: caps.image_frames_out,
        input_images: caps.input_images,
        semantic_vad: caps.semantic_vad,
        transcription_events: caps.transcription_events,
        ...(frameModes.length > 0 ? { first_frames: [...new Set(frameModes)].join(', ') } : {}),
        ...(Object.keys(caps.reasons).length > 0 ? { why_not: caps.reasons } : {}),
      },
      unsupported,
      ...(notMeasured.length > 0 ? { not_measured: notMeasured } : {}),
      speech:
        speech === null
          ? null
          : {
              dir: path.relative(REPO_ROOT, speech.dir).startsWith('..') ? speech.dir : path.relative(REPO_ROOT, speech.dir),
              generated_this_run: speech.generated,
              format: 'PCM16 mono little-endian 24 kHz, raw',
              files: speech.files.map((f) => ({ file: f.file, speaker: f.speaker, text: f.text, sha256: f.sha256, speech_start_ms: f.speech_start_ms, speech_end_ms: f.speech_end_ms })),
            },
      settings: {
        counts,
        instructions: INSTRUCTIONS,
        output_modalities: plan.modalities,
        text_questions: TEXT_QUESTIONS.slice(0, Math.max(1, Math.min(counts.textTurns, TEXT_QUESTIONS.length))),
        turn_detection: SERVER_VAD,
        transcription: TRANSCRIPTION,
        voice_line: 'digital silence, 20 ms input_audio_buffer.append at real time',
        pauses_ms: '300–1000, seeded',
        webrtc,
      },
      definitions: {
        [METRIC.connect]: 'WebSocket connection asked for → session.created arrived',
        [METRIC.textText]: 'response.create sent → first output_text / output_audio_transcript delta',
        [METRIC.textAudio]: 'response.create sent → first output_audio.delta',
        [METRIC.textDone]: 'response.create sent → response.done (whole reply)',
        [METRIC.frame]: 'session.created → first image frame event, a greeting asked for right after session.updated',
        [METRIC.voiceAudio]: 'last audible sample of the speech streamed → first output_audio.delta of the reply',
        [METRIC.decision]: 'end of speech → input_audio_buffer.speech_stopped',
        [METRIC.transcription]: 'speech_stopped → input_audio_transcription.completed',
        [METRIC.reply]: 'the later of speech_stopped and a transcript that came before the audio → first output_audio.delta',
        [METRIC.bargeIn]: "first audible sample of the user's speech over a playing reply → the later of the target's first stop signal and the reply's last audio delta",
        [METRIC.rtcFrame]: 'call POST sent → first video frame presented in Chromium',
        [METRIC.rtcAudio]: 'response.create sent on the data channel → first avatar audio played out at the receiver',
        [METRIC.rtcAv]: 'mouth motion onset − audio onset at the receiver (positive: the picture is late)',
        [METRIC.rtcPacing]: 'time between consecutive presented video frames at the receiver (40 ms at 25 fps; late > 60 ms, frozen > 200 ms)',
        [METRIC.rtcLipR]: "Pearson r of the mouth opening (face found and tracked on the decoded frames, cavity between the lips) against the received speech's RMS around each frame, first call's first turn, -0.5 to +2 s around the first sound, at the best lag within ±40 ms",
        [METRIC.rtcLipLag]: 'the lag of that best r (positive: the mouth trails the sound)',
        [METRIC.wsLipR]: "WebSocket: Pearson r of the mouth opening (method A, as over WebRTC) on every decoded output_image.delta of one reply per face against the reply's output_audio.delta PCM around each frame, both on the server's pts (the audio placed by its ticks: websocket-lip-sync.ts), at the best lag within ±40 ms; one sample per face",
        [METRIC.wsLipRB]: 'the same by method B (the dark and teeth pixels of a mouth region placed once, moved with the upper face)',
        [METRIC.wsOnset]: "WebSocket: mouth onset − the reply's first sound, on the pts (method A; B in the metrics named so); after a pause: each phrase after 150 ms of silence",
        [METRIC.rtcFacesR]: "WebRTC: r as the WebSocket one (method A; B in the metric named so), at the Chromium receiver: one call per face, its first reply, every presented frame from 0.5 s before the first sound to 4 s after against the played-out audio; one sample per face",
        [METRIC.rtcOnset]: 'WebRTC: mouth onset − sound onset at the receiver on the same frames (method A; B in the metrics named so), each call\'s first reply',
      },
    },
    metrics,
    notes,
  };
}

/**
 * One WebSocket lip-sync turn on each face of `faces` in order (lip-faces.ts showFaces, the uploads
 * sent; a face listed again gets another turn); a face that was not uploaded or cannot be shown is
 * reported as missing, with why.
 */
async function websocketLipSync(target: EndpointTarget, faces: LipTurn[], log: (line: string) => void): Promise<WsLipSync[]> {
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'endpoint-ws-faces-'));
  const registry = new FaceRegistry(cacheDir);
  const out: WsLipSync[] = [];
  try {
    for (const face of faces) {
      if (face.id === null) {
        out.push({ face: face.label, question: face.question, missing: face.missing, figures: null, audio_start_pts_ms: null, anchor_agreement: null, frames: 0, audio_ms: 0 });
        continue;
      }
      const x = await lipSyncTurn(target, face.id, face.label, face.question, registry);
      out.push(x);
      log(`  websocket lip sync, ${face.label}, '${face.question}': ${x.frames} frames, ${x.audio_ms} ms of audio, anchor agreement ${x.anchor_agreement ?? '-'}`);
      logFigures(log, face.label, x.figures);
    }
  } finally {
    await registry.close();
    await rm(cacheDir, { recursive: true, force: true });
  }
  return out;
}

/** One face's figures by both methods, a line each (describeFigures). */
function logFigures(log: (line: string) => void, face: string, figures: LipSyncFigures | null): void {
  if (!figures) return;
  log(`    ${face}, method A: ${describeFigures(figures)}; face found in ${Math.round(100 * figures.face_found_share)} % of ${figures.frames_measured} frames`);
  log(`    ${face}, method B: ${figures.method_b ? describeFigures(figures.method_b) : 'not measured (the first frame with a face could not be registered again)'}`);
}

/** The reply's share of a voice turn: end of speech → first audio, less the decision and a transcript awaited before the audio. */
export function replyMs(t: VoiceTurn): number | null {
  if (t.fromSpeechEndMs === null || t.decisionMs === null) return null;
  const tail = t.transcriptionTailMs !== null && t.decisionMs + t.transcriptionTailMs <= t.fromSpeechEndMs ? t.transcriptionTailMs : 0;
  return t.fromSpeechEndMs - t.decisionMs - tail;
}

/** A pause of 300–1000 ms from a seeded generator: the same sequence every run. */
function pauses(seed: number): () => Promise<void> {
  const random = seededRandom(seed);
  return () => new Promise((r) => setTimeout(r, 300 + Math.round(random() * 700)));
}
