import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../src/core/clock.js';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, type TestServer } from '../../harness/servers/server.js';

interface Ctx {
  t: TestServer;
  clock: ManualClock;
}
const Auth = suite<Ctx>('authentication and keys', {} as Ctx);

Auth.before.each(async (ctx) => {
  ctx.clock = new ManualClock();
  ctx.t = await startTestServer({ clock: ctx.clock });
});
Auth.after.each(async (ctx) => {
  await ctx.t.close();
});

Auth('API keys have the avs_ prefix and are stored only as hashes', async ({ t }) => {
  assert.match(t.key, /^avs_[0-9A-Za-z]{40}$/);
  const keys = await t.server.services.store.listApiKeys();
  assert.is(keys.length, 1);
  assert.is.not(keys[0]!.hash, t.key);
  assert.match(keys[0]!.hash, /^[0-9a-f]{64}$/);
  assert.ok(t.key.startsWith(keys[0]!.prefix));
  assert.ok(keys[0]!.prefix.length < 20, 'only a short prefix is kept in clear');
});

Auth('a missing, malformed or unknown key is a 401 on every protected route', async ({ t }) => {
  const routes: [string, string][] = [
    ['POST', '/v1/sessions'],
    ['GET', '/v1/sessions/sess_x'],
    ['DELETE', '/v1/sessions/sess_x'],
    ['GET', '/v1/sessions/sess_x/chat'],
    ['POST', '/sessions'],
    ['GET', '/sessions/sess_x'],
    ['POST', '/sessions/sess_x/end'],
    ['POST', '/faces'],
    ['POST', '/voices'],
    ['POST', '/v1/realtime/client_secrets'],
    ['GET', '/v1/usage'],
  ];
  for (const [method, path] of routes) {
    assertError(await t.request(method, path, { key: null }), 401, 'missing_api_key');
    assertError(await t.request(method, path, { key: 'avs_' + 'x'.repeat(40) }), 401, 'invalid_api_key');
    assertError(await t.request(method, path, { key: 'sk-something' }), 401, 'invalid_api_key');
  }
  const malformed = await t.request('GET', '/v1/usage', { key: null, headers: { authorization: 'Basic abc' } });
  assertError(malformed, 401, 'missing_api_key');
});

Auth('the Bearer scheme is case-insensitive', async ({ t }) => {
  const res = await t.request('GET', '/v1/usage', { key: null, headers: { authorization: `bearer ${t.key}` } });
  assert.is(res.status, 200);
});

Auth('public asset lists need no key', async ({ t }) => {
  for (const path of ['/v1/faces', '/v1/voices', '/v1/driving']) {
    assert.is((await t.request('GET', path, { key: null })).status, 200);
  }
});

Auth('a revoked key stops working at once', async ({ t }) => {
  const key = await t.keyFor('carol');
  assert.is((await t.request('GET', '/v1/usage', { key })).status, 200);
  const [record] = await t.server.services.store.listApiKeys('carol');
  await t.server.services.store.revokeApiKey(record!.id, t.server.services.clock.nowUs());
  assertError(await t.request('GET', '/v1/usage', { key }), 401, 'api_key_revoked');
});

Auth('client_secrets returns a superset for rtAV and OpenAI clients, bound to the session given', async ({ t, clock }) => {
  const res = await t.request('POST', '/v1/realtime/client_secrets', {
    json: { session: { type: 'realtime', voice: 'alice', face: 'face1', instructions: 'Hi.' } },
  });
  assert.is(res.status, 200, res.text);
  assert.match(res.body.value, /^ek_[0-9A-Za-z]{40}$/);
  assert.is(res.body.client_secret, res.body.value);
  assert.is(res.body.expires_in, 60);
  assert.is(res.body.expires_at, Math.floor(clock.nowUs() / 1e6) + 60);
  assert.is(res.body.session.type, 'realtime');
  assert.is(res.body.session.object, 'realtime.session');
  assert.is(res.body.session.model, 'gpt-5.2');
  assert.is(res.body.session.voice, 'alice');
  assert.is(res.body.session.face, 'face1');
  assert.is(res.body.session.instructions, 'Hi.');
  assert.equal(res.body.session.audio.output.format, { type: 'audio/pcm', rate: 24000 });

  const principal = await t.server.services.keys.authenticate(res.body.value);
  assert.is(principal.kind, 'ephemeral');
  assert.is(principal.userId, 'default');
  if (principal.kind === 'ephemeral') assert.is(principal.session.voice, 'alice');
});

