/**
 * The Koa application: middleware chain and every REST route. A composition root only: handlers
 * delegate to services; no business logic lives here.
 */
import Koa from 'koa';
import { Router } from '@koa/router';
import type { AppState, AppContext } from './context.js';
import { createMetrics } from './metrics.js';
import { errorMiddleware, observeMiddleware } from './middleware.js';
import { PLAYGROUND_DIR, playgroundMiddleware } from './playground.js';
import { assetRoutes } from './routes/assets.js';
import { callRoutes, callsCors } from './routes/calls.js';
import { clientSecretRoutes } from './routes/client-secrets.js';
import { routeGuards } from './routes/guards.js';
import { healthRoutes } from './routes/health.js';
import { sessionRoutes } from './routes/sessions.js';
import { usageRoutes } from './routes/usage.js';
import type { Services } from './services.js';

export function createApp(s: Services) {
  const app = new Koa<AppState, AppContext>({ proxy: false });
  const router = new Router<AppState>();
  const { registry, http } = createMetrics(s.store, s.pool, s.config.webhook !== null, s.fleet, () => s.upstreams());
  const guards = routeGuards(s);

  healthRoutes(router, s, registry);
  sessionRoutes(router, s, guards);
  assetRoutes(router, s, guards);
  clientSecretRoutes(router, s, guards);
  callRoutes(router, s, guards);
  usageRoutes(router, s, guards);

  app.use(errorMiddleware(s.log));
  app.use(observeMiddleware(s.log, http));
  app.use(callsCors());
  if (s.config.playground) app.use(playgroundMiddleware(PLAYGROUND_DIR));
  app.use(router.routes());
  app.use(router.allowedMethods());
  // Koa's default handler would log every error to stderr; errorMiddleware already answered and logged.
  app.silent = true;
  return { app, router, registry };
}
