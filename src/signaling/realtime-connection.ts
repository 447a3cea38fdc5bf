/**
 * The transport-free core of a realtime connection, shared by the WebSocket gateway
 * (realtime-ws.ts) and the WebRTC call gateway (realtime-calls.ts): it holds the session the
 * connection runs, starts the avatar and the engine, stamps and sends the engine's events in the
 * connection's dialect, and tears everything down in order. The transports only move text (and,
 * for calls, media) and say how an end reaches their client (close codes, hangups).
 *
 * Lifecycle of one connection:
 *   registry.track(...)                        once the caller is authenticated (connection-registry.ts)
 *   connection.run(session, options)           avatar start -> engine start (session.created)
 *   connection.receive(text) / pushMicrophone  client events, microphone audio (calls)
 *   connection.close()                         engine -> avatar -> the session ends if the
 *                                              connection owns it (client_disconnected)
 * A connection is ended from outside through the registry: its session ended (DELETE, maximum
 * duration), its API key was revoked, or the server is shutting down. Each becomes one call of
 * the transport's `end(reason, errorEvent)`, whichever comes first.
 *
 * Listeners (`attach(sink)`: a call's sideband WebSockets) are second receivers of the same
 * session: each gets every server event the transport gets (the same stamped text; session.created
 * with the session as it is now when it attaches after the engine's own), and its client events go
 * into the same engine, in arrival order with the transport's. An `error` caused by a listener's
 * event goes to that listener alone, with its own event_id (event-attribution.ts); every other
 * event goes to all. A listener ends with the connection, with the same reason; its own end
 * (detach) leaves the connection running; its own key's revocation ends it alone.
 *
 * Usage: the engine counts what it delivers (audio played, frames sent, the model's tokens) into
 * the connection's UsageMeter (sessions/usage-meter.ts), in order with the events that carry it,
 * so a count lands when its event has gone to the transport; the meter commits the running totals
 * to the store within USAGE_FLUSH_MS. Before an event that tells the client a response or a segment
 * is over (SETTLING_EVENTS) goes out, the usage delivered so far is committed (later events wait
 * behind it, in order, at most USAGE_COMMIT_WAIT_MS: ordered-delivery.ts): a client that ends its session the moment it
 * sees response.done gets a record with that response. settle() (the connection closing, or any
 * end of its session in this process: DELETE, deadline, revocation, shutdown) stops the engine, so
 * nothing more is delivered, and commits the exact total before the session's record is written.
 *
 * Teardown never throws; a failure is logged. Nothing here knows about sockets or peers.
 */
import type { Clock } from '../core/clock.js';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { MEDIA_UNSET, resolveMedia } from '../core/media-options.js';
import type { AvatarStartOptions, CallAvatar } from '../media/avatar-output.js';
import { type Dialect, type Json, type ServerEventDraft, RealtimeError, errorEvent, newServerEventId, renameForDialect } from '../realtime/protocol.js';
import { EventAttribution } from './event-attribution.js';
import { OrderedDelivery } from './ordered-delivery.js';
import { EventGate } from './pending-events.js';
import type { AssetChecker, EngineProviders, EngineTransport, SessionRecorder } from '../realtime/engine-ports.js';
import { RealtimeSessionEngine } from '../realtime/session-engine.js';
import type { SessionService } from '../sessions/session-service.js';
import { UsageMeter } from '../sessions/usage-meter.js';
import { DEFAULT_VOICE, type SessionConfig } from '../sessions/session-config.js';
import { applySessionUpdate } from '../realtime/session-update.js';
import { AvatarSessionEngine, avatarSettingsFrom } from '../realtime/avatar-engine.js';
import { isAvatarConfig } from '../realtime/avatar-session-update.js';
import { TranscriptionSessionEngine, transcriptionSettingsFrom } from '../realtime/transcription-engine.js';
import { isTranscriptionConfig } from '../realtime/transcription-session.js';
import { LiveDialect, type LiveOut, USAGE_INTERVAL_MS, isLiveConfig } from '../realtime/live-dialect.js';
import type { SessionRecord, Store } from '../store/store.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';

/** Microphone audio kept while a call's session starts: 10 s at 24 kHz. */
const EARLY_MICROPHONE_SAMPLES = PCM_RATE_HZ * 10;
/** Events that tell the client a response or a segment is over: the usage delivered so far is committed before each goes out. */
const SETTLING_EVENTS: ReadonlySet<string> = new Set(['response.done', 'output_audio_buffer.stopped', 'output_audio_buffer.cleared']);

