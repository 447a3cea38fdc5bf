import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, type TestServer } from '../../harness/servers/server.js';
import { BAD_SESSION_FIELDS as BAD_FIELDS } from './session-fields.js';

const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/;
const SESSION_FIELDS = [
  'created_at', 'duration_seconds', 'ended_at', 'id', 'instructions', 'model', 'started_at', 'status', 'user_id', 'voice',
];

const Sessions = suite<{ t: TestServer }>('sessions (current form)', {} as { t: TestServer });

Sessions.before.each(async (ctx) => {
  ctx.t = await startTestServer();
});
Sessions.after.each(async (ctx) => {
  await ctx.t.close();
});

Sessions('POST /v1/sessions with no body returns an active session with the spec defaults', async ({ t }) => {
  const res = await t.request('POST', '/v1/sessions');
  assert.is(res.status, 200, res.text);
  assert.equal(Object.keys(res.body).sort(), SESSION_FIELDS);
  assert.match(res.body.id, /^sess_[0-9A-Za-z]{24}$/);
  assert.is(res.body.user_id, 'default');
  assert.is(res.body.model, 'gpt-5.2');
  assert.is(res.body.voice, 'default');
  assert.is(res.body.instructions, 'You are a helpful assistant.');
  assert.is(res.body.status, 'active');
  assert.match(res.body.created_at, TIMESTAMP_RE);
  assert.match(res.body.started_at, TIMESTAMP_RE);
  assert.is(res.body.ended_at, null);
  assert.is(res.body.duration_seconds, null);
});

Sessions('POST /v1/sessions stores every field it is given and validates its type', async ({ t }) => {
  const res = await t.request('POST', '/v1/sessions', {
    json: {
      model: 'my-model',
      voice: 'alice',
      face: 'face1',
      driving: 'idle',
      instructions: 'Be brief.',
      target_fps: 30,
      upsample_factor: 2,
      tts_source: 'flite',
      video_codec: 'VP8',
      output_size: '1280x720',
    },
  });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.model, 'my-model');
  assert.is(res.body.voice, 'alice');
  assert.is(res.body.instructions, 'Be brief.');
  const stored = await t.server.services.store.getSession(res.body.id);
  assert.ok(stored);
  assert.is(stored.face, 'face1');
  assert.is(stored.driving, 'idle');
  assert.is(stored.media.targetFps, 30);
  assert.is(stored.media.upsampleFactor, 2);
  assert.is(stored.media.ttsSource, 'flite');
  assert.is(stored.media.videoCodec, 'vp8');
  assert.is(stored.media.outputSize, '1280x720');
});

for (const [field, value, code] of BAD_FIELDS) {
  Sessions(`POST /v1/sessions answers 400 ${code} naming '${field}' for ${JSON.stringify(value)}`, async ({ t }) => {
    const res = await t.request('POST', '/v1/sessions', { json: { [field]: value } });
    assertError(res, 400, code, field);
    assert.is((await t.server.services.pool.usage()).used, 0, 'a rejected request must not hold a worker slot');
  });
}

Sessions('numeric strings are accepted for target_fps and upsample_factor', async ({ t }) => {
  const res = await t.request('POST', '/v1/sessions', { json: { target_fps: '25', upsample_factor: '1.5' } });
  assert.is(res.status, 200, res.text);
  const stored = await t.server.services.store.getSession(res.body.id);
  assert.is(stored?.media.targetFps, 25);
  assert.is(stored?.media.upsampleFactor, 1.5);
});

Sessions('null is absent, enums are any case and trimmed, unknown fields are ignored', async ({ t }) => {
  const res = await t.request('POST', '/v1/sessions', { json: { target_fps: null, face: null, video_codec: '  VP8 ', output_size: '1280X720', tts_source: 'Flite', extra: [1] } });
  assert.is(res.status, 200, res.text);
  const stored = await t.server.services.store.getSession(res.body.id);
  assert.is(stored?.media.targetFps, null);
  assert.is(stored?.face, null);
  assert.is(stored?.media.videoCodec, 'vp8');
  assert.is(stored?.media.outputSize, '1280x720');
  assert.is(stored?.media.ttsSource, 'flite');
  assertError(await t.request('POST', '/v1/sessions', { json: { voice: '   ' } }), 400, 'invalid_value', 'voice');
});

Sessions('a JSON body that is not an object is a 400', async ({ t }) => {
  assertError(await t.request('POST', '/v1/sessions', { json: [1, 2] }), 400, 'invalid_request_body');
  assertError(await t.request('POST', '/v1/sessions', { json: 'text' }), 400, 'invalid_request_body');
});

