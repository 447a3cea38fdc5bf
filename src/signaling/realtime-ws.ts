/**
 * `/v1/realtime` over WebSocket: `ws` on the server's own http.Server (noServer + handleUpgrade).
 * A composition root: it authenticates, creates or attaches the session (and its worker slot),
 * starts the avatar, and connects the socket to a RealtimeSessionEngine.
 *
 * Authentication, first match wins:
 *   1. `Authorization: Bearer <key>` on the upgrade request;
 *   2. the browser subprotocol form `openai-insecure-api-key.<key>`;
 *   3. a first message `{"type":"auth","api_key":"<key>"}` within AUTH_TIMEOUT_MS.
 * API keys and ephemeral keys (ek_) are accepted; an ephemeral key's session config is the start
 * config. Nothing but `auth` is processed before authentication. The subprotocol `realtime` is
 * echoed when offered (browsers and `ws` abort the handshake otherwise).
 *
 * Sessions: `?model=` (or nothing) creates one (origin realtime; it ends when the socket closes);
 * `?session_id=` attaches to a session made by POST /v1/sessions (owner only; it stays until
 * DELETE or its maximum duration). The older form (`voice`, `video`, `face_id`, `voice_id`
 * query parameters, a session made by the older REST form, or a beta client's
 * `OpenAI-Beta: realtime=v1` / `openai-beta.realtime-v1`) gets the older event names.
 *
 * Limits: failed authentications per remote address (auth/throttle.ts) and connections per API key
 * (the key's request bucket) are throttled: an `error` event, then close 4029. Messages that arrive
 * before the engine is ready wait, at most MAX_PENDING_MESSAGES / MAX_PENDING_BYTES of them.
 *
 * Revocation: when the key a connection authenticated with (or the key that minted its ephemeral
 * key) is revoked, the connection gets an `api_key_revoked` error and close 4003, and the sessions
 * the key created end (server.ts wires RevocationWatcher to revokeKeys()).
 *
 * Close codes (also in the README):
 *   1000 normal · 1001 server shutting down · 1011 internal error · 1013 no worker free (try again
 *   later) · 4001 authentication failed · 4003 the key was revoked · 4004 session not found ·
 *   4008 no authentication in time · 4009 session not usable (ended, or attached elsewhere) ·
 *   4010 the session ended while connected · 4029 too many requests (failed authentications from
 *   this address, or connections with this key).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { apiKeyIdOf, bearerToken, type Principal } from '../auth/keys.js';
import type { Services } from '../server/services.js';
import type { SessionRecord } from '../store/store.js';
import type { AvatarOutput } from '../realtime/avatar-output.js';
import type { LanguageModels } from '../providers/llm/base.js';
import type { SpeechService } from '../providers/tts/base.js';
import type { SpeechRecognizers } from '../providers/asr/base.js';
import type { VoiceActivityDetector } from '../providers/vad/base.js';
import { type Dialect, type Json, type ServerEventDraft, RealtimeError, errorEvent, eventIdOf, isObject, newServerEventId, renameForDialect, MAX_CLIENT_EVENT_BYTES } from '../realtime/protocol.js';
import { RealtimeSessionEngine } from '../realtime/session-engine.js';
import { DEFAULT_INSTRUCTIONS } from '../sessions/session-config.js';

export const REALTIME_PATH = '/v1/realtime';
/** A connection without credentials must authenticate within this time. */
export const AUTH_TIMEOUT_MS = 10_000;
/** Hard frame limit of the socket (the engine answers larger events than MAX_CLIENT_EVENT_BYTES with an error). */
const MAX_FRAME_BYTES = 4 * MAX_CLIENT_EVENT_BYTES;
const INSECURE_KEY_PROTOCOL = 'openai-insecure-api-key.';
/** Longest message read as a `{"type":"auth"}` event (a key is under 100 characters); longer ones are not parsed. */
const MAX_AUTH_MESSAGE_CHARS = 4096;

/** Messages held while the engine starts (a client that pipelines events after connecting); more are refused. */
const MAX_PENDING_MESSAGES = 256;
const MAX_PENDING_BYTES = 32 * 1024 * 1024;

