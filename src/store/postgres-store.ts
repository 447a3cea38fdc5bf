/**
 * Store on PostgreSQL (node-postgres, a connection pool): fleet mode's store, shared by every node.
 * The schema and its versions are the SQLite store's (migrations.ts), rows map the same way
 * (rows.ts), and the behaviour is the same; what differs is that many processes write at once:
 *  - migrate() takes a transaction-scoped advisory lock first, so nodes starting together apply
 *    each pending migration once, in order, and the others then find it applied;
 *  - endSession() locks the session's row (SELECT … FOR UPDATE) in its transaction, so when two
 *    nodes end the same session at once (a worker's own end and another node reaping it), exactly
 *    one writes the terminal status, the usage record and the outbox entry, and the other gets null;
 *  - appendChatTurn() numbers turns under the same row lock;
 *  - sessions keep their insertion order in `seq` (SQLite's rowid) for cursor pagination.
 *
 * PostgreSQL down, restarting or not answering is an outage, not a bug: every query and checkout
 * goes through guard(), which turns connection-class failures (refused, reset, terminated, the
 * server shutting down or starting, a connect or query past its timeout: isConnectionError) into
 * dependencyUnavailable('postgres') (503 postgres_unavailable, Retry-After) and reports them to
 * a DependencyHealth, so an outage is one `dependency down` and one `dependency back` line per
 * process however many queries meet it (only a query begun after the latest failure can say it is
 * back: one in flight across a restart must not); any other error (a real query bug) is thrown as
 * it is.
 * Timeouts are short (CONNECT_TIMEOUT_MS, QUERY_TIMEOUT_MS) so a request fails fast instead of
 * waiting out the outage. Every pooled connection has an 'error' listener at all times (the pool's
 * while idle, transaction()'s while checked out), so a restart never makes an unhandled error;
 * the pool reconnects on the next query, and nothing needs restarting once the server is back.
 */
import pg from 'pg';
import { DependencyHealth } from '../core/dependency-health.js';
import { dependencyUnavailable } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { storedMedia } from '../core/media-options.js';
import { MIGRATIONS } from './migrations.js';
import { countersOf, endApplies, sessionEnding, toApiKey, toAsset, toEphemeralKey, toOutbox, toSession, toUsage, type Row } from './rows.js';
import type {
  ApiKeyRecord,
  AssetKind,
  AssetRecord,
  ChatTurn,
  EphemeralKeyRecord,
  OutboxDraft,
  OutboxEntry,
  SessionEnd,
  SessionListQuery,
  SessionRecord,
  SessionStatus,
  Store,
  UsageCounters,
  UsageDraft,
  UsageRecord,
} from './store.js';

/** The advisory lock key migrations hold (any constant the application uses for nothing else). */
const MIGRATION_LOCK = 7_235_112_001;

/** Opening a connection (or waiting for a free one in the pool) gives up after this long. */
export const CONNECT_TIMEOUT_MS = 2_000;
/** A query with no answer after this long fails (its connection is dropped). Migrations get MIGRATE_TIMEOUT_MS. */
export const QUERY_TIMEOUT_MS = 2_000;
/** Migrations may wait for another node's migrations (the advisory lock) and build tables. */
const MIGRATE_TIMEOUT_MS = 60_000;

/** Node's socket errors that mean the server is unreachable or the connection died. */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/**
 * SQLSTATEs that mean the server cannot serve us now: admin_shutdown (57P01: it is stopping or was
 * restarted), crash_shutdown (57P02), cannot_connect_now (57P03: starting up or shutting down),
 * too_many_connections (53300); and class 08, connection exceptions.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** node-postgres's own messages for a connection that died, never opened in time or hung. */
const CONNECTION_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable|timeout expired)/;

/** Whether `err` says the server is down, restarting or not answering (not that a query was wrong). */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (SOCKET_ERRORS.has(e.code) || UNAVAILABLE_SQLSTATES.has(e.code) || /^08[0-9A-Z]{3}$/.test(e.code))) return true;
  if (typeof e.message === 'string' && CONNECTION_MESSAGES.test(e.message)) return true;
  // Connecting to a name with several addresses fails with an AggregateError of each attempt's.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every(isConnectionError)) return true;
  return false;
}

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /** Called with errors of idle pooled connections (which otherwise would be unhandled). */
  onIdleError?: (err: Error) => void;
  /** Where outages are reported (one line per change); without it, errors are still mapped, silently. */
  log?: Logger;
  /** Overrides CONNECT_TIMEOUT_MS and QUERY_TIMEOUT_MS (tests). */
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
}

