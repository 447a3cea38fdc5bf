/**
 * One node's part in a fleet, besides answering requests (server.ts composes it):
 *  - a worker (role worker or all) registers in the worker registry with its capacity and internal
 *    URL and heartbeats every third of the ttl. Every RECONCILE_MS it also heartbeats the sessions
 *    its connections run (their last_seen, what a lost session is billed up to) and closes any
 *    whose stored session has ended: a missed announcement costs at most that long;
 *  - a heartbeat refused means the registry no longer has this worker: either the janitor reaped
 *    it (it stalled or was cut off from Redis longer than the ttl) or Redis lost its data
 *    (restarted empty). It registers again at once, in one step with the sessions it still runs
 *    whose stored records are live (so its used slots are right from the first moment, and nothing
 *    is placed on it before); the registry's tombstone tells the two apart: a reaped worker's
 *    sessions were handed to the janitor, so it reclaims none and fails them itself (worker_lost,
 *    the same end the janitor gives them; the store ends each once, so they are billed once);
 *  - self-fencing: a worker whose last successful heartbeat is older than the ttl cannot know
 *    whether it was reaped. From then on it serves each of its sessions only while the store (the
 *    authority both sides share: the janitor fails a reaped worker's sessions there) says it is
 *    live, checking every third of the ttl instead of every RECONCILE_MS, and when it cannot read
 *    the store either it closes them all. So a worker cut off from Redis alone stops serving its
 *    sessions within a third of a ttl of the janitor failing them, and one cut off from everything
 *    within a ttl and a third; while Redis is down for everyone nobody can reap, the store says the
 *    sessions are live, and they keep talking;
 *  - every session this node ends is announced on Redis, and every node listens: a worker running
 *    a session ended elsewhere (DELETE on an API node, a hangup, a revoked key) closes it at once;
 *  - one node at a time (a leadership lock) is the janitor. Each tick it reaps workers that
 *    stopped heartbeating (their sessions end as failed, worker_lost, billed up to about their
 *    last heartbeat: the registry hands each dead worker to one caller, and the store ends each
 *    session once), and ends sessions whose start timeout or deadline passed while the node that
 *    set the timer was gone. Every RECONCILE_MS it also reconciles Redis with the store, each
 *    finding confirmed on a second pass so that nothing mid-creation is touched: a lease whose
 *    session has ended or does not exist is freed (its node died between placing and storing it,
 *    or Redis was unreachable when it ended), and a live session without a lease whose last_seen
 *    is older than a ttl and a RECONCILE_MS (no worker is running it: a worker heartbeats the
 *    sessions it runs every RECONCILE_MS) fails as worker_lost (the janitor died between reaping
 *    and failing, or its worker died while Redis had lost its data);
 *  - after an outage of Redis as this node saw it, the janitor neither reaps nor fails lease-less
 *    sessions for one ttl (the registry is `recovering`): the workers missed their heartbeats, or
 *    lost their registrations, through no fault of their own and are heartbeating or registering
 *    again. A worker cut off alone is reaped as before, by a janitor that never lost Redis;
 *  - one node at a time drains the webhook outbox: the dispatcher runs only while this node holds
 *    that lock, renewed on its own timer, and stops as soon as a renewal fails or is overdue
 *    (delivery stays at least once; receivers deduplicate by event id).
 * Redis down never blocks or floods: every registry call fails fast (worker-registry.ts), the
 * node's DependencyHealth logs the outage once each way, and the periodic jobs here log nothing
 * more for a failure that is the outage itself.
 * Clocks: no node's wall clock decides anything here. Ages and periods (the last good heartbeat,
 * the reconcile and outbox timers) run on the monotonic clock, so a step of the wall clock neither
 * fences a worker nor stops a janitor; liveness and locks are on Redis's clock (TIME); the times
 * written to records (last_seen, when a lost session was last heard of) come from the node's
 * `clock`, in fleet mode a SyncedClock following the database's, so every node writes on one
 * timeline and a session started on one node and ended on another is billed its true length.
 * A node that dies takes only its open sockets (API) or its sessions (worker, failed by the
 * janitor) with it. drain() (first thing at shutdown) takes a worker's capacity to 0 so no new
 * session is placed on it while its own end.
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../core/clock.js';
import type { DependencyHealth } from '../core/dependency-health.js';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { SessionService } from '../sessions/session-service.js';
import { isLive, type SessionRecord, type Store } from '../store/store.js';
import { isRedisOutage, openFleetRedis, readyWithin, REDIS_COMMAND_TIMEOUT_MS, type RedisWorkerRegistry } from './worker-registry.js';

/** The janitor's and the outbox lock's period; each lock lasts three. */
const TICK_MS = 1000;
const LOCK_TTL_MS = 3 * TICK_MS;
/** A drainer whose last renewal is older than this stops (a lapsed lock may be taken by another). */
const OUTBOX_FENCE_MS = LOCK_TTL_MS - TICK_MS;
/** How often a worker reconciles its connections and the janitor reconciles Redis with the store. */
const RECONCILE_MS = 2000;
const JANITOR = 'janitor';
/** At start, Redis unreachable: registration and subscription are tried again this often. */
const START_RETRY_MS = 1000;
const OUTBOX = 'outbox';

