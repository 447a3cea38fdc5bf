/**
 * Prometheus metrics on a registry of this server's own (several servers in one test process must
 * not share counters). Gauges that mirror the store are read at scrape time, so they are never stale.
 */
import client from 'prom-client';
import type { DependencyHealth } from '../core/dependency-health.js';
import type { Store } from '../store/store.js';
import type { WorkerPool } from '../sessions/worker-pool.js';
import { escapedErrors } from '../core/process-guard.js';
import type { FleetCapacity } from '../fleet/worker-registry.js';

/** Fleet mode: the registry's view of every worker, read at scrape time. */
export interface FleetView {
  capacity(): Promise<FleetCapacity>;
}

export interface HttpMetrics {
  observe(method: string, route: string, status: number, seconds: number): void;
}

export function createMetrics(store: Store, pool: WorkerPool, webhookEnabled: boolean, fleet: FleetView | null = null, upstreams: () => DependencyHealth[] = () => []) {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });

  new client.Gauge({
    name: 'avatar_upstream_up',
    help: 'Hosted dependencies a conversation uses (language_model), 1 while answering, 0 while down (as their requests and probes last found them).',
    labelNames: ['upstream'],
    registers: [registry],
    collect() {
      for (const up of upstreams()) this.set({ upstream: up.dependency }, up.up ? 1 : 0);
    },
  });
  new client.Gauge({
    name: 'avatar_sessions',
    help: 'Sessions in the store by status.',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const counts = await store.countSessionsByStatus();
      for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    },
  });
  new client.Gauge({
    name: 'avatar_worker_slots',
    help: 'Worker slots by state (used, free): this process\'s, or in fleet mode those of every live worker.',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      // Fleet mode with Redis down: no figure rather than a failed scrape (the pool fails fast).
      const usage = await pool.usage().catch(() => null);
      this.reset();
      if (!usage) return;
      this.set({ state: 'used' }, usage.used);
      this.set({ state: 'free' }, usage.capacity - usage.used);
    },
  });
  if (fleet) {
    new client.Gauge({
      name: 'avatar_fleet_workers',
      help: 'Fleet mode: registered workers by state (live; dead until the janitor reaps them).',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        this.reset();
        const perWorker = (await fleet.capacity().catch(() => null))?.perWorker;
        if (!perWorker) return; // Redis down: no figure rather than a failed scrape
        this.set({ state: 'live' }, perWorker.filter((w) => w.live).length);
        this.set({ state: 'dead' }, perWorker.filter((w) => !w.live).length);
      },
    });
    new client.Gauge({
      name: 'avatar_fleet_worker_slots',
      help: 'Fleet mode: slots of each registered worker by state (used, free).',
      labelNames: ['worker', 'state'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const w of (await fleet.capacity().catch(() => null))?.perWorker ?? []) {
          this.set({ worker: w.id, state: 'used' }, w.used);
          this.set({ worker: w.id, state: 'free' }, Math.max(0, w.capacity - w.used));
        }
      },
    });
  }
  new client.Gauge({
    name: 'avatar_process_escaped_errors',
    help: 'Exceptions and promise rejections that escaped every handler since the process started (bugs; the process went on), by kind. Alert on any increase.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      // Process-wide counts (core/process-guard.ts), read at scrape time.
      for (const [kind, n] of Object.entries(escapedErrors())) this.set({ kind }, n);
    },
  });
  if (webhookEnabled) {
    new client.Gauge({
      name: 'avatar_webhook_outbox',
      help: 'Webhook outbox entries by state (pending, delivered, dead).',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        const counts = await store.countOutbox();
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
  }
  const latency = new client.Histogram({
    name: 'avatar_http_request_duration_seconds',
    help: 'HTTP request latency by method, route template and status.',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const http: HttpMetrics = {
    observe: (method, route, status, seconds) => latency.observe({ method, route, status: String(status) }, seconds),
  };
  return { registry, http };
}
