/** The Koa state the middleware chain fills, and the context type every handler receives. */
import type { Router, RouterContext } from '@koa/router';
import type { Principal } from '../auth/keys.js';

export interface AppState {
  requestId: string;
  /** Set by the auth middleware on routes that need a key; optional on public routes. */
  principal?: Principal;
  /** Parsed JSON body (undefined when the request had none). */
  body?: unknown;
}

export type AppContext = RouterContext<AppState>;
export type AppRouter = Router<AppState>;
