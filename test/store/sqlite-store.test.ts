import path from 'node:path';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempDir } from '../../harness/servers/server.js';
import { MEDIA_UNSET } from '../../src/core/media-options.js';

test('migrate() creates the schema once, records each version, and is idempotent', async () => {
  const dir = tempDir();
  const file = path.join(dir, 'a.db');
  const store = new SqliteStore(file);
  const latest = MIGRATIONS.at(-1)!.version;
  assert.is(await store.migrate(), latest);
  assert.is(await store.migrate(), latest);
  await store.close();
  const db = new Database(file, { readonly: true });
  const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as { version: number }[];
  assert.equal(versions.map((v) => v.version), MIGRATIONS.map((m) => m.version));
  assert.is((db.pragma('journal_mode', { simple: true }) as string).toLowerCase(), 'wal');
  db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('migration versions are unique and increasing', () => {
  const versions = MIGRATIONS.map((m) => m.version);
  assert.equal(versions, [...versions].sort((a, b) => a - b));
  assert.is(new Set(versions).size, versions.length);
});

test('ending a session writes the usage record and outbox entry in one transaction, once', async () => {
  const dir = tempDir();
  const store = new SqliteStore(path.join(dir, 'b.db'));
  await store.migrate();
  await store.insertSession({
    id: 'sess_1', userId: 'u', apiKeyId: null, origin: 'rest', model: 'm', voice: 'default', face: null, driving: null,
    instructions: 'i', video: true, media: MEDIA_UNSET,
    status: 'active', endReason: null, createdAtUs: 1_000_000, startedAtUs: 1_000_000, endedAtUs: null,
    durationSeconds: null, deadlineUs: null, lastSeenUs: 1_000_000, currentTranscript: '',
  });
  const outbox = { eventId: 'evt_1', buildPayload: (u: { id: string }) => JSON.stringify({ usage: u.id }), nextAttemptAtUs: 0 };
  const ended = await store.endSession('sess_1', { status: 'ended', endReason: 'client_request', endedAtUs: 3_500_000 }, { id: 'usage_1', createdAtUs: 3_500_000 }, outbox);
  assert.is(ended?.durationSeconds, 2.5);
  const again = await store.endSession('sess_1', { status: 'failed', endReason: 'x', endedAtUs: 9_000_000 }, { id: 'usage_2', createdAtUs: 9_000_000 }, { ...outbox, eventId: 'evt_2' });
  assert.is(again, null, 'a terminal session is not ended again');
  assert.is((await store.getSession('sess_1'))?.status, 'ended');
  assert.is((await store.listUsage('u', 0, Number.MAX_SAFE_INTEGER, 10)).length, 1);
  const due = await store.dueOutboxEntries(1, 10);
  assert.is(due.length, 1);
  assert.equal(JSON.parse(due[0]!.payload), { usage: 'usage_1' });
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});


test('a store made before migration 2 keeps its rows: sessions and ephemeral keys read with apiKeyId null', async () => {
  const dir = tempDir();
  const file = path.join(dir, 'old.db');
  const db = new Database(file);
  db.exec(MIGRATIONS[0]!.sqlite);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_us INTEGER NOT NULL)');
  db.prepare('INSERT INTO schema_migrations VALUES (1, ?, 0)').run(MIGRATIONS[0]!.name);
  db.prepare("INSERT INTO ephemeral_keys VALUES ('h', 'u', '{}', 1, 2)").run();
  db.prepare(
    "INSERT INTO sessions (id, user_id, origin, model, voice, instructions, video, status, created_at_us) VALUES ('sess_old', 'u', 'rest', 'm', 'default', 'i', 1, 'active', 1)",
  ).run();
  db.close();
  const store = new SqliteStore(file);
  assert.is(await store.migrate(), MIGRATIONS.at(-1)!.version);
  assert.is((await store.getSession('sess_old'))?.apiKeyId, null);
  assert.is((await store.findEphemeralKey('h'))?.apiKeyId, null);
  assert.equal(await store.listLiveSessionIdsByApiKey(['key_x']), []);
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test.run();
