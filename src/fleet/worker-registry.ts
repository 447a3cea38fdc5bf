/**
 * The fleet's worker registry in Redis: which worker nodes are live, how many session slots each
 * has and holds, which worker each session is placed on, and leadership locks for the singletons
 * (the janitor, the webhook outbox drainer). It is what a fleet `WorkerPool` (sessions/worker-pool.ts)
 * stands on: the local pool counts slots in one process, this counts them for every node.
 *
 * Invariants (each operation is one Lua script, so Redis runs it atomically):
 *  - A worker is live while its last heartbeat (or registration) is younger than the ttl it gave
 *    then. Every liveness decision reads Redis's own clock (TIME inside the script), so the nodes'
 *    clocks never matter.
 *  - A worker never holds more sessions than its capacity, whoever places: placement reads and
 *    writes the counts in one script, so with one slot left exactly one of any number of parallel
 *    place() calls gets it.
 *  - A session holds at most one lease; placing it again returns that lease (idempotent), even if
 *    its worker has meanwhile stopped heartbeating (the reaper, not placement, moves it on).
 *  - Only live workers with a free slot are placed on; a worker that is not registered (yet, or
 *    again after Redis lost its data) is never placed on.
 *  - A worker and its leases leave together: reapDead() (expired workers) and deregister() (one
 *    worker, gracefully) remove the worker, its slots and its leases in one script and return the
 *    sessions it held, so each dead worker's sessions reach exactly one caller, which ends them.
 *    A reaped worker leaves a tombstone (REAPED_MEMORY_MS) so that when it comes back it learns it
 *    was reaped, not forgotten.
 *  - A worker registering again may reclaim the sessions it still runs, in the same script as its
 *    registration (so its used slots are right from the first moment): each is leased to it unless
 *    another worker holds it; nothing is reclaimed when its tombstone says it was reaped (its
 *    sessions were handed to the janitor to fail).
 *  - A leadership lock has one holder at a time; it lapses ttlMs after the holder's last acquire or
 *    renew, and only the holder can renew or release it.
 *
 * Redis failing (down, restarted, unreachable): every call fails fast, never waits for Redis to
 * come back, and never runs late. The clients this module opens (openFleetRedis) keep no offline
 * queue, give every command REDIS_COMMAND_TIMEOUT_MS, never resend a command after a reconnect, and
 * reconnect on their own at most a second apart; a call made while the connection is known down
 * fails at once, one made while it is (re)connecting waits at most REDIS_COMMAND_TIMEOUT_MS for it.
 * Every such failure is AppError 503 `redis_unavailable` (core/errors.ts dependencyUnavailable),
 * and every outcome feeds the node's DependencyHealth (one log line when Redis goes, one when it is
 * back; /readyz reads it). An error Redis itself answered (a script's) is not an outage and stays
 * as it is. `recovering` is true for one ttl after Redis came back: workers it lost are still
 * registering again, so an empty registry then means "not yet", not "no room" (fleet-node.ts and
 * fleet-pool.ts act on it).
 *
 * Redis data model (every key starts with the registry's prefix P, `avatar:fleet:` by default):
 *
 *   P workers          ZSET    worker id -> liveness deadline (Redis ms: heartbeat time + ttl)
 *   P worker-address   HASH    worker id -> address clients and API nodes reach it at
 *   P worker-capacity  HASH    worker id -> slot count
 *   P held:<worker id> SET     session ids placed on that worker (SCARD = slots used)
 *   P leases           HASH    session id -> worker id
 *   P reaped:<id>      STRING  tombstone of a reaped worker, with PX expiry
 *   P leader:<name>    STRING  holder id, with PX expiry
 *   P call:<call id>   STRING  the call's session id, with PX expiry (hangups reach its worker)
 *   P session-ended    channel a node that ended a session publishes its id (fleet-node.ts)
 *
 * The keys built from a worker id or a lock name are not declared to Redis as script keys: this
 * needs one Redis primary (standalone or with Sentinel), not Redis Cluster. Every script walks the
 * live workers, which is fine for fleets of hundreds.
 */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import type { DependencyHealth } from '../core/dependency-health.js';
