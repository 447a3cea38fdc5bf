/** Middleware stacks shared by routes: who may call, and how the body is read. */
import type Koa from 'koa';
import type { AppContext, AppState } from '../context.js';
import { authMiddleware, jsonBodyMiddleware, rateLimitMiddleware } from '../middleware.js';
import type { Services } from '../services.js';

type Middleware = Koa.Middleware<AppState, AppContext>;

export interface RouteGuards {
  /** API key required (ephemeral keys refused), then the per-key rate limit. */
  authed: Middleware[];
  /** A key (API or ephemeral) is optional; when given it must be valid and identifies the caller. */
  optionalAuth: Middleware[];
  /** API key or ephemeral key: realtime calls and connections only. */
  realtime: Middleware[];
  json: Middleware;
}

export function routeGuards(s: Services): RouteGuards {
  const limit = rateLimitMiddleware(s.rateLimiter);
  return {
    authed: [authMiddleware(s.keys, s.authThrottle), limit],
    optionalAuth: [authMiddleware(s.keys, s.authThrottle, { optional: true, ephemeral: true }), limit],
    realtime: [authMiddleware(s.keys, s.authThrottle, { ephemeral: true }), limit],
    json: jsonBodyMiddleware(s.config.maxJsonBytes),
  };
}
