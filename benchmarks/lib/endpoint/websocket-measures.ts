/**
 * The endpoint benchmark's measures over WebSocket, from the client's side only (nothing here reads
 * a server's log, so they hold for any target that speaks the OpenAI Realtime protocol):
 *
 *  - probeCapabilities: what the target does, each asked for once and read from its answer (an
 *    `error` naming the event, or no answer in time, is a no): image frames out (session.update
 *    with output_modalities ['audio','image'] accepted and echoed), semantic_vad (accepted and
 *    echoed), input images (a user item with a 16x16 PNG input_image added).
 *  - textTurn: a user text item (added), then response.create → the first text (output_text or
 *    output_audio_transcript delta), the first output_audio.delta, the first image delta and
 *    response.done. The whole reply is waited for.
 *  - firstFrame: a new session asking for images; right after session.updated a greeting is asked
 *    for (a target that sends frames only with a reply shows its first one then, one that streams
 *    idle frames shows it sooner): session.created → the first image frame.
 *  - voice turns: lib/voice-turns.ts streamTurn on a server_vad session, the recorded speech on a
 *    silent line in 20 ms appends at real time.
 *  - bargeIn: a long reply asked for in text; one second into its audio the recorded speech is
 *    streamed in real time; from the first audible sample of the speech to the target's audio
 *    stopping: the later of its first stop signal (input_audio_buffer.speech_started, the reply's
 *    response.done cancelled, output_audio_buffer.cleared, conversation.item.truncated) and the
 *    reply's last audio delta. A target that sends a reply faster than real time has sent it all
 *    before the speech; a client then stops its own playout at the stop signal, which is what is
 *    measured. A reply that was neither signalled nor cut, or whose audio still came at the end of
 *    the wait (the speech and 3 s after it), is 'not stopped' (no sample).
 *
 * Times are performance.now() at the client; each event's arrival is stamped as it comes
 * (harness/clients/realtime-session.ts).
 */
import sharp from 'sharp';
import type { ServerEvent } from '../../../harness/clients/realtime-client.js';
import { RATE_HZ, streamTurn, type Sample, type VoiceTurn } from '../voice-turns.js';
import {
  AUDIO_DELTAS,
  IMAGE_DELTAS,
  TEXT_DELTAS,
  addUserItem,
  closeSession,
  nextIndex,
  openSession,
  responseOf,
  updateSession,
  type EndpointSession,
  type EndpointTarget,
} from '../../../harness/clients/realtime-session.js';
import { speechStart } from './speech.js';
import { toPcm16 } from '../../../harness/measures/speech.js';

/** What every measured session is told, so that replies are short and alike on every target. */
export const INSTRUCTIONS = 'You are a helpful assistant. Answer in one or two short sentences.';
/** Voice turns and barge-in: server_vad as OpenAI documents it, 500 ms of silence. */
export const SERVER_VAD = { type: 'server_vad', silence_duration_ms: 500 } as const;
/** Transcription asked for in voice sessions (OpenAI sends transcription events only when asked). */
export const TRANSCRIPTION = { model: process.env.ENDPOINT_TRANSCRIPTION_MODEL || 'whisper-1' };
export const TEXT_QUESTIONS = ['Hello, who are you?', 'What can you do for me?', 'Tell me about the weather.', 'How are you today?', 'What time is it?'];
const LONG_REPLY = 'Tell me a long story about the sea and the ships on it.';
/** The barge-in reply's own instructions: long enough to be talked over. */
const LONG_INSTRUCTIONS = 'Tell a long story of at least ten sentences.';
const REPLY_TIMEOUT_MS = 120_000;
const FIRST_AUDIO_TIMEOUT_MS = 60_000;
/** Barge-in: how far into the reply's audio the speech starts. */
const BARGE_AFTER_MS = 1000;
/** Barge-in: line streamed after the speech while waiting for the target to stop. */
const BARGE_TAIL_MS = 3000;
/** Barge-in: a reply whose last delta came this close to the end of the wait is still playing. */
const STILL_COMING_MS = 250;

export interface Capabilities {
  image_frames_out: boolean;
  input_images: boolean;
  semantic_vad: boolean;
  /** Whether conversation.item.input_audio_transcription.completed came in the voice turns (null: no voice turn ran). */
  transcription_events: boolean | null;
  /** Why each 'false' is false, by capability. */
  reasons: Record<string, string>;
}

/** What the measured sessions ask for: images only where the target takes them. */
export interface SessionPlan {
  modalities: string[];
}

/** Opens a session and sets it up for the measures (instructions, modalities, turn detection, other audio.input fields). */
export async function measuredSession(target: EndpointTarget, plan: SessionPlan, turnDetection: unknown, audioInput: Record<string, unknown> = {}): Promise<EndpointSession> {
  const s = await openSession(target);
  const answer = await updateSession(s, { instructions: INSTRUCTIONS, output_modalities: plan.modalities, audio: { input: { turn_detection: turnDetection, ...audioInput } } });
  if (!answer.ok) {
    await closeSession(s);
    throw new Error(`the target refused the session's settings: ${answer.reason}`);
  }
  return s;
}

