/**
 * Liveness, readiness, Prometheus metrics and the OpenAPI document. Readiness never waits on a
 * dependency that is known to be down: fleet mode's `fleet` check is this node's DependencyHealth
 * for Redis (fed by the Redis clients' own events and command outcomes), read as it stands, and the
 * fleet's slots are not asked for while Redis is down. A hosted language model that is down does not
 * make the server unready: it is listed under `degraded` (and avatar_upstream_up is 0 in
 * /metrics) until it answers again, which its probe finds by itself.
 */
import type client from 'prom-client';
import type { AppRouter } from '../context.js';
import { openApiDocument } from '../openapi.js';
import type { Services } from '../services.js';
import type { Static } from '@sinclair/typebox';
import type { Health, Ready } from '../api/responses.js';

export function healthRoutes(router: AppRouter, s: Services, registry: client.Registry): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' } satisfies Static<typeof Health>;
  });

  router.get('/readyz', async (ctx) => {
    const checks: Record<string, string> = {};
    try {
      await s.store.ping();
      checks.store = 'ok';
    } catch (err) {
      checks.store = `error: ${(err as Error).message}`;
    }
    const missing = s.assets.standard.missing();
    checks.assets = missing.length === 0 ? 'ok' : `missing: ${missing.join(', ')} (run npm run setup:assets)`;
    checks.accepting = s.isAccepting() ? 'ok' : 'shutting down';
    // A conversation started now would wait seconds for the language model, voices and recogniser.
    checks.models = s.isWarmingUp() ? 'warming up' : 'ok';
    const redis = s.redisHealth;
    if (redis) checks.fleet = redis.up ? 'ok' : `redis unavailable for ${Math.round(redis.downForMs() / 1000)} s`;
    const ready = Object.values(checks).every((v) => v === 'ok');
    // A hosted model that is down leaves the server ready (a session's avatar says its fallback line), marked here.
    const degraded: Record<string, string> = {};
    for (const up of s.upstreams()) if (!up.up) degraded[up.dependency] = `down for ${Math.round(up.downForMs() / 1000)} s: ${up.reason ?? 'failing'}`;
    ctx.status = ready ? 200 : 503;
    ctx.body = {
      status: ready ? 'ready' : 'not_ready',
      checks,
      degraded,
      workers: redis && !redis.up ? null : await s.pool.usage().catch(() => null),
    } satisfies Static<typeof Ready>;
  });

  router.get('/metrics', async (ctx) => {
    ctx.type = registry.contentType;
    ctx.body = await registry.metrics();
  });

  router.get('/v1/openapi.json', (ctx) => {
    ctx.body = openApiDocument(`${ctx.protocol}://${ctx.host}`);
  });
}
