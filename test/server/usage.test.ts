import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const Usage = suite<{ t: TestServer }>('usage', {} as { t: TestServer });
Usage.before.each(async (ctx) => {
  ctx.t = await startTestServer();
});
Usage.after.each(async (ctx) => {
  await ctx.t.close();
});

Usage('ending a session writes one usage record with the session facts and counters', async ({ t }) => {
  const created = await t.request('POST', '/v1/sessions', { json: { model: 'm1', voice: 'anthony', face: 'face1', driving: 'idle' } });
  await t.server.services.store.addUsageCounters(created.body.id, { audioSecondsOut: 1.5, framesOut: 40, inputTokens: 7, outputTokens: 11 });
  await t.server.services.store.addUsageCounters(created.body.id, { audioSecondsOut: 0.5, framesOut: 10 });
  const ended = await t.request('DELETE', `/v1/sessions/${created.body.id}`);
  const usage = await t.request('GET', '/v1/usage');
  assert.is(usage.status, 200);
  assert.is(usage.body.object, 'list');
  assert.is(usage.body.data.length, 1);
  const u = usage.body.data[0];
  assert.is(u.object, 'usage.record');
  assert.is(u.user_id, 'default');
  assert.is(u.session_id, created.body.id);
  assert.is(u.model, 'm1');
  assert.is(u.voice, 'anthony');
  assert.is(u.face, 'face1');
  assert.is(u.driving, 'idle');
  assert.is(u.status, 'ended');
  assert.is(u.end_reason, 'client_request');
  assert.is(u.started_at, created.body.started_at);
  assert.is(u.ended_at, ended.body.ended_at);
  assert.is(u.duration_seconds, ended.body.duration_seconds);
  assert.is(u.audio_seconds_out, 2);
  assert.is(u.frames_out, 50);
  assert.is(u.input_tokens, 7);
  assert.is(u.output_tokens, 11);
  assert.equal(usage.body.totals, {
    sessions: 1,
    duration_seconds: u.duration_seconds,
    audio_seconds_out: 2,
    frames_out: 50,
    input_tokens: 7,
    output_tokens: 11,
  });
});

Usage('GET /v1/usage shows only the caller’s records, within the time range asked', async ({ t }) => {
  const mine = await t.request('POST', '/v1/sessions');
  await t.request('DELETE', `/v1/sessions/${mine.body.id}`);
  const other = await t.keyFor('eve');
  const theirs = await t.request('POST', '/v1/sessions', { key: other });
  await t.request('DELETE', `/v1/sessions/${theirs.body.id}`, { key: other });

  assert.is((await t.request('GET', '/v1/usage')).body.data.length, 1);
  assert.is((await t.request('GET', '/v1/usage', { key: other })).body.data[0].session_id, theirs.body.id);

  const started = mine.body.started_at as string; // "2026-...T..:..:..123456", UTC
  const startedS = Date.parse(started.slice(0, 23) + 'Z') / 1000;
  const inRange = await t.request('GET', `/v1/usage?start_time=${Math.floor(startedS)}&end_time=${Math.ceil(startedS + 1)}`);
  assert.is(inRange.body.data.length, 1);
  const iso = await t.request('GET', `/v1/usage?start_time=${encodeURIComponent(started)}`);
  assert.is(iso.body.data.length, 1, 'start_time is inclusive and takes the session timestamp format');
  const after = await t.request('GET', `/v1/usage?start_time=${Math.ceil(startedS + 1)}&end_time=${Math.ceil(startedS + 100)}`);
  assert.is(after.body.data.length, 0);
  const before = await t.request('GET', `/v1/usage?end_time=${Math.floor(startedS - 1)}`);
  assert.is(before.body.data.length, 0);

  assertError(await t.request('GET', '/v1/usage?start_time=yesterday'), 400, 'invalid_value', 'start_time');
  assertError(await t.request('GET', '/v1/usage?start_time=200&end_time=100'), 400, 'invalid_value', 'start_time');
  assertError(await t.request('GET', '/v1/usage?limit=5000'), 400, 'invalid_value', 'limit');
});

Usage('usage pages with limit and has_more', async ({ t }) => {
  for (let i = 0; i < 3; i++) {
    const s = await t.request('POST', '/v1/sessions');
    await t.request('DELETE', `/v1/sessions/${s.body.id}`);
  }
  const page = await t.request('GET', '/v1/usage?limit=2');
  assert.is(page.body.data.length, 2);
  assert.is(page.body.has_more, true);
});

Usage.run();

// ── Webhook ──────────────────────────────────────────────────────────────────────────────────

