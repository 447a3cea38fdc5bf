/**
 * The process's live realtime connections (both transports), in one registry the server holds:
 * it ends them when their session ends, when their key is revoked, and at shutdown, and tells the
 * session service which sessions run here.
 */
import type { Dialect } from '../realtime/protocol.js';
import { RealtimeError } from '../realtime/protocol.js';
import type { SessionService } from '../sessions/session-service.js';
import { type ConnectionDeps, type ConnectionTransport, RealtimeConnection } from './realtime-connection.js';

/**
 * Live connections of both transports: ends them when their session ends, when their key is
 * revoked, and at shutdown; knows which session already has a connection.
 */
export class ConnectionRegistry {
  private readonly connections = new Set<RealtimeConnection>();
  private shuttingDown = false;

  constructor(sessions: SessionService) {
    sessions.useRunner({
      settle: async (sessionId) => {
        await Promise.all([...this.connections].filter((c) => c.sessionId === sessionId).map((c) => c.settle()));
      },
      running: () => this.sessionIds(),
      abandon: (sessionId) => {
        for (const conn of this.connections) {
          if (conn.sessionId === sessionId) conn.end('session_ended', new RealtimeError('session_ended', 'The session could not be ended cleanly; reconnect to a new session.'));
        }
      },
    });
    sessions.on('ended', (session) => {
      for (const conn of this.connections) {
        if (conn.sessionId !== session.id) continue;
        if (conn.revoked) conn.end('key_revoked');
        else if (this.shuttingDown) conn.end('shutdown');
        else conn.end('session_ended', new RealtimeError('session_ended', `The session ended (${session.endReason ?? session.status}).`), session.endReason);
      }
    });
  }

  /** A new connection of an authenticated caller; it leaves the registry when closed. */
  track(deps: ConnectionDeps, transport: ConnectionTransport, caller: { userId: string; apiKeyId: string | null }, dialect: Dialect): RealtimeConnection {
    const conn = new RealtimeConnection(deps, transport, caller, dialect, () => this.connections.delete(conn));
    this.connections.add(conn);
    return conn;
  }

  /** The sessions this process's connections run (fleet mode: what this worker reconciles with the store). */
  sessionIds(): string[] {
    return [...this.connections].flatMap((c) => (c.sessionId ? [c.sessionId] : []));
  }

  hasSession(sessionId: string): boolean {
    return this.connectionOf(sessionId) !== undefined;
  }

  /** The connection running `sessionId` here, if any. */
  connectionOf(sessionId: string): RealtimeConnection | undefined {
    for (const c of this.connections) if (c.sessionId === sessionId) return c;
    return undefined;
  }

  /** From now on, connections whose sessions end are ended as `shutdown`. */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  /** Ends every connection (shutdown) and waits for their teardowns. */
  async closeAll(): Promise<void> {
    this.beginShutdown();
    const all = [...this.connections];
    for (const conn of all) conn.end('shutdown');
    await Promise.allSettled(all.map((conn) => conn.close()));
  }

  /**
   * The API keys `keyIds` were revoked: their connections are marked now (so the end of their
   * sessions ends them as key_revoked, not session_ended) and ended by endRevokedKeys().
   */
  markRevokedKeys(keyIds: readonly string[]): void {
    for (const conn of this.connections) {
      if (conn.apiKeyId !== null && keyIds.includes(conn.apiKeyId)) conn.revoked = true;
      conn.markRevokedListeners(keyIds);
    }
  }

  /** Ends the marked connections still open (those attached to sessions that outlive the key), and the marked listeners of the others. */
  endRevokedKeys(): void {
    for (const conn of this.connections) {
      if (conn.revoked) conn.end('key_revoked');
      else conn.endRevokedListeners();
    }
  }

  get size(): number {
    return this.connections.size;
  }
}