/** What drains the outbox while this node holds its lock (a fresh dispatcher each time). */
export interface OutboxDrainer {
  start(): void;
  /** Ends the current pass and stops; a later start() runs again. */
  stop(): Promise<void>;
  /** A session ended (anywhere): deliver its usage now rather than at the next poll. */
  poke(): void;
}

export interface FleetNodeOptions {
  registry: RedisWorkerRegistry;
  redisUrl: string;
  nodeId: string;
  /** Registered as a worker with this capacity and URL; null for an API-only node. */
  worker: { capacity: number; url: string } | null;
  sessions: SessionService;
  store: Store;
  /** The sessions this process's connections run. */
  localSessions(): string[];
  outbox: OutboxDrainer | null;
  log: Logger;
  /** Record timestamps (last_seen, when a lost session was last heard of): the sessions' clock. */
  clock: Clock;
  /** This node's view of Redis: the event subscriber's connection reports to it too. */
  health?: DependencyHealth | null;
}

interface EndedMessage {
  sessionId: string;
  node: string;
}

export class FleetNode {
  private readonly log: Logger;
  private subscriber: Redis | null = null;
  private readonly timers: NodeJS.Timeout[] = [];
  /** Passes of the periodic jobs in progress; stop() waits for them. */
  private readonly running = new Set<Promise<void>>();
  private draining = false;
  private outboxRenewedAt = -Infinity;
  private stopped = false;
  private drained = false;
  private lastReconcile = -Infinity;
  private lastLocalReconcile = -Infinity;
  /** performance.now() when this worker's last successful heartbeat (or registration) was sent. */
  private lastBeatOk = 0;
  /** Fencing is logged once per lapse. */
  private fenceLogged = false;
  /** The last stored record of each session this worker runs (what fencing closes without the store). */
  private readonly known = new Map<string, SessionRecord>();
  /** The session whose end another node announced, while it is being noted here (not announced again). */
  private noting: string | null = null;
  /** Reconciliation findings of the previous pass, acted on when seen again. */
  private suspectLeases = new Set<string>();
  private suspectSessions = new Set<string>();

  constructor(private readonly o: FleetNodeOptions) {
    this.log = o.log.child({ module: 'fleet', nodeId: o.nodeId });
  }