export const CLOSE = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  INTERNAL: 1011,
  TRY_AGAIN_LATER: 1013,
  AUTH_FAILED: 4001,
  KEY_REVOKED: 4003,
  NOT_FOUND: 4004,
  AUTH_TIMEOUT: 4008,
  SESSION_UNUSABLE: 4009,
  SESSION_ENDED: 4010,
  TOO_MANY_REQUESTS: 4029,
} as const;

/** What a connection needs beyond the REST services: providers and the avatar. */
export interface RealtimeRuntime {
  llm: LanguageModels;
  tts: SpeechService;
  asr: SpeechRecognizers;
  createVad(): Promise<VoiceActivityDetector>;
  startAvatar(options: { userId: string; faceId: string; drivingId: string; fps: number; upsampleFactor: number }): Promise<AvatarOutput>;
}

interface Connection {
  socket: WebSocket;
  sessionId: string | null;
  /** The API key behind its credentials (null until authenticated, or for old ephemeral keys). */
  apiKeyId: string | null;
  /** Set when that key was revoked: the connection is closing with KEY_REVOKED. */
  revoked: boolean;
  close(code: number, reason: string): void;
  /** Settles once the socket closed and its teardown (engine, avatar, session end) is over. */
  finished: Promise<void>;
}

export class RealtimeGateway {
  private readonly wss: WebSocketServer;
  private readonly log: Logger;
  /** Live connections by session id (one per session). */
  private readonly bySession = new Map<string, Connection>();
  private readonly connections = new Set<Connection>();
  /** Connection teardowns in progress (engine, avatar, session end); close() waits for them. */
  private readonly teardowns = new Set<Promise<void>>();

  private readonly authTimeoutMs: number;
  /** Set by beginShutdown(): sockets close with 1001, whatever ends their sessions. */
  private shuttingDown = false;

