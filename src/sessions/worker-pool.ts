/**
 * Worker slots. A session holds one slot from creation (pending sessions reserve theirs, so a
 * WebRTC call admitted at offer time is never refused at connect time) until it reaches a terminal
 * state. Two implementations fill this interface:
 *  - LocalWorkerPool (the embedded default): slots counted in this process. Acquisition runs
 *    without awaiting anything, so parallel requests can never take more than `capacity` (JS runs
 *    one acquisition at a time) and exactly one request wins the last slot; every lease is local.
 *  - FleetWorkerPool (src/fleet/fleet-pool.ts): slots of every worker node, placed atomically in
 *    Redis; a lease names the worker the session runs on, which may be another process. With Redis
 *    down every method rejects within about a second with 503 `redis_unavailable` (never waits for
 *    Redis, never answers "no room" for it): null from tryAcquire means the fleet is full.
 */

export interface WorkerLease {
  readonly workerId: string;
  readonly sessionId: string;
  /** True when the session runs in this process; false when on another worker (fleet mode). */
  readonly local: boolean;
  /** The worker's internal base URL (fleet mode); null for a local lease. */
  readonly address: string | null;
  /** Idempotent. */
  release(): Promise<void>;
}

export interface SlotUsage {
  capacity: number;
  used: number;
}

export interface WorkerPool {
  /** A lease, or null when every slot is held (fleet mode: every slot of every live worker). */
  tryAcquire(sessionId: string): Promise<WorkerLease | null>;
  /** The lease a session holds, if any. */
  leaseOf(sessionId: string): Promise<WorkerLease | null>;
  /** Slots in all (fleet mode: of every live worker) and held. */
  usage(): Promise<SlotUsage>;
}

export class LocalWorkerPool implements WorkerPool {
  private readonly leases = new Map<string, WorkerLease>();
  private readonly freeSlots: number[];

  constructor(readonly capacity: number) {
    this.freeSlots = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
  }

  async tryAcquire(sessionId: string): Promise<WorkerLease | null> {
    const existing = this.leases.get(sessionId);
    if (existing) return existing;
    const slot = this.freeSlots.pop();
    if (slot === undefined) return null;
    let released = false;
    const lease: WorkerLease = {
      workerId: `local-${slot}`,
      sessionId,
      local: true,
      address: null,
      release: async () => {
        if (released) return;
        released = true;
        this.leases.delete(sessionId);
        this.freeSlots.push(slot);
      },
    };
    this.leases.set(sessionId, lease);
    return lease;
  }

  async leaseOf(sessionId: string): Promise<WorkerLease | null> {
    return this.leases.get(sessionId) ?? null;
  }

  async usage(): Promise<SlotUsage> {
    return { capacity: this.capacity, used: this.leases.size };
  }
}
