/**
 * What every `/v1/realtime` WebSocket shares, whoever handles it (realtime-ws.ts for sessions,
 * realtime-sideband.ts for a call's sidebands): the close codes (also in docs/realtime.md), the close
 * code of each way a connection is ended, an event sent outside a connection, and a close that
 * does not wait for a peer that never answers it.
 */
import type { WebSocket } from 'ws';
import { type Dialect, type ServerEventDraft, newServerEventId, renameForDialect } from '../realtime/protocol.js';
import type { EndReason } from './realtime-connection.js';

/** A socket asked to close that does not answer the close frame is cut this long after. */
const CLOSE_GRACE_MS = 1000;

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

/** How a connection (or a listener of one) ended from outside closes its socket. */
export const END_CODES: Record<EndReason, [number, string]> = {
  session_ended: [CLOSE.SESSION_ENDED, 'session ended'],
  key_revoked: [CLOSE.KEY_REVOKED, 'API key revoked'],
  shutdown: [CLOSE.GOING_AWAY, 'server shutting down'],
  close_requested: [CLOSE.NORMAL, 'session closed'],
};

/** Sends a server event outside a connection (auth, session and call refusals). */
export function sendEvent(ws: WebSocket, dialect: Dialect, draft: ServerEventDraft): void {
  if (ws.readyState !== ws.OPEN) return;
  const type = renameForDialect(draft.type, dialect);
  if (type === null) return;
  ws.send(JSON.stringify({ ...draft, type, event_id: newServerEventId() }));
}

/** Closes with `code`; a peer that does not answer the close frame is cut after CLOSE_GRACE_MS. */
export function closeSocket(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState !== ws.OPEN && ws.readyState !== ws.CONNECTING) return;
  ws.close(code, reason.slice(0, 120));
  const kill = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
  kill.unref();
  ws.once('close', () => clearTimeout(kill));
}
