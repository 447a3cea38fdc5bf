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
 */
import type { WebSocket } from 'ws';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { type Dialect, type ServerEventDraft, errorEvent } from '../realtime/protocol.js';
import type { Caller, CallGateway } from './realtime-calls.js';
import type { PendingEvents } from './pending-events.js';
import type { Listener, ListenerSink } from './realtime-connection.js';
import { CLOSE, END_CODES, closeSocket, sendEvent } from './realtime-socket.js';
import { type FleetRouting, type RelayedRun, relaySocket } from './worker-relay.js';

/**
 * A sideband socket skips image deltas while this much is queued for it (a backend reading slower
 * than the avatar's frames): frames are dropped, never the conversation's events.
 */
const MAX_SIDEBAND_BACKLOG_BYTES = 1024 * 1024;

/** A sideband socket's way into its call: attached to it here, or relayed to its worker. */
export interface SidebandLink {
  receive(text: string): void;
  /** The socket closed: detach (the call goes on). */
  close(): void;
}

export class SidebandGateway {
  constructor(private readonly deps: { calls: CallGateway; routing: FleetRouting | null; log: Logger }) {}

  /**
   * The sideband of `callId` on `ws` (authenticated as `caller`): attached to the call when it
   * runs here, relayed to its worker in fleet mode, refused otherwise (an error, then the close
   * code). Events that arrived meanwhile (`pending`) follow in order. Null when refused, or when
   * the socket closed meanwhile.
   */
  async attach(ws: WebSocket, caller: Caller, callId: string, dialect: Dialect, pending: PendingEvents, isClosed: () => boolean): Promise<SidebandLink | null> {
    const { calls, routing } = this.deps;
    const send = (draft: ServerEventDraft) => sendEvent(ws, dialect, draft);
    try {
      const listener = calls.attachSideband(caller, callId, this.sink(ws, caller.apiKeyId, callId));
      if (listener) {
        for (const text of pending.drain()) listener.receive(text);
        return { receive: (text) => listener.receive(text), close: () => listener.detach() };
      }
      const route = await calls.sidebandRoute(caller.userId, callId);
      if (isClosed()) return null;
      const run: RelayedRun = { sessionId: route.sessionId, callId, caller, initial: {}, ownsSession: false, dialect: 'ga', legacyVideo: false };
      const relay = relaySocket(
        ws,
        route.worker,
        routing!.token,
        run,
        {
          onOpen: () => {
            for (const text of pending.drain()) relay.send(text);
          },
          onClose: (code, reason) => closeSocket(ws, code, reason),
          onFailure: () => {
            send(errorEvent(new AppError('worker_unavailable', "The call's worker could not be reached. Retry.", { status: 503 }), null));
            closeSocket(ws, CLOSE.TRY_AGAIN_LATER, 'worker unavailable');
          },
        },
        this.deps.log,
      );
      return {
        receive: (text) => {
          if (relay.opened) return relay.send(text);
          const refused = pending.push(text);
          if (refused) send(refused);
        },
        close: () => relay.close(),
      };
    } catch (err) {
      this.refuse(ws, dialect, callId, err);
      return null;
    }
  }

  /**
   * Fleet mode, on the worker: a sideband relayed by the API node that authenticated it and found
   * the call here; attached as if it had connected here. The caller keeps `ws` in its socket set.
   */
  attachRelayed(ws: WebSocket, run: RelayedRun, callId: string): void {
    let listener: Listener | null = null;
    ws.on('message', (data) => listener?.receive(data.toString()));
    ws.on('close', () => listener?.detach());
    ws.on('error', (err) => this.deps.log.warn('relayed sideband socket error', { err, callId }));
    try {
      listener = this.deps.calls.attachSideband(run.caller, callId, this.sink(ws, run.caller.apiKeyId, callId));
      if (!listener) throw new AppError('call_ended', `Call ${callId} is not running here; it has ended.`, { status: 409, param: 'call_id' });
    } catch (err) {
      this.refuse(ws, run.dialect, callId, err);
    }
  }

  /** An error event, then the close code of its status: 4004 not found, 4009 not usable, 1013 retry, 1011 a bug. */
  private refuse(ws: WebSocket, dialect: Dialect, callId: string, err: unknown): void {
    if (!(err instanceof AppError)) this.deps.log.error('attaching a sideband failed', { err, callId });
    sendEvent(ws, dialect, errorEvent(err, null));
    const status = err instanceof AppError ? err.status : 500;
    const code = status === 404 ? CLOSE.NOT_FOUND : status === 409 ? CLOSE.SESSION_UNUSABLE : status === 503 ? CLOSE.TRY_AGAIN_LATER : CLOSE.INTERNAL;
    closeSocket(ws, code, 'call unavailable');
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
