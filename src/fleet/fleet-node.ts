/**
 * One node's part in a fleet, besides answering requests (server.ts composes it):
 *  - a worker (role worker or all) registers in the worker registry with its capacity and internal
 *    URL and heartbeats every third of the ttl; a heartbeat refused (the node was reaped after a
 *    stall: its sessions were failed by another node) registers it again, empty;
 *  - every session this node ends is announced on Redis, and every node listens: a worker running
 *    a session ended elsewhere (DELETE on an API node, a hangup, a revoked key) closes it;
 *  - one node at a time (a leadership lock, renewed every tick) is the janitor: it reaps workers
 *    that stopped heartbeating (their sessions end as failed, billed up to about their last
 *    heartbeat, exactly once: the registry hands each dead worker to one caller and the store ends
 *    each session once) and ends sessions whose start timeout or deadline passed while the node
 *    that set the timer was gone;
 *  - one node at a time drains the webhook outbox: the dispatcher runs only while this node holds
 *    that lock, and is stopped when it loses it.
 * Nothing here is needed for correctness of a single request: a node that dies takes only its
 * open sockets (API) or its sessions (worker, failed by the janitor) with it.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../core/log.js';
import type { SessionService } from '../sessions/session-service.js';
import type { Store } from '../store/store.js';
import type { RedisWorkerRegistry } from './worker-registry.js';

/** How often the janitor and outbox locks are tried or renewed; each lock lasts three ticks. */
const TICK_MS = 1000;
const LOCK_TTL_MS = 3 * TICK_MS;
/** The lock names. */
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
  private heartbeat: NodeJS.Timeout | null = null;
  private tick: NodeJS.Timeout | null = null;
  private janitorRun: Promise<void> | null = null;
  private draining = false;
  private stopped = false;
  /** The session whose end another node announced, while it is being noted here (not announced again). */
  private noting: string | null = null;

  constructor(private readonly o: FleetNodeOptions) {
    this.log = o.log.child({ module: 'fleet', nodeId: o.nodeId });
  }

  async start(): Promise<void> {
    const { registry, worker, sessions } = this.o;
    if (worker) {
      await registry.register({ id: this.o.nodeId, address: worker.url, capacity: worker.capacity });
      this.heartbeat = setInterval(() => void this.beat(), Math.max(100, Math.floor(registry.ttlMs / 3))).unref();
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
    this.tick = setInterval(() => void this.onTick(), TICK_MS).unref();
    void this.onTick();
    this.log.info('fleet node started', { worker: worker ? { capacity: worker.capacity, url: worker.url } : null, ttlMs: registry.ttlMs });
  }

  /** Leaves the fleet: no more heartbeats or locks; a worker deregisters (its sessions ended before). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.tick) clearInterval(this.tick);
    await this.janitorRun;
    const { registry } = this.o;
    if (this.draining) {
      this.draining = false;
      await this.o.outbox?.stop();
    }
    await Promise.allSettled([registry.releaseLeadership(JANITOR, this.o.nodeId), registry.releaseLeadership(OUTBOX, this.o.nodeId)]);
    if (this.o.worker) await registry.deregister(this.o.nodeId).catch((err: unknown) => this.log.warn('deregistering failed', { err }));
    if (this.subscriber) {
      await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
      this.subscriber = null;
    }
  }

  private async beat(): Promise<void> {
    const { registry, worker } = this.o;
    if (!worker || this.stopped) return;
    try {
      if (await registry.heartbeat(this.o.nodeId)) return;
      // Reaped while we stalled: our sessions were failed by the janitor. Come back empty.
      this.log.error('this worker was dropped from the fleet (no heartbeat in time); registering again');
      await registry.register({ id: this.o.nodeId, address: worker.url, capacity: worker.capacity });
    } catch (err) {
      this.log.warn('heartbeat failed', { err });
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
      if (!session) return;
      // noteEndedElsewhere emits 'ended' synchronously: the listener above sees `noting` and stays quiet.
      this.noting = session.id;
      try {
        this.o.sessions.noteEndedElsewhere(session);
      } finally {
        this.noting = null;
      }
    } catch (err) {
      this.log.warn('reading an ended session failed', { err, sessionId: message.sessionId });
    }
  }

  private async onTick(): Promise<void> {
    if (this.stopped || this.janitorRun) return;
    this.janitorRun = this.runLocks().finally(() => {
      this.janitorRun = null;
    });
  }

  private async runLocks(): Promise<void> {
    const { registry, sessions, nodeId } = this.o;
    try {
      if (await registry.acquireLeadership(JANITOR, nodeId, LOCK_TTL_MS)) {
        for (const dead of await registry.reapDead()) {
          // Its deadline passed within the last tick or so: it was last heard about a ttl ago.
          const lastHeardUs = (Date.now() - registry.ttlMs) * 1000;
          const failed = await sessions.failLost(dead.sessionIds, lastHeardUs, 'worker_lost');
          this.log.warn('worker lost: its sessions ended as failed', { workerId: dead.workerId, sessions: dead.sessionIds.length, failed });
        }
        await sessions.sweepOverdue();
      }
    } catch (err) {
      this.log.warn('janitor pass failed', { err });
    }
    if (!this.o.outbox || this.stopped) return;
    try {
      const leader = await registry.acquireLeadership(OUTBOX, nodeId, LOCK_TTL_MS);
      if (leader && !this.draining) {
        this.draining = true;
        this.o.outbox.start();
        this.log.info('draining the webhook outbox');
      } else if (!leader && this.draining) {
        this.draining = false;
        await this.o.outbox.stop();
        this.log.info('stopped draining the webhook outbox (another node holds it)');
      }
    } catch (err) {
      this.log.warn('outbox lock failed', { err });
    }
  }
}