/** Asks the target what it does (see the header), on a session of its own. */
export async function probeCapabilities(target: EndpointTarget): Promise<Capabilities> {
  const reasons: Record<string, string> = {};
  const s = await openSession(target);
  try {
    const images = await updateSession(s, { output_modalities: ['audio', 'image'] });
    const echoed = images.ok ? (images.event.session?.output_modalities as string[] | undefined) : undefined;
    const image_frames_out = images.ok && (echoed === undefined || echoed.includes('image'));
    if (!images.ok) reasons.image_frames_out = `session.update with output_modalities ['audio','image'] refused: ${images.reason}`;
    else if (!image_frames_out) reasons.image_frames_out = `session.update accepted, but output_modalities came back as ${JSON.stringify(echoed)}`;
    if (images.ok) await updateSession(s, { output_modalities: ['audio'] });

    const semantic = await updateSession(s, { audio: { input: { turn_detection: { type: 'semantic_vad' } } } });
    const kind = semantic.ok ? (semantic.event.session?.audio?.input?.turn_detection?.type ?? semantic.event.session?.turn_detection?.type) : undefined;
    const semantic_vad = semantic.ok && (kind === undefined || kind === 'semantic_vad');
    if (!semantic.ok) reasons.semantic_vad = `session.update with turn_detection semantic_vad refused: ${semantic.reason}`;
    else if (!semantic_vad) reasons.semantic_vad = `session.update accepted, but turn_detection came back as ${JSON.stringify(kind)}`;
    await updateSession(s, { audio: { input: { turn_detection: null } } });

    const png = await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 200, g: 150, b: 120 } } }).png().toBuffer();
    const item = await addUserItem(s, [
      { type: 'input_text', text: 'What colour is this picture?' },
      { type: 'input_image', image_url: `data:image/png;base64,${png.toString('base64')}` },
    ]);
    if (!item.ok) reasons.input_images = `a user item with an input_image refused: ${item.reason}`;
    return { image_frames_out, input_images: item.ok, semantic_vad, transcription_events: null, reasons };
  } finally {
    await closeSession(s);
  }
}

export interface TextTurn {
  firstTextMs: number | null;
  firstAudioMs: number | null;
  firstImageMs: number | null;
  doneMs: number | null;
  status: string;
}

/** One text turn on `s` (see the header): times from response.create. */
export async function textTurn(s: EndpointSession, question: string): Promise<TextTurn> {
  const item = await addUserItem(s, [{ type: 'input_text', text: question }]);
  if (!item.ok) throw new Error(`the target refused a user text item: ${item.reason}`);
  const from = s.c.events.length;
  const t0 = performance.now();
  s.c.send({ type: 'response.create' });
  const done = await nextIndex(s, (e) => e.type === 'response.done' || e.type === 'error', from, REPLY_TIMEOUT_MS);
  const first = (kinds: Set<string>) => {
    const i = s.c.events.findIndex((e, k) => k >= from && kinds.has(e.type));
    return i < 0 || (done !== null && i > done) ? null : Math.round(s.at[i]! - t0);
  };
  const end = done === null ? null : s.c.events[done]!;
  return {
    firstTextMs: first(TEXT_DELTAS),
    firstAudioMs: first(AUDIO_DELTAS),
    firstImageMs: first(IMAGE_DELTAS),
    doneMs: end?.type === 'response.done' ? Math.round(s.at[done!]! - t0) : null,
    status: end === null ? 'no response.done' : end.type === 'error' ? `error ${end.error?.code ?? ''}`.trim() : String(end.response?.status ?? 'unknown'),
  };
}

export interface FirstFrame {
  connectMs: number;
  /** session.created → first frame (null: none within the wait). */
  frameMs: number | null;
  /** Whether it came before the greeting's response.created (idle frames). */
  idle: boolean;
}

/** A new session's first image frame (see the header). */
export async function firstFrame(target: EndpointTarget, plan: SessionPlan, timeoutMs = 30_000): Promise<FirstFrame> {
  const s = await measuredSession(target, plan, null);
  try {
    const from = s.c.events.length;
    s.c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello.' }] } });
    s.c.send({ type: 'response.create' });
    const isFrame = (e: ServerEvent) => IMAGE_DELTAS.has(e.type);
    // Frames may already have come with session.updated (the count starts at session.created).
    const frame = await nextIndex(s, isFrame, 0, timeoutMs);
    const created = s.c.events.findIndex((e, k) => k >= from && e.type === 'response.created');
    s.c.send({ type: 'response.cancel' });
    return {
      connectMs: s.createdAt - s.openedAt,
      frameMs: frame === null ? null : Math.round(s.at[frame]! - s.createdAt),
      idle: frame !== null && (created < 0 || frame < created),
    };
  } finally {
    await closeSession(s);
  }
}

