/**
 * The fleet's worker registry in Redis: which worker nodes are live, how many session slots each
 * has and holds, which worker each session is placed on, and leadership locks for the singletons
 * (the webhook outbox drainer). It is what a fleet `WorkerPool` (sessions/worker-pool.ts) stands
 * on: the local pool counts slots in one process, this counts them for every node.
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
 *  - Only live workers with a free slot are placed on.
 *  - A worker and its leases leave together: reapDead() (expired workers) and deregister() (one
 *    worker, gracefully) remove the worker, its slots and its leases in one script and return the
 *    sessions it held, so each dead worker's sessions reach exactly one caller, which ends them.
 *  - A leadership lock has one holder at a time; it lapses ttlMs after the holder's last acquire or
 *    renew, and only the holder can renew or release it.
 *
 * Redis data model (every key starts with the registry's prefix P, `avatar:fleet:` by default):
 *
 *   P workers          ZSET    worker id -> liveness deadline (Redis ms: heartbeat time + ttl)
 *   P worker-address   HASH    worker id -> address clients and API nodes reach it at
 *   P worker-capacity  HASH    worker id -> slot count
 *   P held:<worker id> SET     session ids placed on that worker (SCARD = slots used)
 *   P leases           HASH    session id -> worker id
 *   P leader:<name>    STRING  holder id, with PX expiry
 *   P call:<call id>   STRING  the call's session id, with PX expiry (hangups reach its worker)
 *   P session-ended    channel a node that ended a session publishes its id (fleet-node.ts)
 *
 * The keys built from a worker id or a lock name are not declared to Redis as script keys: this
 * needs one Redis primary (standalone or with Sentinel), not Redis Cluster. Every script walks the
 * live workers, which is fine for fleets of hundreds.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';

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

export interface WorkerRegistryOptions {
  /** An ioredis client (left open by close()) or a redis:// URL (a client owned and closed here). */
  redis: Redis | string;
  /** Prefix of every key; tests give each registry its own. Default `avatar:fleet:`. */
  prefix?: string;
  /** How long a registration or heartbeat keeps a worker live. Default 5000. */
  ttlMs?: number;
}

export const DEFAULT_PREFIX = 'avatar:fleet:';
export const DEFAULT_WORKER_TTL_MS = 5000;

/** Every key name, in one place. Scripts get the fixed keys as KEYS and the per-worker prefix as ARGV[1]. */
function fleetKeys(prefix: string) {
  return {
    workers: `${prefix}workers`,
    addresses: `${prefix}worker-address`,
    capacities: `${prefix}worker-capacity`,
    leases: `${prefix}leases`,
    /** Followed by a worker id. */
    heldPrefix: `${prefix}held:`,
    leader: (name: string) => `${prefix}leader:${name}`,
    call: (callId: string) => `${prefix}call:${callId}`,
    sessionEnded: `${prefix}session-ended`,
  };
}

/** Shared head of the registry scripts: key names, Redis's clock, and the helpers. */
const PRELUDE = `
local WORKERS, ADDRESSES, CAPACITIES, LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local HELD = ARGV[1]

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

/** ARGV: id, address, capacity, ttlMs. */
const REGISTER = registryScript(`
local id = ARGV[2]
redis.call('HSET', ADDRESSES, id, ARGV[3])
redis.call('HSET', CAPACITIES, id, ARGV[4])
redis.call('ZADD', WORKERS, int(now_ms() + tonumber(ARGV[5])), id)
return 1
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

/** {{worker id, {session ids}}, ...} for every worker whose deadline has passed, now removed. */
const REAP_DEAD = registryScript(`
local reaped = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', WORKERS, '-inf', int(now_ms()))) do
  reaped[#reaped + 1] = {id, drop(id)}
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

  constructor(options: WorkerRegistryOptions) {
    this.ttlMs = checkTtl(options.ttlMs ?? DEFAULT_WORKER_TTL_MS, 'ttlMs');
    this.keys = fleetKeys(options.prefix ?? DEFAULT_PREFIX);
    this.ownsClient = typeof options.redis === 'string';
    this.redis = typeof options.redis === 'string' ? new Redis(options.redis) : options.redis;
  }

  /** Adds the worker, or updates its address and capacity; either way it is live for ttlMs. Leases it holds are kept. */
  async register(worker: WorkerRegistration): Promise<void> {
    checkId(worker.id, 'id');
    if (typeof worker.address !== 'string' || worker.address === '') throw new Error('address must be a non-empty string');
    if (!Number.isSafeInteger(worker.capacity) || worker.capacity < 0) throw new Error(`capacity must be an integer >= 0, not ${worker.capacity}`);
    await this.run(REGISTER, worker.id, worker.address, worker.capacity, this.ttlMs);
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
    const rows = (await this.run(REAP_DEAD)) as unknown[][];
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
    return new Map(Object.entries(await this.redis.hgetall(this.keys.leases)));
  }

  /** The worker of each session, null where it holds no lease; in the order given. */
  async leaseHolders(sessionIds: readonly string[]): Promise<Array<string | null>> {
    if (sessionIds.length === 0) return [];
    return this.redis.hmget(this.keys.leases, ...sessionIds);
  }

  /** Remembers which session a WebRTC call belongs to, for ttlMs (its session's longest life). */
  async setCallRoute(callId: string, sessionId: string, ttlMs: number): Promise<void> {
    checkId(callId, 'callId');
    checkId(sessionId, 'sessionId');
    await this.redis.set(this.keys.call(callId), sessionId, 'PX', checkTtl(ttlMs, 'ttlMs'));
  }

  /** The session of a call, or null when unknown (never made, or its route expired). */
  async callRoute(callId: string): Promise<string | null> {
    checkId(callId, 'callId');
    return this.redis.get(this.keys.call(callId));
  }

  /** The pub/sub channel session ends are announced on. */
  get sessionEndedChannel(): string {
    return this.keys.sessionEnded;
  }

  /** Announces to every node that a session ended (its worker then closes its connection). */
  async publishSessionEnded(message: string): Promise<void> {
    await this.redis.publish(this.keys.sessionEnded, message);
  }

  /** Closes the connection if this registry opened it (from a URL); a client passed in stays open. */
  async close(): Promise<void> {
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
    return this.evalCached(script, [k.workers, k.addresses, k.capacities, k.leases], [k.heldPrefix, ...args]);
  }

  private runLock(script: LuaScript, name: string, holderId: string, ...args: (string | number)[]): Promise<unknown> {
    checkId(name, 'name');
    checkId(holderId, 'holderId');
    return this.evalCached(script, [this.keys.leader(name)], [holderId, ...args]);
  }

  /** EVALSHA; the first time on a server (or after SCRIPT FLUSH), EVAL, which also caches the script there. */
  private async evalCached(script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await this.redis.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return await this.redis.eval(script.source, keys.length, ...keys, ...args);
    }
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
