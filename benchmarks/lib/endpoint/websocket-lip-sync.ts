/**
 * Lip sync over WebSocket, from the client's side: one text turn on a session showing a given face
 * (lip-faces.ts), every `response.output_image.delta` JPEG of the reply decoded and measured by
 * both mouth methods against the reply's `response.output_audio.delta` PCM
 * (harness/measures/lip-figures.ts: r and lag, closed and open shares, onsets, the shifted-audio
 * controls), in the shape the WebRTC receiver's figures have.
 *
 * The time base is the server's pts. Image deltas carry it (`pts_ms`); a realtime session's audio
 * deltas do not (OpenAI's event has no such field; only avatar-only sessions stamp theirs). Their
 * samples are contiguous from the reply's first sound: the avatar's played output tick by tick, the
 * first delta from the first sentence's start to the end of its tick, each later one a whole tick,
 * the last cut at the speech's end (src/realtime/response-speech.ts onAudio). So a sample's pts is
 * the audio's start pts plus its position in the reply's audio, and that start is read from the
 * ticks (audioStartMs): every delta but the last ends where its tick ends, and the image delta
 * that follows it is its own tick's (the render loop hands a tick's frame to the JPEG encoder and
 * emits its PCM at once, so the JPEG comes after the PCM; native/media-core render_loop.rs). Each
 * such pair gives a start; the one most of them agree on is taken, and the share that agree is
 * reported (`anchor_agreement`: under 1, some frames came late, a tick or more behind their PCM).
 * (Checked against the server's own placement: on four replies the start read this way was the
 * pts of the first sentence's first chunk, to the ms.) Each frame is judged against the audio of
 * its own tick, [pts, pts + tick) (rmsOfFrame); the onsets against 10 ms blocks of the same PCM.
 *
 * Invariants: times in ms on the server's pts; the frames measured from the reply's first image
 * delta (before the first sound: the mouth at rest) to AFTER_SPEECH_MS after its last sound.
 */
import type { FaceRegistry } from '../../../src/media/face-registration.js';
import type { ServerEvent } from '../../../harness/clients/realtime-client.js';
import { concatSamples } from '../../../harness/measures/speech.js';
import { lipSyncFigures, trackMouth, type LipSyncFigures } from '../../../harness/measures/lip-figures.js';
import { pcmBlocks } from '../../../harness/measures/onsets.js';
import { LIP_SYNC_MAX_TOKENS } from './lip-faces.js';
import { AUDIO_DELTAS, IMAGE_DELTAS, addUserItem, closeSession, nextIndex, updateSession, type EndpointTarget } from '../../../harness/clients/realtime-session.js';
import { measuredSession } from './websocket-measures.js';

/** The reply's audio: PCM16 mono at this rate (the session's default output format). */
export const AUDIO_RATE_HZ = 24_000;
/** Sound blocks for the onsets, ms. */
const BLOCK_MS = 10;
/** Frames measured after the reply's last sound, ms. */
const AFTER_SPEECH_MS = 500;
const REPLY_TIMEOUT_MS = 90_000;

/** A reply's deltas in the order they came: audio (its samples) and images (pts and JPEG). */
export type ReplyDelta = { kind: 'audio'; pcm: Int16Array } | { kind: 'image'; ptsMs: number; jpeg: Buffer };

export interface WsLipSync {
  face: string;
  /** What the turn asked (lip-faces.ts LIP_SYNC_QUESTIONS). */
  question: string;
  /** Why nothing was measured (the face refused, no frames, no face found); null when measured. */
  missing: string | null;
  figures: LipSyncFigures | null;
  /** The audio's start on the pts base (see the header) and the share of ticks that agree on it. */
  audio_start_pts_ms: number | null;
  anchor_agreement: number | null;
  frames: number;
  audio_ms: number;
}

/** The start pts of the reply's audio, ms (see the header), and the share of end-of-tick pairs that agree within 1 ms; null without a pair. */
export function audioStartMs(deltas: ReplyDelta[], rateHz = AUDIO_RATE_HZ): { startMs: number; agreement: number } | null {
  const frameMs = frameStepMs(deltas);
  if (frameMs === null) return null;
  const audio = deltas.map((d, i) => ({ d, i })).filter((x) => x.d.kind === 'audio');
  const starts: number[] = [];
  let samples = 0;
  for (const [k, { d, i }] of audio.entries()) {
    samples += (d as Extract<ReplyDelta, { kind: 'audio' }>).pcm.length;
    if (k === audio.length - 1) break; // the last delta ends with the speech, not its tick
    const next = deltas.slice(i + 1).find((x) => x.kind === 'image');
    if (next?.kind === 'image') starts.push(Math.round(next.ptsMs + frameMs - (samples * 1000) / rateHz));
  }
  if (starts.length === 0) return null;
  const votes = new Map<number, number>();
  for (const s of starts) votes.set(s, (votes.get(s) ?? 0) + 1);
  const [startMs] = [...votes.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]!;
  const agree = starts.filter((s) => Math.abs(s - startMs) <= 1).length;
  return { startMs, agreement: Math.round((1000 * agree) / starts.length) / 1000 };
}