import { AppError, dependencyUnavailable, isDependencyOutage } from '../core/errors.js';

export interface WorkerRegistration {
  id: string;
  /** Where the worker is reached (host:port or URL); opaque to the registry. */
  address: string;
  /** Session slots; 0 keeps the worker registered but takes no new sessions. */
  capacity: number;
}

export interface Placement {
  workerId: string;
  address: string;
}

export interface WorkerCapacity {
  id: string;
  address: string;
  capacity: number;
  used: number;
  live: boolean;
}

export interface FleetCapacity {
  /** Live workers. */
  workers: number;
  /** Slots of live workers. */
  capacity: number;
  /** Slots held on live workers. */
  used: number;
  /** Every registered worker, dead ones not yet reaped included, by id. */
  perWorker: WorkerCapacity[];
}

export interface ReapedWorker {
  workerId: string;
  /** The sessions it held: the caller ends them as failed. */
  sessionIds: string[];
}

export interface Registered {
  /** The sessions now leased to this worker (those it asked to reclaim that no other worker holds). */
  reclaimed: string[];
  /** True when the registry remembered reaping this worker: its sessions were handed to be failed, and none was reclaimed. */
  wasReaped: boolean;
}

export interface WorkerRegistryOptions {
  /** An ioredis client (left open by close()) or a redis:// URL (a client opened by openFleetRedis, owned and closed here). */
  redis: Redis | string;
  /** Prefix of every key; tests give each registry its own. Default `avatar:fleet:`. */
  prefix?: string;
  /** How long a registration or heartbeat keeps a worker live. Default 5000. */
  ttlMs?: number;
  /** Told of every outcome (the node's view of Redis, which /readyz reads and which logs outages once). */
  health?: DependencyHealth | null;
}

export const DEFAULT_PREFIX = 'avatar:fleet:';
export const DEFAULT_WORKER_TTL_MS = 5000;
/** A request Redis has not answered in this long fails (and its connection is dropped and made again). */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;
/**
 * ioredis's own command timeout, a backstop for what call() does not time itself (the connection
 * handshake, the subscriber). Longer than REDIS_COMMAND_TIMEOUT_MS: its timer fires before pending
 * replies are read, so after an event-loop stall of this node it would fail replies that had come.
 */
const CLIENT_COMMAND_TIMEOUT_MS = 5000;
/** The longest wait between reconnection attempts. */
const RECONNECT_MAX_MS = 1000;
/** How long the registry remembers that it reaped a worker (tombstone). */
const REAPED_MEMORY_MS = 10 * 60_000;

/**
 * Options of every Redis client of the fleet: fail fast instead of queueing. No offline queue (a
 * command while disconnected fails at once), a command timeout (a backstop: the registry times its
 * requests itself), no retry of a command across
 * reconnects (maxRetriesPerRequest 0, autoResendUnfulfilledCommands off: nothing fires late when
 * Redis returns), connection attempts bounded and at most RECONNECT_MAX_MS apart, forever.
 */
export function fleetRedisOptions(): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    commandTimeout: CLIENT_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, RECONNECT_MAX_MS),
  };
}

/**
 * A Redis client with fleetRedisOptions whose connection events feed `health`: lost connections
 * and client errors as failures, each (re)connection ready as a success. It always has an 'error'
 * listener (ioredis prints an unhandled error event's stack otherwise). Not connected yet: the
 * caller connects (connect()) or the registry does on first use.
 */
export function openFleetRedis(url: string, health: DependencyHealth | null, name: string): Redis {
  const redis = new Redis(url, { ...fleetRedisOptions(), connectionName: name });
  redis.on('error', (err: Error) => health?.failed(err));
  redis.on('ready', () => health?.succeeded());
  redis.on('close', () => {
    // Closed by quit()/disconnect() on the way out is no outage.
    if ((redis as unknown as { manuallyClosing?: boolean }).manuallyClosing || redis.status === 'end') return;
    health?.failed(new Error('connection to Redis lost'));
  });
  return redis;
}

