/**
 * Sideband sockets: `/v1/realtime?call_id=rtc_…`, OpenAI's server-side controls, the usual way a
 * backend runs the tools of a browser's WebRTC call. realtime-ws.ts authenticates the socket as any
 * realtime socket and hands it here; this attaches it to the call's connection as a listener
 * (realtime-connection.ts) and moves text both ways.
 *
 * Behaviour:
 *  - the call's owner only (an API key or an ephemeral key of the user who made the call); another
 *    user's call or an unknown id: `call_id_not_found` and close 4004; a call that has ended:
 *    `call_ended` and 4009; more than MAX_SIDEBANDS_PER_CALL: `too_many_sideband_connections`, 4009
 *    (realtime-calls.ts decides; the error event is sent before the close);
 *  - attached, the socket gets every event of the call's session in the GA dialect, from a
 *    session.created on (the engine's own, or one with the session as it is now when the call runs
 *    already); its client events go into the call's engine in order with the data channel's; an
 *    `error` caused by its event comes to it alone;
 *  - closing it leaves the call running; the call's end closes it with the session-end codes
 *    (4010 ended, 4003 key revoked, 1001 shutdown), its own key's revocation with 4003;
 *  - fleet mode: a call running on another worker is found through its route in Redis and the
 *    socket is relayed there (worker-relay.ts), where the same attach happens.
 * Never: a session made or run for a sideband socket.
 *
 * GPT-Live sidebands (`/v1/live/sessions/{session_id}/attach`, openai-python's
 * client.live.sideband) attach the same way to a running Live session, of either primary
 * transport, by its session id: API keys only (Live has no ephemeral keys); the session's owner
 * only; `session_not_found` (4004) for another user's, an unknown or a non-Live session,
 * `session_closed` (4009) for one that has ended, `too_many_sideband_connections` (4009) past
 * MAX_SIDEBANDS_PER_CALL. Attached, the socket hears `info` (sideband_attached), then the Live
 * events with the input and output audio reflected (live-dialect.ts, Observers).
 */
import type { WebSocket } from 'ws';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { isLive } from '../store/store.js';
import type { ClientConnection } from './client-connection.js';
import type { ConnectionRegistry } from './connection-registry.js';
import { runHereOrRelay } from './placement.js';
import { type Caller, type CallGateway, MAX_SIDEBANDS_PER_CALL } from './realtime-calls.js';
import type { ConnectionDeps, Listener, ListenerSink } from './realtime-connection.js';
import { CLOSE, END_CODES, closeSocket } from './realtime-socket.js';
import type { FleetRouting, RelayedRun, RemoteWorker } from './worker-relay.js';

/**
 * A sideband socket skips image deltas while this much is queued for it (a backend reading slower
 * than the avatar's frames): frames are dropped, never the conversation's events.
 */
const MAX_SIDEBAND_BACKLOG_BYTES = 1024 * 1024;

export interface SidebandDeps {
  calls: CallGateway;
  /** The connections running here (a Live session's, by its session id). */
  registry: ConnectionRegistry;
  store: ConnectionDeps['store'];
  /** Fleet mode: where sessions run when not here; null in the embedded default. */
  routing: FleetRouting | null;
  log: Logger;
}

export class SidebandGateway {
  constructor(private readonly deps: SidebandDeps) {}

  /**
   * The sideband of `callId` on `client` (authenticated as `caller`): attached to the call when it
   * runs here, relayed to its worker in fleet mode, refused otherwise (an error, then the close
   * code). What the client sent meanwhile follows in order (the client holds it).
   */
  async attach(client: ClientConnection, caller: Caller, callId: string): Promise<void> {
    const { calls } = this.deps;
    try {
      const listener = calls.attachSideband(caller, callId, this.sink(client.socket, caller.apiKeyId, callId));
      if (listener) return client.attachTo(listener);
      const route = await calls.sidebandRoute(caller.userId, callId);
      client.relayTo(route.worker, { sessionId: route.sessionId, callId, caller, initial: {}, ownsSession: false, dialect: 'ga', legacyVideo: false });
    } catch (err) {
      this.refuse(client, callId, err);
    }
  }

  /**
   * Fleet mode, on the worker: a sideband relayed by the API node that authenticated it and found
   * the call here; attached as if it had connected here.
   */
  attachRelayed(client: ClientConnection, run: RelayedRun, callId: string): void {
    try {
      const listener = this.deps.calls.attachSideband(run.caller, callId, this.sink(client.socket, run.caller.apiKeyId, callId));
      if (!listener) throw new AppError('call_ended', `Call ${callId} is not running here; it has ended.`, { status: 409, param: 'call_id' });
      client.attachTo(listener);
    } catch (err) {
      this.refuse(client, callId, err);
    }
  }