/** The images' tick, ms: the median step between consecutive image pts; null with fewer than two images. */
export function frameStepMs(deltas: ReplyDelta[]): number | null {
  const images = deltas.filter((d): d is Extract<ReplyDelta, { kind: 'image' }> => d.kind === 'image');
  const steps = images.slice(1).map((d, i) => d.ptsMs - images[i]!.ptsMs).sort((a, b) => a - b);
  return steps.length === 0 ? null : steps[Math.floor(steps.length / 2)]!;
}

/**
 * The RMS (full scale 1) of PCM16 starting at `startMs` over the span a frame at time t is shown,
 * [t, t + frameMs): the audio played with that frame's tick (samples outside the PCM count as
 * silence), as the in-process lip-sync test takes it. A window centred on t instead pairs each
 * frame with audio half a tick earlier, and put r's best lag at -20 ms for a mouth in sync.
 */
export function rmsOfFrame(pcm: Int16Array, startMs: number, frameMs: number, rateHz = AUDIO_RATE_HZ): (t: number) => number {
  const window = Math.round((frameMs * rateHz) / 1000);
  return (t) => {
    const from = Math.round(((t - startMs) * rateHz) / 1000);
    let sum = 0;
    for (let i = Math.max(0, from); i < Math.min(pcm.length, from + window); i++) sum += (pcm[i]! / 32768) ** 2;
    return Math.sqrt(sum / window);
  };
}

/** The reply's deltas from the events of one response (GA or older names; images without pts_ms are left out). */
export function replyDeltas(events: ServerEvent[]): ReplyDelta[] {
  const out: ReplyDelta[] = [];
  for (const e of events) {
    if (AUDIO_DELTAS.has(e.type)) {
      // A copy: an Int16Array cannot view a Buffer that sits at an odd byte offset.
      const bytes = Buffer.from(String(e.delta), 'base64');
      out.push({ kind: 'audio', pcm: new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + (bytes.length & ~1))) });
    } else if (IMAGE_DELTAS.has(e.type) && typeof e.pts_ms === 'number') out.push({ kind: 'image', ptsMs: e.pts_ms, jpeg: Buffer.from(String(e.delta), 'base64') });
  }
  return out;
}

/** One lip-sync turn on a new session showing `faceId`, asking `question` (see the header). */
export async function lipSyncTurn(target: EndpointTarget, faceId: string, label: string, question: string, registry: FaceRegistry): Promise<WsLipSync> {
  const out: WsLipSync = { face: label, question, missing: null, figures: null, audio_start_pts_ms: null, anchor_agreement: null, frames: 0, audio_ms: 0 };
  const s = await measuredSession(target, { modalities: ['audio', 'image'] }, null);
  try {
    const face = await updateSession(s, { face: faceId });
    if (!face.ok) return { ...out, missing: `session.update with face '${faceId}' refused: ${face.reason}` };
    const item = await addUserItem(s, [{ type: 'input_text', text: question }]);
    if (!item.ok) return { ...out, missing: `the target refused a user text item: ${item.reason}` };
    const from = s.c.events.length;
    s.c.send({ type: 'response.create', response: { max_output_tokens: LIP_SYNC_MAX_TOKENS } });
    const done = await nextIndex(s, (e) => e.type === 'response.done' || e.type === 'error', from, REPLY_TIMEOUT_MS);
    if (done === null || s.c.events[done]!.type !== 'response.done') return { ...out, missing: 'no response.done for the lip-sync turn' };
    return { ...out, ...(await measureReply(replyDeltas(s.c.events.slice(from, done)), registry)) };
  } finally {
    await closeSession(s);
  }
}

/** Both methods over a reply's frames against its audio on the pts base. */
async function measureReply(deltas: ReplyDelta[], registry: FaceRegistry): Promise<Partial<WsLipSync>> {
  const images = deltas.filter((d): d is Extract<ReplyDelta, { kind: 'image' }> => d.kind === 'image').sort((a, b) => a.ptsMs - b.ptsMs);
  const pcm = concatSamples(deltas.flatMap((d) => (d.kind === 'audio' ? [d.pcm] : [])));
  const audioMs = Math.round((pcm.length * 1000) / AUDIO_RATE_HZ);
  const anchor = audioStartMs(deltas);
  const frameMs = frameStepMs(deltas);
  const base = { frames: images.length, audio_ms: audioMs };
  if (images.length === 0) return { ...base, missing: 'no image delta with pts_ms in the reply' };
  if (!anchor || frameMs === null) return { ...base, missing: 'no audio delta followed by an image delta: the audio cannot be placed on the pts' };
  const speechEnd = anchor.startMs + audioMs;
  const frames = images.filter((f) => f.ptsMs <= speechEnd + AFTER_SPEECH_MS).map((f) => ({ t: f.ptsMs, jpeg: f.jpeg }));
  const tracked = await trackMouth(frames, registry);
  const figures = await lipSyncFigures(tracked, registry, { rmsAt: rmsOfFrame(pcm, anchor.startMs, frameMs), blocks: pcmBlocks(pcm, AUDIO_RATE_HZ, anchor.startMs, BLOCK_MS), blockMs: BLOCK_MS, from: images[0]!.ptsMs });
  return {
    ...base,
    audio_start_pts_ms: anchor.startMs,
    anchor_agreement: anchor.agreement,
    figures,
    missing: figures ? null : `no face found in the ${frames.length} decoded frames (or fewer than 10 measured)`,
  };
}
