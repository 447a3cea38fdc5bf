/**
 * Worker slots in fleet mode: the WorkerPool of every node, over the Redis worker registry. A
 * session is placed on a live worker with a free slot, preferring this node when it is a worker
 * (no relay hop), else the least loaded; capacity is the fleet's, so parallel creates on any
 * number of API nodes never oversubscribe a worker and exactly one wins the last slot. A lease is
 * local when its worker is this node; otherwise it carries the worker's internal URL, where the
 * session's media runs.
 *
 * Redis failing: every call fails fast with 503 `redis_unavailable` (worker-registry.ts), never
 * "no worker available". While Redis has just come back (the registry is `recovering`: workers it
 * lost are registering again, reclaiming the sessions they run) a create that finds no room is
 * answered `redis_unavailable` too, retry in a moment, rather than "All workers are busy"; once
 * that ttl has passed, no room means the fleet is full. A worker that has not registered again is
 * never placed on, and one that has counts the sessions it reclaimed, so placement never exceeds
 * what the workers really run.
 */
import { dependencyUnavailable } from '../core/errors.js';
import type { SlotUsage, WorkerLease, WorkerPool } from '../sessions/worker-pool.js';
import type { Placement, RedisWorkerRegistry } from './worker-registry.js';

export class FleetWorkerPool implements WorkerPool {
  /** @param selfId this node's worker id, or null for an API-only node. */
  constructor(
    private readonly registry: RedisWorkerRegistry,
    private readonly selfId: string | null,
  ) {}

  async tryAcquire(sessionId: string): Promise<WorkerLease | null> {
    const placed = await this.registry.place(sessionId, this.selfId ? { prefer: this.selfId } : {});
    if (placed) return this.lease(sessionId, placed);
    if (this.registry.recovering) throw dependencyUnavailable('redis', new Error('Redis is back; the workers are registering again'));
    return null;
  }

  async leaseOf(sessionId: string): Promise<WorkerLease | null> {
    const placed = await this.registry.leaseOf(sessionId);
    return placed ? this.lease(sessionId, placed) : null;
  }

  async usage(): Promise<SlotUsage> {
    const { capacity, used } = await this.registry.capacity();
    return { capacity, used };
  }

  private lease(sessionId: string, placed: Placement): WorkerLease {
    const local = placed.workerId === this.selfId;
    return {
      workerId: placed.workerId,
      sessionId,
      local,
      address: local ? null : placed.address,
      release: async () => {
        await this.registry.release(sessionId);
      },
    };
  }
}