interface Delivery {
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A loopback receiver that answers the first `failFirst` deliveries with 500. */
async function receiver(failFirst: number) {
  const deliveries: Delivery[] = [];
  let failures = 0;
  const waiters: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (failures < failFirst) {
        failures++;
        res.writeHead(500).end('not now');
        return;
      }
      deliveries.push({ body, headers: req.headers });
      res.writeHead(204).end();
      waiters.splice(0).forEach((w) => w());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  const delivered = (n: number) =>
    new Promise<void>((resolve) => {
      const check = () => (deliveries.length >= n ? resolve() : waiters.push(check));
      check();
    });
  return { url, deliveries, failures: () => failures, delivered, close: () => new Promise((r) => server.close(r)) };
}

const SECRET = 'whsec_test_secret_value';
const webhookEnv = (url: string) => ({ WEBHOOK_URL: url, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_RETRY_MAX_MS: '100' });

const Webhook = suite('usage webhook');

Webhook('each usage record is POSTed once, signed with HMAC-SHA256, after retries through an outage', async () => {
  const hook = await receiver(3);
  const t = await startTestServer({ env: webhookEnv(hook.url) });
  try {
    const delivered = once(t.server.services.webhook!, 'delivered');
    const s = await t.request('POST', '/v1/sessions');
    await t.request('DELETE', `/v1/sessions/${s.body.id}`);
    await delivered;
    assert.is(hook.failures(), 3);
    assert.is(hook.deliveries.length, 1);
    const { body, headers } = hook.deliveries[0]!;
    const event = JSON.parse(body);
    assert.is(event.type, 'usage.recorded');
    assert.is(event.data.session_id, s.body.id);
    assert.is(headers['x-avatar-event-id'], event.id);
    const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(headers['x-avatar-signature']));
    assert.ok(m, `signature header: ${headers['x-avatar-signature']}`);
    const expected = createHmac('sha256', SECRET).update(`${m[1]}.${body}`).digest('hex');
    assert.is(m[2], expected);
    const outbox = await t.server.services.store.countOutbox();
    assert.equal(outbox, { pending: 0, delivered: 1, dead: 0 });
    const metrics = await t.request('GET', '/metrics', { key: null });
    assert.match(metrics.text, /avatar_webhook_outbox\{state="delivered"\} 1/);
  } finally {
    await t.close();
    await hook.close();
  }
});

Webhook('records written while the receiver is down are delivered by the next process', async () => {
  const down = await receiver(1_000_000);
  const t = await startTestServer({ env: { ...webhookEnv(down.url), WEBHOOK_RETRY_BASE_MS: '60000' } });
  const retry = once(t.server.services.webhook!, 'retry');
  const s = await t.request('POST', '/v1/sessions');
  await t.request('DELETE', `/v1/sessions/${s.body.id}`);
  await retry;
  assert.equal(await t.server.services.store.countOutbox(), { pending: 1, delivered: 0, dead: 0 });
  await down.close();

  const up = await receiver(0);
  // The entry's next attempt is a minute away; the restarted process must still deliver it
  // when it becomes due. Move it due now, as time passing would.
  await t.restart(webhookEnv(up.url));
  const due = await t.server.services.store.dueOutboxEntries(Number.MAX_SAFE_INTEGER, 10);
  assert.is(due.length, 1, 'the undelivered entry survived the restart');
  await t.server.services.store.markOutboxFailed(due[0]!.id, 'test: make due', 0, 0);
  await t.restart(webhookEnv(up.url));
  try {
    await up.delivered(1);
    // The receiver answered; wait for the dispatcher to record it (unless it already has).
    const recorded = once(t.server.services.webhook!, 'delivered');
    if ((await t.server.services.store.countOutbox()).delivered === 0) await recorded;
    assert.is(JSON.parse(up.deliveries[0]!.body).data.session_id, s.body.id);
    assert.equal(await t.server.services.store.countOutbox(), { pending: 0, delivered: 1, dead: 0 });
  } finally {
    await t.close();
    await up.close();
  }
});

Webhook('an entry is marked dead after WEBHOOK_MAX_ATTEMPTS and kept', async () => {
  const hook = await receiver(1_000_000);
  const t = await startTestServer({ env: { ...webhookEnv(hook.url), WEBHOOK_MAX_ATTEMPTS: '3' } });
  try {
    const dead = once(t.server.services.webhook!, 'dead');
    const s = await t.request('POST', '/v1/sessions');
    await t.request('DELETE', `/v1/sessions/${s.body.id}`);
    await dead;
    assert.is(hook.failures(), 3);
    assert.equal(await t.server.services.store.countOutbox(), { pending: 0, delivered: 0, dead: 1 });
  } finally {
    await t.close();
    await hook.close();
  }
});

Webhook.run();
