/**
 * Store on one SQLite file (better-sqlite3). WAL mode so the keys CLI can write while the server
 * reads; a busy timeout so the two never fail on a momentary lock. Every multi-row change (ending a
 * session with its usage record and outbox entry) is one transaction.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
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

/** How long a writer waits for another process's lock before failing (keys CLI vs server). */
const BUSY_TIMEOUT_MS = 5000;

export class SqliteStore implements Store {
  private readonly db: Database.Database;

  constructor(file: string) {
    if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
  }

  async migrate(): Promise<number> {
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_us INTEGER NOT NULL)',
    );
    const applied = new Set(
      (this.db.prepare('SELECT version FROM schema_migrations').all() as Row[]).map((r) => Number(r.version)),
    );
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      this.db.transaction(() => {
        this.db.exec(migration.sqlite);
        this.db
          .prepare('INSERT INTO schema_migrations (version, name, applied_at_us) VALUES (?, ?, ?)')
          .run(migration.version, migration.name, Date.now() * 1000);
      }).immediate();
    }
    const row = this.db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as Row;
    return Number(row.v ?? 0);
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  // ── API keys ──────────────────────────────────────────────────────────────

  async insertApiKey(k: ApiKeyRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO api_keys (id, user_id, name, prefix, hash, created_at_us, revoked_at_us, last_used_at_us)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(k.id, k.userId, k.name, k.prefix, k.hash, k.createdAtUs, k.revokedAtUs, k.lastUsedAtUs);
  }

  async findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null> {
    const row = this.db.prepare('SELECT * FROM api_keys WHERE hash = ?').get(hash) as Row | undefined;
    return row ? toApiKey(row) : null;
  }

  async listApiKeys(userId?: string): Promise<ApiKeyRecord[]> {
    const rows = userId
      ? this.db.prepare('SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at_us').all(userId)
      : this.db.prepare('SELECT * FROM api_keys ORDER BY created_at_us').all();
    return (rows as Row[]).map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, atUs: number): Promise<ApiKeyRecord[]> {
    return this.db.transaction(() => {
      const rows = this.db
        .prepare('SELECT * FROM api_keys WHERE (id = ? OR prefix = ?) AND revoked_at_us IS NULL')
        .all(idOrPrefix, idOrPrefix) as Row[];
      const stmt = this.db.prepare('UPDATE api_keys SET revoked_at_us = ? WHERE id = ?');
      for (const row of rows) stmt.run(atUs, row.id);
      return rows.map((r) => ({ ...toApiKey(r), revokedAtUs: atUs }));
    }).immediate();
  }

  async touchApiKey(id: string, atUs: number): Promise<void> {
    this.db.prepare('UPDATE api_keys SET last_used_at_us = ? WHERE id = ?').run(atUs, id);
  }

  async getApiKey(id: string): Promise<ApiKeyRecord | null> {
    const row = this.db.prepare('SELECT * FROM api_keys WHERE id = ?').get(id) as Row | undefined;
    return row ? toApiKey(row) : null;
  }

  async listRevokedApiKeys(sinceUs: number): Promise<ApiKeyRecord[]> {
    const rows = this.db.prepare('SELECT * FROM api_keys WHERE revoked_at_us >= ? ORDER BY revoked_at_us').all(sinceUs) as Row[];
    return rows.map(toApiKey);
  }

  async databaseTimeUs(): Promise<number> {
    return Date.now() * 1000;
  }

  async countApiKeys(): Promise<number> {
    return Number((this.db.prepare('SELECT COUNT(*) AS n FROM api_keys').get() as Row).n);
  }

  // ── Ephemeral keys ────────────────────────────────────────────────────────

  async insertEphemeralKey(k: EphemeralKeyRecord): Promise<void> {
    this.db
      .prepare('INSERT INTO ephemeral_keys (hash, user_id, api_key_id, session_json, created_at_us, expires_at_us) VALUES (?, ?, ?, ?, ?, ?)')
      .run(k.hash, k.userId, k.apiKeyId, JSON.stringify(k.session), k.createdAtUs, k.expiresAtUs);
  }

  async findEphemeralKey(hash: string): Promise<EphemeralKeyRecord | null> {
    const row = this.db.prepare('SELECT * FROM ephemeral_keys WHERE hash = ?').get(hash) as Row | undefined;
    return row ? toEphemeralKey(row) : null;
  }

  async deleteExpiredEphemeralKeys(nowUs: number): Promise<number> {
    return this.db.prepare('DELETE FROM ephemeral_keys WHERE expires_at_us <= ?').run(nowUs).changes;
  }

  // ── Sessions ──────────────────────────────────────────────────────────────

  async insertSession(s: SessionRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO sessions (id, user_id, api_key_id, origin, model, voice, face, driving, instructions, video, media, status,
           end_reason, created_at_us, started_at_us, ended_at_us, duration_seconds, deadline_us, last_seen_us, current_transcript)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        s.id, s.userId, s.apiKeyId, s.origin, s.model, s.voice, s.face, s.driving, s.instructions, s.video ? 1 : 0, storedMedia(s.media),
        s.status, s.endReason, s.createdAtUs, s.startedAtUs, s.endedAtUs, s.durationSeconds, s.deadlineUs, s.lastSeenUs, s.currentTranscript,
      );
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const row = this.db.prepare('SELECT * FROM sessions WHERE id = ?').get(id) as Row | undefined;
    return row ? toSession(row) : null;
  }

  async listSessions(q: SessionListQuery): Promise<SessionRecord[]> {
    const where = ['user_id = @userId'];
    if (q.status) where.push('status = @status');
    if (q.before) where.push('rowid < (SELECT rowid FROM sessions WHERE id = @before)');
    const rows = this.db
      .prepare(`SELECT * FROM sessions WHERE ${where.join(' AND ')} ORDER BY rowid DESC LIMIT @limit`)
      .all({ userId: q.userId, status: q.status ?? null, before: q.before ?? null, limit: q.limit }) as Row[];
    return rows.map(toSession);
  }

  async listLiveSessionIdsByApiKey(apiKeyIds: string[]): Promise<string[]> {
    if (apiKeyIds.length === 0) return [];
    const rows = this.db
      .prepare(`SELECT id FROM sessions WHERE api_key_id IN (${apiKeyIds.map(() => '?').join(',')}) AND status IN ('pending', 'active') ORDER BY rowid`)
      .all(...apiKeyIds) as Row[];
    return rows.map((r) => String(r.id));
  }

  async listSessionsByStatus(statuses: SessionStatus[]): Promise<SessionRecord[]> {
    const rows = this.db
      .prepare(`SELECT * FROM sessions WHERE status IN (${statuses.map(() => '?').join(',')}) ORDER BY rowid`)
      .all(...statuses) as Row[];
    return rows.map(toSession);
  }

  async countSessionsByStatus(): Promise<Record<SessionStatus, number>> {
    const counts: Record<SessionStatus, number> = { pending: 0, active: 0, ended: 0, failed: 0, cancelled: 0 };
    for (const row of this.db.prepare('SELECT status, COUNT(*) AS n FROM sessions GROUP BY status').all() as Row[]) {
      counts[row.status as SessionStatus] = Number(row.n);
    }
    return counts;
  }

  async markSessionStarted(id: string, startedAtUs: number, deadlineUs: number): Promise<boolean> {
    return (
      this.db
        .prepare(
          `UPDATE sessions SET status = 'active', started_at_us = ?, deadline_us = ?, last_seen_us = ?
           WHERE id = ? AND status = 'pending'`,
        )
        .run(startedAtUs, deadlineUs, startedAtUs, id).changes === 1
    );
  }

  async heartbeatSessions(ids: string[], atUs: number): Promise<void> {
    const stmt = this.db.prepare(`UPDATE sessions SET last_seen_us = ? WHERE id = ? AND status IN ('pending','active')`);
    this.db.transaction(() => {
      for (const id of ids) stmt.run(atUs, id);
    })();
  }

  async endSession(
    id: string,
    end: SessionEnd,
    usage: UsageDraft | null,
    outbox: OutboxDraft | null,
  ): Promise<SessionRecord | null> {
    return this.db.transaction(() => {
      const row = this.db.prepare('SELECT * FROM sessions WHERE id = ?').get(id) as Row | undefined;
      if (!row || !endApplies(String(row.status) as SessionStatus, end)) return null;
      const { after, usage: record } = sessionEnding(row, end, usage);
      this.db
        .prepare('UPDATE sessions SET status = ?, end_reason = ?, ended_at_us = ?, duration_seconds = ? WHERE id = ?')
        .run(end.status, end.endReason, end.endedAtUs, after.durationSeconds, id);
      if (record) {
        this.insertUsage(record);
        if (outbox) {
          this.db
            .prepare(
              'INSERT INTO webhook_outbox (event_id, usage_id, payload, next_attempt_at_us, created_at_us) VALUES (?, ?, ?, ?, ?)',
            )
            .run(outbox.eventId, record.id, outbox.buildPayload(record), outbox.nextAttemptAtUs, record.createdAtUs);
        }
      }
      return after;
    }).immediate();
  }

  private insertUsage(u: UsageRecord): void {
    this.db
      .prepare(
        `INSERT INTO usage_records (id, user_id, session_id, model, voice, face, driving, status, end_reason,
           started_at_us, ended_at_us, duration_seconds, audio_seconds_out, frames_out, input_tokens, output_tokens,
           created_at_us)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        u.id, u.userId, u.sessionId, u.model, u.voice, u.face, u.driving, u.status, u.endReason, u.startedAtUs,
        u.endedAtUs, u.durationSeconds, u.audioSecondsOut, u.framesOut, u.inputTokens, u.outputTokens, u.createdAtUs,
      );
  }

  async setCurrentTranscript(id: string, text: string): Promise<void> {
    this.db.prepare('UPDATE sessions SET current_transcript = ? WHERE id = ?').run(text, id);
  }

  async appendChatTurn(id: string, turn: ChatTurn, atUs: number): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO chat_turns (session_id, seq, role, content, created_at_us)
         VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM chat_turns WHERE session_id = ?), ?, ?, ?)`,
      )
      .run(id, id, turn.role, turn.content, atUs);
  }

  async listChatTurns(id: string): Promise<ChatTurn[]> {
    const rows = this.db.prepare('SELECT role, content FROM chat_turns WHERE session_id = ? ORDER BY seq').all(id) as Row[];
    return rows.map((r) => ({ role: r.role as ChatTurn['role'], content: String(r.content) }));
  }

  async addUsageCounters(sessionId: string, d: Partial<UsageCounters>): Promise<void> {
    this.db
      .prepare(
        `UPDATE sessions SET audio_seconds_out = audio_seconds_out + ?, frames_out = frames_out + ?,
           input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?`,
      )
      .run(d.audioSecondsOut ?? 0, d.framesOut ?? 0, d.inputTokens ?? 0, d.outputTokens ?? 0, sessionId);
  }

  async raiseUsageCounters(sessionId: string, t: UsageCounters): Promise<boolean> {
    return (
      this.db
        .prepare(
          `UPDATE sessions SET audio_seconds_out = MAX(audio_seconds_out, ?), frames_out = MAX(frames_out, ?),
             input_tokens = MAX(input_tokens, ?), output_tokens = MAX(output_tokens, ?)
           WHERE id = ? AND status IN ('pending','active')`,
        )
        .run(t.audioSecondsOut, t.framesOut, t.inputTokens, t.outputTokens, sessionId).changes === 1
    );
  }

  async getUsageCounters(sessionId: string): Promise<UsageCounters> {
    const row = this.db.prepare('SELECT * FROM sessions WHERE id = ?').get(sessionId) as Row | undefined;
    return row ? countersOf(row) : { audioSecondsOut: 0, framesOut: 0, inputTokens: 0, outputTokens: 0 };
  }

  // ── Usage ─────────────────────────────────────────────────────────────────

  async listUsage(userId: string, fromUs: number, toUs: number, limit: number): Promise<UsageRecord[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM usage_records WHERE user_id = ? AND started_at_us >= ? AND started_at_us < ?
         ORDER BY started_at_us, id LIMIT ?`,
      )
      .all(userId, fromUs, toUs, limit) as Row[];
    return rows.map(toUsage);
  }

  async getUsageForSession(sessionId: string): Promise<UsageRecord | null> {
    const row = this.db.prepare('SELECT * FROM usage_records WHERE session_id = ?').get(sessionId) as Row | undefined;
    return row ? toUsage(row) : null;
  }

  // ── Webhook outbox ────────────────────────────────────────────────────────

  async dueOutboxEntries(nowUs: number, limit: number): Promise<OutboxEntry[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM webhook_outbox WHERE delivered_at_us IS NULL AND dead_at_us IS NULL AND next_attempt_at_us <= ?
         ORDER BY next_attempt_at_us, id LIMIT ?`,
      )
      .all(nowUs, limit) as Row[];
    return rows.map(toOutbox);
  }

  async markOutboxDelivered(id: number, atUs: number): Promise<void> {
    this.db
      .prepare('UPDATE webhook_outbox SET delivered_at_us = ?, attempts = attempts + 1, last_error = NULL WHERE id = ?')
      .run(atUs, id);
  }

  async markOutboxFailed(id: number, error: string, nextAttemptAtUs: number | null, atUs: number): Promise<void> {
    if (nextAttemptAtUs === null) {
      this.db
        .prepare('UPDATE webhook_outbox SET attempts = attempts + 1, last_error = ?, dead_at_us = ? WHERE id = ?')
        .run(error, atUs, id);
    } else {
      this.db
        .prepare('UPDATE webhook_outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at_us = ? WHERE id = ?')
        .run(error, nextAttemptAtUs, id);
    }
  }

  async countOutbox(): Promise<{ pending: number; delivered: number; dead: number }> {
    const row = this.db
      .prepare(
        `SELECT SUM(delivered_at_us IS NULL AND dead_at_us IS NULL) AS pending, SUM(delivered_at_us IS NOT NULL) AS delivered,
           SUM(dead_at_us IS NOT NULL) AS dead FROM webhook_outbox`,
      )
      .get() as Row;
    return { pending: Number(row.pending ?? 0), delivered: Number(row.delivered ?? 0), dead: Number(row.dead ?? 0) };
  }

  async nextOutboxAttemptUs(): Promise<number | null> {
    const row = this.db
      .prepare('SELECT MIN(next_attempt_at_us) AS t FROM webhook_outbox WHERE delivered_at_us IS NULL AND dead_at_us IS NULL')
      .get() as Row;
    return row.t === null || row.t === undefined ? null : Number(row.t);
  }

  // ── Assets ────────────────────────────────────────────────────────────────

  async insertAsset(a: AssetRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO assets (id, user_id, kind, name, filename, description, content_type, bytes, sha256, storage_path,
           metadata_json, created_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        a.id, a.userId, a.kind, a.name, a.filename, a.description, a.contentType, a.bytes, a.sha256, a.storagePath,
        JSON.stringify(a.metadata), a.createdAtUs,
      );
  }

  async getAsset(id: string): Promise<AssetRecord | null> {
    const row = this.db.prepare('SELECT * FROM assets WHERE id = ?').get(id) as Row | undefined;
    return row ? toAsset(row) : null;
  }

  async listAssets(userId: string, kind: AssetKind): Promise<AssetRecord[]> {
    const rows = this.db
      .prepare('SELECT * FROM assets WHERE user_id = ? AND kind = ? ORDER BY created_at_us')
      .all(userId, kind) as Row[];
    return rows.map(toAsset);
  }

  async deleteAsset(id: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM assets WHERE id = ?').run(id).changes === 1;
  }
}
