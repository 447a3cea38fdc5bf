/**
 * `/v1/realtime` over WebSocket: `ws` on the server's own http.Server (noServer + handleUpgrade).
 * The WebSocket transport of a realtime connection: it authenticates, creates or attaches the
 * session, and moves text between the socket and the connection core (realtime-connection.ts),
 * which runs the avatar and the engine.
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
 * DELETE or its maximum duration); `?call_id=` is a sideband of a WebRTC call (OpenAI's
 * server-side controls: the call's owner, by an API key or an ephemeral key of theirs, gets the
 * call's events from a session.created on, and its client events go into the call's engine; it
 * never creates a session, and closing it leaves the call running; realtime-calls.ts has the
 * rules). `/v1/live/sessions` is GPT-Live's socket (API keys only; the session is made for it and
 * configured by its session.start), `/v1/live/sessions/{id}/attach` a Live session's sideband
 * (realtime-sideband.ts). The older form (`voice`, `video`, `face_id`, `voice_id`
 * query parameters, a session made by the older REST form, or a beta client's
 * `OpenAI-Beta: realtime=v1` / `openai-beta.realtime-v1`) gets the older event names.
 *
 * Limits: failed authentications per remote address (auth/throttle.ts) and connections per API key
 * (the key's request bucket) are throttled: an `error` event, then close 4029. Messages that arrive
 * before the engine is ready wait, bounded (the client's EventGate, client-connection.ts).
 *
 * Each socket is a ClientConnection (client-connection.ts) with its state (authenticating, placing,
 * running, relayed, sideband); this gateway authenticates it, finds or makes its session, asks
 * where it runs (runHereOrRelay, placement.ts) and hands it on.
 *
 * Close codes (also in docs/realtime.md, Close codes):
 *   1000 normal · 1001 server shutting down · 1011 internal error · 1013 no worker free (try again
 *   later) · 4001 authentication failed · 4003 the key was revoked · 4004 session (or call) not
 *   found · 4008 no authentication in time · 4009 session not usable (ended, or attached
 *   elsewhere; a call that has ended, or has its most sidebands) ·
 *   4010 the session ended while connected · 4029 too many requests (failed authentications from
 *   this address, or connections with this key).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { apiKeyIdOf, bearerToken, type KeyService, type Principal } from '../auth/keys.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { RateLimiter } from '../core/rate-limiter.js';
import { MEDIA_FIELDS, type MediaOptions, parseMediaOptions, splitMediaFields } from '../core/media-options.js';
import { LIVE_INITIAL } from '../realtime/live-dialect.js';
import { type Dialect, type Json, errorEvent, isObject, MAX_CLIENT_EVENT_BYTES } from '../realtime/protocol.js';
import type { SessionRecord } from '../store/store.js';
import type { CallGateway } from './realtime-calls.js';
import type { ConnectionRegistry } from './connection-registry.js';
import { ClientConnection, MAX_AUTH_MESSAGE_CHARS } from './client-connection.js';
import { runHereOrRelay } from './placement.js';
import { type ConnectionDeps, type RunOptions, sessionConfigFrom } from './realtime-connection.js';
import { SidebandGateway } from './realtime-sideband.js';
import { CLOSE, closeSocket } from './realtime-socket.js';
import { type FleetRouting, type RelayedRun, type RemoteWorker, FLEET_TOKEN_HEADER, INTERNAL_REALTIME_PATH, hasFleetToken, keepRelayAlive, readRelayedRun } from './worker-relay.js';

export const REALTIME_PATH = '/v1/realtime';
/** GPT-Live's WebSocket (realtime/live-dialect.ts translates it for the engine). */
export const LIVE_PATH = '/v1/live/sessions';
/** A GPT-Live sideband: `/v1/live/sessions/{session_id}/attach` (realtime-sideband.ts). */
const LIVE_ATTACH_PATH = /^\/v1\/live\/sessions\/([^/]+)\/attach$/;
/** A connection without credentials must authenticate within this time. */
export const AUTH_TIMEOUT_MS = 10_000;
/** Hard frame limit of the socket (the engine answers larger events than MAX_CLIENT_EVENT_BYTES with an error). */
const MAX_FRAME_BYTES = 4 * MAX_CLIENT_EVENT_BYTES;
const INSECURE_KEY_PROTOCOL = 'openai-insecure-api-key.';
/** A WebSocket session's media: JPEG frames as image events when asked for, no RTP. */
const WEBSOCKET_MEDIA: Pick<RunOptions, 'jpeg' | 'rtp' | 'imageEvents'> = { jpeg: true, rtp: null, imageEvents: true };

