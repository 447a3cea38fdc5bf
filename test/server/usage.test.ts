import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import fs from 'node:fs';
import path from 'node:path';
import { assertError } from '../helpers/assert-error.js';
import { startTestServer, tempDir, type TestServer } from '../../harness/servers/server.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { ask, converse, receivedBy, type Received } from '../../harness/measures/delivered.js';
import { postgresBinDir, sharedPostgres } from '../../harness/servers/postgres-server.js';
import { until } from '../../harness/servers/wait.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store, UsageRecord } from '../../src/store/store.js';
import { UsageMeter } from '../../src/sessions/usage-meter.js';
import { Logger } from '../../src/core/log.js';
import { MEDIA_UNSET } from '../../src/core/media-options.js';

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

// ── What the client received ─────────────────────────────────────────────────────────────────
//
// Usage must bill exactly what reached the client (audio bytes and image deltas counted at the
// client, tokens as response.done reported them), however the session ends: a DELETE or a close
// the moment response.done arrives (many times over: a race with the response's usage write would
// drop that response), a close, DELETE, response.cancel, truncate, deadline or shutdown mid-reply.
// Run against SQLite and a real PostgreSQL (whose writes are not synchronous underneath).

/**
 * The record bills what the client received: audio and frames exactly. Tokens are billed as soon as
 * the model reports them, so they match response.done's when the client saw it (`tokens`), and are
 * the model's report otherwise (a reply cut mid-speech was written whole).
 */
function assertBilled(record: UsageRecord | null, got: Received, what: string, tokens = true): void {
  assert.ok(record, `${what}: a usage record`);
  const billed = { audio: record.audioSecondsOut, frames: record.framesOut, input: record.inputTokens, output: record.outputTokens };
  const detail = `${what}: billed ${JSON.stringify(billed)}, received ${JSON.stringify(got)}`;
  // One sample of rounding at most (counted per tick in seconds, stored as a double).
  assert.ok(Math.abs(record.audioSecondsOut - got.audioSeconds) < 1 / 24_000, detail);
  assert.is(record.framesOut, got.frames, detail);
  if (tokens) {
    assert.is(record.inputTokens, got.inputTokens, detail);
    assert.is(record.outputTokens, got.outputTokens, detail);
  }
}

async function recordOf(t: TestServer, sessionId: string): Promise<UsageRecord | null> {
  return until(() => t.server.services.store.getUsageForSession(sessionId), (u) => u !== null, `the usage record of ${sessionId}`, 15_000);
}

/** Runs `then` synchronously when the next response.done arrives (before the test's own awaits get a turn). */
function onNextResponseDone(ws: RealtimeTestClient, then: () => void): void {
  const listener = (data: Buffer) => {
    if ((JSON.parse(data.toString()) as { type: string }).type !== 'response.done') return;
    ws.ws.off('message', listener);
    then();
  };
  ws.ws.on('message', listener);
}

const SHORT_REPLY = 'Hi there. Nice to meet you.';
const LONG_REPLY = Array.from({ length: 12 }, (_, i) => `This is sentence number ${i + 1} of a long answer.`).join(' ');