/** The recorded samples in turn on one server_vad session with transcription (lib/voice-turns.ts streamTurn). */
export async function voiceTurns(target: EndpointTarget, plan: SessionPlan, samples: Sample[], log: (line: string) => void): Promise<{ turns: VoiceTurn[]; connectMs: number[] }> {
  const turns: VoiceTurn[] = [];
  const connectMs: number[] = [];
  let s: EndpointSession | null = null;
  try {
    for (const sample of samples) {
      if (!s) {
        s = await voiceSession(target, plan);
        connectMs.push(s.createdAt - s.openedAt);
      }
      const turn = await streamTurn(s.c, sample, 'silence');
      turns.push(turn);
      log(`  voice turn (${sample.label}): end of speech → first audio ${turn.fromSpeechEndMs ?? '-'} ms, speech_stopped ${turn.decisionMs ?? '-'} ms`);
      if (turn.wedged) {
        await closeSession(s);
        s = null;
      }
    }
  } finally {
    if (s) await closeSession(s);
  }
  return { turns, connectMs };
}

/** A voice session: server_vad, transcription asked for (and left out where the target refuses it). */
async function voiceSession(target: EndpointTarget, plan: SessionPlan): Promise<EndpointSession> {
  try {
    return await measuredSession(target, plan, SERVER_VAD, { transcription: TRANSCRIPTION });
  } catch {
    return measuredSession(target, plan, SERVER_VAD);
  }
}

export interface BargeIn {
  connectMs: number;
  /** First audible sample of the speech → the target's audio stopped (null: not stopped). */
  silentMs: number | null;
  /** What stopped it: the first stop signal and whether deltas still came after it. */
  how: string;
}

/** One barge-in on a session of its own (see the header). */
export async function bargeIn(target: EndpointTarget, plan: SessionPlan, sample: Sample): Promise<BargeIn> {
  const s = await measuredSession(target, plan, SERVER_VAD);
  try {
    const item = await addUserItem(s, [{ type: 'input_text', text: LONG_REPLY }]);
    if (!item.ok) throw new Error(`the target refused a user text item: ${item.reason}`);
    const from = s.c.events.length;
    s.c.send({ type: 'response.create', response: { instructions: LONG_INSTRUCTIONS } });
    const audio = await nextIndex(s, (e) => AUDIO_DELTAS.has(e.type), from, FIRST_AUDIO_TIMEOUT_MS);
    if (audio === null) throw new Error(`no reply audio within ${FIRST_AUDIO_TIMEOUT_MS / 1000} s to start the barge-in on`);
    const reply = responseOf(s.c.events[audio]!);
    await new Promise((r) => setTimeout(r, BARGE_AFTER_MS));

    const step = (RATE_HZ * 20) / 1000;
    const pcm = toPcm16(sample.audio);
    const total = pcm.length + (BARGE_TAIL_MS * RATE_HZ) / 1000;
    const start = performance.now();
    const speechAt = start + (speechStart(sample.audio) / RATE_HZ) * 1000;
    const streamedFrom = s.c.events.length;
    for (let n = 0; n * step < total; n++) {
      const wait = start + (n + 1) * 20 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const part = new Int16Array(step);
      if (n * step < pcm.length) part.set(pcm.subarray(n * step, Math.min(pcm.length, (n + 1) * step)));
      s.c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer).toString('base64') });
    }
    const ofReply = (e: ServerEvent) => reply === undefined || responseOf(e) === reply;
    const isStop = (e: ServerEvent) =>
      e.type === 'input_audio_buffer.speech_started' ||
      e.type === 'output_audio_buffer.cleared' ||
      e.type === 'conversation.item.truncated' ||
      (e.type === 'response.done' && ofReply(e) && e.response?.status === 'cancelled');
    const events = s.c.events.map((e, i) => ({ e, at: s.at[i]! })).filter((x, i) => i >= streamedFrom && x.at >= speechAt);
    const stop = events.find((x) => isStop(x.e));
    const lastDelta = events.filter((x) => AUDIO_DELTAS.has(x.e.type) && ofReply(x.e)).at(-1);
    const replyDone = s.c.events.some((e) => e.type === 'response.done' && ofReply(e));
    const windowEnd = performance.now();
    s.c.send({ type: 'response.cancel' });
    if (!stop) return { connectMs: s.createdAt - s.openedAt, silentMs: null, how: 'not stopped: no speech_started, cancellation or clear within the speech and 3 s after it' };
    if (lastDelta && !replyDone && windowEnd - lastDelta.at < STILL_COMING_MS) {
      return { connectMs: s.createdAt - s.openedAt, silentMs: null, how: `not stopped: ${stop.e.type}, but the reply's audio still came ${BARGE_TAIL_MS / 1000} s after the speech` };
    }
    const silentAt = Math.max(stop.at, lastDelta?.at ?? 0);
    return {
      connectMs: s.createdAt - s.openedAt,
      silentMs: Math.round(silentAt - speechAt),
      how: lastDelta && lastDelta.at > stop.at ? `${stop.e.type}, then audio until ${Math.round(lastDelta.at - speechAt)} ms` : stop.e.type,
    };
  } finally {
    await closeSession(s);
  }
}

/** A text-turn session and its connect time. */
export async function textSession(target: EndpointTarget, plan: SessionPlan): Promise<EndpointSession> {
  return measuredSession(target, plan, null);
}
