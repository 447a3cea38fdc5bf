/**
 * The Store contract, run against both stores: SQLite on a temporary file and a real PostgreSQL
 * server (Debian's, started in a temporary directory for this file and stopped at its end). Every
 * method is exercised with the same records and must answer the same; the concurrency cases
 * (migrating and ending a session from several stores at once) are the ones fleet nodes meet.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MEDIA_UNSET } from '../../src/core/media-options.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { openStore } from '../../src/store/open-store.js';
import type { AssetRecord, OutboxDraft, SessionRecord, Store } from '../../src/store/store.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { tempDir } from '../../harness/servers/server.js';

/** A place for one test's database; `open()` may be called several times for several connections to it; `exec` runs SQL on it directly. */
interface Backend {
  name: string;
  dialect: 'sqlite' | 'postgres';
  fresh(): Promise<{ open(): Store; exec(sql: string): Promise<void>; cleanup(): void }>;
  stop(): Promise<void>;
}

function sqliteBackend(): Backend {
  const dirs: string[] = [];
  return {
    name: 'SQLite',
    dialect: 'sqlite',
    async fresh() {
      const dir = tempDir();
      dirs.push(dir);
      const file = path.join(dir, 'store.db');
      const exec = async (sql: string) => {
        const db = new Database(file);
        try {
          db.exec(sql);
        } finally {
          db.close();
        }
      };
      return { open: () => openStore(`sqlite:${file}`), exec, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
    },
    async stop() {
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

let server: TestPostgres | null = null;
function postgresBackend(): Backend {
  return {
    name: 'PostgreSQL',
    dialect: 'postgres',
    async fresh() {
      server ??= await startPostgres();
      const url = await server.createDatabase();
      const exec = async (sql: string) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          await client.query(sql);
        } finally {
          await client.end();
        }
      };
      return { open: () => openStore(url), exec, cleanup: () => {} };
    },
    async stop() {
      await server?.stop();
      server = null;
    },
  };
}

const T0 = 1_700_000_000_000_000;

function session(id: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id, userId: 'u1', apiKeyId: 'key_a', origin: 'rest', model: 'gpt-5.2', voice: 'default', face: 'face_1', driving: null,
    instructions: 'Be brief.', video: true, media: { ...MEDIA_UNSET, targetFps: 25, upsampleFactor: 1.5, videoCodec: 'h264', outputSize: '720x720' },
    status: 'pending', endReason: null, createdAtUs: T0, startedAtUs: null, endedAtUs: null, durationSeconds: null, deadlineUs: null,
    lastSeenUs: null, currentTranscript: '', ...over,
  };
}

const outbox = (eventId: string, nextAttemptAtUs = T0): OutboxDraft => ({
  eventId,
  buildPayload: (u) => JSON.stringify({ usage: u.id, seconds: u.durationSeconds }),
  nextAttemptAtUs,
});

function contract(backend: Backend): void {
  interface Ctx {
    store: Store;
    db: { open(): Store; cleanup(): void };
    extra: Store[];
  }
  const s = suite<Ctx>(`Store contract: ${backend.name}`, {} as Ctx);
  s.before.each(async (ctx) => {
    ctx.db = await backend.fresh();
    ctx.store = ctx.db.open();
    ctx.extra = [];
    await ctx.store.migrate();
  });
  s.after.each(async (ctx) => {
    for (const store of [ctx.store, ...ctx.extra]) await store.close();
    ctx.db.cleanup();
  });
  s.after(() => backend.stop());

  s('migrate() is idempotent and returns the latest version; ping() answers', async ({ store }) => {
    assert.is(await store.migrate(), MIGRATIONS.at(-1)!.version);
    await store.ping();
  });

  s('stores migrating the same database at once apply each migration once', async (ctx) => {
    const fresh = await backend.fresh();
    const stores = [fresh.open(), fresh.open(), fresh.open()];
    ctx.extra.push(...stores);
    const versions = await Promise.all(stores.map((st) => st.migrate()));
    assert.equal(versions, stores.map(() => MIGRATIONS.at(-1)!.version));
    assert.is(await stores[0]!.countApiKeys(), 0);
  });

  s('migration 4 moves an older database\'s media columns into one `media` value: chosen options kept, NULLs still the default', async (ctx) => {
    const old = await backend.fresh();
    const before4 = MIGRATIONS.filter((m) => m.version < 4);
    const oldRow = (id: string, media: string) =>
      `INSERT INTO sessions (id, user_id, origin, model, voice, instructions, video, status, created_at_us, target_fps, upsample_factor, tts_source,
         video_codec, output_size) VALUES ('${id}', 'u1', 'rest', 'm', 'default', 'i', 1, 'ended', 1, ${media});`;
    await old.exec(
      [
        ...before4.map((m) => m[backend.dialect]),
        'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_us BIGINT NOT NULL);',
        ...before4.map((m) => `INSERT INTO schema_migrations VALUES (${m.version}, 'v${m.version}', 0);`),
        oldRow('sess_chosen', "30, 1.5, 'flite', 'vp8', '1280x720'"),
        oldRow('sess_whole', "12, 2, NULL, 'h264', NULL"),
        oldRow('sess_defaults', 'NULL, NULL, NULL, NULL, NULL'),
      ].join('\n'),
    );
    const store = old.open();
    ctx.extra.push(store);
    assert.is(await store.migrate(), MIGRATIONS.at(-1)!.version);
    const chosen = { targetFps: 30, upsampleFactor: 1.5, ttsSource: 'flite', videoCodec: 'vp8', outputSize: '1280x720' } as const;
    assert.equal((await store.getSession('sess_chosen'))!.media, { ...MEDIA_UNSET, ...chosen });
    assert.equal((await store.getSession('sess_whole'))!.media, { ...MEDIA_UNSET, targetFps: 12, upsampleFactor: 2, videoCodec: 'h264' });
    assert.equal((await store.getSession('sess_defaults'))!.media, MEDIA_UNSET);
    for (const column of ['target_fps', 'upsample_factor', 'tts_source', 'video_codec', 'output_size']) {
      await old.exec(`SELECT ${column} FROM sessions`).then(
        () => assert.unreachable(`the old column ${column} is still there`),
        (err: Error) => assert.match(err.message, column),
      );
    }
    await old.exec('SELECT media FROM sessions'); // the known-good case of the check above
  });

  s('API keys: insert, find, list, touch, revoke by id or prefix once, revoked since', async ({ store }) => {
    const key = (id: string, userId: string, at: number) => ({ id, userId, name: `n-${id}`, prefix: `avs_${id}`, hash: `h-${id}`, createdAtUs: at, revokedAtUs: null, lastUsedAtUs: null });
    await store.insertApiKey(key('k1', 'u1', T0));
    await store.insertApiKey(key('k2', 'u2', T0 + 1));
    await store.insertApiKey(key('k3', 'u1', T0 + 2));
    assert.equal(await store.findApiKeyByHash('h-k2'), key('k2', 'u2', T0 + 1));
    assert.is(await store.findApiKeyByHash('nope'), null);
    assert.equal((await store.listApiKeys('u1')).map((k) => k.id), ['k1', 'k3']);
    assert.equal((await store.listApiKeys()).map((k) => k.id), ['k1', 'k2', 'k3']);
    assert.is(await store.countApiKeys(), 3);
    await store.touchApiKey('k1', T0 + 50);
    assert.is((await store.getApiKey('k1'))!.lastUsedAtUs, T0 + 50);
    assert.is(await store.getApiKey('nope'), null);
    const revoked = await store.revokeApiKey('avs_k1', T0 + 100);
    assert.equal(revoked.map((k) => [k.id, k.revokedAtUs]), [['k1', T0 + 100]]);
    assert.equal(await store.revokeApiKey('k1', T0 + 200), [], 'a revoked key is not revoked again');
    await store.revokeApiKey('k3', T0 + 300);
    assert.equal((await store.listRevokedApiKeys(T0 + 150)).map((k) => k.id), ['k3']);
    assert.equal((await store.listRevokedApiKeys(0)).map((k) => k.id), ['k1', 'k3']);
  });

  s('ephemeral keys: the bound session round-trips; expired ones are deleted', async ({ store }) => {
    const config = { type: 'realtime', audio: { output: { voice: 'marin' } }, instructions: 'x' };
    await store.insertEphemeralKey({ hash: 'e1', userId: 'u1', apiKeyId: 'key_a', session: config, createdAtUs: T0, expiresAtUs: T0 + 10 });
    await store.insertEphemeralKey({ hash: 'e2', userId: 'u1', apiKeyId: null, session: {}, createdAtUs: T0, expiresAtUs: T0 + 1000 });
    assert.equal(await store.findEphemeralKey('e1'), { hash: 'e1', userId: 'u1', apiKeyId: 'key_a', session: config, createdAtUs: T0, expiresAtUs: T0 + 10 });
    assert.is(await store.deleteExpiredEphemeralKeys(T0 + 10), 1);
    assert.is(await store.findEphemeralKey('e1'), null);
    assert.is((await store.findEphemeralKey('e2'))!.apiKeyId, null);
  });

  s('sessions: every field round-trips; lists newest first with status filter and cursor; counts', async ({ store }) => {
    const first = session('sess_1');
    await store.insertSession(first);
    await store.insertSession(session('sess_2', { status: 'active', startedAtUs: T0, face: null, video: false, media: MEDIA_UNSET, apiKeyId: null }));
    await store.insertSession(session('sess_3', { userId: 'u2' }));
    await store.insertSession(session('sess_4', { status: 'ended', endReason: 'client_request' }));
    assert.equal(await store.getSession('sess_1'), first);
    const second = (await store.getSession('sess_2'))!;
    assert.equal([second.face, second.video, second.media, second.apiKeyId], [null, false, MEDIA_UNSET, null]);
    assert.is(await store.getSession('nope'), null);
    assert.equal((await store.listSessions({ userId: 'u1', limit: 10 })).map((x) => x.id), ['sess_4', 'sess_2', 'sess_1']);
    assert.equal((await store.listSessions({ userId: 'u1', limit: 1, before: 'sess_4' })).map((x) => x.id), ['sess_2']);
    assert.equal((await store.listSessions({ userId: 'u1', limit: 10, status: 'pending' })).map((x) => x.id), ['sess_1']);
    assert.equal((await store.listSessionsByStatus(['pending', 'active'])).map((x) => x.id), ['sess_1', 'sess_2', 'sess_3']);
    assert.equal(await store.listLiveSessionIdsByApiKey(['key_a']), ['sess_1', 'sess_3']);
    assert.equal(await store.listLiveSessionIdsByApiKey([]), []);
    assert.equal(await store.countSessionsByStatus(), { pending: 2, active: 1, ended: 1, failed: 0, cancelled: 0 });
  });

  s('sessions: start once, heartbeat only live ones, transcript, chat turns in order, usage counters add up', async ({ store }) => {
    await store.insertSession(session('sess_1'));
    await store.insertSession(session('sess_2', { status: 'ended' }));
    assert.ok(await store.markSessionStarted('sess_1', T0 + 1_000_000, T0 + 61_000_000));
    assert.not.ok(await store.markSessionStarted('sess_1', T0 + 2_000_000, T0 + 62_000_000), 'an active session is not started again');
    const started = (await store.getSession('sess_1'))!;
    assert.equal([started.status, started.startedAtUs, started.deadlineUs, started.lastSeenUs], ['active', T0 + 1_000_000, T0 + 61_000_000, T0 + 1_000_000]);
    await store.heartbeatSessions(['sess_1', 'sess_2'], T0 + 5_000_000);
    await store.heartbeatSessions([], T0 + 6_000_000);
    assert.is((await store.getSession('sess_1'))!.lastSeenUs, T0 + 5_000_000);
    assert.is((await store.getSession('sess_2'))!.lastSeenUs, null, 'an ended session is not heartbeaten');
    await store.setCurrentTranscript('sess_1', 'hello there');
    assert.is((await store.getSession('sess_1'))!.currentTranscript, 'hello there');
    for (const i of [0, 1, 2, 3]) await store.appendChatTurn('sess_1', { role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` }, T0 + i);
    assert.equal((await store.listChatTurns('sess_1')).map((t) => `${t.role}:${t.content}`), ['user:turn 0', 'assistant:turn 1', 'user:turn 2', 'assistant:turn 3']);
    await store.addUsageCounters('sess_1', { audioSecondsOut: 1.25, framesOut: 30 });
    await store.addUsageCounters('sess_1', { audioSecondsOut: 0.5, inputTokens: 12, outputTokens: 7 });
    assert.equal(await store.getUsageCounters('sess_1'), { audioSecondsOut: 1.75, framesOut: 30, inputTokens: 12, outputTokens: 7 });
    assert.equal(await store.getUsageCounters('nope'), { audioSecondsOut: 0, framesOut: 0, inputTokens: 0, outputTokens: 0 });
  });

  s('turns appended at once to one session are all kept, numbered in order', async ({ store }) => {
    await store.insertSession(session('sess_1'));
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.appendChatTurn('sess_1', { role: 'user', content: `t${i}` }, T0 + i)));
    const turns = await store.listChatTurns('sess_1');
    assert.equal(turns.map((t) => t.content).sort(), Array.from({ length: 8 }, (_, i) => `t${i}`));
  });

  s('ending: a started session gets its usage record and outbox entry once; a pending one none; unknown is null', async ({ store }) => {
    await store.insertSession(session('sess_1', { status: 'active', startedAtUs: T0 }));
    await store.insertSession(session('sess_2'));
    await store.addUsageCounters('sess_1', { audioSecondsOut: 2, framesOut: 50, inputTokens: 3, outputTokens: 4 });
    const ended = await store.endSession('sess_1', { status: 'ended', endReason: 'client_request', endedAtUs: T0 + 2_500_000 }, { id: 'usage_1', createdAtUs: T0 + 2_500_000 }, outbox('evt_1'));
    assert.equal([ended!.status, ended!.endReason, ended!.endedAtUs, ended!.durationSeconds], ['ended', 'client_request', T0 + 2_500_000, 2.5]);
    assert.equal(await store.getSession('sess_1'), ended);
    assert.is(await store.endSession('sess_1', { status: 'failed', endReason: 'x', endedAtUs: T0 + 9_000_000 }, { id: 'usage_2', createdAtUs: T0 }, outbox('evt_2')), null);
    const usage = (await store.getUsageForSession('sess_1'))!;
    assert.equal(usage, {
      id: 'usage_1', userId: 'u1', sessionId: 'sess_1', model: 'gpt-5.2', voice: 'default', face: 'face_1', driving: null, status: 'ended',
      endReason: 'client_request', startedAtUs: T0, endedAtUs: T0 + 2_500_000, durationSeconds: 2.5, audioSecondsOut: 2, framesOut: 50,
      inputTokens: 3, outputTokens: 4, createdAtUs: T0 + 2_500_000,
    });
    const pending = await store.endSession('sess_2', { status: 'cancelled', endReason: 'pending_timeout', endedAtUs: T0 + 1 }, { id: 'usage_3', createdAtUs: T0 }, outbox('evt_3'));
    assert.equal([pending!.status, pending!.durationSeconds], ['cancelled', 0]);
    assert.is(await store.getUsageForSession('sess_2'), null, 'a session that never started bills nothing');
    assert.is(await store.endSession('nope', { status: 'ended', endReason: 'x', endedAtUs: T0 }, null, null), null);
    assert.equal((await store.dueOutboxEntries(T0, 10)).map((e) => [e.eventId, e.usageId, JSON.parse(e.payload)]), [['evt_1', 'usage_1', { usage: 'usage_1', seconds: 2.5 }]]);
  });

  s('an end limited to pending sessions leaves a started one alone (a start timeout racing the start)', async ({ store }) => {
    await store.insertSession(session('sess_1'));
    assert.ok(await store.markSessionStarted('sess_1', T0 + 1, T0 + 2));
    const timeout = { status: 'cancelled', endReason: 'start_timeout', endedAtUs: T0 + 3, onlyFrom: ['pending'] } as const;
    assert.is(await store.endSession('sess_1', { ...timeout, onlyFrom: [...timeout.onlyFrom] }, { id: 'usage_1', createdAtUs: T0 }, null), null);
    assert.is((await store.getSession('sess_1'))!.status, 'active');
    await store.insertSession(session('sess_2'));
    assert.is((await store.endSession('sess_2', { ...timeout, onlyFrom: [...timeout.onlyFrom] }, null, null))!.status, 'cancelled');
  });

  s('ending the same session from several stores at once: exactly one ends it, with one usage record', async (ctx) => {
    const stores = [ctx.db.open(), ctx.db.open(), ctx.db.open()];
    ctx.extra.push(...stores);
    await ctx.store.insertSession(session('sess_1', { status: 'active', startedAtUs: T0 }));
    const results = await Promise.all(
      stores.map((st, i) => st.endSession('sess_1', { status: 'failed', endReason: `node_${i}`, endedAtUs: T0 + 1_000_000 * (i + 1) }, { id: `usage_${i}`, createdAtUs: T0 }, outbox(`evt_${i}`))),
    );
    const winners = results.filter((r) => r !== null);
    assert.is(winners.length, 1);
    assert.is((await ctx.store.getUsageForSession('sess_1'))!.endReason, winners[0]!.endReason);
    assert.is((await ctx.store.listUsage('u1', 0, Number.MAX_SAFE_INTEGER, 10)).length, 1);
    assert.is((await ctx.store.countOutbox()).pending, 1);
  });

  s('running usage totals: raised per counter, never lowered, idempotent, refused once the session has ended', async ({ store }) => {
    await store.insertSession(session('sess_1', { status: 'active', startedAtUs: T0 }));
    const totals = { audioSecondsOut: 1.5, framesOut: 40, inputTokens: 0, outputTokens: 0 };
    assert.ok(await store.raiseUsageCounters('sess_1', totals));
    assert.ok(await store.raiseUsageCounters('sess_1', totals), 'the same totals again (a retried write) change nothing');
    assert.equal(await store.getUsageCounters('sess_1'), totals);
    // A stale write (an earlier snapshot landing late) lowers nothing; each counter is raised on its own.
    assert.ok(await store.raiseUsageCounters('sess_1', { audioSecondsOut: 0.25, framesOut: 60, inputTokens: 9, outputTokens: 4 }));
    assert.equal(await store.getUsageCounters('sess_1'), { audioSecondsOut: 1.5, framesOut: 60, inputTokens: 9, outputTokens: 4 });
    await store.endSession('sess_1', { status: 'failed', endReason: 'worker_lost', endedAtUs: T0 + 3_000_000 }, { id: 'usage_1', createdAtUs: T0 }, null);
    assert.not.ok(await store.raiseUsageCounters('sess_1', { audioSecondsOut: 9, framesOut: 900, inputTokens: 90, outputTokens: 90 }), 'an ended session is final');
    const record = (await store.getUsageForSession('sess_1'))!;
    assert.equal([record.audioSecondsOut, record.framesOut, record.inputTokens, record.outputTokens], [1.5, 60, 9, 4]);
    assert.equal(await store.getUsageCounters('sess_1'), { audioSecondsOut: 1.5, framesOut: 60, inputTokens: 9, outputTokens: 4 });
    assert.not.ok(await store.raiseUsageCounters('nope', totals));
  });

  s('a running total written while another store ends the session lands before the end or not at all', async (ctx) => {
    const other = ctx.db.open();
    ctx.extra.push(other);
    for (let i = 0; i < 10; i++) {
      const id = `sess_${i}`;
      await ctx.store.insertSession(session(id, { status: 'active', startedAtUs: T0 }));
      const [raised] = await Promise.all([
        ctx.store.raiseUsageCounters(id, { audioSecondsOut: 2, framesOut: 50, inputTokens: 1, outputTokens: 1 }),
        other.endSession(id, { status: 'ended', endReason: 'client_request', endedAtUs: T0 + 1_000_000 }, { id: `usage_${i}`, createdAtUs: T0 }, null),
      ]);
      const record = (await ctx.store.getUsageForSession(id))!;
      assert.is(record.audioSecondsOut, raised ? 2 : 0, `the record holds the total exactly when the write was accepted (${id})`);
    }
  });

  s('usage: listed by start time within the range, limited', async ({ store }) => {
    for (let i = 0; i < 4; i++) {
      await store.insertSession(session(`sess_${i}`, { status: 'active', startedAtUs: T0 + i * 1_000_000 }));
      await store.endSession(`sess_${i}`, { status: 'ended', endReason: 'client_request', endedAtUs: T0 + 10_000_000 }, { id: `usage_${i}`, createdAtUs: T0 }, null);
    }
    assert.equal((await store.listUsage('u1', T0 + 1_000_000, T0 + 3_000_000, 10)).map((u) => u.id), ['usage_1', 'usage_2']);
    assert.equal((await store.listUsage('u1', 0, Number.MAX_SAFE_INTEGER, 3)).map((u) => u.id), ['usage_0', 'usage_1', 'usage_2']);
    assert.equal(await store.listUsage('u2', 0, Number.MAX_SAFE_INTEGER, 10), []);
  });

  s('outbox: due in order, delivered, retried, dead; counts and the next attempt', async ({ store }) => {
    for (let i = 0; i < 3; i++) {
      await store.insertSession(session(`sess_${i}`, { status: 'active', startedAtUs: T0 }));
      await store.endSession(`sess_${i}`, { status: 'ended', endReason: 'r', endedAtUs: T0 + 1 }, { id: `usage_${i}`, createdAtUs: T0 }, outbox(`evt_${i}`, T0 + 10 - i));
    }
    assert.is(await store.nextOutboxAttemptUs(), T0 + 8);
    const due = await store.dueOutboxEntries(T0 + 10, 10);
    assert.equal(due.map((e) => e.eventId), ['evt_2', 'evt_1', 'evt_0']);
    assert.equal(due.map((e) => e.attempts), [0, 0, 0]);
    assert.equal((await store.dueOutboxEntries(T0 + 9, 1)).map((e) => e.eventId), ['evt_2']);
    await store.markOutboxDelivered(due[0]!.id, T0 + 20);
    await store.markOutboxFailed(due[1]!.id, 'HTTP 500', T0 + 100, T0 + 20);
    await store.markOutboxFailed(due[2]!.id, 'HTTP 410', null, T0 + 20);
    assert.equal(await store.countOutbox(), { pending: 1, delivered: 1, dead: 1 });
    assert.is(await store.nextOutboxAttemptUs(), T0 + 100);
    const retry = await store.dueOutboxEntries(T0 + 100, 10);
    assert.equal(retry.map((e) => [e.eventId, e.attempts, e.lastError]), [['evt_1', 1, 'HTTP 500']]);
    await store.markOutboxDelivered(retry[0]!.id, T0 + 101);
    assert.equal(await store.countOutbox(), { pending: 0, delivered: 2, dead: 1 });
    assert.is(await store.nextOutboxAttemptUs(), null);
  });

  s('assets: insert, get with metadata, list by user and kind, delete once', async ({ store }) => {
    const asset = (id: string, kind: AssetRecord['kind'], at: number): AssetRecord => ({
      id, userId: 'u1', kind, name: `n-${id}`, filename: `${id}.png`, description: 'd', contentType: 'image/png', bytes: 12_345_678_901,
      sha256: 'ab'.repeat(32), storagePath: `assets/${id}`, metadata: { width: 512, height: 640, crop: { x: 1, y: 2 } }, createdAtUs: at,
    });
    await store.insertAsset(asset('face_1', 'face', T0));
    await store.insertAsset(asset('face_2', 'face', T0 + 1));
    await store.insertAsset(asset('voice_1', 'voice', T0 + 2));
    assert.equal(await store.getAsset('face_1'), asset('face_1', 'face', T0));
    assert.equal((await store.listAssets('u1', 'face')).map((a) => a.id), ['face_1', 'face_2']);
    assert.equal(await store.listAssets('u2', 'face'), []);
    assert.ok(await store.deleteAsset('face_1'));
    assert.not.ok(await store.deleteAsset('face_1'));
    assert.is(await store.getAsset('face_1'), null);
  });

  s.run();
}

contract(sqliteBackend());
contract(postgresBackend());
