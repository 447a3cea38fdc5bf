/** What route handlers are given: the services of one server, built in server.ts. */
import type { Config } from '../config.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { KeyService } from '../auth/keys.js';
import type { AuthThrottle } from '../auth/throttle.js';
import type { CallGateway } from '../signaling/realtime-calls.js';
import type { AssetService } from '../assets/asset-service.js';
import type { SessionService } from '../sessions/session-service.js';
import type { WorkerPool } from '../sessions/worker-pool.js';
import type { Store } from '../store/store.js';
import type { WebhookDispatcher } from '../usage/webhook.js';
import type { RateLimiter } from '../core/rate-limiter.js';
import type { FleetView } from './metrics.js';
import type { DependencyHealth } from '../core/dependency-health.js';

export interface Services {
  config: Config;
  clock: Clock;
  log: Logger;
  store: Store;
  keys: KeyService;
  assets: AssetService;
  sessions: SessionService;
  pool: WorkerPool;
  rateLimiter: RateLimiter | null;
  /** WebRTC calls (POST /v1/realtime/calls). */
  calls: CallGateway;
  /** Failed authentications by remote address (REST, realtime, calls). */
  authThrottle: AuthThrottle;
  /** Null when no WEBHOOK_URL is configured, and in fleet mode (the outbox drainer there follows a lock: fleet/fleet-node.ts). */
  webhook: WebhookDispatcher | null;
  /** Fleet mode: every worker's slots (metrics); null in the embedded default. */
  fleet: FleetView | null;
  /** Fleet mode: this node's view of Redis (/readyz's `fleet` check); null in the embedded default. */
  redisHealth: DependencyHealth | null;
  /** False while starting and once shutting down: /readyz answers 503. */
  isAccepting(): boolean;
  /** True while the models are being loaded at start (PRELOAD_MODELS): not ready to talk yet. */
  isWarmingUp(): boolean;
  /** The hosted dependencies a conversation uses (a hosted language model), as their requests last found them: /readyz's `degraded`, /metrics. */
  upstreams(): DependencyHealth[];
}
