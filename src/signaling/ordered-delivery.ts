/**
 * The order a connection's deliveries go out in (its server events, to the transport and the
 * listeners, and the usage counted as they are delivered), with usage commits between them:
 * before an event that tells the client a response or a segment is over goes out, the usage
 * delivered so far is committed, and every delivery after it waits behind that commit, in order,
 * at most USAGE_COMMIT_WAIT_MS (a store outage must not stall the session). A client that ends its
 * session the moment it sees response.done then gets a record with that response.
 * realtime-connection.ts decides which events settle; this keeps the order.
 */
/** Deliveries wait behind a usage commit at most this long. */
export const USAGE_COMMIT_WAIT_MS = 2_000;

export class OrderedDelivery {
  /** Deliveries waiting behind a commit, in order; null when none is in progress. */
  private held: Array<() => void> | null = null;
  /** The commit `held` waits for (a stale one's release does nothing). */
  private commit: object | null = null;

  constructor(
    private readonly deps: {
      /** Commits the usage counted so far; null when there is nothing to commit to (no meter yet, or the connection is settling). */
      commitUsage(): Promise<void> | null;
      /** A held delivery threw (a bug: it is logged, and the ones after it still go out). */
      failed(err: unknown): void;
    },
  ) {}

  /** Delivers now, or after what waits behind a commit. */
  inOrder(deliver: () => void): void {
    if (this.held) this.held.push(deliver);
    else deliver();
  }

  /** Delivers once the usage counted so far is committed; what comes meanwhile waits behind it. */
  afterCommit(deliver: () => void): void {
    if (this.held) {
      this.held.push(() => this.afterCommit(deliver));
      return;
    }
    const committing = this.deps.commitUsage();
    if (committing === null) return deliver();
    const commit = {};
    this.commit = commit;
    this.held = [deliver];
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, USAGE_COMMIT_WAIT_MS).unref();
    });
    void Promise.race([committing, waited]).then(() => {
      clearTimeout(timer);
      if (this.commit === commit) this.release();
    });
  }

  /** Lets out what waited behind a commit, in order, until one of them starts another commit. */
  release(): void {
    const held = this.held;
    this.held = null;
    this.commit = null;
    if (!held) return;
    for (const [i, deliver] of held.entries()) {
      if (this.held) {
        (this.held as Array<() => void>).push(...held.slice(i));
        return;
      }
      try {
        deliver();
      } catch (err) {
        this.deps.failed(err);
      }
    }
  }
}
