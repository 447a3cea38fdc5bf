import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, type TestServer } from '../../harness/servers/server.js';

const Errors = suite<{ t: TestServer }>('HTTP errors', {} as { t: TestServer });
Errors.before.each(async (ctx) => {
  ctx.t = await startTestServer({ env: { MAX_JSON_BYTES: '2048' } });
});
Errors.after.each(async (ctx) => {
  await ctx.t.close();
});

const JSON_ROUTES = ['/v1/sessions', '/sessions', '/v1/realtime/client_secrets'];

Errors('malformed JSON is a 400 invalid_json on every JSON route, never a 500', async ({ t }) => {
  for (const path of JSON_ROUTES) {
    for (const body of ['{', '{"model":', 'nul', '{"a":1}}', '\u0000']) {
      const res = await t.request('POST', path, { body, headers: { 'content-type': 'application/json' } });
      assertError(res, 400, 'invalid_json', null);
    }
  }
});

Errors('JSON sent without a JSON content type (curl -d) is still read', async ({ t }) => {
  const res = await t.request('POST', '/v1/sessions', {
    body: '{"voice":"alice"}',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.voice, 'alice');
});

Errors('a non-JSON content type on a JSON route is a 415', async ({ t }) => {
  for (const type of ['image/png', 'multipart/form-data; boundary=x', 'application/xml']) {
    const res = await t.request('POST', '/v1/sessions', { body: '<x/>', headers: { 'content-type': type } });
    assertError(res, 415, 'unsupported_media_type');
  }
});

Errors('a JSON body over MAX_JSON_BYTES is a 413, and the server keeps serving', async ({ t }) => {
  const big = JSON.stringify({ instructions: 'x'.repeat(4096) });
  assertError(await t.request('POST', '/v1/sessions', { body: big, headers: { 'content-type': 'application/json' } }), 413, 'request_too_large');
  // Without Content-Length (chunked), the limit holds while streaming.
  const chunked = new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(big));
      controller.close();
    },
  });
  const res = await fetch(`${t.url}/v1/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
    body: chunked,
    duplex: 'half',
  } as RequestInit);
  assert.is(res.status, 413);
  assert.is(((await res.json()) as { error: { code: string } }).error.code, 'request_too_large');
  assert.is((await t.request('GET', '/v1/sessions')).status, 200);
});

Errors('an unknown route is a 404 in the error shape', async ({ t }) => {
  assertError(await t.request('GET', '/v1/nothing-here'), 404, 'not_found');
  assertError(await t.request('GET', '/v2/sessions', { key: null }), 404, 'not_found');
});

Errors('a known path with the wrong method is a 405 with Allow', async ({ t }) => {
  const res = await t.request('PUT', '/v1/sessions');
  assertError(res, 405, 'method_not_allowed');
  assert.match(res.headers.get('allow') ?? '', /POST/);
});

Errors('the older session form requires model', async ({ t }) => {
  assertError(await t.request('POST', '/sessions', { json: { voice: 'alice' } }), 400, 'missing_required_parameter', 'model');
  assertError(await t.request('POST', '/sessions', { json: { model: 'm', video: 'yes' } }), 400, 'invalid_type', 'video');
  assertError(await t.request('POST', '/sessions', { json: { model: 'm', face_id: 'nobody' } }), 400, 'unknown_face', 'face_id');
});

Errors('every response carries an X-Request-Id, echoing a sane incoming one', async ({ t }) => {
  const mine = await t.request('GET', '/healthz', { key: null, headers: { 'x-request-id': 'abc-123' } });
  assert.is(mine.headers.get('x-request-id'), 'abc-123');
  const made = await t.request('GET', '/healthz', { key: null, headers: { 'x-request-id': 'bad id with spaces' } });
  assert.match(made.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
});

Errors.run();
