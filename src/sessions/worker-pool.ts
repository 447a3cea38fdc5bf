/**
 * Worker slots. A session holds one slot from creation (pending sessions reserve theirs, so a
 * WebRTC call admitted at offer time is never refused at connect time) until it reaches a terminal
 * state. The embedded pool counts slots in this process; acquisition is synchronous, so parallel
 * requests can never take more than `capacity` (JS runs one acquisition at a time) and exactly one
 * request wins the last slot. A fleet implementation (slots on media hosts registered in Redis)
 * fills the same interface.
 */

export interface WorkerLease {
  readonly workerId: string;
  readonly sessionId: string;
  /** Idempotent. */
  release(): void;
}

export interface WorkerPool {
  readonly capacity: number;
  used(): number;
  /** A lease, or null when every slot is held. */
  tryAcquire(sessionId: string): WorkerLease | null;
  /** The lease a session holds, if any. */
  leaseOf(sessionId: string): WorkerLease | null;
}

export class LocalWorkerPool implements WorkerPool {
  private readonly leases = new Map<string, WorkerLease>();
  private readonly freeSlots: number[];

  constructor(readonly capacity: number) {
    this.freeSlots = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
  }

  used(): number {
    return this.leases.size;
  }

  tryAcquire(sessionId: string): WorkerLease | null {
    const existing = this.leases.get(sessionId);
    if (existing) return existing;
    const slot = this.freeSlots.pop();
    if (slot === undefined) return null;
    let released = false;
    const lease: WorkerLease = {
      workerId: `local-${slot}`,
      sessionId,
      release: () => {
        if (released) return;
        released = true;
        this.leases.delete(sessionId);
        this.freeSlots.push(slot);
      },
    };
    this.leases.set(sessionId, lease);
    return lease;
  }

  leaseOf(sessionId: string): WorkerLease | null {
    return this.leases.get(sessionId) ?? null;
  }
}
