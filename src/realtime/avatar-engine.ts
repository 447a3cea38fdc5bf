/**
 * The engine of an avatar-only session (docs/avatar-mode.md): the client streams an agent's speech,
 * the avatar plays it out with the face in sync, and the played audio and the frames go back on
 * one clock. No recogniser, language model or voice runs. The counterpart of session-engine.ts for
 * `session.type: "avatar"`; the connection core (realtime-connection.ts) runs one or the other.
 *
 *   output_audio_buffer.append ─▶ decode (G.711, or PCM16 at the client's rate) ─▶ avatar.pushSpeech
 *                                                          │ placement on the clock
 *                                                          ▼
 *   avatar 'audio' tick ─▶ SegmentTimeline.advance ─▶ output_audio_buffer.started / .stopped
 *                      └─▶ response.output_audio.delta (WebSocket; silence included)
 *   avatar 'frame' / 'raw' ─▶ response.output_image.delta (JPEG) / a binary I420 message
 *   output_audio_buffer.clear ─▶ avatar.interrupt ─▶ every unfinished segment .stopped
 *                                (interrupted, played up to the cut) ─▶ output_audio_buffer.cleared
 *
 * Rules kept here, as in the realtime engine: client events are handled in arrival order on one
 * chain; a bad event gets an `error` naming its event_id and the session goes on; nothing a
 * handler throws escapes. Memory is bounded: at most MAX_QUEUED_AHEAD_NS of speech may wait ahead
 * of the playout (an append beyond it is refused with output_audio_buffer_full), a segment keeps
 * only its spans still ahead of the playout, and frames are skipped (audio never) while the
 * client's socket holds more than MAX_FRAME_BACKLOG_BYTES unsent.
 *
 * Usage is counted as it is delivered (recorder.addUsage, which the connection commits): each tick
 * the segments' speech it played (silence between segments is not billed), right after its audio
 * delta and before any segment's output_audio_buffer.stopped; each frame sent. A clear bills what
 * had played up to the cut, never what was only queued. close() interrupts the avatar, so nothing
 * plays (or reaches a call's track) once the engine has stopped counting.
 */
import type { Logger } from '../core/log.js';
import { AppError } from '../core/errors.js';
import { InputAudioDecoder, OutputAudioEncoder } from '../audio/wire-format.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import type { AvatarOutput, AvatarRawFrame } from './avatar-output.js';
import { MotionStream } from './motion-stream.js';
import { type AvatarFrameShape, type AvatarSessionSettings, applyAvatarSessionUpdate, avatarSessionObject } from './avatar-session-update.js';
import { type SegmentChange, SegmentTimeline } from './avatar-segments.js';
import type { AssetChecker, EngineTransport, SessionRecorder } from './engine-ports.js';
import { type AvatarClientEventOf, typedAvatarClientEvent } from './client-events.js';
import {
  ALL_CLIENT_EVENT_TYPES,
  type ClientEvent,
  type Json,
  type ServerEventDraft,
  RealtimeError,
  decodeBase64,
  errorEvent,
} from './protocol.js';
import { type MessageReader, clientEventOf } from './client-message.js';

/** Speech that may wait ahead of the playout: two minutes (5.8 MB at 24 kHz). */
export const MAX_QUEUED_AHEAD_NS = 120_000_000_000;
/** Frames are skipped while the client's socket has more than this unsent. */
export const MAX_FRAME_BACKLOG_BYTES = 4 * 1024 * 1024;
export { MAX_SEGMENT_ID_CHARS } from './client-events.js';
/** The binary header of a raw frame (docs/avatar-mode.md "Raw frames"). */
export const RAW_FRAME_HEADER_BYTES = 24;
const RAW_FRAME_MAGIC = 'I420';
const NS_PER_MS = 1e6;
const BYTES_PER_SAMPLE = 2;


export interface AvatarEngineOptions {
  sessionId: string;
  userId: string;
  transport: EngineTransport;
  /** Unix seconds at which the session ends. */
  expiresAt: number;
  /** The opening config (`type: "avatar"` and any avatar session fields). */
  initial: Json;
  /** The frames' size and rate, shown in the session object. */
  frames: AvatarFrameShape;
}

export interface AvatarEngineDeps {
  send(event: ServerEventDraft): void;
  /** A binary message to the client (raw frames); WebSocket only. */
  sendBinary(data: Buffer): void;
  /** Bytes the client's transport has not sent yet (frames are skipped above MAX_FRAME_BACKLOG_BYTES). */
  backlogBytes(): number;
  avatar: AvatarOutput;
  assets: AssetChecker;
  recorder: Pick<SessionRecorder, 'addUsage'>;
  log: Logger;
}

