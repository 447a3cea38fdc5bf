import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, type TestServer } from '../../harness/servers/server.js';

const CAPACITY = 3;
const Capacity = suite<{ t: TestServer }>('worker capacity', {} as { t: TestServer });

Capacity.before.each(async (ctx) => {
  ctx.t = await startTestServer({ env: { WORKER_CAPACITY: String(CAPACITY), RATE_LIMIT_PER_MINUTE: '0' } });
});
Capacity.after.each(async (ctx) => {
  await ctx.t.close();
});

Capacity('parallel creates never exceed capacity; the rest get 503 with Retry-After', async ({ t }) => {
  const results = await Promise.all(Array.from({ length: 12 }, () => t.request('POST', '/v1/sessions')));
  const ok = results.filter((r) => r.status === 200);
  const busy = results.filter((r) => r.status === 503);
  assert.is(ok.length, CAPACITY);
  assert.is(busy.length, 12 - CAPACITY);
  for (const r of busy) {
    assertError(r, 503, 'no_worker_available', null);
    assert.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After is a positive number of seconds');
  }
  assert.is((await t.server.services.pool.usage()).used, CAPACITY);
  const active = await t.request('GET', '/v1/sessions?status=active');
  assert.is(active.body.data.length, CAPACITY, 'refused creates leave no session behind');
});

Capacity('exactly one of two racing creates wins the last slot', async ({ t }) => {
  for (let i = 0; i < CAPACITY - 1; i++) assert.is((await t.request('POST', '/v1/sessions')).status, 200);
  const [a, b] = await Promise.all([t.request('POST', '/v1/sessions'), t.request('POST', '/v1/sessions')]);
  assert.equal([a.status, b.status].sort(), [200, 503]);
});

Capacity('ending a session frees its slot for the next create', async ({ t }) => {
  const ids: string[] = [];
  for (let i = 0; i < CAPACITY; i++) ids.push((await t.request('POST', '/v1/sessions')).body.id);
  assertError(await t.request('POST', '/v1/sessions'), 503, 'no_worker_available');
  await t.request('DELETE', `/v1/sessions/${ids[0]}`);
  assert.is((await t.request('POST', '/v1/sessions')).status, 200);
});

Capacity('the older form shares the same slots', async ({ t }) => {
  for (let i = 0; i < CAPACITY; i++) assert.is((await t.request('POST', '/sessions', { json: { model: 'm' } })).status, 200);
  assertError(await t.request('POST', '/v1/sessions'), 503, 'no_worker_available');
  assertError(await t.request('POST', '/sessions', { json: { model: 'm' } }), 503, 'no_worker_available');
});

Capacity('metrics report used and free slots', async ({ t }) => {
  await t.request('POST', '/v1/sessions');
  const metrics = await t.request('GET', '/metrics', { key: null });
  assert.match(metrics.text, /avatar_worker_slots\{state="used"\} 1/);
  assert.match(metrics.text, new RegExp(`avatar_worker_slots\\{state="free"\\} ${CAPACITY - 1}`));
  assert.match(metrics.text, /avatar_sessions\{status="active"\} 1/);
});

Capacity.run();
