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
 * Pool errors on idle connections (the server restarting) are logged by the caller's handler and
 * the pool reconnects on the next query; a query during an outage fails like any store error.
 */
import pg from 'pg';
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

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /** Called with errors of idle pooled connections (which otherwise would be unhandled). */
  onIdleError?: (err: Error) => void;
}

export class PostgresStore implements Store {
  private readonly pool: pg.Pool;
  private closed = false;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.pool = new pg.Pool({ connectionString: url, max: options.maxConnections ?? 10, connectionTimeoutMillis: 10_000 });
    this.pool.on('error', (err) => options.onIdleError?.(err));
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

  /** Runs `work` in one transaction on one connection; rolls back if it throws. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async migrate(): Promise<number> {
    return this.transaction(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_us BIGINT NOT NULL)');
      const applied = new Set(((await c.query('SELECT version FROM schema_migrations')).rows as Row[]).map((r) => Number(r.version)));
      for (const migration of MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        await c.query(migration.postgres);
        await c.query('INSERT INTO schema_migrations (version, name, applied_at_us) VALUES ($1, $2, $3)', [
          migration.version,
          migration.name,
          Date.now() * 1000,
        ]);
      }
      const row = (await c.query('SELECT MAX(version) AS v FROM schema_migrations')).rows[0] as Row;
      return Number(row.v ?? 0);
    });
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
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
      `INSERT INTO sessions (id, user_id, api_key_id, origin, model, voice, face, driving, instructions, video, target_fps,
         upsample_factor, tts_source, video_codec, output_size, status, end_reason, created_at_us, started_at_us, ended_at_us,
         duration_seconds, deadline_us, last_seen_us, current_transcript)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
      [
        s.id, s.userId, s.apiKeyId, s.origin, s.model, s.voice, s.face, s.driving, s.instructions, s.video ? 1 : 0, s.targetFps,
        s.upsampleFactor, s.ttsSource, s.videoCodec, s.outputSize, s.status, s.endReason, s.createdAtUs, s.startedAtUs,
        s.endedAtUs, s.durationSeconds, s.deadlineUs, s.lastSeenUs, s.currentTranscript,
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