/**
 * `promise`, or a "Command timed out" rejection after `ms`. The timer's verdict waits for one turn
 * of the event loop's I/O (setImmediate): after a stall of this process, a reply that arrived
 * meanwhile is read first and wins, so only Redis's silence times out, never our own slowness.
 */
function withinTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        settled = true;
        reject(new Error(`Command timed out (no answer from Redis within ${ms} ms)`));
      });
    }, ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(error);
      },
    );
  });
}

/** Resolves when `redis` is ready (at once if it is); rejects with 503 redis_unavailable after `ms`. */
export function readyWithin(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = (error: Error | null) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      if (error) reject(dependencyUnavailable('redis', error));
      else resolve();
    };
    const onReady = () => done(null);
    const timer = setTimeout(() => done(new Error(`no connection to Redis within ${ms} ms`)), ms);
    redis.on('ready', onReady);
  });
}

/**
 * Whether an error means Redis could not be asked (down, unreachable, not answering in time, or
 * not ready to serve), as opposed to an answer it gave (a script error, a wrong argument).
 */
export function isRedisOutage(err: unknown): boolean {
  if (err instanceof AppError) return isDependencyOutage(err, 'redis');
  if (!(err instanceof Error)) return false;
  if (err.name === 'ReplyError') return /^(LOADING|BUSY|MASTERDOWN|READONLY|TRYAGAIN|CLUSTERDOWN)\b/.test(err.message);
  if (err.name === 'MaxRetriesPerRequestError' || typeof (err as NodeJS.ErrnoException).code === 'string') return true;
  // ioredis's own connection errors are plain Errors, told by their messages; anything else (a bug) is not an outage.
  return /Connection is closed|Stream isn't writeable|timed out|ETIMEDOUT|ECONN|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(err.message);
}

/** Every key name, in one place. Scripts get the fixed keys as KEYS and the per-worker prefix as ARGV[1]. */
function fleetKeys(prefix: string) {
  return {
    workers: `${prefix}workers`,
    addresses: `${prefix}worker-address`,
    capacities: `${prefix}worker-capacity`,
    leases: `${prefix}leases`,
    leader: (name: string) => `${prefix}leader:${name}`,
    call: (callId: string) => `${prefix}call:${callId}`,
    sessionEnded: `${prefix}session-ended`,
  };
}

/** Shared head of the registry scripts: key names, Redis's clock, and the helpers. */
const PRELUDE = `
local WORKERS, ADDRESSES, CAPACITIES, LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local HELD, REAPED = ARGV[1] .. 'held:', ARGV[1] .. 'reaped:'

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lua turns numbers into strings with 14 significant digits; integers are written out in full.
local function int(n)
  return string.format('%d', n)
end

-- Byte order, whatever the server's locale (Lua's < on strings follows strcoll).
local function before(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function is_live(id, now)
  local deadline = redis.call('ZSCORE', WORKERS, id)
  return deadline ~= false and tonumber(deadline) > now
end

-- Removes a worker with its slots and leases; returns the sessions it held.
local function drop(id)
  local held = redis.call('SMEMBERS', HELD .. id)
  for _, sid in ipairs(held) do
    if redis.call('HGET', LEASES, sid) == id then redis.call('HDEL', LEASES, sid) end
  end
  redis.call('DEL', HELD .. id)
  redis.call('HDEL', ADDRESSES, id)
  redis.call('HDEL', CAPACITIES, id)
  redis.call('ZREM', WORKERS, id)
  return held
end
`;

class LuaScript {
  readonly sha: string;
  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }
}

const registryScript = (body: string) => new LuaScript(PRELUDE + body);

/**
 * ARGV: id, address, capacity, ttlMs, then the sessions to reclaim. {reaped (0/1), {reclaimed}}:
 * after a reaping (its tombstone, consumed here) nothing is reclaimed; otherwise each session is
 * leased to this worker unless another worker holds it.
 */