  async start(): Promise<void> {
    const { registry, worker, sessions } = this.o;
    if (worker) {
      const sentAt = performance.now();
      await this.whenRedis(() => registry.register({ id: this.o.nodeId, address: worker.url, capacity: worker.capacity }));
      this.lastBeatOk = sentAt;
      const beatMs = Math.max(100, Math.floor(registry.ttlMs / 3));
      this.every(beatMs, () => this.beat());
      this.every(beatMs, () => this.reconcileLocalTick());
    }
    sessions.on('ended', (session) => {
      this.known.delete(session.id);
      if (session.id === this.noting) return; // another node's end, not ours to announce
      const message: EndedMessage = { sessionId: session.id, node: this.o.nodeId };
      registry.publishSessionEnded(JSON.stringify(message)).catch((err: unknown) => this.quietWarn('announcing a session end failed', err, { sessionId: session.id }));
    });
    this.subscriber = openFleetRedis(this.o.redisUrl, this.o.health ?? null, 'avatar-events');
    this.subscriber.on('message', (_channel, text) => void this.onEnded(text));
    const subscriber = this.subscriber;
    await this.whenRedis(async () => {
      if (subscriber.status === 'wait') await subscriber.connect();
      else await readyWithin(subscriber, REDIS_COMMAND_TIMEOUT_MS);
      await subscriber.subscribe(registry.sessionEndedChannel); // resubscribed by the client after each reconnection
    });
    this.every(TICK_MS, () => this.janitor());
    if (this.o.outbox) this.every(TICK_MS, () => this.holdOutbox());
    this.log.info('fleet node started', { worker: worker ? { capacity: worker.capacity, url: worker.url } : null, ttlMs: registry.ttlMs });
  }

  /** Shutting down: no new session is placed on this worker (capacity 0) while its own end. */
  async drain(): Promise<void> {
    const { worker, registry } = this.o;
    if (!worker || this.drained) return;
    this.drained = true;
    await registry.register({ id: this.o.nodeId, address: worker.url, capacity: 0 }).catch((err: unknown) => this.log.warn('draining failed', { err }));
  }

