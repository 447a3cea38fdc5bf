/**
 * Composition root of one server process: opens the store (migrating it), recovers sessions a
 * previous process left live, creates the first API key on an empty store, builds the services
 * and the HTTP server, and tears all of it down in order on close():
 *   stop accepting -> realtime sockets to close with 1001 -> end live sessions (failed, server_shutdown)
 *   -> close sockets -> leave the fleet -> stop webhook and revocation watch -> close HTTP -> close store
 * Revoked API keys (by any process: RevocationWatcher) end their sessions and close their
 * realtime connections within a second.
 *
 * Fleet mode (config.fleet, REDIS_URL set): the store is the shared PostgreSQL, worker slots are
 * the fleet's (FleetWorkerPool over the Redis registry), signaling relays sessions placed on other
 * workers (FleetRouting), and a FleetNode registers this node as a worker (roles worker and all),
 * announces session ends, and takes its turn as janitor and outbox drainer. Start-up recovery is
 * then the janitor's (a restarted worker comes back under a new id; the old one is reaped), never
 * this process's: other nodes' live sessions are not ours to close. Every Redis client of the node
 * (the registry's, the fleet node's event subscriber) fails fast and reports to one DependencyHealth
 * for Redis, which /readyz reads and which logs an outage once each way (fleet/worker-registry.ts).
 */
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config.js';
import { type Clock, SyncedClock, systemClock } from '../core/clock.js';
import { Logger } from '../core/log.js';
import { logNativeRtc } from '../transport/call-peer.js';
import { DependencyHealth } from '../core/dependency-health.js';
import { KeyService } from '../auth/keys.js';
import { AuthThrottle } from '../auth/throttle.js';
import { RevocationWatcher } from '../auth/revocations.js';
import { AssetService } from '../assets/asset-service.js';
import { FaceRegistry } from '../media/face-registration.js';
import { StandardAssets } from '../assets/catalog.js';
import { SessionService } from '../sessions/session-service.js';
import { LocalWorkerPool, type WorkerPool } from '../sessions/worker-pool.js';
import { FleetNode, type OutboxDrainer } from '../fleet/fleet-node.js';
import { FleetWorkerPool } from '../fleet/fleet-pool.js';
import { RedisWorkerRegistry } from '../fleet/worker-registry.js';
import type { FleetRouting } from '../signaling/worker-relay.js';
import { openStore, redactDatabaseUrl } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import { WebhookDispatcher, webhookBody } from '../usage/webhook.js';
import { createApp } from './app.js';
import { RateLimiter } from '../core/rate-limiter.js';
import type { Services } from './services.js';
import { createRealtimeRuntime } from './realtime-runtime.js';
import { RealtimeGateway } from '../signaling/realtime-ws.js';
import { CallGateway } from '../signaling/realtime-calls.js';
import { ConnectionRegistry } from '../signaling/connection-registry.js';
import type { ConnectionDeps, RealtimeRuntime } from '../signaling/realtime-connection.js';

/** Ephemeral keys past their expiry are deleted this often. */
const EPHEMERAL_SWEEP_INTERVAL_MS = 60_000;

export interface ServerOptions {
  clock?: Clock;
  log?: Logger;
  /** Called once with the API key created on first start with an empty store. */
  onBootstrapKey?: (key: string, userId: string) => void;
  /** Shorter pending-start timeout for tests. */
  pendingTimeoutMs?: number;
  /** Replaces parts of the realtime runtime (tests: scripted LLM, fake ASR...). */
  runtime?: Partial<RealtimeRuntime>;
  /** How long an unauthenticated realtime socket may wait for its auth message (default AUTH_TIMEOUT_MS). */
  realtimeAuthTimeoutMs?: number;
}

export interface RunningServer {
  url: string;
  port: number;
  http: http.Server;
  services: Services;
  gateway: RealtimeGateway;
  /** Loads the default models ahead of the first conversation (see RuntimeControl.warmUp). */
  warmUp(): Promise<void>;
  close(): Promise<void>;
}