/** What connections use besides the REST services: the engine's providers and the avatar. */
export interface RealtimeRuntime extends EngineProviders {
  startAvatar(options: AvatarStartOptions): Promise<CallAvatar>;
}

export interface ConnectionDeps {
  sessions: SessionService;
  store: Store;
  assets: AssetChecker;
  clock: Clock;
  log: Logger;
  defaultModel: string;
  runtime: RealtimeRuntime;
}

/**
 * The REST session record fields of a realtime session config (an ephemeral key's session, a
 * call's `session` JSON, WebSocket query parameters): validated by the same rules as
 * session.update, so a bad config is refused before a session exists. An avatar-only config
 * (`type: "avatar"`) and a transcription one (`type: "transcription"`) are read by their own rules
 * (avatar-session-update.ts, transcription-session.ts); raw frames are for WebSocket clients only.
 */
export function sessionConfigFrom(initial: Json, defaultModel: string, transport: EngineTransport = 'websocket'): SessionConfig {
  const session = isAvatarConfig(initial)
    ? avatarConfig(initial, defaultModel, transport)
    : isTranscriptionConfig(initial)
      ? transcriptionConfig(initial, defaultModel)
      : applySessionUpdate(null, isLiveConfig(initial) ? {} : initial, defaultModel).session; // a Live session's config comes with session.start
  return {
    model: session.model,
    voice: session.voice,
    face: session.face,
    driving: session.driving,
    instructions: session.instructions,
    video: false,
    media: MEDIA_UNSET,
  };
}

function avatarConfig(initial: Json, defaultModel: string, transport: EngineTransport): { model: string; voice: string; face: string | null; driving: string | null; instructions: string } {
  const settings = avatarSettingsFrom(initial);
  if (transport === 'webrtc' && settings.videoFormat === 'i420') {
    throw new RealtimeError('invalid_value', "Raw frames ('video.format': 'i420') are for WebSocket clients; a call's video travels as RTP.", 'session.video.format');
  }
  // No model or voice runs; the record keeps the defaults in those fields (GET shows type-less REST fields).
  return { model: typeof initial.model === 'string' ? initial.model : defaultModel, voice: DEFAULT_VOICE, face: settings.face, driving: settings.driving, instructions: '' };
}

/** A transcription session's record: no model, voice or avatar runs, so it keeps the defaults in those fields. */
function transcriptionConfig(initial: Json, defaultModel: string): { model: string; voice: string; face: string | null; driving: string | null; instructions: string } {
  transcriptionSettingsFrom(initial);
  return { model: defaultModel, voice: DEFAULT_VOICE, face: null, driving: null, instructions: '' };
}

/**
 * What the connection drives: the realtime engine (session-engine.ts) or, for an avatar-only
 * session, the avatar engine (avatar-engine.ts), or for a transcription session the transcription
 * engine (transcription-engine.ts), which needs no avatar.
 */
interface ConnectionEngine {
  start(): Promise<void>;
  receive(text: string): void;
  pushMicrophone(pcm: Int16Array): void;
  sessionObject(): Json;
  close(): Promise<void>;
}

/** Why a connection is ended from outside. */
export type EndReason = 'session_ended' | 'key_revoked' | 'shutdown' | 'close_requested';

/** What a transport does for the core. */
export interface ConnectionTransport {
  readonly kind: EngineTransport;
  /** One stamped server event as JSON text. */
  sendText(text: string): void;
  /** A binary message (an avatar-only session's raw frames); transports without binary messages leave it out. */
  sendBinary?(data: Buffer): void;
  /** Bytes queued for the client and not sent yet (0 when the transport cannot tell). */
  backlogBytes?(): number;
  /** Whether what is sent now still goes out (a closing socket drops it, so it is not billed); absent: always. */
  isOpen?(): boolean;
  /** Ends the connection for `reason`; `errorText` (a stamped `error` event, when given) is the last thing to send. */
  end(reason: EndReason, errorText: string | null): void;
}

/** A second receiver of a connection's events (a call's sideband WebSocket); see RealtimeConnection.attach. */
export interface ListenerSink {
  /** The API key of the listener's caller: its revocation ends this listener alone. */
  readonly apiKeyId: string | null;
  /** One stamped server event as JSON text. */
  sendText(text: string): void;
  /** The connection ended for `reason` (or the listener's key was revoked); `errorText` is the last thing to send. */
  end(reason: EndReason, errorText: string | null): void;
}