export { CLOSE } from './realtime-socket.js';

/** What the gateway needs besides the connection core's dependencies. */
export interface WebSocketGatewayDeps {
  connection: ConnectionDeps;
  registry: ConnectionRegistry;
  /** The WebRTC calls, for their sidebands (`?call_id=`). */
  calls: CallGateway;
  keys: KeyService;
  authThrottle: AuthThrottle;
  rateLimiter: RateLimiter | null;
  isAccepting(): boolean;
  /** Fleet mode: where sessions run when not here; null in the embedded default. */
  routing: FleetRouting | null;
  log: Logger;
}

export class RealtimeGateway {
  private readonly wss: WebSocketServer;
  private readonly log: Logger;
  private readonly sockets = new Set<WebSocket>();
  /** Connections' teardowns in progress; close() waits for them. */
  private readonly teardowns = new Set<Promise<void>>();
  private readonly authTimeoutMs: number;
  private readonly sidebands: SidebandGateway;

  constructor(
    private readonly deps: WebSocketGatewayDeps,
    options: { authTimeoutMs?: number } = {},
  ) {
    this.authTimeoutMs = options.authTimeoutMs ?? AUTH_TIMEOUT_MS;
    this.log = deps.log.child({ module: 'realtime-ws' });
    this.sidebands = new SidebandGateway({ calls: deps.calls, registry: deps.registry, store: deps.connection.store, routing: deps.routing, log: this.log });
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_FRAME_BYTES,
      handleProtocols: (protocols) => (protocols.has('realtime') ? 'realtime' : false),
    });
  }

  /** Registers the upgrade handler on `server`: /v1/realtime becomes WebSocket, other paths are refused. */
  attach(server: http.Server): void {
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const routing = this.deps.routing;
      if (routing && url.pathname === INTERNAL_REALTIME_PATH) {
        if (!hasFleetToken(routing.token, req.headers[FLEET_TOKEN_HEADER])) {
          socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
          return;
        }
        if (!this.deps.isAccepting()) {
          socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
          return;
        }
        let run: RelayedRun;
        try {
          run = readRelayedRun(req.headers['x-fleet-run']);
        } catch {
          socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
          return;
        }
        this.wss.handleUpgrade(req, socket, head, (ws) => void this.onRelayed(ws, run));
        return;
      }
      if (url.pathname !== REALTIME_PATH && url.pathname !== '/realtime' && url.pathname !== LIVE_PATH && !LIVE_ATTACH_PATH.test(url.pathname)) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      if (!this.deps.isAccepting()) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => void this.onConnection(ws, req, url));
    });
  }

  /** Closes every socket still open (after the registry ended the connections) and the server. */
  async close(): Promise<void> {
    for (const ws of this.sockets) closeSocket(ws, CLOSE.GOING_AWAY, 'server shutting down');
    await Promise.allSettled([...this.teardowns]);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  get connectionCount(): number {
    return this.sockets.size;
  }

  /** A client of /v1/realtime: authenticated, then placed (its session here or relayed, or a call's sideband). */
  private async onConnection(ws: WebSocket, req: http.IncomingMessage, url: URL): Promise<void> {
    const query = url.searchParams;
    const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
    const beta = req.headers['openai-beta'] !== undefined || offered.includes('openai-beta.realtime-v1');
    const legacyQuery = ['voice', 'video', 'face_id', 'voice_id'].some((k) => query.has(k));
    const client = this.client(ws, beta || legacyQuery ? 'legacy' : 'ga', 'authenticating');

    // 1. Authenticate.
    let principal: Principal;
    try {
      principal = await this.authenticate(client, req, offered);
      client.authenticated();
    } catch (err) {
      if (err === SOCKET_CLOSED) return;
      const throttled = err instanceof AppError && err.status === 429;
      // The key could not be checked (the store is down): try again later, not a failed authentication.
      const outage = err instanceof AppError && err.status === 503;
      if (outage) client.refuse(err, CLOSE.TRY_AGAIN_LATER, 'try again later');
      else client.refuse(err, throttled ? CLOSE.TOO_MANY_REQUESTS : CLOSE.AUTH_FAILED, throttled ? 'too many requests' : 'authentication failed');
      return;
    }
    if (client.closed) return;
    const caller = { userId: principal.userId, apiKeyId: apiKeyIdOf(principal) };
    const callId = query.get('call_id');
    // A sideband: it attaches to the call (here or on its worker) and never makes a session.
    if (callId !== null) return this.sidebands.attach(client, caller, callId);
    const liveAttach = LIVE_ATTACH_PATH.exec(url.pathname);
    if (liveAttach) {
      if (principal.kind === 'ephemeral') return client.refuse(new AppError('invalid_api_key', 'A Live sideband attaches with an API key; ephemeral client keys are for /v1/realtime.', { status: 401 }), CLOSE.AUTH_FAILED, 'authentication failed');
      return this.sidebands.attachLive(client, caller, liveAttach[1] ?? '');
    }

    // 2. Create or attach the session.
    let placed: Awaited<ReturnType<RealtimeGateway['sessionFor']>>;
    try {
      placed = url.pathname === LIVE_PATH ? await this.liveSession(principal) : await this.sessionFor(principal, query, legacyQuery, client.dialect);
    } catch (err) {
      const status = err instanceof AppError ? err.status : 500;
      const code = status === 503 ? CLOSE.TRY_AGAIN_LATER : status === 404 ? CLOSE.NOT_FOUND : status === 409 || status === 400 ? CLOSE.SESSION_UNUSABLE : status === 401 ? CLOSE.AUTH_FAILED : CLOSE.INTERNAL;
      client.refuse(err, code, code === CLOSE.AUTH_FAILED ? 'authentication failed' : 'session unavailable');
      return;
    }
    const { session, owns, initial, dialect } = placed;
    client.dialect = dialect;
    if (owns) client.own(session.id);

    // 3. Run it here, or relay the socket to the worker it was placed on.
    const legacyVideo = dialect === 'legacy' && (session.video || query.get('video') === 'true');
    let worker: RemoteWorker | null;
    try {
      worker = await runHereOrRelay(this.deps.routing, session.id, this.log);
    } catch (err) {
      client.refuse(err, CLOSE.TRY_AGAIN_LATER, 'worker unavailable', 'worker_unreachable');
      return;
    }
    if (worker) client.relayTo(worker, { sessionId: session.id, caller, initial, ownsSession: owns, dialect, legacyVideo });
    else await client.runHere(session, caller, { initial, ownsSession: owns, legacyVideo, ...WEBSOCKET_MEDIA });
  }

  /**
   * Fleet mode, on the worker: a client's socket relayed by the API node that authenticated it and
   * placed its session here. The session runs as if the client had connected here.
   */
  private async onRelayed(ws: WebSocket, run: RelayedRun): Promise<void> {
    // An API node that freezes or vanishes without closing the socket is noticed, not waited for.
    keepRelayAlive(ws, this.log, { sessionId: run.sessionId });
    const client = this.client(ws, run.dialect, 'placing');
    // A call's sideband: attached to the call running here, not a session run.
    if (run.callId !== undefined) return this.sidebands.attachRelayed(client, run, run.callId);
    if (run.liveSideband) return this.sidebands.attachLiveRelayed(client, run);
    let session: SessionRecord | null;
    try {
      session = await this.deps.connection.store.getSession(run.sessionId);
    } catch (err) {
      this.log.error('reading a relayed session failed', { err, sessionId: run.sessionId });
      session = null;
    }
    if (!session || session.status !== 'active' || this.deps.registry.hasSession(session.id)) {
      client.refuse(new AppError('session_not_active', `Session ${run.sessionId} is not active here.`, { status: 409 }), CLOSE.SESSION_UNUSABLE, 'session unavailable');
      return;
    }
    // Owned from here (not before the checks: a session that is not this run's to end is left alone).
    if (run.ownsSession) client.own(session.id);
    await client.runHere(session, run.caller, { initial: run.initial, ownsSession: run.ownsSession, legacyVideo: run.legacyVideo, ...WEBSOCKET_MEDIA });
  }

  /** A client on `ws`, in the gateway's socket set until it closes; close() waits for its teardown. */
  private client(ws: WebSocket, dialect: Dialect, state: 'authenticating' | 'placing'): ClientConnection {
    this.sockets.add(ws);
    return new ClientConnection(ws, dialect, {
      connection: this.deps.connection,
      registry: this.deps.registry,
      fleetToken: this.deps.routing?.token ?? null,
      log: this.log,
      onClosed: (teardown) => {
        this.sockets.delete(ws);
        this.teardowns.add(teardown);
        void teardown.finally(() => this.teardowns.delete(teardown));
      },
    }, state);
  }

  /** Credentials (header, subprotocol, or the first message), throttled; rejects with an AppError or SOCKET_CLOSED. */
  private async authenticate(client: ClientConnection, req: http.IncomingMessage, offered: string[]): Promise<Principal> {
    const { authThrottle, keys, rateLimiter } = this.deps;
    const headerToken = bearerToken(req.headers.authorization);
    const protocolToken = offered.find((p) => p.startsWith(INSECURE_KEY_PROTOCOL))?.slice(INSECURE_KEY_PROTOCOL.length);
    const address = req.socket.remoteAddress ?? 'unknown';
    authThrottle.check(address); // a throttled address is refused before it sends anything
    const token = headerToken ?? protocolToken ?? (await this.awaitAuthMessage(client));
    if (token === null) throw SOCKET_CLOSED;
    const principal = await authThrottle.guard(address, () => keys.authenticate(token));
    // Connections count against the key's request bucket, like REST requests.
    const limited = rateLimiter?.take(apiKeyIdOf(principal) ?? `user:${principal.userId}`, Date.now());
    if (limited && !limited.allowed) {
      throw new AppError('rate_limit_exceeded', `Too many connections with this key; try again in ${limited.retryAfterS} s.`, { status: 429 });
    }
    return principal;
  }

  /** The session of a new socket: attached by ?session_id=, or created (the socket owns it then). */
  private async sessionFor(principal: Principal, query: URLSearchParams, legacyQuery: boolean, dialect: Dialect): Promise<{ session: SessionRecord; owns: boolean; initial: Json; dialect: Dialect }> {
    const { sessions, defaultModel } = this.deps.connection;
    const sessionId = query.get('session_id');
    if (sessionId) {
      let session = await sessions.get(principal.userId, sessionId);
      if (session.status === 'pending') session = await sessions.start(session.id);
      if (session.status !== 'active') {
        throw new AppError('session_not_active', `Session ${session.id} is ${session.status}; create a new one.`, { status: 409, param: 'session_id' });
      }
      if (this.deps.registry.hasSession(session.id)) {
        throw new AppError('session_in_use', `Session ${session.id} already has a realtime connection.`, { status: 409, param: 'session_id' });
      }
      if (transcriptionIntent(query, null)) return { session, owns: false, initial: { type: 'transcription' }, dialect: 'ga' };
      const avatar = avatarIntent(query, null);
      if (avatar) {
        const initial: Json = { ...avatar, face: session.face, driving: session.driving };
        sessionConfigFrom(initial, defaultModel); // its video format, checked before the session runs
        return { session, owns: false, initial, dialect: 'ga' };
      }
      const initial: Json = { model: session.model, voice: session.voice, instructions: session.instructions, face: session.face, driving: session.driving };
      if (session.origin === 'legacy' && session.video) initial.modalities = ['audio', 'text', 'image'];
      return { session, owns: false, initial, dialect: session.origin === 'legacy' ? 'legacy' : dialect };
    }
    // The engine's session.update rules drop the key's read-only fields (id, object, expires_at).
    // The key's media fields are the session record's (the URL's win), the rest its realtime config.
    const minted = splitMediaFields(principal.kind === 'ephemeral' ? principal.session : {});
    let initial: Json = minted.rest;
    if (transcriptionIntent(query, initial)) {
      // No model runs in a transcription session (OpenAI's socket for one names none): a `model` in the URL is not used.
      const { model: _model, ...fields } = initial;
      initial = { ...fields, type: 'transcription' };
    } else {
      const model = query.get('model') ?? (typeof initial.model === 'string' ? initial.model : defaultModel);
      initial = { ...initial, model, ...avatarIntent(query, initial) };
    }
    if (legacyQuery) {
      const voice = query.get('voice_id') ?? query.get('voice') ?? (typeof initial.voice === 'string' ? initial.voice : 'default');
      const face = query.get('face_id') ?? (typeof initial.face === 'string' ? initial.face : null);
      initial = { ...initial, voice, face };
    }
    const session = await sessions.create(
      principal.userId,
      { ...sessionConfigFrom(initial, defaultModel), video: query.get('video') === 'true', media: mediaFromQuery(query, minted.media) },
      'realtime',
      {
        start: true,
        apiKeyId: apiKeyIdOf(principal),
        preferredId: principal.kind === 'ephemeral' && typeof principal.session.id === 'string' ? principal.session.id : null,
        params: legacyQuery ? { face: 'face_id', voice: 'voice_id', driving: 'driving' } : undefined,
      },
    );
    return { session, owns: true, initial, dialect };
  }

  /** A GPT-Live session: created for the socket, configured by its session.start (Live has no ephemeral keys, and no query parameters). */
  private async liveSession(principal: Principal): Promise<{ session: SessionRecord; owns: boolean; initial: Json; dialect: Dialect }> {
    if (principal.kind === 'ephemeral') {
      throw new AppError('invalid_api_key', 'GPT-Live sessions are opened with an API key; ephemeral client keys are for /v1/realtime.', { status: 401 });
    }
    const { sessions, defaultModel } = this.deps.connection;
    const session = await sessions.create(principal.userId, sessionConfigFrom(LIVE_INITIAL, defaultModel), 'realtime', { start: true, apiKeyId: apiKeyIdOf(principal), preferredId: null });
    return { session, owns: true, initial: LIVE_INITIAL, dialect: 'ga' };
  }

  /**
   * Waits for `{"type":"auth","api_key":...}`. Other events before it get an error and are not
   * processed; no message in time → an error and close 4008. Resolves null if the socket closed.
   */
  private awaitAuthMessage(client: ClientConnection): Promise<string | null> {
    const ws = client.socket;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        client.send(errorEvent(new AppError('authentication_timeout', `No credentials within ${this.authTimeoutMs / 1000} s: send Authorization: Bearer <key>, the subprotocol openai-insecure-api-key.<key>, or a first message {"type":"auth","api_key":"<key>"}.`, { status: 401 }), null));
        ws.close(CLOSE.AUTH_TIMEOUT, 'authentication timeout');
        resolve(null);
      }, this.authTimeoutMs);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve(null);
      });
      client.awaitAuth((text) => {
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
          client.send(errorEvent(new AppError('not_authenticated', 'Authenticate first: send {"type":"auth","api_key":"<key>"} before any other event.', { status: 401, param: 'type' }), eventId));
          return;
        }
        clearTimeout(timer);
        client.awaitAuth(null); // what follows waits for the key's check
        const key = msg.api_key ?? msg.token;
        if (typeof key !== 'string' || key === '') {
          reject(new AppError('missing_api_key', "The auth event needs 'api_key'.", { status: 401, param: 'api_key' }));
          return;
        }
        resolve(key);
      });
    });
  }
}

