/**
 * Fleet mode, between an API node and the worker a session was placed on. The API node does
 * everything a client sees first (authentication, throttling, the session and its placement, every
 * refusal); the worker runs the session (avatar, engine, WebRTC peer) from what the API node sends
 * on its internal routes, which take only requests bearing the fleet token:
 *
 *   WebSocket  /internal/realtime?session_id=…  the client's socket, relayed message by message:
 *              the API node keeps the client's socket and opens this one to the worker; text goes
 *              both ways unchanged, and whichever side closes first closes the other with its
 *              code (a worker that vanishes: 1011). The run parameters (caller, initial config,
 *              dialect, ownership) travel in headers. Relayed, not redirected: WebSocket clients
 *              (browsers, the OpenAI SDKs) do not follow redirects on the upgrade, and the API
 *              node has already answered the handshake by the time it knows the session.
 *              A call's sideband (`?call_id=`) is relayed the same way to the worker running the
 *              call (the run names the call; the worker attaches it there, running nothing).
 *   POST       /internal/calls                 a call's offer for its session, placed here; the
 *              worker builds the peer, so the SDP answer carries the worker's own ICE candidates
 *              and media flows between client and worker directly.
 *   POST       /internal/calls/{id}/hangup     a hangup that reached another node.
 *
 * Both ends of a relayed socket ping the other (keepRelayAlive): a peer that stops answering for
 * RELAY_SILENCE_MS (a frozen process, a host gone without closing its connections, a partition) is
 * taken as gone and its socket terminated, as if it had closed: on the worker the session ends as
 * for a closed connection (its slot freed, billed once), on the API node the client gets 1011. A
 * killed process closes its sockets itself (the kernel does), which both ends see at once.
 */
import { timingSafeEqual } from 'node:crypto';
import { WebSocket } from 'ws';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Dialect, Json } from '../realtime/protocol.js';
import { EventGate } from './pending-events.js';
import { sendEvent } from './realtime-socket.js';

export const INTERNAL_REALTIME_PATH = '/internal/realtime';
export const INTERNAL_CALLS_PATH = '/internal/calls';
export const FLEET_TOKEN_HEADER = 'x-fleet-token';
const RUN_HEADER = 'x-fleet-run';
/** How long an internal HTTP request to a worker may take (an offer's answer is built in well under a second). */
const FORWARD_TIMEOUT_MS = 15_000;
/** A worker that does not complete the internal handshake in this time is taken as gone. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How often each end of a relayed socket pings the other. */
export const RELAY_PING_MS = 3_000;
/** A relayed socket whose peer sent nothing (not even a pong) for this long is terminated. */
export const RELAY_SILENCE_MS = 10_000;

/** Where a session runs when it is not this process. */
export interface RemoteWorker {
  workerId: string;
  /** The worker's internal base URL (http://host:port). */
  url: string;
}

/** The fleet's routing, as signaling needs it (server.ts builds it over the worker registry). */
export interface FleetRouting {
  token: string;
  /** The worker a session runs on, or null when it runs here (or holds no lease). */
  remoteWorkerOf(sessionId: string): Promise<RemoteWorker | null>;
  /** Remembers a call's session so a hangup on any node finds it. */
  rememberCall(callId: string, sessionId: string): Promise<void>;
  /** The session of a call made through any node; null when unknown. */
  callSession(callId: string): Promise<string | null>;
}

/** What a worker needs to run a relayed WebSocket session. */
export interface RelayedRun {
  sessionId: string;
  caller: { userId: string; apiKeyId: string | null };
  initial: Json;
  ownsSession: boolean;
  dialect: Dialect;
  legacyVideo: boolean;
  /** A sideband of this call (`?call_id=`): attached to the call's connection on the worker; the session is not run. */
  callId?: string;
  /** A sideband of this Live session (`/v1/live/sessions/{id}/attach`): attached to its connection on the worker. */
  liveSideband?: true;
}

/** An offer forwarded to the worker its session was placed on. */
export interface ForwardedCall {
  sessionId: string;
  caller: { userId: string; apiKeyId: string | null };
  sdp: string;
  initial: Json;
  videoCodec: 'h264' | 'vp8';
}

/** Whether a request bears the fleet token (compared in constant time). */
export function hasFleetToken(token: string, presented: string | string[] | undefined): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The run parameters a worker reads from the internal upgrade request. */
export function readRelayedRun(header: string | string[] | undefined): RelayedRun {
  if (typeof header !== 'string') throw new AppError('invalid_request', `The internal upgrade needs ${RUN_HEADER}.`, { status: 400 });
  const run = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as RelayedRun;
  if (typeof run.sessionId !== 'string' || typeof run.caller?.userId !== 'string' || (run.callId !== undefined && typeof run.callId !== 'string') || (run.liveSideband !== undefined && run.liveSideband !== true)) throw new AppError('invalid_request', `Malformed ${RUN_HEADER}.`, { status: 400 });
  return run;
}