for (const backend of (process.env.USAGE_TEST_BACKENDS?.split(',') ?? ['SQLite', 'PostgreSQL']) as Array<'SQLite' | 'PostgreSQL'>) {
  const Delivered = suite<{ t: RealtimeTestServer }>(`usage bills what the client received (${backend})`, {} as { t: RealtimeTestServer });
  const register = backend === 'PostgreSQL' && !postgresBinDir() ? Delivered.skip : Delivered;
  Delivered.before(async (ctx) => {
    if (backend === 'PostgreSQL' && !postgresBinDir()) return;
    const env: Record<string, string> = backend === 'PostgreSQL' ? { DATABASE_URL: await (await sharedPostgres()).createDatabase() } : {};
    ctx.t = await startRealtimeTestServer({ env });
  });
  Delivered.after(async (ctx) => {
    await ctx.t?.close();
  });
  Delivered.before.each((ctx) => {
    ctx.t?.resetProviders();
  });

  register('DELETE or close the moment response.done arrives, 16 times: every record holds every response, exactly as received', async ({ t }) => {
    t.llm.options = { ...t.llm.options, reply: SHORT_REPLY };
    for (let i = 0; i < 16; i++) {
      const { ws, id } = await converse(t.url, t.key, i % 4 === 0);
      await ws.waitFor('response.done', { from: ask(ws, 'Hello.') });
      const byDelete = i % 2 === 0;
      let deleted: Promise<unknown> | null = null;
      onNextResponseDone(ws, () => {
        if (byDelete) deleted = t.request('DELETE', `/v1/sessions/${id}`);
        else ws.ws.close();
      });
      ask(ws, 'And again.');
      await ws.waitClose(15_000).catch((err: Error) => {
        throw new Error(`round ${i} (${byDelete ? 'DELETE' : 'close'}): ${err.message}; got ${ws.types().slice(-6).join(', ')}`);
      });
      await deleted;
      const got = receivedBy(ws);
      assert.is(got.responses, 2);
      assertBilled(await recordOf(t, id), got, `${byDelete ? 'DELETE' : 'close'} on response.done, round ${i}`);
    }
  });

  register('mid-reply ends bill what was sent up to the end: close, DELETE, response.cancel, truncate', async ({ t }) => {
    t.llm.options = { ...t.llm.options, reply: LONG_REPLY };
    const midReply = async (images: boolean) => {
      const s = await converse(t.url, t.key, images);
      const from = ask(s.ws, 'Tell me a long story.');
      // About half a second of audio out.
      await s.ws.waitFor((e) => e.type === 'response.output_audio.delta' && s.ws.ofType('response.output_audio.delta').length >= 12, { from, timeoutMs: 20_000 });
      return s;
    };

    const closed = await midReply(true);
    await closed.ws.close();
    const closedGot = receivedBy(closed.ws);
    assert.ok(closedGot.audioSeconds > 0.3 && closedGot.frames > 0, JSON.stringify(closedGot));
    assertBilled(await recordOf(t, closed.id), closedGot, 'client close mid-reply', false);

    const deleted = await midReply(false);
    assert.is((await t.request('DELETE', `/v1/sessions/${deleted.id}`)).status, 200);
    await deleted.ws.waitClose(15_000);
    assertBilled(await recordOf(t, deleted.id), receivedBy(deleted.ws), 'DELETE mid-reply', false);

    const cancelled = await midReply(true);
    cancelled.ws.send({ type: 'response.cancel' });
    assert.is((await cancelled.ws.waitFor('response.done')).response.status, 'cancelled');
    // Nothing more is billed after the cancel: end the session a while later.
    await new Promise((r) => setTimeout(r, 300));
    await t.request('DELETE', `/v1/sessions/${cancelled.id}`);
    await cancelled.ws.waitClose(15_000);
    assertBilled(await recordOf(t, cancelled.id), receivedBy(cancelled.ws), 'response.cancel mid-reply');

    const truncated = await midReply(false);
    const itemId = truncated.ws.ofType('response.output_audio.delta')[0]!.item_id as string;
    truncated.ws.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 200 });
    assert.is((await truncated.ws.waitFor('response.done')).response.status, 'cancelled');
    await truncated.ws.waitFor('conversation.item.truncated');
    await truncated.ws.close();
    const truncatedGot = receivedBy(truncated.ws);
    assert.ok(truncatedGot.audioSeconds > 0.2, 'the audio sent before the truncate, not the 200 ms heard, is what was delivered');
    assertBilled(await recordOf(t, truncated.id), truncatedGot, 'truncate mid-reply');
  });

  Delivered.run();
}

const Ends = suite('usage bills what the client received when the server ends the session mid-reply');

Ends('the session deadline (max_duration) mid-reply bills what was sent', async () => {
  const t = await startRealtimeTestServer({ env: { MAX_SESSION_SECONDS: '5' } });
  try {
    // A first session loads what sessions share (the VAD, the avatar's assets) within its own deadline.
    await (await converse(t.url, t.key)).ws.close();
    t.llm.options = { ...t.llm.options, reply: LONG_REPLY };
    const { ws, id } = await converse(t.url, t.key, true);
    ask(ws, 'Tell me a long story.');
    await ws.waitClose(20_000);
    const got = receivedBy(ws);
    assert.ok(got.audioSeconds > 0.3, `the reply was playing when the deadline came (${got.audioSeconds} s)`);
    assert.not.ok(ws.types().includes('response.done'), 'the reply was still playing');
    const record = await recordOf(t, id);
    assert.is(record?.endReason, 'max_duration');
    assertBilled(record, got, 'max_duration mid-reply', false);
  } finally {
    await t.close();
  }
});

