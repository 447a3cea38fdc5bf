/**
 * Whether a dependency (the fleet's Redis, the PostgreSQL store, a hosted language model) is answering, as this process last
 * saw it. Whoever talks to the dependency reports each success and failure; `up` changes on the
 * first failure after a success and the first success after a failure, so /readyz follows the
 * dependency at once, without waiting for a probe of its own to time out.
 *
 * The log says less than `up` does: an outage of any length is two lines per node, never one per
 * attempt. One `warn` line when it goes down (with the error); one `info` line once it has answered
 * for `settleMs` without failing again (with how long it was down). A restart flaps: PostgreSQL's
 * fast shutdown ends its connections one after another, so a query on a connection not yet ended
 * succeeds between two that fail. Such a flap is the same outage, not a second one.
 */
import type { Dependency } from './errors.js';
import type { Logger } from './log.js';

/** How long a dependency must answer without failing before its outage is logged as over. */
export const DEPENDENCY_SETTLE_MS = 500;

export class DependencyHealth {
  /** When the outage now being reported began; null once its end has been logged. */
  private outageSince: number | null = null;
  private answering = true;
  private settling: NodeJS.Timeout | null = null;
  /** Why it stopped answering (the failure's message); null while up. */
  private lastFailure: string | null = null;

  constructor(
    readonly dependency: Dependency,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly settleMs = DEPENDENCY_SETTLE_MS,
  ) {}

  get up(): boolean {
    return this.answering;
  }

  /** The failure that took it down, while down. */
  get reason(): string | null {
    return this.answering ? null : this.lastFailure;
  }

  /** Milliseconds since it stopped answering; 0 while up. */
  downForMs(): number {
    return this.answering || this.outageSince === null ? 0 : this.now() - this.outageSince;
  }

  succeeded(): void {
    if (this.answering) return;
    this.answering = true;
    const downForMs = this.now() - (this.outageSince ?? this.now());
    this.settling = setTimeout(() => {
      this.settling = null;
      this.outageSince = null;
      this.log.info('dependency back', { dependency: this.dependency, downForMs });
    }, this.settleMs);
    this.settling.unref();
  }

  failed(err: unknown): void {
    const e = err as { message?: unknown; code?: unknown };
    this.lastFailure = String(e?.message ?? err);
    if (!this.answering) return;
    this.answering = false;
    if (this.settling) {
      // Answered only briefly: the outage already logged goes on.
      clearTimeout(this.settling);
      this.settling = null;
      return;
    }
    this.outageSince = this.now();
    // The message and code only: a stack would say nothing more about a refused connection.
    this.log.warn('dependency down', { dependency: this.dependency, error: String(e?.message ?? err), code: e?.code });
  }
}