/** What attach() hands back: the listener's way in, and its way out. */
export interface Listener {
  /** One client event (JSON text) of the listener; held while the session starts. */
  receive(text: string): void;
  /** The listener went away: it gets nothing more; the connection goes on. */
  detach(): void;
}

interface AttachedListener {
  /** Its number in the event ids of its events (EventAttribution). */
  no: number;
  sink: ListenerSink;
  /** Its events, held until the engine runs. */
  gate: EventGate;
  revoked: boolean;
}

export interface RunOptions {
  /** The session config the engine starts with (an ephemeral key's session, the call's, a REST session's fields). */
  initial: Json;
  /** The connection created the session: it ends with the connection. Attached REST sessions outlive it. */
  ownsSession: boolean;
  /** Older-form `video=true`: frames as response.video.delta. */
  legacyVideo: boolean;
  /** Avatar media beyond the engine's needs (calls). */
  rtp: AvatarStartOptions['rtp'];
  jpeg: boolean;
  /** Frames as image events when asked for (false: they travel as RTP video). */
  imageEvents: boolean;
}

export class RealtimeConnection {
  readonly userId: string;
  readonly apiKeyId: string | null;
  /** Set when its key was revoked (the registry ends it as key_revoked). */
  revoked = false;
  private session: SessionRecord | null = null;
  private ownsSession = false;
  private avatar: CallAvatar | null = null;
  /** The engine once created; `engine` once it has started (client events go to it from then). */
  private created: ConnectionEngine | null = null;
  private engine: ConnectionEngine | null = null;
  /** The transport's client events, held until the engine runs. */
  private readonly gate = new EventGate((refused) => this.send(refused));
  private readonly earlyMicrophone: Int16Array[] = [];
  private earlyMicrophoneSamples = 0;
  private starting: Promise<boolean> | null = null;
  private ended = false;
  private closing: Promise<void> | null = null;
  private log: Logger;
  private readonly listeners = new Map<number, AttachedListener>();
  private listenersAttached = 0;
  /** Made with the first listener: a connection that never has one tags nothing. */
  private attribution: EventAttribution | null = null;
  /** The listener whose event the engine is reading right now: what it refuses at once is that listener's. */
  private receivingFrom: AttachedListener | null = null;
  /** Whether the engine has sent session.created (a listener attaching later is greeted with its own). */
  private greeted = false;
  /** What the engine delivered, committed as it accrues (see the header). */
  private meter: UsageMeter | null = null;
  /** The engine stopped and its usage committed (settle()); no engine runs afterwards. */
  private settling: Promise<void> | null = null;
  /** Deliveries (events, usage counts) in order, with usage commits between them (ordered-delivery.ts). */
  private readonly delivery = new OrderedDelivery({
    commitUsage: () => (this.meter && !this.settling ? this.meter.flush() : null),
    failed: (err) => this.log.error('a held server event could not be sent', { err }),
  });

  constructor(
    private readonly deps: ConnectionDeps,
    private readonly transport: ConnectionTransport,
    caller: { userId: string; apiKeyId: string | null },
    private dialect: Dialect,
    private readonly onClosed: () => void,
  ) {
    this.userId = caller.userId;
    this.apiKeyId = caller.apiKeyId;
    this.log = deps.log;
  }

  get sessionId(): string | null {
    return this.session?.id ?? null;
  }

  /**
   * Binds the session before it runs (a call: created at offer time, run when its media connects):
   * the registry ends the connection if the session ends first, and closing it ends the session
   * when the connection owns it (a call that never connected is cancelled).
   */
  hold(session: SessionRecord, ownsSession: boolean): void {
    this.session = session;
    this.ownsSession = ownsSession;
    this.log = this.deps.log.child({ sessionId: session.id });
  }

  /** A GPT-Live session (/v1/live/sessions): its events are translated both ways (realtime/live-dialect.ts). */
  private liveDialect: LiveDialect | null = null;
  private usageTimer: NodeJS.Timeout | null = null;

  /** The session's dialect can change once the session is known (an older-form REST session). */
  setDialect(dialect: Dialect): void {
    this.dialect = dialect;
  }

  /**
   * Runs `session` on this connection: the avatar, then the engine (which sends session.created).
   * On failure the session fails (avatar) and the transport is ended; resolves false then.
   */
  run(session: SessionRecord, options: RunOptions): Promise<boolean> {
    this.starting ??= this.start(session, options);
    return this.starting;
  }

