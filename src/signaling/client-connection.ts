/**
 * One WebSocket client of `/v1/realtime`, from its upgrade to its close, with an explicit state
 * (as mediasoup's transports under a router: the gateway places it, it holds its own state):
 *
 *   authenticating ─► placing ─┬─► running    its session runs here (a RealtimeConnection)
 *                              ├─► relayed    fleet mode: its session runs on another worker
 *                              └─► sideband   a call's sideband: a listener of the call's
 *                                             connection here, or relayed to the call's worker
 *   any state ─► closed                       the socket closed (after a refusal too)
 *
 * A relayed socket on the worker (fleet mode) starts at `placing`: the API node authenticated it.
 *
 * Its client events are held (an EventGate) until a route is chosen and then go to the route,
 * which holds them itself until it is ready (the connection until its engine runs, the relay until
 * the worker's side opens): no gateway drains a queue. A session the client made is the client's
 * until a route takes it over (the connection from run(), the worker once the relay opens); the
 * socket closing before then ends it as client_disconnected, a worker that cannot be reached as
 * failed/worker_unreachable: both written here, once.
 */
import type { WebSocket } from 'ws';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type Dialect, type ServerEventDraft, binaryMessageRefused, errorEvent, isObject } from '../realtime/protocol.js';
import type { SessionRecord } from '../store/store.js';
import type { ConnectionRegistry } from './connection-registry.js';
import { EventGate } from './pending-events.js';
import type { ConnectionDeps, Listener, RealtimeConnection, RunOptions } from './realtime-connection.js';
import { CLOSE, END_CODES, closeSocket, sendEvent } from './realtime-socket.js';
import { type RelayedRun, type RemoteWorker, relaySocket } from './worker-relay.js';

export type ClientState = 'authenticating' | 'placing' | 'running' | 'relayed' | 'sideband' | 'closed';

/** An `auth` event is a few hundred bytes; longer messages are not parsed before authentication (issue 8). */
export const MAX_AUTH_MESSAGE_CHARS = 4096;

export interface ClientDeps {
  connection: ConnectionDeps;
  registry: ConnectionRegistry;
  /** Fleet mode: the token of the workers' internal routes (relayTo). */
  fleetToken: string | null;
  log: Logger;
  /** The socket closed; `teardown` settles once what ran for it has stopped (the gateway's close() waits for it). */
  onClosed(teardown: Promise<void>): void;
}

/** Where a placed client's events go. */
interface Route {
  receive(text: string): void;
  close(): Promise<void> | void;
}

export class ClientConnection {
  private current: ClientState;
  private readonly gate: EventGate;
  private route: Route | null = null;
  /** The session this client made, while no route has taken it over. */
  private owned: string | null = null;
  /** While authentication waits for a first `auth` message: where messages go meanwhile. */
  private authWaiter: ((text: string) => void) | null = null;

  constructor(
    readonly socket: WebSocket,
    private dialectNow: Dialect,
    private readonly deps: ClientDeps,
    state: 'authenticating' | 'placing',
  ) {
    this.current = state;
    this.gate = new EventGate((refused) => this.send(refused));
    socket.on('message', (data, isBinary) => {
      if (isBinary) this.send(binaryMessageRefused());
      else this.receive(data.toString());
    });
    socket.on('close', () => this.onClose());
    socket.on('error', (err) => deps.log.warn('socket error', { err }));
  }

  get state(): ClientState {
    return this.current;
  }

  get closed(): boolean {
    return this.current === 'closed';
  }

  get dialect(): Dialect {
    return this.dialectNow;
  }

  /** The session's dialect can change once it is known (an older-form REST session). */
  set dialect(dialect: Dialect) {
    this.dialectNow = dialect;
  }

  /** A server event outside a connection (refusals before the session runs). */
  send(draft: ServerEventDraft): void {
    sendEvent(this.socket, this.dialectNow, draft);
  }

  /** Authentication waits for the client's `auth` message: messages go to `waiter` (null: held again). */
  awaitAuth(waiter: ((text: string) => void) | null): void {
    this.authWaiter = waiter;
  }

  /** Authenticated: its session is being made or found next. */
  authenticated(): void {
    this.authWaiter = null;
    if (this.current === 'authenticating') this.current = 'placing';
  }

  /** The client made `sessionId`: it ends with the client unless a route takes it over. */
  own(sessionId: string): void {
    this.owned = sessionId;
    if (this.closed) this.endOwned(null, 'client_disconnected');
  }

