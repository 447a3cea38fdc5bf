/**
 * A media session: PCM (and phoneme timings) in; H.264 access units, VP8 RTP packets, JPEG frames,
 * raw I420 frames, Opus packets and PCM chunks out, with speech and interruption events, all on
 * one session clock in integer nanoseconds. A typed facade over the native addon's `MediaSession`
 * (see native.ts): same methods, errors rethrown as `NativeError` with the addon's code, events
 * re-emitted by type.
 *
 * Events: every native event is emitted as `'event'` and under its `type` ('h264', 'vp8', 'jpeg',
 * 'i420', 'opus', 'pcm', 'motion', 'speech_started', 'speech_ended', 'interrupted', 'closed'), except the
 * native `error` event, which is emitted as `'media_error'` so that a pipeline failure in one
 * session never becomes an unhandled EventEmitter `'error'` that takes the process down. Listeners
 * run on the event loop (the addon queues events; it never calls JavaScript from its threads); a
 * listener that throws is an uncaught exception, as with any I/O callback. An `i420` event is
 * a raw frame (width x height luma bytes, then the two quarter-size chroma planes, BT.601 limited
 * range, rows packed) with the PTS and frame index of the same frame's `jpeg` event.
 *
 * Starting: `await MediaSession.start(config)` prepares the face and launches the pipelines on
 * the libuv thread pool; `new MediaSession(config)` does the same on the event loop (tens of ms
 * up to ~0.3 s with five outputs), which stalls every other session's events meanwhile: use it
 * in tests and tools, `start` in the server.
 *
 * Lifecycle: `close()` (idempotent) stops the session and resolves once `'closed'`, always the
 * last event, has arrived; `await using` works through `Symbol.asyncDispose`. After close, every
 * method but `stats()` throws SESSION_CLOSED. A session that is never closed keeps the process
 * alive (its event channel holds the loop open): close it.
 *
 * Not done here: RTP sending, conversation logic, deciding when to interrupt.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../core/log.js';
import {
  awaitNative,
  callNative,
  loadBinding,
  toNativeError,
  type EncoderCaps,
  type FaceInput,
  type InterruptResult,
  type MediaEvent,
  type MediaSessionConfig,
  type MediaStats,
  type MotionInput,
  type NativeMediaSession,
  type PreparedFace,
  type PushAudioOptions,
  type PushAudioResult,
} from './native.js';

export type {
  EncoderCaps,
  FaceInput,
  InterruptResult,
  MediaEvent,
  MediaSessionConfig,
  MediaStats,
  MotionInput,
  PreparedFace,
  PushAudioOptions,
  PushAudioResult,
};

/** The event of one `type`. */
export type MediaEventOf<T extends MediaEvent['type']> = Extract<MediaEvent, { type: T }>;

export interface MediaSessionEvents {
  event: [MediaEvent];
  h264: [MediaEventOf<'h264'>];
  vp8: [MediaEventOf<'vp8'>];
  jpeg: [MediaEventOf<'jpeg'>];
  /** Every rendered frame raw (`outputs.i420`), on the clock and numbering of the jpeg events. */
  i420: [MediaEventOf<'i420'>];
  opus: [MediaEventOf<'opus'>];
  pcm: [MediaEventOf<'pcm'>];
  /** The face of each frame (`outputs.motion`), before that frame's audio: a client draws it. */
  motion: [MediaEventOf<'motion'>];
  speech_started: [MediaEventOf<'speech_started'>];
  speech_ended: [MediaEventOf<'speech_ended'>];
  interrupted: [MediaEventOf<'interrupted'>];
  /** The native `error` event (a pipeline failure); the session is torn down after it. */
  media_error: [MediaEventOf<'error'>];
  closed: [];
}

export interface MediaSessionOptions {
  /** Warns here when events were dropped (the JS thread fell behind). */
  logger?: Logger;
}

/** Marks the constructor call made by `MediaSession.start`, which attaches the native session itself. */
const ASYNC_START = Symbol('MediaSession.start');

export class MediaSession extends EventEmitter<MediaSessionEvents> implements AsyncDisposable {
  #native!: NativeMediaSession;
  readonly #logger: Logger | undefined;
  readonly #closedEvent: Promise<void>;
  #markClosed!: () => void;
  #sawClosed = false;
  #closing: Promise<void> | null = null;
  /** Events that arrived while `start` was still settling; emitted once listeners can exist. */
  #early: MediaEvent[] | null = null;

  /** Starts a session synchronously, on the event loop; see `MediaSession.start`. */
  constructor(config: MediaSessionConfig, options?: MediaSessionOptions);
  constructor(config: MediaSessionConfig | typeof ASYNC_START, options: MediaSessionOptions = {}) {
    super();
    this.#logger = options.logger;
    this.#closedEvent = new Promise((resolve) => (this.#markClosed = resolve));
    if (config === ASYNC_START) {
      this.#early = [];
      return;
    }
    const binding = loadBinding();
    this.#native = callNative(() => new binding.MediaSession(config, (event) => this.#dispatch(event)));
  }

  /**
   * Starts a session without blocking the event loop (face and pipelines are prepared on the libuv
   * thread pool). Events that come before the caller could attach listeners (realtime pacing
   * starts rendering at once) are held and emitted on the next turn of the event loop.
   */
  static async start(config: MediaSessionConfig, options: MediaSessionOptions = {}): Promise<MediaSession> {
    const binding = loadBinding();
    // The overload hides this form from callers; only this method uses it.
    const session = new MediaSession(ASYNC_START as unknown as MediaSessionConfig, options);
    session.#native = await awaitNative(callNative(() => binding.startMediaSession(config, (event) => session.#dispatch(event))));
    setImmediate(() => {
      const early = session.#early ?? [];
      session.#early = null;
      for (const event of early) session.#emitEvent(event);
    });
    return session;
  }