const REGISTER = registryScript(`
local id = ARGV[2]
redis.call('HSET', ADDRESSES, id, ARGV[3])
redis.call('HSET', CAPACITIES, id, ARGV[4])
redis.call('ZADD', WORKERS, int(now_ms() + tonumber(ARGV[5])), id)
if redis.call('DEL', REAPED .. id) == 1 then return {1, {}} end
local reclaimed = {}
for i = 6, #ARGV do
  local sid = ARGV[i]
  local holder = redis.call('HGET', LEASES, sid)
  if not holder or holder == id then
    redis.call('HSET', LEASES, sid, id)
    redis.call('SADD', HELD .. id, sid)
    reclaimed[#reclaimed + 1] = sid
  end
end
return {0, reclaimed}
`);

/** ARGV: id, ttlMs. 1, or 0 when the worker is no longer registered (reaped or deregistered). */
const HEARTBEAT = registryScript(`
local id = ARGV[2]
if redis.call('HEXISTS', CAPACITIES, id) == 0 then return 0 end
redis.call('ZADD', WORKERS, int(now_ms() + tonumber(ARGV[3])), id)
return 1
`);

/** ARGV: id. The sessions it held. */
const DEREGISTER = registryScript(`
return drop(ARGV[2])
`);

/** ARGV: session id, preferred worker id or ''. {worker id, address}, or nil when no live worker has a free slot. */
const PLACE = registryScript(`
local sid, prefer = ARGV[2], ARGV[3]
local current = redis.call('HGET', LEASES, sid)
if current then
  return {current, redis.call('HGET', ADDRESSES, current) or ''}
end
local now = now_ms()
local function load(id)
  return redis.call('SCARD', HELD .. id), tonumber(redis.call('HGET', CAPACITIES, id) or '0')
end
local chosen
if prefer ~= '' and is_live(prefer, now) then
  local used, cap = load(prefer)
  if used < cap then chosen = prefer end
end
if not chosen then
  local best_used, best_cap
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', WORKERS, '(' .. int(now), '+inf')) do
    local used, cap = load(id)
    if used < cap then
      -- least loaded by used/capacity (compared crosswise, in integers), ties by id
      local a, b = used * (best_cap or 1), (best_used or 0) * cap
      if not chosen or a < b or (a == b and before(id, chosen)) then
        chosen, best_used, best_cap = id, used, cap
      end
    end
  end
end
if not chosen then return false end
redis.call('HSET', LEASES, sid, chosen)
redis.call('SADD', HELD .. chosen, sid)
return {chosen, redis.call('HGET', ADDRESSES, chosen) or ''}
`);

/** ARGV: session id. 1 when a lease was freed, 0 when there was none. */
const RELEASE = registryScript(`
local sid = ARGV[2]
local id = redis.call('HGET', LEASES, sid)
if not id then return 0 end
redis.call('HDEL', LEASES, sid)
redis.call('SREM', HELD .. id, sid)
return 1
`);

/** ARGV: session id. {worker id, address} or nil. */
const LEASE_OF = registryScript(`
local id = redis.call('HGET', LEASES, ARGV[2])
if not id then return false end
return {id, redis.call('HGET', ADDRESSES, id) or ''}
`);

/** {{id, address, capacity, used, live (0/1)}, ...} for every registered worker. */
const CAPACITY = registryScript(`
local now = now_ms()
local rows = {}
local entries = redis.call('ZRANGE', WORKERS, 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  local id = entries[i]
  rows[#rows + 1] = {
    id,
    redis.call('HGET', ADDRESSES, id) or '',
    tonumber(redis.call('HGET', CAPACITIES, id) or '0'),
    redis.call('SCARD', HELD .. id),
    tonumber(entries[i + 1]) > now and 1 or 0,
  }
end
return rows
`);

/** ARGV: tombstone ms. {{worker id, {session ids}}, ...} for every worker whose deadline has passed, now removed (each leaves a tombstone). */
const REAP_DEAD = registryScript(`
local reaped = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', WORKERS, '-inf', int(now_ms()))) do
  reaped[#reaped + 1] = {id, drop(id)}
  redis.call('SET', REAPED .. id, '1', 'PX', ARGV[2])
end
return reaped
`);