/** The initial config's settings, or the error that refuses it (before a session exists). */
export function avatarSettingsFrom(initial: Json): AvatarSessionSettings {
  return applyAvatarSessionUpdate(null, initial, true);
}

export class AvatarSessionEngine {
  private settings: AvatarSessionSettings;
  private readonly timeline = new SegmentTimeline();
  private chain: Promise<void> = Promise.resolve();
  private readonly reader: MessageReader<string>;
  private closed = false;
  /** A face the client draws: its faces and frames (nothing when the server draws it). */
  private readonly motion: MotionStream;
  private decoder: InputAudioDecoder | null;
  private encoder: OutputAudioEncoder;
  /** Session time up to which the avatar has played (the end of the latest tick). */
  private playedToNs = 0;
  /** JPEG frames rendered so far (a frame's index counts the skipped ones too). */
  private jpegFrames = 0;
  private framesSent = 0;
  private framesSkipped = 0;
  /** Speech of finished segments, as played (ns). */
  private finishedNs = 0;
  /** Speech counted into usage so far (ns). */
  private billedNs = 0;

  constructor(
    private readonly options: AvatarEngineOptions,
    private readonly deps: AvatarEngineDeps,
  ) {
    this.settings = avatarSettingsFrom(options.initial);
    // Its own events and the realtime ones, which it refuses by name rather than as unknown.
    this.reader = { types: ALL_CLIENT_EVENT_TYPES, emit: (e) => this.emit(e), log: deps.log, sessionId: options.sessionId };
    this.decoder = decoderFor(this.settings);
    this.encoder = new OutputAudioEncoder(this.settings.outputFormat);
    deps.avatar.on('audio', (chunk) => this.guard('audio', () => this.onTick(chunk.data, chunk.ptsNs)));
    deps.avatar.on('frame', (frame) => this.guard('frame', () => this.onJpeg(frame.data, frame.ptsNs)));
    deps.avatar.on('raw', (frame) => this.guard('raw frame', () => this.onRaw(frame)));
    // A face the agent's viewer draws (video_render: client): its parameters every frame.
    this.motion = new MotionStream(deps.avatar, (e) => this.emit(e));
    deps.avatar.on('failed', (err) => {
      deps.log.error('avatar output failed', { sessionId: options.sessionId, err });
      this.emit(errorEvent(new RealtimeError('avatar_failed', 'The avatar media pipeline failed; no further audio or video can be produced.', null, 'server_error'), null));
    });
  }

  /** Sends session.created; call once, before the first message. */
  async start(): Promise<void> {
    this.emit({ type: 'session.created', session: this.sessionObject() });
    this.motion.start();
  }

  sessionObject(): Json {
    return avatarSessionObject(this.settings, this.options.sessionId, this.options.expiresAt, this.options.frames);
  }

  /** A call's microphone: an avatar-only session listens to no one (the client says when the user speaks: avatar.listen). */
  pushMicrophone(_pcm: Int16Array): void {}

  /** One text message from the client; handled after every earlier one. Never throws. */
  receive(text: string): void {
    const event = clientEventOf(text, this.reader);
    if (event) this.chain = this.chain.then(() => this.handle(event));
  }

  /** Resolves once every message received so far has been handled. */
  idle(): Promise<void> {
    return this.chain;
  }

  /**
   * Stops: no events are sent and nothing is counted afterwards, and the avatar's queued speech is
   * cut (what played up to the last tick was counted tick by tick).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      this.deps.avatar.interrupt();
    } catch (err) {
      this.deps.log.warn('avatar interrupt failed', { sessionId: this.options.sessionId, err });
    }
    if (this.framesSkipped > 0) this.deps.log.info('avatar frames skipped for a slow client', { sessionId: this.options.sessionId, skipped: this.framesSkipped, sent: this.framesSent });
  }

  private emit(event: ServerEventDraft): void {
    if (this.closed) return;
    try {
      this.deps.send(event);
    } catch (err) {
      this.deps.log.error('server event could not be sent', { sessionId: this.options.sessionId, type: event.type, err });
    }
  }

  /** Runs an avatar callback; a failure is logged, never thrown into the media plane. */
  private guard(what: string, fn: () => void): void {
    if (this.closed) return;
    try {
      fn();
    } catch (err) {
      this.deps.log.error(`avatar ${what} handling failed`, { sessionId: this.options.sessionId, err });
    }
  }

