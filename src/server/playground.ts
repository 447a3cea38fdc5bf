/**
 * The playground page at `/`: the files src/cli/build-playground.ts makes in target/playground,
 * served without a key (the page asks the person for theirs and keeps it in the browser; the
 * server never puts a key in a page). Outside the REST router and its OpenAPI document on
 * purpose: it is a page, not API. A strict Content-Security-Policy allows only this origin (the
 * page talks to this server's REST API, WebSocket and WebRTC calls and nothing else).
 * `/playground/face.js`, the face renderer for pages of their own (playground/src/face-embed.ts),
 * may be imported from any origin.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type Koa from 'koa';
import { AppError } from '../core/errors.js';
import type { AppContext, AppState } from './context.js';

/** Where src/cli/build-playground.ts writes the page (build output, not in git). */
export const PLAYGROUND_DIR = path.resolve(import.meta.dirname, '../../target/playground');

const FILES: Record<string, { file: string; type: string; anyOrigin?: boolean }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/playground/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/playground/app.js.map': { file: 'app.js.map', type: 'application/json' },
  '/playground/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
  '/playground/face.js': { file: 'face.js', type: 'text/javascript; charset=utf-8', anyOrigin: true },
  '/playground/face.js.map': { file: 'face.js.map', type: 'application/json', anyOrigin: true },
};

const CSP = [
  "default-src 'self'",
  "img-src 'self' blob: data:",
  "media-src 'self' blob:",
  "connect-src 'self' ws: wss:",
  "style-src 'self'",
  "script-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function playgroundMiddleware(dir: string): Koa.Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    const entry = FILES[ctx.path];
    if (!entry || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    let body: Buffer;
    try {
      body = await fs.readFile(path.join(dir, entry.file));
    } catch {
      throw new AppError('playground_not_built', 'The playground page is not built; run npm run setup (npm start does it).', { status: 503, type: 'server_error' });
    }
    ctx.type = entry.type;
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('Content-Security-Policy', CSP);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    // A module script is fetched with CORS: another origin's page may import the renderer.
    if (entry.anyOrigin) ctx.set('Access-Control-Allow-Origin', '*');
    ctx.body = body;
  };
}