Sessions('GET /v1/sessions/{id} returns the same object as create', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions', { json: { voice: 'anthony' } });
  const got = await t.request('GET', `/v1/sessions/${created.body.id}`);
  assert.is(got.status, 200);
  assert.equal(got.body, created.body);
});

Sessions('DELETE /v1/sessions/{id} ends the session, frees its worker, and is idempotent', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions');
  assert.is((await t.server.services.pool.usage()).used, 1);
  const ended = await t.request('DELETE', `/v1/sessions/${created.body.id}`);
  assert.is(ended.status, 200, ended.text);
  assert.is(ended.body.status, 'ended');
  assert.match(ended.body.ended_at, TIMESTAMP_RE);
  assert.type(ended.body.duration_seconds, 'number');
  assert.ok(ended.body.duration_seconds >= 0);
  assert.is(ended.body.created_at, created.body.created_at);
  assert.is((await t.server.services.pool.usage()).used, 0);

  const again = await t.request('DELETE', `/v1/sessions/${created.body.id}`);
  assert.is(again.status, 200);
  assert.equal(again.body, ended.body, 'ending twice changes nothing');
  const usage = await t.request('GET', '/v1/usage');
  assert.is(usage.body.data.length, 1, 'ending twice records usage once');
});

Sessions('another user cannot see, end or read the chat of a session: 404', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions');
  const other = await t.keyFor('mallory');
  assertError(await t.request('GET', `/v1/sessions/${created.body.id}`, { key: other }), 404, 'session_not_found');
  assertError(await t.request('DELETE', `/v1/sessions/${created.body.id}`, { key: other }), 404, 'session_not_found');
  assertError(await t.request('GET', `/v1/sessions/${created.body.id}/chat`, { key: other }), 404, 'session_not_found');
  const still = await t.request('GET', `/v1/sessions/${created.body.id}`);
  assert.is(still.body.status, 'active');
});

Sessions('unknown session ids are a 404', async ({ t }) => {
  assertError(await t.request('GET', '/v1/sessions/sess_nope'), 404, 'session_not_found');
  assertError(await t.request('DELETE', '/v1/sessions/sess_nope'), 404, 'session_not_found');
});

Sessions('GET /v1/sessions/{id}/chat returns the spec 2.4 shape with turns in order', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions', { json: { instructions: 'Speak like a pirate.' } });
  const id = created.body.id;
  const empty = await t.request('GET', `/v1/sessions/${id}/chat`);
  assert.equal(empty.body, { session_id: id, instructions: 'Speak like a pirate.', turns: [], current_transcript: '' });

  const { store } = t.server.services;
  await store.appendChatTurn(id, { role: 'user', content: 'Hello' }, 1);
  await store.appendChatTurn(id, { role: 'assistant', content: 'Ahoy!' }, 2);
  await store.setCurrentTranscript(id, 'And how');
  const chat = await t.request('GET', `/v1/sessions/${id}/chat`);
  assert.equal(chat.body.turns, [
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Ahoy!' },
  ]);
  assert.is(chat.body.current_transcript, 'And how');
});

Sessions('GET /v1/sessions lists own sessions newest first, with status filter and cursor', async ({ t }) => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await t.request('POST', '/v1/sessions')).body.id);
  await t.request('DELETE', `/v1/sessions/${ids[0]}`);
  const other = await t.keyFor('someone-else');
  await t.request('POST', '/v1/sessions', { key: other });

  const all = await t.request('GET', '/v1/sessions');
  assert.equal(all.body.data.map((s: { id: string }) => s.id), [...ids].reverse());
  const active = await t.request('GET', '/v1/sessions?status=active');
  assert.equal(active.body.data.map((s: { id: string }) => s.id), [ids[2], ids[1]]);
  const page1 = await t.request('GET', '/v1/sessions?limit=2');
  assert.is(page1.body.has_more, true);
  const page2 = await t.request('GET', `/v1/sessions?limit=2&before=${page1.body.last_id}`);
  assert.equal(page2.body.data.map((s: { id: string }) => s.id), [ids[0]]);
  assert.is(page2.body.has_more, false);
  assertError(await t.request('GET', '/v1/sessions?status=weird'), 400, 'invalid_value', 'status');
  assertError(await t.request('GET', '/v1/sessions?limit=0'), 400, 'invalid_value', 'limit');
  assertError(await t.request('GET', '/v1/sessions?limit=2&limit=3'), 400, 'invalid_value', 'limit');
  assertError(await t.request('GET', '/v1/sessions?limit=many'), 400, 'invalid_value', 'limit');
});

Sessions.run();