Ends('a server shutdown (the SIGTERM path) mid-reply bills what was sent', async () => {
  const dataDir = tempDir();
  const databaseUrl = `sqlite:${path.join(dataDir, 'usage.db')}`;
  const t = await startRealtimeTestServer({ dataDir, env: { DATABASE_URL: databaseUrl } });
  try {
    t.llm.options = { ...t.llm.options, reply: LONG_REPLY };
    const { ws, id } = await converse(t.url, t.key, true);
    const from = ask(ws, 'Tell me a long story.');
    await ws.waitFor((e) => e.type === 'response.output_audio.delta' && ws.ofType('response.output_audio.delta').length >= 12, { from, timeoutMs: 20_000 });
    await t.server.close();
    await ws.waitClose(15_000);
    const store = openStore(databaseUrl);
    try {
      const record = await store.getUsageForSession(id);
      assert.is(record?.endReason, 'server_shutdown');
      assertBilled(record, receivedBy(ws), 'server shutdown mid-reply', false);
    } finally {
      await store.close();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

Ends.run();

const Meter = suite('usage meter: running totals committed as they accrue');

Meter('a write whose outcome is unknown is retried with the running total, never counted twice; the session\'s end makes the record final', async () => {
  const dir = tempDir();
  const store = openStore(`sqlite:${path.join(dir, 'meter.db')}`);
  try {
    await store.migrate();
    const now = Date.now() * 1000;
    await store.insertSession({
      id: 'sess_m', userId: 'u1', apiKeyId: null, origin: 'realtime', model: 'm', voice: 'v', face: null, driving: null, instructions: '',
      video: false, media: MEDIA_UNSET, status: 'active', endReason: null,
      createdAtUs: now, startedAtUs: now, endedAtUs: null, durationSeconds: null, deadlineUs: null, lastSeenUs: now, currentTranscript: '',
    });
    // Counters from an earlier connection of the same session stay and are added to.
    await store.addUsageCounters('sess_m', { audioSecondsOut: 1, framesOut: 10 });
    let failNext = true;
    // The first write commits and then reports a failure (a connection lost after COMMIT).
    const flaky: Pick<Store, 'getUsageCounters' | 'raiseUsageCounters'> = {
      getUsageCounters: (id) => store.getUsageCounters(id),
      raiseUsageCounters: async (id, totals) => {
        const live = await store.raiseUsageCounters(id, totals);
        if (failNext) {
          failNext = false;
          throw new Error('connection lost after commit');
        }
        return live;
      },
    };
    const meter = new UsageMeter({ sessionId: 'sess_m', store: flaky, log: new Logger('silent'), flushMs: 20 });
    for (let i = 0; i < 25; i++) meter.add({ audioSecondsOut: 0.04, framesOut: 1 });
    meter.add({ inputTokens: 5, outputTokens: 7 });
    await until(() => store.getUsageCounters('sess_m'), (c) => c.framesOut === 35, 'the timer to commit');
    await meter.flush(); // the retry of the write whose outcome was unknown
    assert.equal(await store.getUsageCounters('sess_m'), { audioSecondsOut: 2, framesOut: 35, inputTokens: 5, outputTokens: 7 }, 'counted once');
    meter.add({ audioSecondsOut: 0.5 });
    await store.endSession('sess_m', { status: 'failed', endReason: 'worker_lost', endedAtUs: now + 1 }, { id: 'usage_m', createdAtUs: now }, null);
    await meter.close(); // lands on an ended session: refused
    meter.add({ audioSecondsOut: 9 });
    await meter.flush();
    const record = (await store.getUsageForSession('sess_m'))!;
    assert.equal([record.audioSecondsOut, record.framesOut, record.inputTokens, record.outputTokens], [2, 35, 5, 7], 'the record is final');
  } finally {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

Meter.run();
