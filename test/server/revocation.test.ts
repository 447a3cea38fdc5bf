/**
 * Revoking a key revokes access everywhere, whichever process revoked it; failed authentication
 * and realtime connections are throttled; a shutdown closes realtime sockets with 1001.
 */
import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { POLL_INTERVAL_MS } from '../../src/auth/revocations.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { assertError } from '../helpers/assert-error.js';
import { spawnServer } from '../../harness/servers/process.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { tempDir } from '../../harness/servers/server.js';

/** Revoking as the keys CLI does: from another store handle on the same file (another process's view). */
async function revokeElsewhere(t: RealtimeTestServer, keyId: string): Promise<void> {
  const store = new SqliteStore(path.join(t.dataDir, 'avatar.db'));
  try {
    assert.is((await store.revokeApiKey(keyId, Date.now() * 1000)).length, 1);
  } finally {
    await store.close();
  }
}

const Revoke = suite<{ t: RealtimeTestServer }>('revocation', {} as { t: RealtimeTestServer });
Revoke.before.each(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});
Revoke.after.each(async (ctx) => {
  await ctx.t.close();
});

Revoke('the poll that notices revocations by other processes runs at least twice a second', () => {
  assert.ok(POLL_INTERVAL_MS <= 500, `${POLL_INTERVAL_MS} ms`);
});

Revoke('a revoked key: its open connections close with 4003, its ephemeral keys and REST sessions end, within a second or so', async ({ t }) => {
  const key = await t.keyFor('carol');
  const [record] = await t.server.services.store.listApiKeys('carol');
  const rest = await t.request('POST', '/v1/sessions', { key, json: {} });
  assert.is(rest.status, 200);
  const secret = await t.request('POST', '/v1/realtime/client_secrets', { key, json: {} });
  const direct = await RealtimeTestClient.connect(t.url, { key, query: 'model=gpt-realtime' });
  const viaEphemeral = await RealtimeTestClient.connect(t.url, { key: secret.body.value, query: 'model=gpt-realtime' });
  const attached = await RealtimeTestClient.connect(t.url, { key, query: `session_id=${rest.body.id}` });
  const otherUser = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  for (const c of [direct, viaEphemeral, attached, otherUser]) await c.waitFor('session.created');
  const directSession = direct.ofType('session.created')[0]!.session.id as string;

  const revokedAt = performance.now();
  await revokeElsewhere(t, record!.id);
  for (const c of [direct, viaEphemeral, attached]) {
    assert.is(await c.waitClose(10_000), 4003);
    assert.is(c.ofType('error').at(-1)!.error.code, 'api_key_revoked');
  }
  console.log(`  revocation took effect in ${Math.round(performance.now() - revokedAt)} ms`);
  assert.is(otherUser.closeCode, null, "another user's connection is untouched");

  for (const id of [rest.body.id as string, directSession]) {
    const session = await t.server.services.store.getSession(id);
    assert.ok(session && session.status === 'ended' && session.endReason === 'key_revoked', `${id}: ${session?.status} ${session?.endReason}`);
    assert.ok(await t.server.services.store.getUsageForSession(id), 'usage recorded');
  }
  assertError(await t.request('GET', '/v1/usage', { key }), 401, 'api_key_revoked');
  const again = await RealtimeTestClient.connect(t.url, { key: secret.body.value, query: 'model=gpt-realtime' });
  assert.is((await again.waitFor('error')).error.code, 'api_key_revoked', 'the ephemeral key it minted no longer works');
  assert.is(await again.waitClose(), 4001);
  await otherUser.close();
});

const Throttle = suite<{ t: RealtimeTestServer }>('authentication throttling', {} as { t: RealtimeTestServer });
Throttle.before.each(async (ctx) => {
  // A bucket of 3 that refills once a minute: on a loaded machine, opening three sockets can take
  // longer than a faster refill's interval, and the fourth would find a token again.
  ctx.t = await startRealtimeTestServer({ env: { AUTH_FAILURES_PER_MINUTE: '5', RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_MINUTE: '1' } });
});
Throttle.after.each(async (ctx) => {
  await ctx.t.close();
});

Throttle('past its budget of wrong keys an address gets 429 with Retry-After on REST and 4029 on WebSocket, even with a good key', async ({ t }) => {
  for (let i = 0; i < 8; i++) assertError(await t.request('GET', '/v1/usage', { key: null }), 401, 'missing_api_key'); // no key: not counted
  for (let i = 0; i < 5; i++) assertError(await t.request('GET', '/v1/usage', { key: `avs_${'x'.repeat(40)}` }), 401, 'invalid_api_key');
  const throttled = await t.request('GET', '/v1/usage', { key: `avs_${'y'.repeat(40)}` });
  assertError(throttled, 429, 'too_many_failed_authentications');
  assert.ok(Number(throttled.headers.get('retry-after')) >= 1);
  assertError(await t.request('GET', '/v1/usage'), 429, 'too_many_failed_authentications');
  const ws = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  assert.is((await ws.waitFor('error')).error.code, 'too_many_failed_authentications');
  assert.is(await ws.waitClose(), 4029);
});

Throttle('wrong keys on WebSocket count too, in every form', async ({ t }) => {
  const bad = `avs_${'z'.repeat(40)}`;
  for (let i = 0; i < 5; i++) {
    const ws = await RealtimeTestClient.connect(t.url, i % 2 ? { key: bad } : { protocols: ['realtime', `openai-insecure-api-key.${bad}`] });
    assert.is(await ws.waitClose(), 4001);
  }
  assertError(await t.request('GET', '/v1/usage'), 429, 'too_many_failed_authentications');
});

Throttle('realtime connections take from the key’s request bucket: past it, rate_limit_exceeded and 4029', async ({ t }) => {
  const open: RealtimeTestClient[] = [];
  for (let i = 0; i < 3; i++) {
    const ws = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
    await ws.waitFor('session.created');
    open.push(ws);
  }
  const over = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  assert.is((await over.waitFor('error')).error.code, 'rate_limit_exceeded');
  assert.is(await over.waitClose(), 4029);
  const other = await t.keyFor('dave');
  const fine = await RealtimeTestClient.connect(t.url, { key: other, query: 'model=gpt-realtime' });
  await fine.waitFor('session.created');
  for (const ws of [...open, fine]) await ws.close();
});

const Shutdown = suite('shutdown and realtime sockets');

Shutdown('SIGTERM closes realtime sockets with 1001 and bills their sessions as server_shutdown', async () => {
  const dataDir = tempDir();
  const proc = await spawnServer({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
  const ws = await RealtimeTestClient.connect(proc.url, { key: proc.bootstrapKey, query: 'model=gpt-realtime' });
  const created = await ws.waitFor('session.created');
  proc.child.kill('SIGTERM');
  assert.is(await ws.waitClose(), 1001);
  assert.is(await proc.exited, 0);
  const store = new SqliteStore(path.join(dataDir, 'avatar.db'));
  try {
    const session = await store.getSession(created.session.id);
    assert.is(session?.status, 'failed');
    assert.is(session?.endReason, 'server_shutdown');
    assert.ok(await store.getUsageForSession(created.session.id));
  } finally {
    await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

Revoke.run();
Throttle.run();
Shutdown.run();