  /** Leaves the fleet: no more heartbeats or locks; a worker deregisters, failing any session it still held. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    await Promise.allSettled([...this.running]);
    const { registry, sessions } = this.o;
    if (this.draining) {
      this.draining = false;
      await this.o.outbox?.stop();
    }
    await Promise.allSettled([registry.releaseLeadership(JANITOR, this.o.nodeId), registry.releaseLeadership(OUTBOX, this.o.nodeId)]);
    if (this.o.worker) {
      try {
        const left = await registry.deregister(this.o.nodeId);
        if (left.length > 0) await sessions.failLost(left, this.o.clock.nowUs(), 'server_shutdown');
      } catch (err) {
        this.log.warn('deregistering failed', { err });
      }
    }
    if (this.subscriber) {
      await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
      this.subscriber = null;
    }
  }

  /** Start-up: `op` again each second while Redis is unreachable (its DependencyHealth logs that once), until it answers or this node stops. */
  private async whenRedis<T>(op: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await op();
      } catch (err) {
        if (!isRedisOutage(err) || this.stopped) throw err;
        this.o.health?.failed(err instanceof AppError && err.cause !== undefined ? err.cause : err);
        await new Promise((resolve) => setTimeout(resolve, START_RETRY_MS));
      }
    }
  }

  /** Runs `run` every `ms`, one pass at a time: a tick that finds the last pass still going is skipped. */
  private every(ms: number, run: () => Promise<void>): void {
    let pass: Promise<void> | null = null;
    const tick = () => {
      if (this.stopped || pass) return;
      const current = run().finally(() => {
        pass = null;
        this.running.delete(current);
      });
      pass = current;
      this.running.add(current);
    };
    this.timers.push(setInterval(tick, ms).unref());
  }

  private async beat(): Promise<void> {
    const { registry, worker } = this.o;
    if (!worker || this.stopped) return;
    const sentAt = performance.now();
    try {
      if (await registry.heartbeat(this.o.nodeId)) {
        this.heard(sentAt);
        return;
      }
      await this.rejoin(sentAt);
    } catch (err) {
      this.quietWarn('heartbeat failed', err);
    }
  }

  /** Registered again (a heartbeat was refused): with the sessions still run here, unless this worker was reaped. */
  private async rejoin(sentAt: number): Promise<void> {
    const { registry, worker, store, sessions } = this.o;
    const lastHeardUs = this.o.clock.nowUs() - Math.round((performance.now() - this.lastBeatOk) * 1000);
    // Only sessions the store says are live are reclaimed; the others close here now. A store that
    // cannot be read aborts the rejoin (tried again next beat): meanwhile nothing is placed here.
    const live: string[] = [];
    for (const id of new Set(this.o.localSessions())) {
      const session = await store.getSession(id);
      if (session && isLive(session.status)) live.push(id);
      else if (session) this.note(session);
    }
    const { wasReaped, reclaimed } = await registry.register({ id: this.o.nodeId, address: worker!.url, capacity: this.drained ? 0 : worker!.capacity }, { reclaim: live });
    this.heard(sentAt);
    if (wasReaped) {
      // Its sessions were handed to the janitor to fail: the same end here, whoever is first.
      this.log.error('this worker was reaped (no heartbeat within the ttl): its sessions end as failed, and it registered again empty', { sessions: live.length });
      await sessions.failLost(live, lastHeardUs, 'worker_lost');
      await this.reconcileLocal();
      return;
    }
    const refused = live.filter((id) => !reclaimed.includes(id));
    this.log.warn('this worker was missing from the registry (Redis lost its data): registered again with the sessions it runs', { reclaimed: reclaimed.length, refused });
  }

  private heard(sentAt: number): void {
    this.lastBeatOk = Math.max(this.lastBeatOk, sentAt);
    if (this.fenceLogged) this.log.info('heartbeats are answered again: no longer fenced');
    this.fenceLogged = false;
  }

  /** Whether this worker's registration may have lapsed: its last successful heartbeat is older than the ttl. */
  private get lapsed(): boolean {
    return performance.now() - this.lastBeatOk > this.o.registry.ttlMs;
  }

  /** Every RECONCILE_MS; while lapsed, every beat (a third of the ttl). */
  private async reconcileLocalTick(): Promise<void> {
    const lapsed = this.lapsed;
    if (lapsed && !this.fenceLogged) {
      this.fenceLogged = true;
      this.log.warn('no heartbeat answered within the ttl: this worker may have been reaped; its sessions go on only while the store says they are live', { sinceMs: performance.now() - this.lastBeatOk });
    }
    if (!lapsed && performance.now() - this.lastLocalReconcile < RECONCILE_MS) return;
    this.lastLocalReconcile = performance.now();
    await this.reconcileLocal(lapsed);
  }

  /**
   * Heartbeats the sessions this worker runs and closes those whose stored session has ended.
   * `fence`: when the store cannot be read either, every one of them closes.
   */
  private async reconcileLocal(fence = false): Promise<void> {
    const ids = [...new Set(this.o.localSessions())];
    for (const id of this.known.keys()) if (!ids.includes(id)) this.known.delete(id);
    if (ids.length === 0 || this.stopped) return;
    try {
      await this.o.store.heartbeatSessions(ids, this.o.clock.nowUs());
      for (const id of ids) {
        const session = await this.o.store.getSession(id);
        if (session) this.known.set(id, session);
        if (session && !isLive(session.status)) this.note(session);
      }
    } catch (err) {
      this.quietWarn('reconciling local sessions failed', err);
      if (!fence) return;
      this.log.error('neither Redis nor the store answers and the registration may have lapsed: closing the sessions run here', { sessions: ids.length });
      const endedAtUs = this.o.clock.nowUs();
      for (const id of ids) {
        const last = this.known.get(id);
        if (last) this.note({ ...last, status: 'failed', endReason: 'worker_lost', endedAtUs });
      }
    }
  }

  /** A warning, unless the failure is a dependency's outage, which its DependencyHealth has already logged once. */
  private quietWarn(msg: string, err: unknown, fields: Record<string, unknown> = {}): void {
    if (err instanceof AppError && err.code.endsWith('_unavailable')) return;
    this.log.warn(msg, { err, ...fields });
  }

  private async onEnded(text: string): Promise<void> {
    let message: EndedMessage;
    try {
      message = JSON.parse(text) as EndedMessage;
    } catch {
      return;
    }
    this.o.outbox?.poke();
    if (message.node === this.o.nodeId) return;
    try {
      const session = await this.o.store.getSession(message.sessionId);
      if (session) this.note(session);
    } catch (err) {
      this.quietWarn('reading an ended session failed', err, { sessionId: message.sessionId });
    }
  }

  /** Another node ended `session`: its timers and connections here end, without announcing it again. */
  private note(session: SessionRecord): void {
    // noteEndedElsewhere emits 'ended' synchronously: the listener in start() sees `noting`.
    this.noting = session.id;
    try {
      this.o.sessions.noteEndedElsewhere(session);
    } finally {
      this.noting = null;
    }
  }

  private async janitor(): Promise<void> {
    const { registry, sessions, nodeId } = this.o;
    try {
      if (!(await registry.acquireLeadership(JANITOR, nodeId, LOCK_TTL_MS))) return;
      // Just back from an outage: the workers' missed heartbeats were Redis's fault, not theirs.
      if (!registry.recovering) {
        for (const dead of await registry.reapDead()) {
          // Its deadline passed within the last tick or so: it was last heard about a ttl ago.
          const lastHeardUs = this.o.clock.nowUs() - registry.ttlMs * 1000;
          const failed = await sessions.failLost(dead.sessionIds, lastHeardUs, 'worker_lost');
          this.log.warn('worker lost: its sessions ended as failed', { workerId: dead.workerId, sessions: dead.sessionIds.length, failed });
        }
      }
      await sessions.sweepOverdue();
      if (performance.now() - this.lastReconcile >= RECONCILE_MS) {
        this.lastReconcile = performance.now();
        await this.reconcileFleet();
      }
    } catch (err) {
      this.quietWarn('janitor pass failed', err);
    }
  }

  /** Redis against the store; a finding is acted on only when the next pass confirms it. */
  private async reconcileFleet(): Promise<void> {
    const { registry, store, sessions } = this.o;
    const leases = await registry.listLeases();
    const suspectLeases = new Set<string>();
    for (const sessionId of leases.keys()) {
      const session = await store.getSession(sessionId);
      if (session && isLive(session.status)) continue;
      if (!this.suspectLeases.has(sessionId)) suspectLeases.add(sessionId);
      else {
        await registry.release(sessionId);
        this.log.warn('freed the slot of a session that has ended or was never stored', { sessionId, status: session?.status ?? 'missing' });
      }
    }
    this.suspectLeases = suspectLeases;
    if (registry.recovering) {
      // Workers are still reclaiming their sessions: a missing lease means nothing yet.
      this.suspectSessions = new Set();
      return;
    }
    const live = await store.listSessionsByStatus(['pending', 'active']);
    const holders = await registry.leaseHolders(live.map((s) => s.id));
    // A worker running a session heartbeats its last_seen every RECONCILE_MS.
    const staleBeforeUs = this.o.clock.nowUs() - (registry.ttlMs + RECONCILE_MS) * 1000;
    const suspectSessions = new Set<string>();
    for (const [i, session] of live.entries()) {
      if (holders[i] !== null) continue;
      if ((session.lastSeenUs ?? session.createdAtUs) > staleBeforeUs) continue;
      if (!this.suspectSessions.has(session.id)) suspectSessions.add(session.id);
      else {
        await sessions.failLost([session.id], session.lastSeenUs ?? this.o.clock.nowUs(), 'worker_lost');
        this.log.warn('a live session had no worker: ended as failed', { sessionId: session.id });
      }
    }
    this.suspectSessions = suspectSessions;
  }

  private async holdOutbox(): Promise<void> {
    const outbox = this.o.outbox!;
    let leader = false;
    try {
      leader = await this.o.registry.acquireLeadership(OUTBOX, this.o.nodeId, LOCK_TTL_MS);
      if (leader) this.outboxRenewedAt = performance.now();
    } catch (err) {
      this.quietWarn('outbox lock failed', err);
      leader = performance.now() - this.outboxRenewedAt < OUTBOX_FENCE_MS; // still within the lock we last had
    }
    if (this.stopped) return;
    if (leader && !this.draining) {
      this.draining = true;
      outbox.start();
      this.log.info('draining the webhook outbox');
    } else if (!leader && this.draining) {
      this.draining = false;
      await outbox.stop();
      this.log.info('stopped draining the webhook outbox (the lock went to another node, or could not be renewed)');
    }
  }
}
