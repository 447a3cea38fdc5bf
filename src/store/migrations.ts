/**
 * Versioned schema migrations, one list for both stores: each version carries its SQLite and its
 * PostgreSQL text, the same tables, columns and indexes in each dialect (PostgreSQL: BIGINT for
 * microsecond times and counters, DOUBLE PRECISION for REAL, BIGSERIAL where SQLite has rowid or
 * AUTOINCREMENT; JSON stays TEXT so both stores map rows the same way, rows.ts, except a session's
 * `media`, JSONB in PostgreSQL, which core/media-options.ts reads in either form). Append only: a
 * released migration is never edited; a change is a new entry with both texts. Each runs in a
 * transaction with its version recorded in schema_migrations, so a crash mid-way leaves the previous
 * version intact (PostgreSQL's DDL is transactional too).
 */

export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sqlite: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at_us INTEGER NOT NULL,
        revoked_at_us INTEGER,
        last_used_at_us INTEGER
      );
      CREATE INDEX api_keys_user ON api_keys(user_id);

      CREATE TABLE ephemeral_keys (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_json TEXT NOT NULL,
        created_at_us INTEGER NOT NULL,
        expires_at_us INTEGER NOT NULL
      );
      CREATE INDEX ephemeral_keys_expiry ON ephemeral_keys(expires_at_us);

      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        model TEXT NOT NULL,
        voice TEXT NOT NULL,
        face TEXT,
        driving TEXT,
        instructions TEXT NOT NULL,
        video INTEGER NOT NULL,
        target_fps INTEGER,
        upsample_factor REAL,
        tts_source TEXT,
        video_codec TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending','active','ended','failed','cancelled')),
        end_reason TEXT,
        created_at_us INTEGER NOT NULL,
        started_at_us INTEGER,
        ended_at_us INTEGER,
        duration_seconds REAL,
        deadline_us INTEGER,
        last_seen_us INTEGER,
        current_transcript TEXT NOT NULL DEFAULT '',
        audio_seconds_out REAL NOT NULL DEFAULT 0,
        frames_out INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_user_created ON sessions(user_id, created_at_us);
      CREATE INDEX sessions_status ON sessions(status);

      CREATE TABLE chat_turns (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at_us INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
      );

      CREATE TABLE usage_records (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL UNIQUE REFERENCES sessions(id),
        model TEXT NOT NULL,
        voice TEXT NOT NULL,
        face TEXT,
        driving TEXT,
        status TEXT NOT NULL,
        end_reason TEXT,
        started_at_us INTEGER NOT NULL,
        ended_at_us INTEGER NOT NULL,
        duration_seconds REAL NOT NULL,
        audio_seconds_out REAL NOT NULL,
        frames_out INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        created_at_us INTEGER NOT NULL
      );
      CREATE INDEX usage_user_started ON usage_records(user_id, started_at_us);

      CREATE TABLE webhook_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE,
        usage_id TEXT NOT NULL REFERENCES usage_records(id),
        payload TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at_us INTEGER NOT NULL,
        last_error TEXT,
        delivered_at_us INTEGER,
        dead_at_us INTEGER,
        created_at_us INTEGER NOT NULL
      );
      CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at_us)
        WHERE delivered_at_us IS NULL AND dead_at_us IS NULL;

      CREATE TABLE assets (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('face','voice','driving')),
        name TEXT NOT NULL,
        filename TEXT NOT NULL,
        description TEXT NOT NULL,
        content_type TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        storage_path TEXT NOT NULL,
        metadata_json TEXT NOT NULL,
        created_at_us INTEGER NOT NULL
      );
      CREATE INDEX assets_user_kind ON assets(user_id, kind, created_at_us);
    `,
    postgres: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at_us BIGINT NOT NULL,
        revoked_at_us BIGINT,
        last_used_at_us BIGINT
      );
      CREATE INDEX api_keys_user ON api_keys(user_id);

      CREATE TABLE ephemeral_keys (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_json TEXT NOT NULL,
        created_at_us BIGINT NOT NULL,
        expires_at_us BIGINT NOT NULL
      );
      CREATE INDEX ephemeral_keys_expiry ON ephemeral_keys(expires_at_us);

      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        seq BIGSERIAL NOT NULL UNIQUE,
        user_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        model TEXT NOT NULL,
        voice TEXT NOT NULL,
        face TEXT,
        driving TEXT,
        instructions TEXT NOT NULL,
        video INTEGER NOT NULL,
        target_fps INTEGER,
        upsample_factor DOUBLE PRECISION,
        tts_source TEXT,
        video_codec TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending','active','ended','failed','cancelled')),
        end_reason TEXT,
        created_at_us BIGINT NOT NULL,
        started_at_us BIGINT,
        ended_at_us BIGINT,
        duration_seconds DOUBLE PRECISION,
        deadline_us BIGINT,
        last_seen_us BIGINT,
        current_transcript TEXT NOT NULL DEFAULT '',
        audio_seconds_out DOUBLE PRECISION NOT NULL DEFAULT 0,
        frames_out BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_user_created ON sessions(user_id, created_at_us);
      CREATE INDEX sessions_status ON sessions(status);

      CREATE TABLE chat_turns (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at_us BIGINT NOT NULL,
        PRIMARY KEY (session_id, seq)
      );

      CREATE TABLE usage_records (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL UNIQUE REFERENCES sessions(id),
        model TEXT NOT NULL,
        voice TEXT NOT NULL,
        face TEXT,
        driving TEXT,
        status TEXT NOT NULL,
        end_reason TEXT,
        started_at_us BIGINT NOT NULL,
        ended_at_us BIGINT NOT NULL,
        duration_seconds DOUBLE PRECISION NOT NULL,
        audio_seconds_out DOUBLE PRECISION NOT NULL,
        frames_out BIGINT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        created_at_us BIGINT NOT NULL
      );
      CREATE INDEX usage_user_started ON usage_records(user_id, started_at_us);

      CREATE TABLE webhook_outbox (
        id BIGSERIAL PRIMARY KEY,
        event_id TEXT NOT NULL UNIQUE,
        usage_id TEXT NOT NULL REFERENCES usage_records(id),
        payload TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at_us BIGINT NOT NULL,
        last_error TEXT,
        delivered_at_us BIGINT,
        dead_at_us BIGINT,
        created_at_us BIGINT NOT NULL
      );
      CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at_us)
        WHERE delivered_at_us IS NULL AND dead_at_us IS NULL;

      CREATE TABLE assets (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('face','voice','driving')),
        name TEXT NOT NULL,
        filename TEXT NOT NULL,
        description TEXT NOT NULL,
        content_type TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        storage_path TEXT NOT NULL,
        metadata_json TEXT NOT NULL,
        created_at_us BIGINT NOT NULL
      );
      CREATE INDEX assets_user_kind ON assets(user_id, kind, created_at_us);
    `,
  },
  {
    version: 2,
    name: 'which API key minted each ephemeral key and created each session (revocation reaches both)',
    sqlite: `
      ALTER TABLE ephemeral_keys ADD COLUMN api_key_id TEXT;
      ALTER TABLE sessions ADD COLUMN api_key_id TEXT;
      CREATE INDEX sessions_api_key_live ON sessions(api_key_id) WHERE status IN ('pending', 'active');
      CREATE INDEX api_keys_revoked ON api_keys(revoked_at_us) WHERE revoked_at_us IS NOT NULL;
    `,
    postgres: `
      ALTER TABLE ephemeral_keys ADD COLUMN api_key_id TEXT;
      ALTER TABLE sessions ADD COLUMN api_key_id TEXT;
      CREATE INDEX sessions_api_key_live ON sessions(api_key_id) WHERE status IN ('pending', 'active');
      CREATE INDEX api_keys_revoked ON api_keys(revoked_at_us) WHERE revoked_at_us IS NOT NULL;
    `,
  },
  {
    version: 3,
    name: "the avatar's output size of each session",
    sqlite: `
      ALTER TABLE sessions ADD COLUMN output_size TEXT;
    `,
    postgres: `
      ALTER TABLE sessions ADD COLUMN output_size TEXT;
    `,
  },
  {
    version: 4,
    name: "a session's media options in one column (JSON under their wire names; null = the default)",
    sqlite: `
      ALTER TABLE sessions ADD COLUMN media TEXT NOT NULL DEFAULT '{}';
      UPDATE sessions SET media = json_object('target_fps', target_fps, 'upsample_factor', upsample_factor, 'tts_source', tts_source,
        'video_codec', video_codec, 'output_size', output_size);
      ALTER TABLE sessions DROP COLUMN target_fps;
      ALTER TABLE sessions DROP COLUMN upsample_factor;
      ALTER TABLE sessions DROP COLUMN tts_source;
      ALTER TABLE sessions DROP COLUMN video_codec;
      ALTER TABLE sessions DROP COLUMN output_size;
    `,
    postgres: `
      ALTER TABLE sessions ADD COLUMN media JSONB NOT NULL DEFAULT '{}';
      UPDATE sessions SET media = jsonb_build_object('target_fps', target_fps, 'upsample_factor', upsample_factor, 'tts_source', tts_source,
        'video_codec', video_codec, 'output_size', output_size);
      ALTER TABLE sessions DROP COLUMN target_fps, DROP COLUMN upsample_factor, DROP COLUMN tts_source, DROP COLUMN video_codec,
        DROP COLUMN output_size;
    `,
  },
];