  private async start(session: SessionRecord, options: RunOptions): Promise<boolean> {
    this.hold(session, options.ownsSession);
    const { runtime } = this.deps;
    // Checked when the session was made (sessionConfigFrom); read again here for the media it needs.
    const avatarOnly = isAvatarConfig(options.initial) ? avatarSettingsFrom(options.initial) : null;
    const transcription = isTranscriptionConfig(options.initial);
    if (avatarOnly || transcription) this.dialect = 'ga';
    // A Live session: a WebRTC one starts with its POST's config, a WebSocket one with the client's session.start.
    const liveStart = isLiveConfig(options.initial) && options.initial.session !== undefined ? JSON.stringify({ type: 'session.start', session: options.initial.session }) : null;
    if (isLiveConfig(options.initial)) {
      this.liveDialect = new LiveDialect({ id: session.id, expiresAt: Math.floor((session.deadlineUs ?? 0) / 1e6), transport: this.transport.kind });
      options = { ...options, initial: {} };
      for (const listener of this.listeners.values()) this.greet(listener);
    }
    try {
      if (!transcription) this.avatar = await runtime.startAvatar({
        userId: this.userId,
        faceId: session.face ?? 'default',
        drivingId: session.driving ?? 'default',
        media: session.media,
        jpeg: options.jpeg && (avatarOnly === null || avatarOnly.videoFormat === 'jpeg'),
        i420: options.rtp === null && avatarOnly?.videoFormat === 'i420',
        rtp: options.rtp,
      });
    } catch (err) {
      this.log.error('avatar start failed', { err });
      await this.deps.sessions.fail(session.id, 'avatar_start_failed').catch(() => undefined);
      this.ownsSession = false; // already failed
      this.endWith('session_ended', new RealtimeError('avatar_unavailable', 'The avatar could not be started.', null, 'server_error'));
      return false;
    }
    if (this.closing || this.settling) return false; // the teardown, waiting for this, closes the avatar
    this.meter = new UsageMeter({ sessionId: session.id, store: this.deps.store, log: this.log });
    const engine = avatarOnly ? this.avatarEngine(session, options) : transcription ? this.transcriptionEngine(session, options) : this.realtimeEngine(session, options);
    this.created = engine;
    try {
      await engine.start();
    } catch (err) {
      this.log.error('engine start failed', { err });
      this.endWith('session_ended', err);
      return false;
    }
    if (this.closing || this.settling) return false;
    this.engine = engine;
    for (const pcm of this.earlyMicrophone.splice(0)) engine.pushMicrophone(pcm);
    this.earlyMicrophoneSamples = 0;
    if (liveStart !== null) this.toEngine(liveStart);
    this.gate.open((text) => this.toEngine(text));
    for (const listener of this.listeners.values()) listener.gate.open((text) => this.deliverFrom(listener, text));
    if (this.liveDialect) this.usageTimer = setInterval(() => this.sendLive({ event: this.liveDialect!.usage(), to: 'all' }), USAGE_INTERVAL_MS);
    return true;
  }

  /** A client event of the transport into the engine; a Live one translated first. */
  private toEngine(text: string): void {
    const engine = this.engine;
    if (!engine) return;
    if (this.liveDialect) this.liveCommand(text, null);
    else engine.receive(text);
  }

  /**
   * A Live command of the transport (`from` null) or of a listener (a sideband): translated, its
   * engine events run (an error they cause goes back to where they came from), its answers sent
   * (a listener's errors to it alone), a close carried out.
   */
  private liveCommand(text: string, from: AttachedListener | null): void {
    const { engine: events, send, close } = this.liveDialect!.clientEvent(text, from ? 'observer' : 'primary');
    this.receivingFrom = from;
    try {
      for (const event of events) this.engine?.receive(JSON.stringify(event));
    } finally {
      this.receivingFrom = null;
    }
    for (const out of send) {
      if (from && out.event.type === 'error') this.delivery.inOrder(() => from.sink.sendText(liveText(out)));
      else this.sendLive(out);
    }
    if (close) this.delivery.inOrder(() => this.endWith('close_requested', null));
  }

