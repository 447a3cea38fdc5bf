/**
 * The environment of one fleet node that a test starts as its own process (harness/servers/
 * process.ts spawnServer): an API node or a worker on the test's PostgreSQL and Redis, with its own
 * data directory (pushed on `dirs` for the test to remove), the offline responder, and, for a
 * worker, its own WebRTC port range (each test file uses ranges of its own, so a node left over
 * from one file never takes another's ports).
 *
 * The worker ttl defaults to FLEET_TEST_TTL_MS, not the server's 1.5 s minimum: on a loaded 2-core
 * CI machine a worker went 2.8 s without a heartbeat, and a test must not take load for a death.
 */
import { tempDir } from './server.js';

export const FLEET_TEST_TOKEN = 'fleet-test-token-0123456789';
export const FLEET_TEST_TTL_MS = 3000;

export interface FleetNodeSpec {
  role: 'api' | 'worker';
  id: string;
  databaseUrl: string;
  redisUrl: string;
  /** Data directories made for nodes; the test removes them. */
  dirs: string[];
  capacity: number;
  ttlMs?: number;
  /** A worker's WebRTC ports. */
  rtcPorts?: readonly [number, number];
  /** Anything else, last (it may override the above). */
  extra?: Record<string, string>;
}

export function fleetNodeEnv(spec: FleetNodeSpec): Record<string, string> {
  const dir = tempDir();
  spec.dirs.push(dir);
  return {
    DATA_DIR: dir,
    DATABASE_URL: spec.databaseUrl,
    REDIS_URL: spec.redisUrl,
    NODE_ROLE: spec.role,
    NODE_ID: spec.id,
    FLEET_TOKEN: FLEET_TEST_TOKEN,
    FLEET_WORKER_TTL_MS: String(spec.ttlMs ?? FLEET_TEST_TTL_MS),
    WORKER_CAPACITY: String(spec.capacity),
    LLM_PROVIDER: 'offline',
    LOG_LEVEL: process.env.FLEET_TEST_LOG_LEVEL ?? 'warn',
    ...(spec.role === 'worker' && spec.rtcPorts ? { RTC_PORT_MIN: String(spec.rtcPorts[0]), RTC_PORT_MAX: String(spec.rtcPorts[1]) } : {}),
    ...spec.extra,
  };
}