  private async handle(event: ClientEvent<string>): Promise<void> {
    if (this.closed) return;
    try {
      const typed = typedAvatarClientEvent(event);
      switch (typed?.type) {
        case 'session.update':
          return await this.onSessionUpdate(typed.session);
        case 'output_audio_buffer.append':
          return await this.onAppend(typed);
        case 'output_audio_buffer.commit':
          return this.onCommit();
        case 'output_audio_buffer.clear':
          return this.onClear();
        case 'avatar.listen':
          return this.deps.avatar.listen(typed.listening);
        default:
          throw new RealtimeError(
            'unsupported_in_avatar_session',
            `'${event.type}' is not available in an avatar-only session: the client supplies the speech (output_audio_buffer.append), and no model runs.`,
            'type',
          );
      }
    } catch (err) {
      if (!(err instanceof AppError)) {
        this.deps.log.error('avatar event failed', { sessionId: this.options.sessionId, eventId: event.eventId, type: event.type, err });
      }
      this.emit(errorEvent(err, event.eventId));
    }
  }

  // ---- client events ----

  private async onSessionUpdate(update: Json): Promise<void> {
    const next = applyAvatarSessionUpdate(this.settings, update, false);
    const before = this.settings;
    const { userId } = this.options;
    await Promise.all([
      next.face !== before.face && next.face !== null ? this.deps.assets.require('face', next.face, userId, 'session.face') : null,
      next.driving !== before.driving && next.driving !== null ? this.deps.assets.require('driving', next.driving, userId, 'session.driving') : null,
    ]);
    // The avatar switches before the settings do: a face that fails to load leaves the old one.
    if (next.face !== before.face) await this.deps.avatar.setFace(next.face ?? 'default');
    if (next.driving !== before.driving) await this.deps.avatar.setDriving(next.driving ?? 'default');
    if (next.inputFormat.type !== before.inputFormat.type) this.decoder = decoderFor(next);
    if (next.outputFormat.type !== before.outputFormat.type) this.encoder = new OutputAudioEncoder(next.outputFormat);
    this.settings = next;
    this.emit({ type: 'session.updated', session: this.sessionObject() });
  }

  private async onAppend(event: AvatarClientEventOf<'output_audio_buffer.append'>): Promise<void> {
    const segmentId = this.segmentIdOf(event.segment_id);
    const bytes = decodeBase64(event.audio, 'audio');
    if (bytes.length === 0) return;
    const format = this.settings.inputFormat;
    if (!this.decoder && bytes.length % 2 !== 0) throw new RealtimeError('invalid_audio', `PCM16 audio must have an even number of bytes; this append has ${bytes.length}.`, 'audio');
    // The append's length from its bytes, checked before anything is decoded: a G.711 append is
    // filtered at 144 multiply-adds a byte, so its cost is bounded by the queue's limit below (and
    // decoded a second of audio at a time, letting the event loop run between seconds).
    const durationNs = ((this.decoder ? bytes.length : bytes.length / 2) / format.rate) * 1e9;
    const aheadNs = Math.max(this.timeline.queuedEndNs, this.playedToNs) - this.playedToNs + durationNs;
    if (aheadNs > MAX_QUEUED_AHEAD_NS) {
      throw new RealtimeError(
        'output_audio_buffer_full',
        `At most ${MAX_QUEUED_AHEAD_NS / 1e9} s of speech may wait ahead of the playout; this append would make it ${(aheadNs / 1e9).toFixed(1)} s. Send audio no faster than it plays once that much is queued.`,
        'audio',
      );
    }
    let pcm: Int16Array;
    if (this.decoder) {
      pcm = await this.decoder.decodeYielding(bytes);
      if (this.closed) return;
    } else {
      pcm = new Int16Array(bytes.length / 2);
      Buffer.from(pcm.buffer).set(bytes);
    }
    if (pcm.length === 0) return;
    const rate = this.decoder ? PCM_RATE_HZ : format.rate; // G.711 is decoded to 24 kHz
    const placed = this.deps.avatar.pushSpeech(pcm, rate, []);
    this.timeline.append(placed.startPtsNs, placed.endPtsNs, segmentId);
  }

  /**
   * The client's name for the segment an append opens (`segment_id`, optional; its form is checked
   * by typedAvatarClientEvent): not the id of a segment still unfinished. Ignored on appends that
   * join the open segment, which keeps its name.
   */
  private segmentIdOf(id: string | null): string | null {
    if (id === null) return null;
    if (this.timeline.open === null && this.timeline.unfinished.some((s) => s.id === id)) {
      throw new RealtimeError('duplicate_segment_id', `Segment '${id}' has not finished yet; name a new segment differently.`, 'segment_id');
    }
    return id;
  }

  private onCommit(): void {
    const segment = this.timeline.commit();
    if (!segment) throw new RealtimeError('output_audio_buffer_commit_empty', 'There is no open segment to commit: append audio first (a commit or a clear ends the segment before it).');
    this.emit({ type: 'output_audio_buffer.committed', segment_id: segment.id, audio_ms: Math.round(segment.totalNs / NS_PER_MS) });
  }

