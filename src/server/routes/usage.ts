/**
 * GET /v1/usage: the caller's usage records whose session started in [start_time, end_time),
 * oldest first, with totals. Times as Unix seconds or ISO 8601 (UTC when no zone); the default
 * range is the last 30 days.
 */
import { parseTimestamp } from '../../core/clock.js';
import { invalidParam } from '../../core/errors.js';
import type { UsageRecord } from '../../store/store.js';
import { usageView } from '../../usage/usage-view.js';
import type { Static } from '@sinclair/typebox';
import { parseUsageQuery } from '../api/requests.js';
import type { UsageList } from '../api/responses.js';
import type { AppRouter } from '../context.js';
import { principalOf } from '../middleware.js';
import type { Services } from '../services.js';
import type { RouteGuards } from './guards.js';

const DEFAULT_RANGE_US = 30 * 24 * 3600 * 1_000_000;

export function usageRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
  router.get('/v1/usage', ...g.authed, async (ctx) => {
    const { userId } = principalOf(ctx);
    const now = s.clock.nowUs();
    const query = parseUsageQuery(ctx.query);
    const end = timeParam(query, 'end_time') ?? now + 1;
    const start = timeParam(query, 'start_time') ?? end - DEFAULT_RANGE_US;
    if (start >= end) throw invalidParam('start_time', "'start_time' must be before 'end_time'.");
    const limit = query.limit ?? 100;
    const rows = await s.store.listUsage(userId, start, end, limit + 1);
    const page = rows.slice(0, limit);
    ctx.body = { object: 'list', data: page.map(usageView), totals: totals(page), has_more: rows.length > limit } satisfies Static<typeof UsageList>;
  });
}

/** A time of the query in microseconds (`start_time` or its alias `start`, ...), or null when absent. */
function timeParam(query: Record<string, unknown>, key: 'start_time' | 'end_time'): number | null {
  for (const name of [key, key.replace('_time', '')]) {
    const value = query[name];
    if (typeof value !== 'string') continue;
    const us = parseTimestamp(value);
    if (us === null) throw invalidParam(name, `'${name}' must be Unix seconds or an ISO 8601 timestamp.`);
    return us;
  }
  return null;
}

function totals(rows: UsageRecord[]) {
  const sum = (pick: (u: UsageRecord) => number) => rows.reduce((acc, u) => acc + pick(u), 0);
  return {
    sessions: rows.length,
    duration_seconds: Math.round(sum((u) => u.durationSeconds) * 1e6) / 1e6,
    audio_seconds_out: Math.round(sum((u) => u.audioSecondsOut) * 1e6) / 1e6,
    frames_out: sum((u) => u.framesOut),
    input_tokens: sum((u) => u.inputTokens),
    output_tokens: sum((u) => u.outputTokens),
  };
}