/** The pool as the store's methods see it: each query goes through guard(). */
interface GuardedPool {
  query(sql: string, params?: unknown[]): Promise<pg.QueryResult>;
}

export class PostgresStore implements Store {
  private readonly raw: pg.Pool;
  private readonly pool: GuardedPool;
  /** Whether PostgreSQL answered last time this process asked (null without a logger). */
  readonly health: DependencyHealth | null;
  /** Connection failures seen so far: a query that began before the latest one cannot say it is back. */
  private failures = 0;
  private closed = false;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.health = options.log ? new DependencyHealth('postgres', options.log) : null;
    this.raw = new pg.Pool({
      connectionString: url,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      query_timeout: options.queryTimeoutMs ?? QUERY_TIMEOUT_MS,
      keepAlive: true,
    });
    // An idle connection dropped by a restarting server: the pool discards it and opens another next time.
    this.raw.on('error', (err) => {
      this.failed(err);
      options.onIdleError?.(err);
    });
    this.pool = { query: (sql, params) => this.guard(() => this.raw.query(sql, params)) };
  }

  /** Runs one use of the server: connection-class failures become postgres_unavailable (and are reported). */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    const failuresBefore = this.failures;
    let result: T;
    try {
      result = await work();
    } catch (err) {
      if (!isConnectionError(err)) {
        this.answered(failuresBefore); // the server answered, with an error of the query's own
        throw err;
      }
      this.failed(err);
      throw dependencyUnavailable('postgres', err);
    }
    this.answered(failuresBefore);
    return result;
  }

  private failed(err: unknown): void {
    this.failures++;
    this.health?.failed(err);
  }

  /** The server answered a query begun when `failuresBefore` failures had been seen; it is back only if none came since. */
  private answered(failuresBefore: number): void {
    if (this.failures === failuresBefore) this.health?.succeeded();
  }

  private async rows(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await this.pool.query(sql, params)).rows as Row[];
  }

  private async row(sql: string, params: unknown[] = []): Promise<Row | null> {
    return (await this.rows(sql, params))[0] ?? null;
  }

  private async count(sql: string, params: unknown[] = []): Promise<number> {
    return (await this.pool.query(sql, params)).rowCount ?? 0;
  }

  /**
   * Runs `work` in one transaction on one connection; rolls back if it throws. The connection has
   * an 'error' listener while it is checked out (the pool's is only there while it is idle), and
   * one that failed is dropped rather than returned to the pool.
   */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.guard(async () => {
      const client = await this.raw.connect();
      let broken: Error | undefined;
      const onError = (err: Error) => {
        broken = err; // the query in flight fails with it too
        this.failed(err);
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (isConnectionError(err)) broken ??= err as Error;
        else await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        throw err;
      } finally {
        client.removeListener('error', onError);
        client.release(broken);
      }
    });
  }

  async migrate(): Promise<number> {
    return this.transaction(async (c) => {
      const q = (text: string, values?: unknown[]) => c.query({ text, values, query_timeout: MIGRATE_TIMEOUT_MS } as pg.QueryConfig);
      await q('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await q('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_us BIGINT NOT NULL)');
      const applied = new Set(((await q('SELECT version FROM schema_migrations')).rows as Row[]).map((r) => Number(r.version)));
      for (const migration of MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        await q(migration.postgres);
        await q('INSERT INTO schema_migrations (version, name, applied_at_us) VALUES ($1, $2, $3)', [
          migration.version,
          migration.name,
          Date.now() * 1000,
        ]);
      }
      const row = (await q('SELECT MAX(version) AS v FROM schema_migrations')).rows[0] as Row;
      return Number(row.v ?? 0);
    });
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.raw.end();
  }

  // ── API keys ──────────────────────────────────────────────────────────────

  async insertApiKey(k: ApiKeyRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO api_keys (id, user_id, name, prefix, hash, created_at_us, revoked_at_us, last_used_at_us)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [k.id, k.userId, k.name, k.prefix, k.hash, k.createdAtUs, k.revokedAtUs, k.lastUsedAtUs],
    );
  }

  async findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null> {
    const row = await this.row('SELECT * FROM api_keys WHERE hash = $1', [hash]);
    return row ? toApiKey(row) : null;
  }

  async listApiKeys(userId?: string): Promise<ApiKeyRecord[]> {
    const rows = userId
      ? await this.rows('SELECT * FROM api_keys WHERE user_id = $1 ORDER BY created_at_us, id', [userId])
      : await this.rows('SELECT * FROM api_keys ORDER BY created_at_us, id');
    return rows.map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, atUs: number): Promise<ApiKeyRecord[]> {
    const rows = await this.rows(
      'UPDATE api_keys SET revoked_at_us = $2 WHERE (id = $1 OR prefix = $1) AND revoked_at_us IS NULL RETURNING *',
      [idOrPrefix, atUs],
    );
    return rows.map(toApiKey);
  }

  async touchApiKey(id: string, atUs: number): Promise<void> {
    await this.pool.query('UPDATE api_keys SET last_used_at_us = $2 WHERE id = $1', [id, atUs]);
  }

  async getApiKey(id: string): Promise<ApiKeyRecord | null> {
    const row = await this.row('SELECT * FROM api_keys WHERE id = $1', [id]);
    return row ? toApiKey(row) : null;
  }

  async listRevokedApiKeys(sinceUs: number): Promise<ApiKeyRecord[]> {
    return (await this.rows('SELECT * FROM api_keys WHERE revoked_at_us >= $1 ORDER BY revoked_at_us, id', [sinceUs])).map(toApiKey);
  }

  async databaseTimeUs(): Promise<number> {
    return Number((await this.row('SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint AS us'))!.us);
  }

  async countApiKeys(): Promise<number> {
    return Number((await this.row('SELECT COUNT(*) AS n FROM api_keys'))!.n);
  }

  // ── Ephemeral keys ────────────────────────────────────────────────────────

  async insertEphemeralKey(k: EphemeralKeyRecord): Promise<void> {
    await this.pool.query(
      'INSERT INTO ephemeral_keys (hash, user_id, api_key_id, session_json, created_at_us, expires_at_us) VALUES ($1, $2, $3, $4, $5, $6)',
      [k.hash, k.userId, k.apiKeyId, JSON.stringify(k.session), k.createdAtUs, k.expiresAtUs],
    );
  }

  async findEphemeralKey(hash: string): Promise<EphemeralKeyRecord | null> {
    const row = await this.row('SELECT * FROM ephemeral_keys WHERE hash = $1', [hash]);
    return row ? toEphemeralKey(row) : null;
  }

  async deleteExpiredEphemeralKeys(nowUs: number): Promise<number> {
    return this.count('DELETE FROM ephemeral_keys WHERE expires_at_us <= $1', [nowUs]);
  }

  // ── Sessions ──────────────────────────────────────────────────────────────

  async insertSession(s: SessionRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO sessions (id, user_id, api_key_id, origin, model, voice, face, driving, instructions, video, media, status,
         end_reason, created_at_us, started_at_us, ended_at_us, duration_seconds, deadline_us, last_seen_us, current_transcript)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
      [
        s.id, s.userId, s.apiKeyId, s.origin, s.model, s.voice, s.face, s.driving, s.instructions, s.video ? 1 : 0, storedMedia(s.media),
        s.status, s.endReason, s.createdAtUs, s.startedAtUs, s.endedAtUs, s.durationSeconds, s.deadlineUs, s.lastSeenUs, s.currentTranscript,
      ],
    );
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const row = await this.row('SELECT * FROM sessions WHERE id = $1', [id]);
    return row ? toSession(row) : null;
  }

  async listSessions(q: SessionListQuery): Promise<SessionRecord[]> {
    const where = ['user_id = $1'];
    const params: unknown[] = [q.userId];
    if (q.status) where.push(`status = $${params.push(q.status)}`);
    if (q.before) where.push(`seq < (SELECT seq FROM sessions WHERE id = $${params.push(q.before)})`);
    const rows = await this.rows(`SELECT * FROM sessions WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.push(q.limit)}`, params);
    return rows.map(toSession);
  }

  async listLiveSessionIdsByApiKey(apiKeyIds: string[]): Promise<string[]> {
    if (apiKeyIds.length === 0) return [];
    const rows = await this.rows(`SELECT id FROM sessions WHERE api_key_id = ANY($1) AND status IN ('pending', 'active') ORDER BY seq`, [apiKeyIds]);
    return rows.map((r) => String(r.id));
  }

  async listSessionsByStatus(statuses: SessionStatus[]): Promise<SessionRecord[]> {
    return (await this.rows('SELECT * FROM sessions WHERE status = ANY($1) ORDER BY seq', [statuses])).map(toSession);
  }

  async countSessionsByStatus(): Promise<Record<SessionStatus, number>> {
    const counts: Record<SessionStatus, number> = { pending: 0, active: 0, ended: 0, failed: 0, cancelled: 0 };
    for (const row of await this.rows('SELECT status, COUNT(*) AS n FROM sessions GROUP BY status')) {
      counts[row.status as SessionStatus] = Number(row.n);
    }
    return counts;
  }

  async markSessionStarted(id: string, startedAtUs: number, deadlineUs: number): Promise<boolean> {
    const changed = await this.count(
      `UPDATE sessions SET status = 'active', started_at_us = $2, deadline_us = $3, last_seen_us = $2 WHERE id = $1 AND status = 'pending'`,
      [id, startedAtUs, deadlineUs],
    );
    return changed === 1;
  }

  async heartbeatSessions(ids: string[], atUs: number): Promise<void> {
    if (ids.length === 0) return;
    await this.pool.query(`UPDATE sessions SET last_seen_us = $2 WHERE id = ANY($1) AND status IN ('pending', 'active')`, [ids, atUs]);
  }

  async endSession(id: string, end: SessionEnd, usage: UsageDraft | null, outbox: OutboxDraft | null): Promise<SessionRecord | null> {
    return this.transaction(async (c) => {
      const row = (await c.query('SELECT * FROM sessions WHERE id = $1 FOR UPDATE', [id])).rows[0] as Row | undefined;
      if (!row || !endApplies(String(row.status) as SessionStatus, end)) return null;
      const { after, usage: record } = sessionEnding(row, end, usage);
      await c.query('UPDATE sessions SET status = $2, end_reason = $3, ended_at_us = $4, duration_seconds = $5 WHERE id = $1', [
        id,
        end.status,
        end.endReason,
        end.endedAtUs,
        after.durationSeconds,
      ]);
      if (record) {
        await insertUsage(c, record);
        if (outbox) {
          await c.query('INSERT INTO webhook_outbox (event_id, usage_id, payload, next_attempt_at_us, created_at_us) VALUES ($1, $2, $3, $4, $5)', [
            outbox.eventId,
            record.id,
            outbox.buildPayload(record),
            outbox.nextAttemptAtUs,
            record.createdAtUs,
          ]);
        }
      }
      return after;
    });
  }

  async setCurrentTranscript(id: string, text: string): Promise<void> {
    await this.pool.query('UPDATE sessions SET current_transcript = $2 WHERE id = $1', [id, text]);
  }

  async appendChatTurn(id: string, turn: ChatTurn, atUs: number): Promise<void> {
    await this.transaction(async (c) => {
      await c.query('SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE', [id]);
      await c.query(
        `INSERT INTO chat_turns (session_id, seq, role, content, created_at_us)
         VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM chat_turns WHERE session_id = $1), $2, $3, $4)`,
        [id, turn.role, turn.content, atUs],
      );
    });
  }

  async listChatTurns(id: string): Promise<ChatTurn[]> {
    const rows = await this.rows('SELECT role, content FROM chat_turns WHERE session_id = $1 ORDER BY seq', [id]);
    return rows.map((r) => ({ role: r.role as ChatTurn['role'], content: String(r.content) }));
  }

  async addUsageCounters(sessionId: string, d: Partial<UsageCounters>): Promise<void> {
    await this.pool.query(
      `UPDATE sessions SET audio_seconds_out = audio_seconds_out + $2, frames_out = frames_out + $3,
         input_tokens = input_tokens + $4, output_tokens = output_tokens + $5 WHERE id = $1`,
      [sessionId, d.audioSecondsOut ?? 0, d.framesOut ?? 0, d.inputTokens ?? 0, d.outputTokens ?? 0],
    );
  }

  async raiseUsageCounters(sessionId: string, t: UsageCounters): Promise<boolean> {
    // Row-locked against endSession's SELECT ... FOR UPDATE: once the end commits, the status test fails.
    return (
      (await this.count(
        `UPDATE sessions SET audio_seconds_out = GREATEST(audio_seconds_out, $2), frames_out = GREATEST(frames_out, $3),
           input_tokens = GREATEST(input_tokens, $4), output_tokens = GREATEST(output_tokens, $5)
         WHERE id = $1 AND status IN ('pending', 'active')`,
        [sessionId, t.audioSecondsOut, t.framesOut, t.inputTokens, t.outputTokens],
      )) === 1
    );
  }

  async getUsageCounters(sessionId: string): Promise<UsageCounters> {
    const row = await this.row('SELECT * FROM sessions WHERE id = $1', [sessionId]);
    return row ? countersOf(row) : { audioSecondsOut: 0, framesOut: 0, inputTokens: 0, outputTokens: 0 };
  }

  // ── Usage ─────────────────────────────────────────────────────────────────

  async listUsage(userId: string, fromUs: number, toUs: number, limit: number): Promise<UsageRecord[]> {
    const rows = await this.rows(
      `SELECT * FROM usage_records WHERE user_id = $1 AND started_at_us >= $2 AND started_at_us < $3
       ORDER BY started_at_us, id LIMIT $4`,
      [userId, fromUs, toUs, limit],
    );
    return rows.map(toUsage);
  }

  async getUsageForSession(sessionId: string): Promise<UsageRecord | null> {
    const row = await this.row('SELECT * FROM usage_records WHERE session_id = $1', [sessionId]);
    return row ? toUsage(row) : null;
  }

  // ── Webhook outbox ────────────────────────────────────────────────────────

  async dueOutboxEntries(nowUs: number, limit: number): Promise<OutboxEntry[]> {
    const rows = await this.rows(
      `SELECT * FROM webhook_outbox WHERE delivered_at_us IS NULL AND dead_at_us IS NULL AND next_attempt_at_us <= $1
       ORDER BY next_attempt_at_us, id LIMIT $2`,
      [nowUs, limit],
    );
    return rows.map(toOutbox);
  }

  async markOutboxDelivered(id: number, atUs: number): Promise<void> {
    await this.pool.query('UPDATE webhook_outbox SET delivered_at_us = $2, attempts = attempts + 1, last_error = NULL WHERE id = $1', [id, atUs]);
  }

  async markOutboxFailed(id: number, error: string, nextAttemptAtUs: number | null, atUs: number): Promise<void> {
    if (nextAttemptAtUs === null) {
      await this.pool.query('UPDATE webhook_outbox SET attempts = attempts + 1, last_error = $2, dead_at_us = $3 WHERE id = $1', [id, error, atUs]);
    } else {
      await this.pool.query('UPDATE webhook_outbox SET attempts = attempts + 1, last_error = $2, next_attempt_at_us = $3 WHERE id = $1', [
        id,
        error,
        nextAttemptAtUs,
      ]);
    }
  }

  async countOutbox(): Promise<{ pending: number; delivered: number; dead: number }> {
    const row = (await this.row(
      `SELECT COUNT(*) FILTER (WHERE delivered_at_us IS NULL AND dead_at_us IS NULL) AS pending,
         COUNT(*) FILTER (WHERE delivered_at_us IS NOT NULL) AS delivered, COUNT(*) FILTER (WHERE dead_at_us IS NOT NULL) AS dead
       FROM webhook_outbox`,
    ))!;
    return { pending: Number(row.pending), delivered: Number(row.delivered), dead: Number(row.dead) };
  }

  async nextOutboxAttemptUs(): Promise<number | null> {
    const row = (await this.row('SELECT MIN(next_attempt_at_us) AS t FROM webhook_outbox WHERE delivered_at_us IS NULL AND dead_at_us IS NULL'))!;
    return row.t === null || row.t === undefined ? null : Number(row.t);
  }

  // ── Assets ────────────────────────────────────────────────────────────────

  async insertAsset(a: AssetRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO assets (id, user_id, kind, name, filename, description, content_type, bytes, sha256, storage_path,
         metadata_json, created_at_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [a.id, a.userId, a.kind, a.name, a.filename, a.description, a.contentType, a.bytes, a.sha256, a.storagePath, JSON.stringify(a.metadata), a.createdAtUs],
    );
  }

  async getAsset(id: string): Promise<AssetRecord | null> {
    const row = await this.row('SELECT * FROM assets WHERE id = $1', [id]);
    return row ? toAsset(row) : null;
  }

  async listAssets(userId: string, kind: AssetKind): Promise<AssetRecord[]> {
    return (await this.rows('SELECT * FROM assets WHERE user_id = $1 AND kind = $2 ORDER BY created_at_us, id', [userId, kind])).map(toAsset);
  }

  async deleteAsset(id: string): Promise<boolean> {
    return (await this.count('DELETE FROM assets WHERE id = $1', [id])) === 1;
  }
}

async function insertUsage(c: pg.PoolClient, u: UsageRecord): Promise<void> {
  await c.query(
    `INSERT INTO usage_records (id, user_id, session_id, model, voice, face, driving, status, end_reason,
       started_at_us, ended_at_us, duration_seconds, audio_seconds_out, frames_out, input_tokens, output_tokens, created_at_us)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
    [
      u.id, u.userId, u.sessionId, u.model, u.voice, u.face, u.driving, u.status, u.endReason, u.startedAtUs,
      u.endedAtUs, u.durationSeconds, u.audioSecondsOut, u.framesOut, u.inputTokens, u.outputTokens, u.createdAtUs,
    ],
  );
}