  /** A Live event (already Live-shaped), stamped unless bare, to those it is for: the transport, the listeners, or both. */
  private sendLive(out: LiveOut): void {
    if (out.to === 'observers' && this.listeners.size === 0) return;
    const text = liveText(out);
    this.delivery.inOrder(() => {
      if (out.to !== 'observers') this.transport.sendText(text);
      if (out.to !== 'primary') for (const listener of this.listeners.values()) listener.sink.sendText(text);
    });
  }

  private realtimeEngine(session: SessionRecord, options: RunOptions): ConnectionEngine {
    const { runtime } = this.deps;
    return new RealtimeSessionEngine(
      {
        sessionId: session.id,
        userId: this.userId,
        dialect: this.dialect,
        transport: this.transport.kind,
        imageEvents: options.imageEvents,
        defaultModel: this.deps.defaultModel,
        expiresAt: Math.floor((session.deadlineUs ?? 0) / 1e6),
        ttsSource: resolveMedia(session.media).ttsSource,
        legacyVideo: options.legacyVideo,
        initial: options.initial,
        // A Live call's observers hear its output audio reflected (live-dialect.ts).
        audioEventsToo: this.liveDialect !== null,
      },
      {
        send: (event) => this.send(event),
        avatar: this.avatar!,
        llm: runtime.llm,
        tts: runtime.tts,
        asr: runtime.asr,
        createVad: () => runtime.createVad(),
        endOfTurnModel: () => runtime.endOfTurnModel(),
        assets: this.deps.assets,
        images: runtime.images,
        mcp: runtime.mcp,
        recorder: this.recorder(session),
        log: this.log,
      },
    );
  }

  /** An avatar-only session: the client streams the speech (docs/avatar-mode.md). */
  private avatarEngine(session: SessionRecord, options: RunOptions): ConnectionEngine {
    return new AvatarSessionEngine(
      {
        sessionId: session.id,
        userId: this.userId,
        transport: this.transport.kind,
        expiresAt: Math.floor((session.deadlineUs ?? 0) / 1e6),
        initial: options.initial,
        frames: { ...this.avatar!.size, fps: this.avatar!.fps },
      },
      {
        send: (event) => this.send(event),
        sendBinary: (data) => this.transport.sendBinary?.(data),
        backlogBytes: () => this.transport.backlogBytes?.() ?? 0,
        avatar: this.avatar!,
        assets: this.deps.assets,
        recorder: this.recorder(session),
        log: this.log,
      },
    );
  }

  /** A transcription session: turns and transcripts, no response (transcription-engine.ts). */
  private transcriptionEngine(session: SessionRecord, options: RunOptions): ConnectionEngine {
    const { runtime } = this.deps;
    return new TranscriptionSessionEngine(
      {
        sessionId: session.id,
        userId: this.userId,
        transport: this.transport.kind,
        expiresAt: Math.floor((session.deadlineUs ?? 0) / 1e6),
        initial: options.initial,
      },
      {
        send: (event) => this.send(event),
        asr: runtime.asr,
        createVad: () => runtime.createVad(),
        endOfTurnModel: () => runtime.endOfTurnModel(),
        recorder: this.recorder(session),
        log: this.log,
      },
    );
  }

  private recorder(session: SessionRecord): SessionRecorder {
    const { store, clock } = this.deps;
    return {
      appendTurn: (role, content) => store.appendChatTurn(session.id, { role, content }, clock.nowUs()),
      setCurrentTranscript: (text) => store.setCurrentTranscript(session.id, text),
      // Counted once the events before it went out, and only while they still can (see isOpen).
      addUsage: (delta) =>
        this.delivery.inOrder(() => {
          if (this.transport.isOpen?.() ?? true) this.meter?.add(delta);
        }),
    };
  }

  /**
   * Stops the engine (nothing more is delivered), lets out what waited behind a usage commit, and
   * commits the exact usage delivered. The session can then end with a final record. Idempotent.
   */
  settle(): Promise<void> {
    this.settling ??= (async () => {
      try {
        await this.created?.close();
      } catch (err) {
        this.log.error('closing the engine failed', { err });
      }
      this.delivery.release();
      await this.meter?.close();
    })();
    return this.settling;
  }

  /** The avatar of a running call (its encoded media), or null before run() succeeded. */
  get callAvatar(): CallAvatar | null {
    return this.engine ? this.avatar : null;
  }

  /** One client event (JSON text) of the transport; held (bounded, in order) until the engine runs. */
  receive(text: string): void {
    if (this.engine && this.gate.isOpen) this.toEngine(text);
    else this.gate.receive(text);
  }