  constructor(
    private readonly services: Services,
    private readonly runtime: RealtimeRuntime,
    options: { authTimeoutMs?: number } = {},
  ) {
    this.authTimeoutMs = options.authTimeoutMs ?? AUTH_TIMEOUT_MS;
    this.log = services.log.child({ module: 'realtime-ws' });
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_FRAME_BYTES,
      handleProtocols: (protocols) => (protocols.has('realtime') ? 'realtime' : false),
    });
    services.sessions.on('ended', (session) => {
      const conn = this.bySession.get(session.id);
      if (!conn) return;
      if (conn.revoked) return this.closeRevoked(conn);
      if (this.shuttingDown) return conn.close(CLOSE.GOING_AWAY, 'server shutting down');
      this.send(conn.socket, 'ga', errorEvent(new RealtimeError('session_ended', `The session ended (${session.endReason ?? session.status}).`), null));
      conn.close(CLOSE.SESSION_ENDED, `session ${session.status}`);
    });
  }

  /** Registers the upgrade handler on `server`: /v1/realtime becomes WebSocket, other paths are refused. */
  attach(server: http.Server): void {
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== REALTIME_PATH && url.pathname !== '/realtime') {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      if (!this.services.isAccepting()) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => void this.onConnection(ws, req, url));
    });
  }

  /** From now on sockets close with 1001 (server shutdown), also when their sessions are ended for it. */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  /**
   * The API keys `keyIds` were revoked: their connections are marked now (so the end of their
   * sessions closes them with KEY_REVOKED, not SESSION_ENDED) and closed by closeRevokedKeys().
   */
  markRevokedKeys(keyIds: readonly string[]): void {
    for (const conn of this.connections) if (conn.apiKeyId !== null && keyIds.includes(conn.apiKeyId)) conn.revoked = true;
  }

  /** Closes the marked connections still open (those attached to sessions that outlive the key). */
  closeRevokedKeys(): void {
    for (const conn of this.connections) if (conn.revoked) this.closeRevoked(conn);
  }

  private closeRevoked(conn: Connection): void {
    if (conn.socket.readyState !== conn.socket.OPEN) return;
    this.send(conn.socket, 'ga', errorEvent(new AppError('api_key_revoked', 'The API key of this connection has been revoked.', { status: 401 }), null));
    conn.close(CLOSE.KEY_REVOKED, 'API key revoked');
  }

  /** Closes every connection (server shutdown). */
  async close(): Promise<void> {
    this.beginShutdown();
    const finishing = [...this.connections].map((conn) => {
      conn.close(CLOSE.GOING_AWAY, 'server shutting down');
      // Do not wait long for the peer's close frame: ending the TCP connection runs the teardown too.
      const kill = setTimeout(() => conn.socket.terminate(), 1000);
      return conn.finished.finally(() => clearTimeout(kill));
    });
    await Promise.allSettled([...finishing, ...this.teardowns]);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  private async onConnection(ws: WebSocket, req: http.IncomingMessage, url: URL): Promise<void> {
    const { sessions, keys, config } = this.services;
    const query = url.searchParams;
    const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
    const beta = req.headers['openai-beta'] !== undefined || offered.includes('openai-beta.realtime-v1');
    const legacyQuery = ['voice', 'video', 'face_id', 'voice_id'].some((k) => query.has(k));

    // Until the engine exists, messages wait here (auth first, then everything else in order).
    const pending: string[] = [];
    let pendingBytes = 0;
    let engine: RealtimeSessionEngine | null = null;
    let dialect: Dialect = beta || legacyQuery ? 'legacy' : 'ga';
    let closed = false;
    let authWaiter: ((msg: string) => void) | null = null;
    let authenticated = false;
    let markFinished!: () => void;
    const conn: Connection = {
      socket: ws,
      sessionId: null,
      apiKeyId: null,
      revoked: false,
      close: (code, reason) => {
        if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reason.slice(0, 120));
      },
      finished: new Promise<void>((resolve) => (markFinished = resolve)),
    };
    this.connections.add(conn);
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        this.send(ws, dialect, errorEvent(new RealtimeError('invalid_event', 'Binary messages are not supported; send JSON text events.'), null));
        return;
      }
      const text = data.toString();
      if (authenticated && isAuthMessage(text)) return; // already authenticated (header or subprotocol)
      if (engine) engine.receive(text);
      else if (authWaiter) authWaiter(text);
      else if (pending.length >= MAX_PENDING_MESSAGES || pendingBytes + text.length > MAX_PENDING_BYTES) {
        const eventId = eventIdOf(text.slice(0, MAX_AUTH_MESSAGE_CHARS));
        this.send(ws, dialect, errorEvent(new RealtimeError('session_not_ready', `The session is still starting and holds at most ${MAX_PENDING_MESSAGES} events meanwhile; send this event again after session.created.`), eventId));
      } else {
        pending.push(text);
        pendingBytes += text.length;
      }
    });
    let teardown: (() => Promise<void>) | null = null;
    ws.on('close', () => {
      closed = true;
      if (teardown) {
        const done = teardown().catch((err: unknown) => this.log.error('connection teardown failed', { err }));
        this.teardowns.add(done);
        void done.finally(() => {
          this.teardowns.delete(done);
          this.connections.delete(conn);
          markFinished();
        });
      } else {
        this.connections.delete(conn);
        markFinished();
      }
    });
    ws.on('error', (err) => this.log.warn('socket error', { err }));

    // 1. Authenticate.
    let principal: Principal;
    try {
      const headerToken = bearerToken(req.headers.authorization);
      const protocolToken = offered.find((p) => p.startsWith(INSECURE_KEY_PROTOCOL))?.slice(INSECURE_KEY_PROTOCOL.length);
      const address = req.socket.remoteAddress ?? 'unknown';
      this.services.authThrottle.check(address); // a throttled address is refused before it sends anything
      const token = headerToken ?? protocolToken ?? (await this.awaitAuthMessage(ws, dialect, (fn) => (authWaiter = fn)));
      authWaiter = null;
      if (token === null) return; // closed while waiting
      principal = await this.services.authThrottle.guard(address, () => keys.authenticate(token));
      authenticated = true;
      conn.apiKeyId = apiKeyIdOf(principal);
      // Connections count against the key's request bucket, like REST requests.
      const limited = this.services.rateLimiter?.take(conn.apiKeyId ?? `user:${principal.userId}`, Date.now());
      if (limited && !limited.allowed) {
        throw new AppError('rate_limit_exceeded', `Too many connections with this key; try again in ${limited.retryAfterS} s.`, { status: 429 });
      }
    } catch (err) {
      this.send(ws, dialect, errorEvent(err, null));
      const throttled = err instanceof AppError && err.status === 429;
      conn.close(throttled ? CLOSE.TOO_MANY_REQUESTS : CLOSE.AUTH_FAILED, throttled ? 'too many requests' : 'authentication failed');
      return;
    }
    if (closed) return;

    // 2. Create or attach the session.
    let session: SessionRecord;
    let autoCreated = false;
    let initial: Json;
    try {
      const sessionId = query.get('session_id');
      if (sessionId) {
        session = await sessions.get(principal.userId, sessionId);
        if (session.status === 'pending') session = await sessions.start(session.id);
        if (session.status !== 'active') {
          throw new AppError('session_not_active', `Session ${session.id} is ${session.status}; create a new one.`, { status: 409, param: 'session_id' });
        }
        if (this.bySession.has(session.id)) {
          throw new AppError('session_in_use', `Session ${session.id} already has a realtime connection.`, { status: 409, param: 'session_id' });
        }
        if (session.origin === 'legacy') dialect = 'legacy';
        initial = { model: session.model, voice: session.voice, instructions: session.instructions, face: session.face, driving: session.driving };
        if (session.origin === 'legacy' && session.video) initial.modalities = ['audio', 'text', 'image'];
      } else {
        // The engine's session.update rules drop the key's read-only fields (id, object, expires_at).
        initial = principal.kind === 'ephemeral' ? { ...principal.session } : {};
        const model = query.get('model') ?? (typeof initial.model === 'string' ? initial.model : config.defaultModel);
        const voice = query.get('voice_id') ?? query.get('voice') ?? (typeof initial.voice === 'string' ? initial.voice : 'default');
        const face = query.get('face_id') ?? (typeof initial.face === 'string' ? initial.face : null);
        initial = { ...initial, model };
        if (legacyQuery) initial = { ...initial, voice, face };
        session = await sessions.create(
          principal.userId,
          {
            model,
            voice: typeof initial.voice === 'string' ? initial.voice : 'default',
            face,
            driving: typeof initial.driving === 'string' ? initial.driving : null,
            instructions: typeof initial.instructions === 'string' ? initial.instructions : DEFAULT_INSTRUCTIONS,
            video: query.get('video') === 'true',
            targetFps: null,
            upsampleFactor: null,
            ttsSource: null,
            videoCodec: null,
          },
          'realtime',
          { start: true, apiKeyId: conn.apiKeyId, params: legacyQuery ? { face: 'face_id', voice: 'voice_id', driving: 'driving' } : undefined },
        );
        autoCreated = true;
      }
    } catch (err) {
      this.send(ws, dialect, errorEvent(err, null));
      const status = err instanceof AppError ? err.status : 500;
      conn.close(status === 503 ? CLOSE.TRY_AGAIN_LATER : status === 404 ? CLOSE.NOT_FOUND : status === 409 ? CLOSE.SESSION_UNUSABLE : status === 400 ? CLOSE.SESSION_UNUSABLE : CLOSE.INTERNAL, 'session unavailable');
      return;
    }
    conn.sessionId = session.id;
    this.bySession.set(session.id, conn);
    const log = this.log.child({ sessionId: session.id });

    const endSession = async () => {
      this.bySession.delete(session.id);
      if (autoCreated) await sessions.end(session.id, null, 'client_disconnected').catch((err: unknown) => log.error('ending session failed', { err }));
    };
    if (closed) {
      await endSession();
      return;
    }

    // 3. The avatar, then the engine.
    let avatar: AvatarOutput;
    try {
      avatar = await this.runtime.startAvatar({
        userId: principal.userId,
        faceId: session.face ?? 'default',
        drivingId: session.driving ?? 'default',
        fps: session.targetFps ?? 25,
        upsampleFactor: session.upsampleFactor ?? 1,
      });
    } catch (err) {
      log.error('avatar start failed', { err });
      this.send(ws, dialect, errorEvent(new RealtimeError('avatar_unavailable', 'The avatar could not be started.', null, 'server_error'), null));
      await sessions.fail(session.id, 'avatar_start_failed').catch(() => undefined);
      this.bySession.delete(session.id);
      conn.close(CLOSE.INTERNAL, 'avatar unavailable');
      return;
    }
    const store = this.services.store;
    const activeDialect = dialect;
    const eng = new RealtimeSessionEngine(
      {
        sessionId: session.id,
        userId: principal.userId,
        dialect: activeDialect,
        defaultModel: config.defaultModel,
        expiresAt: Math.floor((session.deadlineUs ?? 0) / 1e6),
        ttsSource: session.ttsSource ?? 'auto',
        legacyVideo: activeDialect === 'legacy' && (session.video || query.get('video') === 'true'),
        initial,
      },
      {
        send: (event) => this.send(ws, activeDialect, event),
        avatar,
        llm: this.runtime.llm,
        tts: this.runtime.tts,
        asr: this.runtime.asr,
        createVad: () => this.runtime.createVad(),
        assets: this.services.assets,
        recorder: {
          appendTurn: (role, content) => store.appendChatTurn(session.id, { role, content }, this.services.clock.nowUs()),
          setCurrentTranscript: (text) => store.setCurrentTranscript(session.id, text),
          addUsage: (delta) => store.addUsageCounters(session.id, delta),
        },
        log,
      },
    );
    teardown = async () => {
      await eng.close();
      await avatar.close().catch((err: unknown) => log.warn('avatar close failed', { err }));
      await endSession();
    };
    try {
      await eng.start();
    } catch (err) {
      log.error('engine start failed', { err });
      this.send(ws, dialect, errorEvent(err, null));
      conn.close(CLOSE.INTERNAL, 'engine start failed');
      return;
    }
    if (closed) {
      await teardown();
      return;
    }
    engine = eng;
    for (const text of pending.splice(0)) eng.receive(text);
  }

  /**
   * Waits for `{"type":"auth","api_key":...}`. Other events before it get an error and are not
   * processed; no message in time → an error and close 4008. Resolves null if the socket closed.
   */
  private awaitAuthMessage(ws: WebSocket, dialect: Dialect, setWaiter: (fn: (msg: string) => void) => void): Promise<string | null> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.send(ws, dialect, errorEvent(new AppError('authentication_timeout', `No credentials within ${this.authTimeoutMs / 1000} s: send Authorization: Bearer <key>, the subprotocol openai-insecure-api-key.<key>, or a first message {"type":"auth","api_key":"<key>"}.`, { status: 401 }), null));
        ws.close(CLOSE.AUTH_TIMEOUT, 'authentication timeout');
        resolve(null);
      }, this.authTimeoutMs);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve(null);
      });
      setWaiter((text) => {
        let msg: unknown = null;
        // An auth event is small; a large message from a client not yet known is not parsed at all
        // (16 MiB of JSON objects takes JSON.parse seconds and gigabytes: issue 8).
        if (text.length <= MAX_AUTH_MESSAGE_CHARS) {
          try {
            msg = JSON.parse(text);
          } catch {
            msg = null;
          }
        }
        const eventId = isObject(msg) && typeof msg.event_id === 'string' ? msg.event_id : null;
        if (!isObject(msg) || msg.type !== 'auth') {
          this.send(ws, dialect, errorEvent(new AppError('not_authenticated', 'Authenticate first: send {"type":"auth","api_key":"<key>"} before any other event.', { status: 401, param: 'type' }), eventId));
          return;
        }
        clearTimeout(timer);
        const key = msg.api_key ?? msg.token;
        if (typeof key !== 'string' || key === '') {
          reject(new AppError('missing_api_key', "The auth event needs 'api_key'.", { status: 401, param: 'api_key' }));
          return;
        }
        resolve(key);
      });
    });
  }

  private send(ws: WebSocket, dialect: Dialect, draft: ServerEventDraft): void {
    if (ws.readyState !== ws.OPEN) return;
    const type = renameForDialect(draft.type, dialect);
    if (type === null) return;
    ws.send(JSON.stringify({ ...draft, type, event_id: newServerEventId() }));
  }
}

function isAuthMessage(text: string): boolean {
  if (text.length > MAX_AUTH_MESSAGE_CHARS) return false;
  try {
    const msg: unknown = JSON.parse(text);
    return isObject(msg) && msg.type === 'auth';
  } catch {
    return false;
  }
}

