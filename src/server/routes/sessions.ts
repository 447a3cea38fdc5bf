/** Sessions, current form (spec 4.1) and older form (spec 4.2): thin handlers over SessionService. */
import { apiKeyIdOf } from '../../auth/keys.js';
import { parseLegacySessionRequest, parseSessionRequest } from '../../sessions/session-config.js';
import type { Static } from '@sinclair/typebox';
import { parseSessionListQuery } from '../api/requests.js';
import type { SessionList } from '../api/responses.js';
import type { AppRouter } from '../context.js';
import { principalOf } from '../middleware.js';
import type { Services } from '../services.js';
import { chatView, legacySessionView, sessionView } from '../views.js';
import type { RouteGuards } from './guards.js';

export function sessionRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
  router.post('/v1/sessions', ...g.authed, g.json, async (ctx) => {
    const principal = principalOf(ctx);
    const config = parseSessionRequest(ctx.state.body, s.config.defaultModel);
    const session = await s.sessions.create(principal.userId, config, 'rest', { start: true, apiKeyId: apiKeyIdOf(principal) });
    ctx.status = 200;
    ctx.body = sessionView(session);
  });

  router.get('/v1/sessions', ...g.authed, async (ctx) => {
    const { userId } = principalOf(ctx);
    const { status, limit = 20, before } = parseSessionListQuery(ctx.query);
    const rows = await s.sessions.list(userId, { status, limit: limit + 1, before });
    const page = rows.slice(0, limit);
    ctx.body = { object: 'list', data: page.map(sessionView), has_more: rows.length > limit, last_id: page.at(-1)?.id ?? null } satisfies Static<typeof SessionList>;
  });

  router.get('/v1/sessions/:session_id', ...g.authed, async (ctx) => {
    ctx.body = sessionView(await s.sessions.get(principalOf(ctx).userId, ctx.params.session_id ?? ''));
  });

  router.delete('/v1/sessions/:session_id', ...g.authed, async (ctx) => {
    ctx.body = sessionView(await s.sessions.endForUser(principalOf(ctx).userId, ctx.params.session_id ?? ''));
  });

  router.get('/v1/sessions/:session_id/chat', ...g.authed, async (ctx) => {
    const session = await s.sessions.get(principalOf(ctx).userId, ctx.params.session_id ?? '');
    ctx.body = chatView(session, await s.store.listChatTurns(session.id));
  });

  // ── Older form ────────────────────────────────────────────────────────────
  const legacyParams = { face: 'face_id', voice: 'voice', driving: 'driving' };

  router.post('/sessions', ...g.authed, g.json, async (ctx) => {
    const principal = principalOf(ctx);
    const config = parseLegacySessionRequest(ctx.state.body);
    const session = await s.sessions.create(principal.userId, config, 'legacy', { start: true, params: legacyParams, apiKeyId: apiKeyIdOf(principal) });
    ctx.body = legacySessionView(session);
  });

  router.get('/sessions/:id', ...g.authed, async (ctx) => {
    ctx.body = legacySessionView(await s.sessions.get(principalOf(ctx).userId, ctx.params.id ?? ''));
  });

  router.post('/sessions/:id/end', ...g.authed, async (ctx) => {
    ctx.body = legacySessionView(await s.sessions.endForUser(principalOf(ctx).userId, ctx.params.id ?? ''));
  });
}