Auth('an ephemeral key is refused on REST routes and after it expires', async ({ t, clock }) => {
  const res = await t.request('POST', '/v1/realtime/client_secrets', {
    json: { session: { type: 'realtime' }, expires_after: { anchor: 'created_at', seconds: 10 } },
  });
  assert.is(res.body.expires_in, 10);
  const ek = res.body.value as string;
  assertError(await t.request('POST', '/v1/sessions', { key: ek }), 401, 'ephemeral_key_not_allowed');
  assertError(await t.request('GET', '/v1/usage', { key: ek }), 401, 'ephemeral_key_not_allowed');
  assertError(await t.request('POST', '/v1/realtime/client_secrets', { key: ek, json: {} }), 401, 'ephemeral_key_not_allowed');
  // A browser holding only an ephemeral key can still read the public asset lists.
  assert.is((await t.request('GET', '/v1/faces', { key: ek })).status, 200);

  const { keys } = t.server.services;
  clock.advanceMs(9_000);
  assert.is((await keys.authenticate(ek)).kind, 'ephemeral', 'valid before expiry');
  clock.advanceMs(1_000);
  try {
    await keys.authenticate(ek);
    assert.unreachable('an expired ephemeral key must be rejected');
  } catch (err) {
    assert.is((err as { code?: string }).code, 'ephemeral_key_expired');
    assert.is((err as { status?: number }).status, 401);
  }
  assert.is(await keys.sweepExpired(), 1);
});

Auth('client_secrets validates its request', async ({ t }) => {
  const cases: [unknown, string, string][] = [
    [{ session: 'x' }, 'session', 'invalid_type'],
    [{ session: { type: 'conference' } }, 'session.type', 'invalid_value'],
    [{ session: { type: 'transcription', model: 'gpt-realtime' } }, 'session.model', 'unknown_parameter'],
    [{ session: { type: 'transcription', audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 5000 } } } } }, 'session.audio.input.turn_detection.idle_timeout_ms', 'invalid_value'],
    [{ session: { type: 'realtime', voice: 'ghost' } }, 'session.voice', 'unknown_voice'],
    [{ session: { type: 'realtime', face: 'ghost' } }, 'session.face', 'unknown_face'],
    [{ session: { type: 'realtime', output_modalities: ['smell'] } }, 'session.output_modalities', 'invalid_value'],
    [{ expires_after: { seconds: 0 } }, 'expires_after.seconds', 'invalid_value'],
    [{ expires_after: { seconds: 7201 } }, 'expires_after.seconds', 'invalid_value'],
    [{ expires_after: { anchor: 'now', seconds: 30 } }, 'expires_after.anchor', 'invalid_value'],
    [{ expires_after: 5 }, 'expires_after', 'invalid_type'],
  ];
  for (const [json, param, code] of cases) {
    assertError(await t.request('POST', '/v1/realtime/client_secrets', { json }), 400, code, param);
  }
  const noBody = await t.request('POST', '/v1/realtime/client_secrets');
  assert.is(noBody.status, 200, 'the session config is optional');
});

Auth('an OpenAI voice name in audio.output.voice is kept, and the flat voice field agrees with it', async ({ t }) => {
  const res = await t.request('POST', '/v1/realtime/client_secrets', {
    json: { session: { type: 'realtime', audio: { output: { voice: 'marin' } } } },
  });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.session.audio.output.voice, 'marin');
  assert.is(res.body.session.voice, 'marin');
});

Auth.run();

// ── Rate limits ───────────────────────────────────────────────────────────────────────────────

const Limits = suite<{ t: TestServer }>('rate limits', {} as { t: TestServer });
Limits.before.each(async (ctx) => {
  ctx.t = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '60', RATE_LIMIT_BURST: '5' } });
});
Limits.after.each(async (ctx) => {
  await ctx.t.close();
});

Limits('a key past its burst gets 429 with Retry-After; other keys are unaffected', async ({ t }) => {
  const statuses: number[] = [];
  let limited = null;
  for (let i = 0; i < 6; i++) {
    const res = await t.request('GET', '/v1/usage');
    statuses.push(res.status);
    if (res.status === 429) limited = res;
  }
  assert.equal(statuses, [200, 200, 200, 200, 200, 429]);
  assertError(limited!, 429, 'rate_limit_exceeded');
  assert.is(limited!.body.error.type, 'rate_limit_error');
  assert.ok(Number(limited!.headers.get('retry-after')) >= 1);
  assert.is(limited!.headers.get('x-ratelimit-remaining-requests'), '0');
  const other = await t.keyFor('bob');
  assert.is((await t.request('GET', '/v1/usage', { key: other })).status, 200);
});

Limits.run();
