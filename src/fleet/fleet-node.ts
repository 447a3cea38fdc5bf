/**
 * One node's part in a fleet, besides answering requests (server.ts composes it):
 *  - a worker (role worker or all) registers in the worker registry with its capacity and internal
 *    URL and heartbeats every third of the ttl. Every RECONCILE_MS it also heartbeats the sessions
 *    its connections run (their last_seen, what a lost session is billed up to) and closes any
 *    whose stored session has ended: a missed announcement costs at most that long. A heartbeat
 *    refused (the node was reaped after a stall, and its sessions failed by another node) closes
 *    those connections first, then registers again, empty;
 *  - every session this node ends is announced on Redis, and every node listens: a worker running
 *    a session ended elsewhere (DELETE on an API node, a hangup, a revoked key) closes it at once;
 *  - one node at a time (a leadership lock) is the janitor. Each tick it reaps workers that
 *    stopped heartbeating (their sessions end as failed, worker_lost, billed up to about their
 *    last heartbeat: the registry hands each dead worker to one caller, and the store ends each
 *    session once), and ends sessions whose start timeout or deadline passed while the node that
 *    set the timer was gone. Every RECONCILE_MS it also reconciles Redis with the store, each
 *    finding confirmed on a second pass so that nothing mid-creation is touched: a lease whose
 *    session has ended or does not exist is freed (its node died between placing and storing it,
 *    or Redis was unreachable when it ended), and a live session without a lease fails as
 *    worker_lost (the janitor died between reaping and failing, or Redis lost its data);
 *  - one node at a time drains the webhook outbox: the dispatcher runs only while this node holds
 *    that lock, renewed on its own timer, and stops as soon as a renewal fails or is overdue
 *    (delivery stays at least once; receivers deduplicate by event id).
 * A node that dies takes only its open sockets (API) or its sessions (worker, failed by the
 * janitor) with it. drain() (first thing at shutdown) takes a worker's capacity to 0 so no new
 * session is placed on it while its own end.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../core/log.js';
import type { SessionService } from '../sessions/session-service.js';
import { isLive, type SessionRecord, type Store } from '../store/store.js';
import type { RedisWorkerRegistry } from './worker-registry.js';

/** The janitor's and the outbox lock's period; each lock lasts three. */
const TICK_MS = 1000;
const LOCK_TTL_MS = 3 * TICK_MS;
/** A drainer whose last renewal is older than this stops (a lapsed lock may be taken by another). */
const OUTBOX_FENCE_MS = LOCK_TTL_MS - TICK_MS;
/** How often a worker reconciles its connections and the janitor reconciles Redis with the store. */
const RECONCILE_MS = 2000;
const JANITOR = 'janitor';
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
  private outboxRenewedAt = 0;
  private stopped = false;
  private drained = false;
  private lastReconcile = 0;
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
      await registry.register({ id: this.o.nodeId, address: worker.url, capacity: worker.capacity });
      this.every(Math.max(100, Math.floor(registry.ttlMs / 3)), () => this.beat());
      this.every(RECONCILE_MS, () => this.reconcileLocal());
    }
    sessions.on('ended', (session) => {
      if (session.id === this.noting) return; // another node's end, not ours to announce
      const message: EndedMessage = { sessionId: session.id, node: this.o.nodeId };
      registry.publishSessionEnded(JSON.stringify(message)).catch((err: unknown) => this.log.warn('announcing a session end failed', { err, sessionId: session.id }));
    });
    this.subscriber = new Redis(this.o.redisUrl, { lazyConnect: true });
    this.subscriber.on('error', (err) => this.log.warn('redis subscriber error', { error: err.message }));
    this.subscriber.on('message', (_channel, text) => void this.onEnded(text));
    await this.subscriber.connect();
    await this.subscriber.subscribe(registry.sessionEndedChannel);
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
        if (left.length > 0) await sessions.failLost(left, Date.now() * 1000, 'server_shutdown');
      } catch (err) {
        this.log.warn('deregistering failed', { err });
      }
    }
    if (this.subscriber) {
      await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
      this.subscriber = null;
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
    try {
      if (await registry.heartbeat(this.o.nodeId)) return;
      // Reaped while we stalled: our sessions were failed elsewhere. Close them, then come back empty.
      this.log.error('this worker was dropped from the fleet (no heartbeat in time); closing its sessions and registering again');
      await this.reconcileLocal();
      await registry.register({ id: this.o.nodeId, address: worker.url, capacity: this.drained ? 0 : worker.capacity });
    } catch (err) {
      this.log.warn('heartbeat failed', { err });
    }
  }

  /** Heartbeats the sessions this worker runs and closes those whose stored session has ended. */
  private async reconcileLocal(): Promise<void> {
    const ids = [...new Set(this.o.localSessions())];
    if (ids.length === 0 || this.stopped) return;
    try {
      await this.o.store.heartbeatSessions(ids, Date.now() * 1000);
      for (const id of ids) {
        const session = await this.o.store.getSession(id);
        if (session && !isLive(session.status)) this.note(session);
      }
    } catch (err) {
      this.log.warn('reconciling local sessions failed', { err });
    }
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
      this.log.warn('reading an ended session failed', { err, sessionId: message.sessionId });
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
      for (const dead of await registry.reapDead()) {
        // Its deadline passed within the last tick or so: it was last heard about a ttl ago.
        const lastHeardUs = (Date.now() - registry.ttlMs) * 1000;
        const failed = await sessions.failLost(dead.sessionIds, lastHeardUs, 'worker_lost');
        this.log.warn('worker lost: its sessions ended as failed', { workerId: dead.workerId, sessions: dead.sessionIds.length, failed });
      }
      await sessions.sweepOverdue();
      if (Date.now() - this.lastReconcile >= RECONCILE_MS) {
        this.lastReconcile = Date.now();
        await this.reconcileFleet();
      }
    } catch (err) {
      this.log.warn('janitor pass failed', { err });
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
    const live = await store.listSessionsByStatus(['pending', 'active']);
    const holders = await registry.leaseHolders(live.map((s) => s.id));
    const suspectSessions = new Set<string>();
    for (const [i, session] of live.entries()) {
      if (holders[i] !== null) continue;
      if (!this.suspectSessions.has(session.id)) suspectSessions.add(session.id);
      else {
        await sessions.failLost([session.id], session.lastSeenUs ?? Date.now() * 1000, 'worker_lost');
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
      if (leader) this.outboxRenewedAt = Date.now();
    } catch (err) {
      this.log.warn('outbox lock failed', { err });
      leader = Date.now() - this.outboxRenewedAt < OUTBOX_FENCE_MS; // still within the lock we last had
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