  /**
   * Queues mono signed 16-bit speech (8–48 kHz; played at 24 kHz) after what is queued, or at
   * `options.ptsNs`; phoneme times are relative to the chunk. Returns where it plays.
   */
  pushAudio(pcm: Int16Array, sampleRateHz: number, options?: PushAudioOptions): PushAudioResult {
    // Called directly (not through callNative's closure): the speech path's one hop into the addon.
    try {
      return this.#native.pushAudio(pcm, sampleRateHz, options);
    } catch (err) {
      throw toNativeError(err);
    }
  }

  /** Drops queued speech at once (the next frame is idle); `speech_ended` and `interrupted` follow. */
  interrupt(): InterruptResult {
    return callNative(() => this.#native.interrupt());
  }

  /** Switches faces. A `FaceInput` is prepared on the event loop; for large photos use `prepareFace` first. */
  setFace(face: FaceInput | PreparedFace): void {
    callNative(() => this.#native.setFace(face));
  }

  /** Whether the user is speaking: the face listens (attention, nods) or settles back to idle. */
  setListening(on: boolean): void {
    callNative(() => this.#native.setListening(on));
  }

  setDriving(motion: MotionInput): void {
    callNative(() => this.#native.setDriving(motion));
  }

  /** Next H.264/VP8 frames become keyframes (a viewer joined, or a PLI/FIR arrived). */
  requestKeyframe(): void {
    callNative(() => this.#native.requestKeyframe());
  }

  /**
   * The H.264/VP8 encoders' target bitrate, kbit/s (50..50000), from their next frame on: a
   * call's sender following its link. False when no video encoder took it.
   */
  setVideoBitrate(kbps: number): boolean {
    return callNative(() => this.#native.setVideoBitrate(kbps));
  }

  /** Manual pacing: renders `frames` frames now; their encoded outputs arrive as events. */
  advance(frames: number): void {
    callNative(() => this.#native.advance(frames));
  }

  stats(): MediaStats {
    return callNative(() => this.#native.stats());
  }

  get closed(): boolean {
    return this.#closing !== null || this.#sawClosed;
  }

  /**
   * Stops the session (the drain, up to ~50 ms, runs on the libuv pool) and resolves when
   * `closed`, the last event, has arrived; rejects after it when a pipeline did not drain.
   * Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    let failure: unknown = null;
    try {
      await this.#native.closeAsync(); // drains on the libuv pool, not on the event loop
    } catch (err) {
      failure = toNativeError(err); // the session is gone anyway; `closed` still arrives
    }
    await this.#closedEvent;
    // One line per session for operators (and the webrtc benchmark): did it keep real time?
    const s = this.#native.stats();
    const summary = {
      framesRendered: s.framesRendered,
      lateFrames: s.lateFrames,
      maxLatenessMs: Math.round(s.maxLatenessNs / 1e5) / 10,
      droppedBuffers: s.droppedBuffers,
      eventsDropped: s.eventsDropped,
      pipelineErrors: s.pipelineErrors,
    };
    if (s.eventsDropped > 0 || s.droppedBuffers > 0) this.#logger?.warn('media session closed with losses', summary);
    else this.#logger?.info('media session closed', summary);
    if (failure) throw failure;
  }

  #dispatch(event: MediaEvent): void {
    if (this.#early) this.#early.push(event);
    else this.#emitEvent(event);
  }

  #emitEvent(event: MediaEvent): void {
    if (event.type === 'closed') {
      this.#sawClosed = true;
      this.#markClosed();
    }
    this.emit('event', event);
    switch (event.type) {
      case 'h264':
        this.emit('h264', event);
        break;
      case 'vp8':
        this.emit('vp8', event);
        break;
      case 'jpeg':
        this.emit('jpeg', event);
        break;
      case 'i420':
        this.emit('i420', event);
        break;
      case 'opus':
        this.emit('opus', event);
        break;
      case 'pcm':
        this.emit('pcm', event);
        break;
      case 'motion':
        this.emit('motion', event);
        break;
      case 'speech_started':
        this.emit('speech_started', event);
        break;
      case 'speech_ended':
        this.emit('speech_ended', event);
        break;
      case 'interrupted':
        this.emit('interrupted', event);
        break;
      case 'error':
        this.emit('media_error', event);
        break;
      case 'closed':
        this.emit('closed');
        break;
    }
  }
}

/**
 * Prepares a face for the renderer named `renderer` on the libuv thread pool, for `setFace`
 * without blocking the event loop; one prepared face can serve every session of that renderer
 * (another renderer's session refuses it: INVALID_ARGUMENT).
 */
export function prepareFace(face: FaceInput, renderer = 'cpu', signal?: AbortSignal): Promise<PreparedFace> {
  const binding = loadBinding();
  return awaitNative(callNative(() => binding.prepareFace(face, renderer, signal)));
}

/** The names of the native media engine's renderers (what MediaSessionConfig.renderer takes). */
export function nativeRenderers(): string[] {
  const binding = loadBinding();
  return callNative(() => binding.renderers());
}

/** The encoders this machine's GStreamer offers (H.264 element name, VP8, Opus, JPEG). */
export function detectEncoders(): EncoderCaps {
  const binding = loadBinding();
  return callNative(() => binding.detectEncoders());
}

/** E.g. "GStreamer 1.22.0". */
export function gstreamerVersion(): string {
  const binding = loadBinding();
  return callNative(() => binding.gstreamerVersion());
}
