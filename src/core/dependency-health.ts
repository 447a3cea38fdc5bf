/**
 * Whether a dependency (the fleet's Redis, the PostgreSQL store) is answering, as this process last
 * saw it. Whoever talks to the dependency reports each success and failure; the state changes on
 * the first failure after a success and the first success after a failure, and only a change is
 * logged: one `warn` line when it goes down (with the error), one `info` line when it is back (with
 * how long it was down). An outage of any length is two log lines per node, never one per attempt.
 *
 * /readyz reads `up` so a load balancer sees the outage at once, without waiting for a probe of its
 * own to time out.
 */
import type { Dependency } from './errors.js';
import type { Logger } from './log.js';

export class DependencyHealth {
  private downSince: number | null = null;

  constructor(
    readonly dependency: Dependency,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  get up(): boolean {
    return this.downSince === null;
  }

  /** Milliseconds since it went down; 0 while up. */
  downForMs(): number {
    return this.downSince === null ? 0 : this.now() - this.downSince;
  }

  succeeded(): void {
    if (this.downSince === null) return;
    const downForMs = this.now() - this.downSince;
    this.downSince = null;
    this.log.info('dependency back', { dependency: this.dependency, downForMs });
  }

  failed(err: unknown): void {
    if (this.downSince !== null) return;
    this.downSince = this.now();
    const e = err as { message?: unknown; code?: unknown };
    // The message and code only: a stack would say nothing more about a refused connection.
    this.log.warn('dependency down', { dependency: this.dependency, error: String(e?.message ?? err), code: e?.code });
  }
}