  private onClear(): void {
    const playing = this.timeline.segmentAt(this.playedToNs, this.playedToNs + 1);
    const cut = this.deps.avatar.interrupt();
    let playedMs = 0;
    const changes = this.timeline.cut(cut.ptsNs);
    for (const change of changes) if (change.kind === 'finished') this.finishedNs += change.playedNs;
    this.bill();
    for (const change of changes) {
      if (change.kind === 'finished' && change.segment === playing) playedMs = Math.round(change.playedNs / NS_PER_MS);
      this.apply(change);
    }
    this.decoder?.reset();
    this.emit({ type: 'output_audio_buffer.cleared', played_ms: playedMs });
  }

  // ---- the avatar's clock ----

  /** One tick of played audio: segments start and finish; the audio goes out as a delta. */
  private onTick(pcm: Buffer, ptsNs: number): void {
    const endNs = ptsNs + (pcm.length / BYTES_PER_SAMPLE / PCM_RATE_HZ) * 1e9;
    const segment = this.timeline.segmentAt(ptsNs, endNs);
    const changes = this.timeline.advance(endNs);
    this.playedToNs = Math.max(this.playedToNs, endNs);
    for (const change of changes) if (change.kind === 'started') this.apply(change);
    if (this.options.transport === 'websocket' && this.settings.modalities.includes('audio')) {
      const wire = this.encoder.encode(pcm);
      if (wire.length > 0) this.emit({ type: 'response.output_audio.delta', delta: wire.toString('base64'), segment_id: segment?.id ?? null, pts_ms: Math.round(ptsNs / NS_PER_MS) });
    }
    for (const change of changes) if (change.kind === 'finished') this.finishedNs += change.playedNs;
    this.bill();
    for (const change of changes) if (change.kind === 'finished') this.apply(change);
  }

  /** Counts the speech played and not counted yet: finished segments, and the unfinished ones up to the latest tick. */
  private bill(): void {
    const played = this.finishedNs + this.timeline.playedBy(this.playedToNs);
    if (played <= this.billedNs) {
      // A cut behind the latest tick: what was sent stays billed (and is not billed again later).
      this.finishedNs += this.billedNs - played;
      return;
    }
    this.deps.recorder.addUsage({ audioSecondsOut: (played - this.billedNs) / 1e9 });
    this.billedNs = played;
  }

  private onJpeg(jpeg: Buffer, ptsNs: number): void {
    const frameIndex = this.jpegFrames++;
    if (!this.framesWanted('jpeg')) return;
    this.emit({
      type: 'response.output_image.delta',
      delta: jpeg.toString('base64'),
      frame_index: frameIndex,
      pts_ms: Math.round(ptsNs / NS_PER_MS),
      segment_id: this.timeline.segmentAt(ptsNs, ptsNs + 1)?.id ?? null,
    });
    this.deps.recorder.addUsage({ framesOut: 1 });
  }

  private onRaw(frame: AvatarRawFrame): void {
    if (!this.framesWanted('i420')) return;
    const header = Buffer.alloc(RAW_FRAME_HEADER_BYTES);
    header.write(RAW_FRAME_MAGIC, 0, 'ascii');
    header.writeUInt32LE(frame.frameIndex, 4);
    header.writeUInt16LE(frame.width, 8);
    header.writeUInt16LE(frame.height, 10);
    header.writeBigUInt64LE(BigInt(Math.round(frame.ptsNs)), 16);
    this.deps.sendBinary(Buffer.concat([header, frame.data]));
    this.deps.recorder.addUsage({ framesOut: 1 });
  }

  /** Whether this frame goes out (and is counted): the client asked for frames in this format and keeps up. */
  private framesWanted(format: 'jpeg' | 'i420'): boolean {
    if (this.options.transport !== 'websocket' || this.settings.videoFormat !== format || !this.settings.modalities.includes('image')) return false;
    if (this.deps.backlogBytes() > MAX_FRAME_BACKLOG_BYTES) {
      this.framesSkipped++;
      return false;
    }
    this.framesSent++;
    return true;
  }

  /** A segment started or finished: its event, and usage at its end. */
  private apply(change: SegmentChange): void {
    const { segment } = change;
    if (change.kind === 'started') {
      this.emit({ type: 'output_audio_buffer.started', segment_id: segment.id, pts_ms: Math.round(change.ptsNs / NS_PER_MS) });
      return;
    }
    this.emit({ type: 'output_audio_buffer.stopped', segment_id: segment.id, played_ms: Math.round(change.playedNs / NS_PER_MS), interrupted: change.interrupted });
  }
}

/** The decoder of G.711 input; null for PCM16, which the avatar resamples itself at any rate. */
function decoderFor(settings: AvatarSessionSettings): InputAudioDecoder | null {
  const { type } = settings.inputFormat;
  return type === 'audio/pcm' ? null : new InputAudioDecoder({ type, rate: 8000 });
}