export async function startServer(config: Config, options: ServerOptions = {}): Promise<RunningServer> {
  let clock: Clock = options.clock ?? systemClock;
  const log = options.log ?? new Logger(config.logLevel, { service: 'avatar-server' });
  // PostgreSQL outages are logged once per change (down, back) by the store's DependencyHealth.
  const store: Store = openStore(config.databaseUrl, { log: log.child({ module: 'store' }) });
  const schemaVersion = await store.migrate();
  log.info('store ready', { databaseUrl: redactDatabaseUrl(config.databaseUrl), schemaVersion });
  // Fleet mode: every node writes records on the database's clock, one timeline whatever the nodes' own clocks say.
  const synced = config.fleet && !options.clock ? await SyncedClock.start(() => store.databaseTimeUs(), { log: log.child({ module: 'clock' }) }) : null;
  if (synced) clock = synced;

  const keys = new KeyService(store, clock);
  if ((await store.countApiKeys()) === 0) {
    const { key, record } = await keys.createApiKey(config.bootstrapUserId, 'bootstrap');
    log.info('created the first API key on an empty store', { keyId: record.id, userId: record.userId, prefix: record.prefix });
    options.onBootstrapKey?.(key, record.userId);
  }

  const standard = StandardAssets.load(config.modelsDir);
  const missing = standard.missing();
  if (missing.length > 0) log.warn('standard asset files missing; run npm run setup:assets', { missing });

  const fleet = config.fleet;
  // One view of Redis per node, fed by every Redis client of the node (registry, events): /readyz reads it, outages are logged once each way.
  const redisHealth = fleet ? new DependencyHealth('redis', log.child({ module: 'fleet' })) : null;
  const workers = fleet ? new RedisWorkerRegistry({ redis: fleet.redisUrl, ttlMs: fleet.workerTtlMs, health: redisHealth }) : null;
  const runsSessions = !fleet || fleet.role !== 'api';
  const pool: WorkerPool = workers ? new FleetWorkerPool(workers, runsSessions ? fleet!.nodeId : null) : new LocalWorkerPool(config.workerCapacity);
  const faces = new FaceRegistry(path.join(config.dataDir, 'faces-cache'));
  const assets = new AssetService(store, standard, config.dataDir, clock, faces);
  const newDispatcher = config.webhook ? () => new WebhookDispatcher(store, config.webhook!, clock, log.child({ module: 'webhook' })) : null;
  // Embedded: one dispatcher for the process's life. Fleet: one node at a time drains the outbox (FleetNode).
  const webhook = newDispatcher && !fleet ? newDispatcher() : null;
  const sessions = new SessionService(store, pool, assets, clock, log.child({ module: 'sessions' }), {
    maxSessionSeconds: config.maxSessionSeconds,
    pendingTimeoutMs: options.pendingTimeoutMs,
    webhookPayload: newDispatcher ? webhookBody : null,
  });
  if (webhook) sessions.on('ended', () => webhook.poke());
  if (!fleet) await sessions.recover();
  webhook?.start();

  const runtime = await createRealtimeRuntime({ config, assets, faces, log }, options.runtime);
  const registry = new ConnectionRegistry(sessions);
  const connection: ConnectionDeps = { sessions, store, assets, clock, log: log.child({ module: 'realtime' }), defaultModel: config.defaultModel, runtime };
  const routing: FleetRouting | null = workers
    ? {
        token: fleet!.token,
        remoteWorkerOf: async (sessionId) => {
          const lease = await pool.leaseOf(sessionId);
          return lease && !lease.local && lease.address ? { workerId: lease.workerId, url: lease.address } : null;
        },
        // A call's route outlives its session's longest life by a minute.
        rememberCall: (callId, sessionId) => workers.setCallRoute(callId, sessionId, config.maxSessionSeconds * 1000 + 60_000),
        callSession: (callId) => workers.callRoute(callId),
      }
    : null;
  logNativeRtc(config.rtc.nativeLog, log);
  const calls = new CallGateway({ connection, registry, rtc: config.rtc, routing, log });

  let accepting = false;
  let warmingUp = false;
  const services: Services = {
    config,
    clock,
    log,
    store,
    keys,
    assets,
    sessions,
    pool,
    webhook,
    rateLimiter: config.rateLimitPerMinute > 0 ? new RateLimiter(config.rateLimitPerMinute, config.rateLimitBurst) : null,
    authThrottle: new AuthThrottle(config.authFailuresPerMinute),
    calls,
    fleet: workers,
    redisHealth,
    isAccepting: () => accepting,
    isWarmingUp: () => warmingUp,
    upstreams: () => [runtime.llm.upstream()].filter((h): h is NonNullable<typeof h> => h !== null),
  };
  const { app } = createApp(services);
  const server = http.createServer(app.callback());
  const gateway = new RealtimeGateway(
    { connection, registry, calls, keys, authThrottle: services.authThrottle, rateLimiter: services.rateLimiter, isAccepting: () => accepting, routing, log },
    { authTimeoutMs: options.realtimeAuthTimeoutMs },
  );
  gateway.attach(server);
  const revocations = new RevocationWatcher(store, log.child({ module: 'revocations' }));
  revocations.on('revoked', (keyIds) => {
    registry.markRevokedKeys(keyIds);
    sessions
      .endForApiKeys(keyIds)
      .catch((err: unknown) => log.error('ending the sessions of revoked keys failed', { err, keyIds }))
      .finally(() => registry.endRevokedKeys());
  });
  await revocations.start();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const sweep = setInterval(() => {
    keys.sweepExpired().catch((err: unknown) => log.error('ephemeral key sweep failed', { err }));
  }, EPHEMERAL_SWEEP_INTERVAL_MS).unref();
  const port = (server.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  const fleetNode =
    fleet && workers
      ? new FleetNode({
          registry: workers,
          redisUrl: fleet.redisUrl,
          nodeId: fleet.nodeId,
          worker: runsSessions ? { capacity: config.workerCapacity, url: fleet.workerUrl ?? url } : null,
          sessions,
          store,
          localSessions: () => registry.sessionIds(),
          outbox: newDispatcher ? restartable(newDispatcher) : null,
          log,
          clock,
          health: redisHealth,
        })
      : null;
  await fleetNode?.start();
  accepting = true;
  log.info('listening', { url, workerCapacity: config.workerCapacity, ...(fleet ? { fleet: { role: fleet.role, nodeId: fleet.nodeId } } : {}) });

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      accepting = false;
      await fleetNode?.drain(); // no new session is placed here from now on
      clearInterval(sweep);
      registry.beginShutdown();
      await sessions.shutdown();
      await registry.closeAll();
      await gateway.close();
      await calls.close();
      await fleetNode?.stop();
      await workers?.close();
      await revocations.stop();
      await webhook?.stop();
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime.close();
      await faces.close();
      await assets.close();
      synced?.stop();
      await store.close();
      log.info('stopped');
    })());

  return { url, port, http: server, services, gateway, warmUp, close };

  /** Loads the models; /readyz says not ready until it is done. */
  async function warmUp(): Promise<void> {
    if (!runsSessions) return; // an API node runs no models
    warmingUp = true;
    try {
      await runtime.warmUp();
    } finally {
      warmingUp = false;
    }
  }
}

/** An outbox drainer over dispatchers made afresh each time this node takes the outbox's lock. */
function restartable(make: () => WebhookDispatcher): OutboxDrainer {
  let current: WebhookDispatcher | null = null;
  return {
    start() {
      current ??= make();
      current.start();
    },
    async stop() {
      const stopping = current;
      current = null;
      await stopping?.stop();
    },
    poke() {
      current?.poke();
    },
  };
}