  /**
   * Decoded microphone audio of a call (PCM16 mono 24 kHz). Audio that arrives while the session
   * is still starting (avatar and engine warming up) is kept, its newest EARLY_MICROPHONE_SAMPLES,
   * and given to the engine when it runs: a caller who speaks as soon as the call connects is heard
   * from the first word.
   */
  pushMicrophone(pcm: Int16Array): void {
    if (this.engine) {
      if (this.liveDialect) {
        // A Live call: reflected to its observers before muting; silence to the model while muted.
        const { engine, reflect } = this.liveDialect.microphoneAudio(pcm, this.listeners.size > 0);
        if (reflect) this.sendLive(reflect);
        pcm = engine;
      }
      this.engine.pushMicrophone(pcm);
      return;
    }
    if (this.closing) return;
    this.earlyMicrophone.push(pcm);
    this.earlyMicrophoneSamples += pcm.length;
    while (this.earlyMicrophoneSamples > EARLY_MICROPHONE_SAMPLES && this.earlyMicrophone.length > 1) {
      this.earlyMicrophoneSamples -= this.earlyMicrophone.shift()!.length;
    }
  }

  /** Whether the connection still runs (or will): not ended, not closing. Listeners attach only then. */
  get live(): boolean {
    return !this.ended && this.closing === null;
  }