/** KEYS: lock. ARGV: holder, ttlMs. 1 when the holder has the lock now (taken, or already its own and extended). */
const ACQUIRE_LEADERSHIP = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if current then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`);

/** KEYS: lock. ARGV: holder, ttlMs. */
const RENEW_LEADERSHIP = new LuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`);

/** KEYS: lock. ARGV: holder. */
const RELEASE_LEADERSHIP = new LuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`);

export class RedisWorkerRegistry {
  readonly ttlMs: number;
  private readonly redis: Redis;
  private readonly ownsClient: boolean;
  private readonly keys: ReturnType<typeof fleetKeys>;
  private readonly prefix: string;
  private readonly health: DependencyHealth | null;
  /** performance.now() of the first failure of the outage in progress; null while Redis answers. */
  private downSince: number | null = null;
  /** performance.now() when Redis last came back after an outage; null if it never went. */
  private backAt: number | null = null;
  private closing = false;
  private readyWait: Promise<void> | null = null;

  constructor(options: WorkerRegistryOptions) {
    this.ttlMs = checkTtl(options.ttlMs ?? DEFAULT_WORKER_TTL_MS, 'ttlMs');
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.keys = fleetKeys(this.prefix);
    this.health = options.health ?? null;
    this.ownsClient = typeof options.redis === 'string';
    this.redis = typeof options.redis === 'string' ? openFleetRedis(options.redis, this.health, 'avatar-registry') : options.redis;
    // A connection lost is an outage now, not at the next command.
    this.redis.on('close', () => {
      if (!this.closing) this.failed(new Error('connection to Redis lost'));
    });
    this.redis.on('ready', () => this.succeeded());
  }

  /** Whether Redis answered this node's last request (false from the first failure until it answers again). */
  get up(): boolean {
    return this.downSince === null;
  }

  /**
   * True for one ttl after Redis came back from an outage this node saw: workers that lost their
   * registration (Redis restarted empty) or missed heartbeats through no fault of theirs are still
   * registering or heartbeating again. Reaping and "no room" wait for it to pass.
   */
  get recovering(): boolean {
    return this.downSince !== null || (this.backAt !== null && performance.now() - this.backAt < this.ttlMs);
  }

  /**
   * Adds the worker, or updates its address and capacity; either way it is live for ttlMs. Leases
   * it holds are kept, and `reclaim` (sessions it runs, after it found itself unregistered) are
   * leased to it in the same step unless it was reaped (see Registered).
   */
  async register(worker: WorkerRegistration, options: { reclaim?: readonly string[] } = {}): Promise<Registered> {
    checkId(worker.id, 'id');
    if (typeof worker.address !== 'string' || worker.address === '') throw new Error('address must be a non-empty string');
    if (!Number.isSafeInteger(worker.capacity) || worker.capacity < 0) throw new Error(`capacity must be an integer >= 0, not ${worker.capacity}`);
    const reclaim = [...new Set(options.reclaim ?? [])];
    for (const id of reclaim) checkId(id, 'reclaim');
    const [reaped, reclaimed] = (await this.run(REGISTER, worker.id, worker.address, worker.capacity, this.ttlMs, ...reclaim)) as [unknown, unknown];
    return { wasReaped: Number(reaped) === 1, reclaimed: stringList(reclaimed) };
  }

  /**
   * Keeps the worker live for another ttlMs. False when it is no longer registered (it was reaped
   * or deregistered, and its sessions handed to another node to end): it must register again.
   */
  async heartbeat(workerId: string): Promise<boolean> {
    checkId(workerId, 'workerId');
    return (await this.run(HEARTBEAT, workerId, this.ttlMs)) === 1;
  }

  /**
   * Removes the worker with its slots and leases, and returns the sessions it still held, for the
   * caller to end. A worker shutting down gracefully lets its sessions end first. [] when unknown.
   */
  async deregister(workerId: string): Promise<string[]> {
    checkId(workerId, 'workerId');
    return stringList(await this.run(DEREGISTER, workerId));
  }

  /**
   * Places a session on a live worker with a free slot: the preferred one if it qualifies, else
   * the least loaded (used/capacity, ties by id). Returns the lease the session already holds, if
   * any. Null when every live worker is full (the caller answers 503).
   */
  async place(sessionId: string, options: { prefer?: string } = {}): Promise<Placement | null> {
    checkId(sessionId, 'sessionId');
    return placement(await this.run(PLACE, sessionId, options.prefer ?? ''));
  }

  /** Frees the session's slot. Idempotent: false when it held none. */
  async release(sessionId: string): Promise<boolean> {
    checkId(sessionId, 'sessionId');
    return (await this.run(RELEASE, sessionId)) === 1;
  }

  async leaseOf(sessionId: string): Promise<Placement | null> {
    checkId(sessionId, 'sessionId');
    return placement(await this.run(LEASE_OF, sessionId));
  }

  async capacity(): Promise<FleetCapacity> {
    const rows = (await this.run(CAPACITY)) as unknown[][];
    const perWorker = rows
      .map(([id, address, capacity, used, live]) => ({
        id: String(id),
        address: String(address),
        capacity: Number(capacity),
        used: Number(used),
        live: Number(live) === 1,
      }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const live = perWorker.filter((w) => w.live);
    return {
      workers: live.length,
      capacity: live.reduce((sum, w) => sum + w.capacity, 0),
      used: live.reduce((sum, w) => sum + w.used, 0),
      perWorker,
    };
  }

  /**
   * Claims every worker whose heartbeat expired: removes it with its slots and leases and returns
   * the sessions it held. Each dead worker is returned to exactly one caller, however many call.
   */
  async reapDead(): Promise<ReapedWorker[]> {
    const rows = (await this.run(REAP_DEAD, REAPED_MEMORY_MS)) as unknown[][];
    return rows.map(([id, sessions]) => ({ workerId: String(id), sessionIds: stringList(sessions) }));
  }

  /** Takes the lock `name` for ttlMs if it is free (or extends it if `holderId` has it). True when held now. */
  async acquireLeadership(name: string, holderId: string, ttlMs: number): Promise<boolean> {
    return (await this.runLock(ACQUIRE_LEADERSHIP, name, holderId, checkTtl(ttlMs, 'ttlMs'))) === 1;
  }

  /** Extends the lock by ttlMs if `holderId` still has it; false when it lapsed or someone else has it. */
  async renewLeadership(name: string, holderId: string, ttlMs: number): Promise<boolean> {
    return (await this.runLock(RENEW_LEADERSHIP, name, holderId, checkTtl(ttlMs, 'ttlMs'))) === 1;
  }

  /** Frees the lock if `holderId` has it; does nothing otherwise. True when it was freed. */
  async releaseLeadership(name: string, holderId: string): Promise<boolean> {
    return (await this.runLock(RELEASE_LEADERSHIP, name, holderId)) === 1;
  }

  /** Every lease: session id -> worker id (the janitor's reconciliation with the store). */
  async listLeases(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.call(() => this.redis.hgetall(this.keys.leases))));
  }

  /** The worker of each session, null where it holds no lease; in the order given. */
  async leaseHolders(sessionIds: readonly string[]): Promise<Array<string | null>> {
    if (sessionIds.length === 0) return [];
    return this.call(() => this.redis.hmget(this.keys.leases, ...sessionIds));
  }

  /** Remembers which session a WebRTC call belongs to, for ttlMs (its session's longest life). */
  async setCallRoute(callId: string, sessionId: string, ttlMs: number): Promise<void> {
    checkId(callId, 'callId');
    checkId(sessionId, 'sessionId');
    await this.call(() => this.redis.set(this.keys.call(callId), sessionId, 'PX', checkTtl(ttlMs, 'ttlMs')));
  }

  /** The session of a call, or null when unknown (never made, or its route expired). */
  async callRoute(callId: string): Promise<string | null> {
    checkId(callId, 'callId');
    return this.call(() => this.redis.get(this.keys.call(callId)));
  }

  /** The pub/sub channel session ends are announced on. */
  get sessionEndedChannel(): string {
    return this.keys.sessionEnded;
  }

  /** Announces to every node that a session ended (its worker then closes its connection). */
  async publishSessionEnded(message: string): Promise<void> {
    await this.call(() => this.redis.publish(this.keys.sessionEnded, message));
  }

  /** Closes the connection if this registry opened it (from a URL); a client passed in stays open. */
  async close(): Promise<void> {
    this.closing = true;
    if (!this.ownsClient) return;
    if (this.redis.status === 'end') return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  private run(script: LuaScript, ...args: (string | number)[]): Promise<unknown> {
    const k = this.keys;
    return this.evalCached(script, [k.workers, k.addresses, k.capacities, k.leases], [this.prefix, ...args]);
  }

  private runLock(script: LuaScript, name: string, holderId: string, ...args: (string | number)[]): Promise<unknown> {
    checkId(name, 'name');
    checkId(holderId, 'holderId');
    return this.evalCached(script, [this.keys.leader(name)], [holderId, ...args]);
  }

  /** EVALSHA; the first time on a server (or after SCRIPT FLUSH, or a restart), EVAL, which also caches the script there. */
  private evalCached(script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    return this.call(async () => {
      try {
        return await this.redis.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
        return await this.redis.eval(script.source, keys.length, ...keys, ...args);
      }
    });
  }

  /**
   * Runs one request against Redis, failing fast: at once while the connection is known to be
   * down, after at most REDIS_COMMAND_TIMEOUT_MS while it is being made. An outage becomes 503
   * redis_unavailable; every outcome is reported.
   */
  private async call<T>(request: () => Promise<T>): Promise<T> {
    // Known down: refused without asking, and without reporting anything new.
    if (this.downSince !== null && this.redis.status !== 'ready' && this.redis.status !== 'wait') {
      throw dependencyUnavailable('redis', new Error(`Redis has not answered for ${Math.round(performance.now() - this.downSince)} ms`));
    }
    try {
      await this.connected();
      const result = await withinTimeout(request(), REDIS_COMMAND_TIMEOUT_MS);
      this.succeeded();
      return result;
    } catch (err) {
      if (!isRedisOutage(err)) {
        this.succeeded(); // Redis answered, with an error of its own
        throw err;
      }
      this.failed(err instanceof AppError && err.cause !== undefined ? err.cause : err);
      // A command that timed out may still be sitting in the socket: drop the connection so it can
      // never run late, and make a fresh one.
      if (this.ownsClient && !this.closing && err instanceof Error && /timed out/.test(err.message) && this.redis.status === 'ready') this.redis.disconnect(true);
      throw err instanceof AppError ? err : dependencyUnavailable('redis', err);
    }
  }

  /** Resolves once the client is ready; rejects at once while Redis is known down, or after the wait bound. */
  private async connected(): Promise<void> {
    const redis = this.redis;
    if (redis.status === 'ready') return;
    if (redis.status === 'end' || this.closing) throw dependencyUnavailable('redis', new Error('the Redis client is closed'));
    if (redis.status === 'wait') redis.connect().catch(() => {}); // lazy: the first use connects
    // One wait shared by every call that arrives meanwhile.
    this.readyWait ??= readyWithin(redis, REDIS_COMMAND_TIMEOUT_MS).finally(() => (this.readyWait = null));
    await this.readyWait;
  }

  private succeeded(): void {
    if (this.downSince !== null) {
      this.downSince = null;
      this.backAt = performance.now();
    }
    this.health?.succeeded();
  }

  private failed(err: unknown): void {
    this.downSince ??= performance.now();
    this.health?.failed(err);
  }
}

function placement(reply: unknown): Placement | null {
  if (reply === null) return null;
  const [workerId, address] = reply as unknown[];
  return { workerId: String(workerId), address: String(address) };
}

function stringList(reply: unknown): string[] {
  return (reply as unknown[]).map(String);
}

function checkId(value: string, what: string): void {
  if (typeof value !== 'string' || value === '') throw new Error(`${what} must be a non-empty string`);
}

function checkTtl(ms: number, what: string): number {
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new Error(`${what} must be a positive integer of milliseconds, not ${ms}`);
  return ms;
}