  /**
   * A refusal: an error event, then the close `code`. `ownedFailure`: the owned session fails
   * with this reason (a worker that cannot be reached); otherwise it ends with the socket.
   */
  refuse(err: unknown, code: number, reason: string, ownedFailure: string | null = null): void {
    if (ownedFailure !== null) this.endOwned('failed', ownedFailure);
    this.send(errorEvent(err, null));
    closeSocket(this.socket, code, reason);
  }

  /** Runs `session` here: a connection in the registry, its events going there from now on. */
  async runHere(session: SessionRecord, caller: { userId: string; apiKeyId: string | null }, options: RunOptions): Promise<void> {
    if (this.closed) return;
    const conn = this.track(caller);
    this.current = 'running';
    const run = conn.run(session, options); // the connection holds the session from here
    if (this.owned === session.id) this.owned = null;
    this.routeTo(conn);
    if (!(await run) && !this.closed) closeSocket(this.socket, CLOSE.INTERNAL, 'session could not start');
  }

  /** Relays the socket to `worker`, where `run` runs (fleet mode); the owned session is the worker's once it opens. */
  relayTo(worker: RemoteWorker, run: RelayedRun): void {
    if (this.closed) return;
    this.current = run.callId === undefined ? 'relayed' : 'sideband';
    const what = run.callId === undefined ? "The session's" : "The call's";
    const relay = relaySocket(this.socket, worker, this.deps.fleetToken!, run, {
      onOpen: () => {
        this.owned = null;
      },
      onClose: (code, reason) => closeSocket(this.socket, code, reason),
      onFailure: () => this.refuse(new AppError('worker_unavailable', `${what} worker could not be reached. Retry.`, { status: 503 }), CLOSE.TRY_AGAIN_LATER, 'worker unavailable', 'worker_unreachable'),
    }, this.deps.log);
    this.routeTo(relay);
  }

  /** A sideband attached to its call here: its events go into the call's connection. */
  attachTo(listener: Listener): void {
    if (this.closed) return listener.detach();
    this.current = 'sideband';
    this.routeTo({ receive: listener.receive, close: listener.detach });
  }

  /** The held events go to `route` first; from then on each goes straight there. */
  private routeTo(route: Route): void {
    this.gate.open((text) => route.receive(text));
    this.route = route;
  }

  private receive(text: string): void {
    if (this.current === 'authenticating') {
      if (this.authWaiter) this.authWaiter(text);
      else this.gate.receive(text);
      return;
    }
    if (isAuthMessage(text)) return; // already authenticated (a header, the subprotocol, or the API node)
    if (this.route) this.route.receive(text);
    else this.gate.receive(text);
  }

  private onClose(): void {
    this.current = 'closed';
    this.gate.shut();
    this.endOwned(null, 'client_disconnected');
    const route = this.route;
    this.route = null;
    let teardown = Promise.resolve();
    try {
      teardown = Promise.resolve(route?.close()).catch((err: unknown) => this.deps.log.error('closing a client route failed', { err }));
    } catch (err) {
      this.deps.log.error('closing a client route failed', { err });
    }
    this.deps.onClosed(teardown);
  }

  private endOwned(status: 'failed' | null, reason: string): void {
    const id = this.owned;
    this.owned = null;
    if (id !== null) void this.deps.connection.sessions.endEventually(id, status, reason);
  }

  /** A connection of the authenticated caller on this socket: its events go out as text, its end closes the socket. */
  private track(caller: { userId: string; apiKeyId: string | null }): RealtimeConnection {
    const ws = this.socket;
    return this.deps.registry.track(
      this.deps.connection,
      {
        kind: 'websocket',
        sendText: (text) => {
          if (ws.readyState === ws.OPEN) ws.send(text);
        },
        sendBinary: (data) => {
          if (ws.readyState === ws.OPEN) ws.send(data, { binary: true });
        },
        backlogBytes: () => ws.bufferedAmount,
        isOpen: () => ws.readyState === ws.OPEN,
        end: (reason, errorText) => {
          if (errorText && ws.readyState === ws.OPEN) ws.send(errorText);
          closeSocket(ws, ...END_CODES[reason]);
        },
      },
      caller,
      this.dialectNow,
    );
  }
}

/** Whether `text` is an `auth` event (parsed only when small and when it names the type at all). */
export function isAuthMessage(text: string): boolean {
  if (text.length > MAX_AUTH_MESSAGE_CHARS || !text.includes('"auth"')) return false;
  try {
    const msg: unknown = JSON.parse(text);
    return isObject(msg) && msg.type === 'auth';
  } catch {
    return false;
  }
}