  /** A GPT-Live session (set once it runs): its listeners are Live sidebands. */
  get isLiveSession(): boolean {
    return this.liveDialect !== null;
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  /**
   * Adds a listener (see the header): from now on it gets every server event, and what it sends
   * goes to the engine. Greeted with session.created when the engine has sent its own already
   * (otherwise it gets the engine's). Only while `live`.
   */
  attach(sink: ListenerSink): Listener {
    if (!this.live) throw new Error('attach() on a connection that has ended');
    const no = ++this.listenersAttached;
    const listener: AttachedListener = { no, sink, gate: new EventGate((refused) => this.sendTo(listener, refused)), revoked: false };
    this.listeners.set(listener.no, listener);
    this.attribution ??= new EventAttribution();
    this.greet(listener);
    if (this.engine) listener.gate.open((text) => this.deliverFrom(listener, text));
    return {
      receive: (text) => listener.gate.receive(text),
      detach: () => {
        this.listeners.delete(listener.no);
        listener.gate.shut();
      },
    };
  }

  /**
   * A new listener's first event: a Live session's `info` (sideband_attached); otherwise
   * session.created, when the engine has sent its own already (else the engine's is its first).
   */
  private greet(listener: AttachedListener): void {
    if (this.liveDialect) this.delivery.inOrder(() => listener.sink.sendText(liveText({ event: this.liveDialect!.attached(), to: 'observers' })));
    else if (this.greeted && this.created) this.sendTo(listener, { type: 'session.created', session: this.created.sessionObject() });
  }

  /** A listener's event into the engine, tagged so an error it causes goes back to it alone. */
  private deliverFrom(listener: AttachedListener, text: string): void {
    if (!this.listeners.has(listener.no) || !this.engine) return;
    if (this.liveDialect) return this.liveCommand(text, listener);
    const tagged = this.attribution!.tag(listener.no, text);
    this.receivingFrom = listener;
    try {
      this.engine.receive(tagged ?? text);
    } finally {
      this.receivingFrom = null;
    }
  }

  /** Marks the listeners of revoked keys (ended by endRevokedListeners, unless the connection ends first). */
  markRevokedListeners(keyIds: readonly string[]): void {
    for (const listener of this.listeners.values()) if (listener.sink.apiKeyId !== null && keyIds.includes(listener.sink.apiKeyId)) listener.revoked = true;
  }

  /** Ends the marked listeners; the connection goes on. */
  endRevokedListeners(): void {
    const text = this.stamp(errorEvent(new AppError('api_key_revoked', 'The API key of this connection has been revoked.', { status: 401 }), null));
    for (const listener of [...this.listeners.values()]) {
      if (!listener.revoked) continue;
      this.listeners.delete(listener.no);
      listener.sink.end('key_revoked', text);
    }
  }

  /**
   * Sends one server event, stamped and named for this connection's dialect: to the transport and
   * every listener, except an error caused by a listener's event, which goes to that listener only.
   */
  send(draft: ServerEventDraft): void {
    if (draft.type === 'session.created') this.greeted = true;
    if (this.liveDialect && draft.type !== 'error') {
      for (const event of this.liveDialect.serverEvent(draft)) this.sendLive(event);
      return;
    }
    if (draft.type === 'error' && this.attribution) {
      const origin = this.attribution.resolve(draft.error.event_id);
      if (origin) {
        const listener = this.listeners.get(origin.source);
        // A listener that has gone hears nothing more, its errors included.
        if (listener) this.sendTo(listener, { ...draft, error: { ...draft.error, event_id: origin.eventId } });
        return;
      }
      if (this.receivingFrom) return this.sendTo(this.receivingFrom, draft);
    }
    const text = this.stamp(draft);
    if (text === null) return;
    const deliver = () => {
      this.transport.sendText(text);
      for (const listener of this.listeners.values()) listener.sink.sendText(text);
    };
    if (SETTLING_EVENTS.has(draft.type)) this.delivery.afterCommit(deliver);
    else this.delivery.inOrder(deliver);
  }

  private sendTo(listener: AttachedListener, draft: ServerEventDraft): void {
    const text = this.stamp(draft);
    if (text !== null) this.delivery.inOrder(() => listener.sink.sendText(text));
  }

  private stamp(draft: ServerEventDraft): string | null {
    if (this.liveDialect) {
      const [out] = this.liveDialect.serverEvent(draft); // one Live event or none
      return out === undefined ? null : liveText(out);
    }
    const type = renameForDialect(draft.type, this.dialect);
    return type === null ? null : JSON.stringify({ ...draft, type, event_id: newServerEventId() });
  }

  /** Ended from outside (see ConnectionRegistry): the transport tells its client, once. */
  end(reason: EndReason, error: unknown = null, sessionEndReason: string | null = null): void {
    this.sessionEndReason = sessionEndReason;
    this.endWith(reason, error);
  }

  /** The session's end reason when it ended from outside (max_duration: a Live session has expired). */
  private sessionEndReason: string | null = null;

  /** Tears down: engine, avatar, then the session when this connection owns it. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.teardown();
    return this.closing;
  }

  private endWith(reason: EndReason, error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    if (this.usageTimer) clearInterval(this.usageTimer);
    // A Live client and its listeners hear why the session ended (a close it asked for was answered already).
    if (this.liveDialect && reason !== 'close_requested') {
      const why = reason === 'shutdown' ? 'connection_lost' : this.sessionEndReason === 'max_duration' ? 'expired' : 'close_requested';
      const closed = liveText({ event: this.liveDialect.closed(why), to: 'all' });
      this.transport.sendText(closed);
      for (const listener of this.listeners.values()) listener.sink.sendText(closed);
    }
    const event =
      reason === 'key_revoked'
        ? errorEvent(new AppError('api_key_revoked', 'The API key of this connection has been revoked.', { status: 401 }), null)
        : error === null
          ? null
          : errorEvent(error, null);
    // A Live session's end is told by session.closed (above): no session_ended error after it (a failure still says why).
    const told = this.liveDialect !== null && error instanceof RealtimeError && error.code === 'session_ended';
    const text = event === null || told ? null : this.stamp(event);
    this.transport.end(reason, text);
    this.endListeners(reason, text);
  }

  private endListeners(reason: EndReason, errorText: string | null): void {
    const listeners = [...this.listeners.values()];
    this.listeners.clear();
    for (const listener of listeners) listener.sink.end(reason, errorText);
  }

  private async teardown(): Promise<void> {
    try {
      await this.starting; // never rejects: a failed start resolves false
      await this.settle();
      await this.avatar?.close().catch((err: unknown) => this.log.warn('avatar close failed', { err }));
      if (this.session && this.ownsSession) {
        const meter = this.meter;
        await this.deps.sessions.endEventually(this.session.id, null, 'client_disconnected', meter ? () => meter.flush() : undefined);
      }
    } catch (err) {
      this.log.error('connection teardown failed', { err });
    } finally {
      // Listeners still here were not ended with the session (one this connection does not own).
      if (this.listeners.size > 0) this.endListeners('session_ended', this.stamp(errorEvent(new RealtimeError('session_ended', 'The connection of this session ended.'), null)));
      this.onClosed();
    }
  }
}

/** A Live event as text: stamped with an event_id, unless it is bare (reflected input audio has none). */
function liveText(out: LiveOut): string {
  return JSON.stringify(out.bare ? out.event : { ...out.event, event_id: newServerEventId() });
}
