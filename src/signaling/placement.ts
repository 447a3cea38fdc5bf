/**
 * Where a session runs: the one placement decision of signaling, asked by the WebSocket gateway
 * (a client's session), the sideband (the call's session) and the call gateway (an offer, a
 * hangup). In the embedded default (no fleet routing) every session runs here; in fleet mode it
 * runs where its lease is (fleet/worker-registry.ts), and the caller relays to that worker:
 * a socket through ClientConnection.relayTo (client-connection.ts), an offer or a hangup by
 * postToWorker (worker-relay.ts).
 */
import { AppError, isDependencyOutage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { FleetRouting, RemoteWorker } from './worker-relay.js';

/**
 * The worker `sessionId` runs on, or null when it runs here. A routing failure is an AppError a
 * client can act on: Redis down is answered as itself (503 redis_unavailable, logged once by the
 * node's DependencyHealth), anything else as 503 worker_unavailable (logged here).
 */
export async function runHereOrRelay(routing: FleetRouting | null, sessionId: string, log: Logger): Promise<RemoteWorker | null> {
  if (!routing) return null;
  try {
    return await routing.remoteWorkerOf(sessionId);
  } catch (err) {
    if (isDependencyOutage(err, 'redis')) throw err;
    log.error("finding the session's worker failed", { err, sessionId });
    throw new AppError('worker_unavailable', "The session's worker could not be found. Retry.", { status: 503 });
  }
}