/**
 * The media options of a socket that makes its session: its ephemeral key's, under those in its
 * URL (`?video_render=client`, `&output_size=`, ...: the media fields of a REST session, by their
 * wire names); checked by their schema (400 names the field).
 */
function mediaFromQuery(query: URLSearchParams, minted: Record<string, unknown>): MediaOptions {
  return parseMediaOptions({ ...minted, ...Object.fromEntries(MEDIA_FIELDS.filter((name) => query.has(name)).map((name) => [name, query.get(name)])) });
}

/** Thrown by authenticate() when the socket closed while waiting for credentials. */
const SOCKET_CLOSED = Symbol('socket closed');

/**
 * Whether the socket opens a transcription session (`?intent=transcription`, or an ephemeral key
 * minted for one); a key minted for another kind of session cannot open one.
 */
function transcriptionIntent(query: URLSearchParams, keySession: Json | null): boolean {
  const keyType = keySession?.type;
  if (query.get('intent') !== 'transcription') return keyType === 'transcription';
  if (keyType !== undefined && keyType !== 'transcription') {
    throw new AppError('invalid_value', `This ephemeral key was minted for a session of type '${String(keyType)}'; a transcription session needs a key minted with session.type 'transcription'.`, { status: 400, param: 'intent' });
  }
  return true;
}

/**
 * An avatar-only session asked for in the URL (`?intent=avatar`, `&video_format=`), as the fields
 * it adds to the initial config; null when the URL asks for none. An ephemeral key's realtime
 * session cannot be opened as an avatar-only one (the key was minted for a conversation).
 */
function avatarIntent(query: URLSearchParams, keySession: Json | null): Json | null {
  const intent = query.get('intent');
  const videoFormat = query.get('video_format');
  const keyType = keySession?.type;
  if (intent !== 'avatar' && keyType !== 'avatar') {
    if (videoFormat !== null) throw new AppError('invalid_value', "'video_format' is for avatar-only sessions (intent=avatar).", { status: 400, param: 'video_format' });
    return null;
  }
  if (intent === 'avatar' && keyType !== undefined && keyType !== 'avatar') {
    throw new AppError('invalid_value', "This ephemeral key was minted for a realtime session; an avatar-only session needs a key minted with session.type 'avatar'.", { status: 400, param: 'intent' });
  }
  const video = videoFormat === null ? {} : { video: { ...(isObject(keySession?.video) ? keySession.video : {}), format: videoFormat } };
  return { type: 'avatar', ...video };
}