export interface SocketRelay {
  /** True once the worker's side is open. */
  readonly opened: boolean;
  /** A client message for the worker; held (bounded, in order) until the worker's side opens. */
  receive(text: string): void;
  /** The client went away: close the worker's side. */
  close(): void;
}

/**
 * Relays `client` to the session's worker. `onOpen` is called once the worker's side is open
 * (what the client sent meanwhile has gone on by then); `onClose(code, reason)` once when the
 * worker's side ends (the caller closes the client with that code); `onFailure` when the worker
 * could not be reached at all.
 */
export function relaySocket(
  client: WebSocket,
  worker: RemoteWorker,
  token: string,
  run: RelayedRun,
  handlers: { onOpen(): void; onClose(code: number, reason: string): void; onFailure(err: Error): void },
  log: Logger,
): SocketRelay {
  const url = `${worker.url.replace(/^http/, 'ws')}${INTERNAL_REALTIME_PATH}?session_id=${encodeURIComponent(run.sessionId)}`;
  const upstream = new WebSocket(url, {
    headers: { [FLEET_TOKEN_HEADER]: token, [RUN_HEADER]: Buffer.from(JSON.stringify(run)).toString('base64url') },
    handshakeTimeout: CONNECT_TIMEOUT_MS,
    maxPayload: 64 * 1024 * 1024,
  });
  let opened = false;
  let finished = false;
  const gate = new EventGate((refused) => sendEvent(client, run.dialect, refused));
  upstream.on('open', () => {
    opened = true;
    keepRelayAlive(upstream, log, { workerId: worker.workerId, sessionId: run.sessionId });
    gate.open((text) => {
      if (upstream.readyState === upstream.OPEN) upstream.send(text);
    });
    handlers.onOpen();
  });
  upstream.on('message', (data, isBinary) => {
    if (client.readyState === client.OPEN) client.send(isBinary ? data : data.toString());
  });
  upstream.on('close', (code, reason) => {
    if (finished) return;
    finished = true;
    // 1005 (no code) and 1006 (connection lost) cannot be sent on: the worker is gone.
    const sendable = code >= 1000 && code < 5000 && code !== 1005 && code !== 1006;
    handlers.onClose(sendable ? code : 1011, sendable ? reason.toString() : 'worker connection lost');
  });
  upstream.on('error', (err) => {
    log.warn('relay to the worker failed', { workerId: worker.workerId, err });
    if (!opened && !finished) {
      finished = true;
      gate.shut();
      handlers.onFailure(err);
    }
  });
  return {
    get opened() {
      return opened;
    },
    receive(text) {
      gate.receive(text);
    },
    close() {
      finished = true;
      gate.shut();
      if (upstream.readyState === upstream.OPEN) upstream.close(1000, 'client closed');
      else upstream.terminate();
    },
  };
}

/**
 * Keeps watch on one end of a relayed socket: pings the peer every RELAY_PING_MS and terminates the
 * socket (its 'close' then fires, code 1006) once nothing (a message or a pong) has come from the
 * peer for RELAY_SILENCE_MS. Times are monotonic (a stepped wall clock changes nothing). Stops
 * with the socket.
 */
export function keepRelayAlive(ws: WebSocket, log: Logger, fields: Record<string, string>): void {
  let heardAt = performance.now();
  const heard = () => {
    heardAt = performance.now();
  };
  ws.on('pong', heard);
  ws.on('message', heard);
  const timer = setInterval(() => {
    if (ws.readyState !== ws.OPEN) return;
    const silentMs = performance.now() - heardAt;
    if (silentMs >= RELAY_SILENCE_MS) {
      log.warn('relayed socket silent: its peer is taken as gone', { ...fields, silentMs: Math.round(silentMs) });
      ws.terminate();
      return;
    }
    ws.ping();
  }, RELAY_PING_MS);
  timer.unref();
  ws.once('close', () => clearInterval(timer));
}

/** POSTs JSON to a worker's internal route; the worker's error body becomes the same AppError here. */
export async function postToWorker<T>(worker: RemoteWorker, token: string, path: string, body: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${worker.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [FLEET_TOKEN_HEADER]: token },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
  } catch (err) {
    throw new AppError('worker_unavailable', `The session's worker could not be reached (${(err as Error).message}). Retry.`, { status: 503, headers: { 'Retry-After': '1' } });
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const error = (parsed as { error?: { code?: string; message?: string; param?: string | null } } | null)?.error;
    throw new AppError(error?.code ?? 'worker_error', error?.message ?? `The worker answered ${res.status}.`, { status: res.status, param: error?.param ?? undefined });
  }
  return parsed as T;
}