  /**
   * The sideband of the Live session `sessionId` (`/v1/live/sessions/{id}/attach`): attached when
   * it runs here, relayed to its worker in fleet mode, refused otherwise (see the header).
   */
  async attachLive(client: ClientConnection, caller: Caller, sessionId: string): Promise<void> {
    try {
      const listener = this.attachLiveHere(caller, sessionId, client.socket);
      if (listener) return client.attachTo(listener);
      const worker = await this.liveRoute(caller.userId, sessionId);
      client.relayTo(worker, { sessionId, liveSideband: true, caller, initial: {}, ownsSession: false, dialect: 'ga', legacyVideo: false });
    } catch (err) {
      this.refuse(client, sessionId, err);
    }
  }

  /** Fleet mode, on the worker: a Live sideband relayed by the API node that found the session here. */
  attachLiveRelayed(client: ClientConnection, run: RelayedRun): void {
    try {
      const listener = this.attachLiveHere(run.caller, run.sessionId, client.socket);
      if (!listener) throw liveSessionClosed(run.sessionId);
      client.attachTo(listener);
    } catch (err) {
      this.refuse(client, run.sessionId, err);
    }
  }

  /** Attaches to the Live session when its connection runs here; null when it does not (it may run elsewhere, or have ended). */
  private attachLiveHere(caller: Caller, sessionId: string, ws: WebSocket): Listener | null {
    const connection = this.deps.registry.connectionOf(sessionId);
    if (!connection) return null;
    if (connection.userId !== caller.userId || !connection.isLiveSession) throw liveSessionNotFound(sessionId);
    if (!connection.live) throw liveSessionClosed(sessionId);
    if (connection.listenerCount >= MAX_SIDEBANDS_PER_CALL) {
      throw new AppError('too_many_sideband_connections', `Session ${sessionId} already has ${MAX_SIDEBANDS_PER_CALL} sideband connections; close one before opening another.`, { status: 409, param: 'session_id' });
    }
    return connection.attach(this.sink(ws, caller.apiKeyId, sessionId));
  }

  /** A Live session not running here: its worker in fleet mode; otherwise (or when it has ended) the refusal. */
  private async liveRoute(userId: string, sessionId: string): Promise<RemoteWorker> {
    const session = await this.deps.store.getSession(sessionId);
    if (!session || session.userId !== userId) throw liveSessionNotFound(sessionId);
    if (!isLive(session.status)) throw liveSessionClosed(sessionId);
    const worker = this.deps.routing ? await runHereOrRelay(this.deps.routing, sessionId, this.deps.log) : null;
    // Live, yet not running here nor on a worker: it is starting or ending.
    if (!worker) throw liveSessionClosed(sessionId);
    return worker;
  }

  /** An error event, then the close code of its status: 4004 not found, 4009 not usable, 1013 retry, 1011 a bug. */
  private refuse(client: ClientConnection, callId: string, err: unknown): void {
    if (!(err instanceof AppError)) this.deps.log.error('attaching a sideband failed', { err, callId });
    const status = err instanceof AppError ? err.status : 500;
    const code = status === 404 ? CLOSE.NOT_FOUND : status === 409 ? CLOSE.SESSION_UNUSABLE : status === 503 ? CLOSE.TRY_AGAIN_LATER : CLOSE.INTERNAL;
    client.refuse(err, code, 'call unavailable');
  }

  /** The socket as a listener of the call's connection: events as text (image deltas skipped when backed up); the call's end closes it. */
  private sink(ws: WebSocket, apiKeyId: string | null, callId: string): ListenerSink {
    let droppedImages = 0;
    return {
      apiKeyId,
      sendText: (text) => {
        if (ws.readyState !== ws.OPEN) return;
        if (ws.bufferedAmount > MAX_SIDEBAND_BACKLOG_BYTES && text.startsWith('{"type":"response.output_image.delta"')) {
          if (droppedImages++ === 0) this.deps.log.warn('image events dropped: a sideband socket is backed up', { callId });
          return;
        }
        ws.send(text);
      },
      end: (reason, errorText) => {
        if (errorText && ws.readyState === ws.OPEN) ws.send(errorText);
        closeSocket(ws, ...END_CODES[reason]);
      },
    };
  }
}

function liveSessionNotFound(sessionId: string): AppError {
  return new AppError('session_not_found', `No Live session ${sessionId} of yours is running.`, { status: 404, param: 'session_id' });
}

function liveSessionClosed(sessionId: string): AppError {
  return new AppError('session_closed', `Live session ${sessionId} has ended; a sideband attaches to a running session.`, { status: 409, param: 'session_id' });
}
