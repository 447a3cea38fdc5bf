/**
 * Sideband WebSockets (`/v1/realtime?call_id=rtc_…`, OpenAI's server-side controls) on real
 * WebRTC calls: headless Chromium makes the call (a data channel, text replies, so the machine's
 * two cores are not spent on media), a backend-like `ws` client attaches to it with the caller's
 * key. What is checked: the greeting and the call's events on the sideband, the sideband's events
 * in the call's engine with their answers on both sides, errors of the sideband's events on the
 * sideband alone, the refusals and their close codes, the bound, and who ends whom. In fleet mode,
 * a call's sideband and a GPT-Live session's (/v1/live/sessions/{id}/attach) are relayed from the
 * API node to the worker that runs the session.
 */
import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { callIn, chromiumAvailable, eventsIn, launchBrowser, type CallStartResult, type TestBrowser } from '../../harness/clients/browser.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { startPostgres, type TestPostgres } from '../../harness/servers/postgres-server.js';
import { startRedis, type RedisServer } from '../../harness/servers/redis-server.js';
import { REPO_ROOT, request, tempDir } from '../../harness/servers/server.js';
import { until } from '../../harness/servers/wait.js';
import { MAX_SIDEBANDS_PER_CALL } from '../../src/signaling/realtime-calls.js';
import { EventAttribution } from '../../src/signaling/event-attribution.js';

const Attribution = suite('EventAttribution');

Attribution('tag() gives the engine the same event under an id of its own; resolve() names the source and the original id', () => {
  const a = new EventAttribution();
  const tagged = a.tag(3, JSON.stringify({ type: 'response.create', event_id: 'mine', response: { instructions: 'x' } }))!;
  const event = JSON.parse(tagged);
  assert.equal({ ...event, event_id: undefined }, { type: 'response.create', event_id: undefined, response: { instructions: 'x' } });
  assert.is.not(event.event_id, 'mine');
  assert.equal(a.resolve(event.event_id), { source: 3, eventId: 'mine' });
  const anonymous = JSON.parse(a.tag(4, '{"type":"response.cancel"}')!);
  assert.equal(a.resolve(anonymous.event_id), { source: 4, eventId: null }, 'an event without an id is still attributed');
});

Attribution('resolve() is null for ids it did not make (a client choosing the same text, another instance); tag() is null for unreadable events', () => {
  const a = new EventAttribution();
  const b = new EventAttribution();
  const id = JSON.parse(a.tag(1, '{"type":"response.cancel","event_id":"x"}')!).event_id as string;
  assert.is(b.resolve(id), null);
  assert.is(a.resolve('x'), null);
  assert.is(a.resolve(null), null);
  assert.is(a.tag(1, 'not json'), null);
  assert.is(a.tag(1, '{"type":"no.such.event"}'), null);
  assert.is(a.tag(1, '[1,2]'), null);
});

Attribution('the memory of original ids is bounded: the oldest is forgotten, and still names its source', () => {
  const a = new EventAttribution();
  const first = JSON.parse(a.tag(7, '{"type":"response.cancel","event_id":"first"}')!).event_id as string;
  for (let i = 0; i < 5000; i++) a.tag(2, `{"type":"response.cancel","event_id":"e${i}"}`);
  assert.equal(a.resolve(first), { source: 7, eventId: null });
});

Attribution.run();

interface Ctx {
  t: RealtimeTestServer;
  browser: TestBrowser;
}

interface Call {
  page: Page;
  callId: string;
  sessionId: string;
}

/** A data-channel call answering in text, made by Chromium with `key`; resolves once the page has session.created. */
async function startCall(ctx: Ctx, key = ctx.t.key): Promise<Call> {
  const page = await ctx.browser.newPage();
  const res = await callIn<CallStartResult>(page, 'start', {
    baseUrl: ctx.t.url,
    key,
    form: 'multipart',
    audio: false,
    video: false,
    channel: 'oai-events',
    session: { type: 'realtime', instructions: 'Be brief.', output_modalities: ['text'] },
  });
  assert.is(res.status, 201, res.answer);
  await waitPage(page, (e) => e.type === 'session.created');
  return { page, callId: res.location!.split('/').pop()!, sessionId: res.sessionId! };
}

const sideband = (ctx: Ctx, callId: string, key: string | null = ctx.t.key) => RealtimeTestClient.connect(ctx.t.url, { query: `call_id=${encodeURIComponent(callId)}`, key });

const waitPage = (page: Page, match: (e: { type: string; [field: string]: any }) => boolean, what = 'an event on the data channel', timeoutMs = 30_000) =>
  until(() => eventsIn(page), (ev) => ev.some(match), what, timeoutMs).then((ev) => ev.find(match)!);

const userText = (text: string) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });

const Sideband = suite<Ctx>('sideband WebSockets of WebRTC calls', {} as Ctx);
Sideband.before(async (ctx) => {
  if (!chromiumAvailable()) throw new Error('Chromium is not installed: run bash src/cli/setup.sh');
  ctx.browser = await launchBrowser({ microphone: 'silence' });
});
Sideband.after(async (ctx) => {
  await ctx.browser.close();
});
Sideband.before.each(async (ctx) => {
  ctx.t = await startRealtimeTestServer({ pendingTimeoutMs: 5000 });
});
Sideband.after.each(async (ctx) => {
  await ctx.t.close();
});

Sideband("a sideband with the call's key: session.created once, then the call's events; its item and response.create run in the call's engine, response.done on both sides", async (ctx) => {
  const call = await startCall(ctx);
  const sb = await sideband(ctx, call.callId);
  const created = await sb.waitFor('session.created');
  assert.is(created.session.id, call.sessionId, "the call's session");
  assert.equal(created.session.output_modalities, ['text']);
  assert.is(created.session.instructions, 'Be brief.');

  ctx.t.llm.options.reply = 'Tools run on the server.';
  sb.send({ type: 'conversation.item.create', event_id: 'sb_item', item: userText('Hello from the backend.') });
  sb.send({ type: 'response.create', event_id: 'sb_response' });
  const done = await sb.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  const onPage = await waitPage(call.page, (e) => e.type === 'response.done' && e.response.id === done.response.id, 'the same response.done on the data channel', 60_000);
  assert.is(onPage.event_id, done.event_id, 'one event, stamped once, sent to both');
  const pageTypes = (await eventsIn(call.page)).map((e) => e.type);
  assert.ok(pageTypes.includes('conversation.item.added'), `the sideband's item reached the call: ${pageTypes.join(', ')}`);
  const text = sb.ofType('response.output_text.done')[0];
  assert.is(text?.text, 'Tools run on the server.');

  // A session.update on the sideband is the call's.
  sb.send({ type: 'session.update', session: { type: 'realtime', instructions: 'From the backend.' } });
  const updated = await waitPage(call.page, (e) => e.type === 'session.updated', 'session.updated on the data channel');
  assert.is(updated.session.instructions, 'From the backend.');
  assert.is((await sb.waitFor('session.updated')).session.instructions, 'From the backend.');
  assert.is(sb.ofType('session.created').length, 1, 'greeted once');
  assert.not.ok(sb.types().includes('error'), sb.types().join(', '));
  await sb.close();
  await call.page.close();
});

Sideband("the backend runs the call's tools: tools set over the sideband, the browser's turn calls one, the sideband answers with function_call_output + response.create, the browser gets the reply", async (ctx) => {
  const call = await startCall(ctx);
  const sb = await sideband(ctx, call.callId);
  await sb.waitFor('session.created');
  sb.send({ type: 'session.update', session: { type: 'realtime', tools: [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }] } });
  assert.equal((await sb.waitFor('session.updated')).session.tools.map((t: { name: string }) => t.name), ['get_weather']);
  ctx.t.llm.options.toolCalls = (r) => (r.messages.some((m) => m.role === 'tool') ? [] : [{ name: 'get_weather', arguments: '{"city":"Paris"}', callId: 'call_w' }]);
  ctx.t.llm.options.reply = (r) => {
    const tool = r.messages.find((m) => m.role === 'tool');
    return tool ? `It is ${JSON.parse(tool.content as string).temperature} degrees in Paris.` : 'Let me check.';
  };

  await callIn(call.page, 'send', { type: 'conversation.item.create', item: userText('What is the weather in Paris?') });
  await callIn(call.page, 'send', { type: 'response.create' });
  const args = await sb.waitFor('response.function_call_arguments.done', { timeoutMs: 60_000 });
  assert.equal([args.call_id, args.name, args.arguments], ['call_w', 'get_weather', '{"city":"Paris"}']);
  await sb.waitFor('response.done', { timeoutMs: 60_000 });
  sb.send({ type: 'conversation.item.create', event_id: 'tool_out', item: { type: 'function_call_output', call_id: args.call_id, output: '{"temperature":21}' } });
  sb.send({ type: 'response.create', event_id: 'tool_reply' });
  const text = await waitPage(call.page, (e) => e.type === 'response.output_text.done' && /degrees/.test(e.text), 'the reply with the tool output on the data channel', 60_000);
  assert.is(text.text, 'It is 21 degrees in Paris.');
  assert.not.ok(sb.types().includes('error'), sb.types().join(', '));
  await sb.close();
  await call.page.close();
});

Sideband("errors of the sideband's events go to the sideband alone, with its own event_id; the data channel's go to both; closing the sideband leaves the call running", async (ctx) => {
  const call = await startCall(ctx);
  const sb = await sideband(ctx, call.callId);
  await sb.waitFor('session.created');
  // The same event_id on both sides: each error still reaches the right client.
  sb.send({ type: 'response.cancel', event_id: 'same_id' });
  const sbError = await sb.waitFor('error');
  assert.equal([sbError.error.code, sbError.error.event_id], ['response_cancel_not_active', 'same_id']);
  sb.sendRaw('not json');
  const badJson = await sb.waitFor((e) => e.type === 'error' && e.error.code === 'invalid_json');
  assert.is(badJson.error.event_id, null);
  sb.send({ type: 'conversation.item.retrieve', event_id: 'sb_missing', item_id: 'item_nope' });
  // Refused later, while the engine handles it (not while reading it): attributed by its id.
  const missing = await sb.waitFor((e) => e.type === 'error' && e.error.event_id === 'sb_missing');
  assert.is(missing.error.param, 'item_id');

  await callIn(call.page, 'send', { type: 'response.cancel', event_id: 'dc_cancel' });
  const dcError = await waitPage(call.page, (e) => e.type === 'error', 'the data channel error');
  assert.equal([dcError.error.code, dcError.error.event_id], ['response_cancel_not_active', 'dc_cancel']);
  const mirrored = await sb.waitFor((e) => e.type === 'error' && e.error.event_id === 'dc_cancel');
  assert.is(mirrored.event_id, dcError.event_id, "the data channel's error reaches the sideband too");
  const pageErrors = (await eventsIn(call.page)).filter((e) => e.type === 'error');
  assert.equal(pageErrors.map((e) => e.error.event_id), ['dc_cancel'], "none of the sideband's errors reached the data channel");

  // The sideband goes; the call does not.
  await sb.close();
  await new Promise((r) => setTimeout(r, 300));
  assert.is((await ctx.t.request('GET', `/v1/sessions/${call.sessionId}`)).body.status, 'active');
  ctx.t.llm.options.reply = 'Still here.';
  await callIn(call.page, 'send', { type: 'conversation.item.create', item: userText('Are you there?') });
  await callIn(call.page, 'send', { type: 'response.create' });
  const done = await waitPage(call.page, (e) => e.type === 'response.done', 'response.done after the sideband left', 60_000);
  assert.is(done.response.status, 'completed');
  await call.page.close();
});

Sideband("refusals: another user's key and an unknown id close 4004 (call_id_not_found); the owner's ephemeral key attaches; hangup closes the sideband 4010 (session_ended); an ended call closes 4009 (call_ended); no session is made", async (ctx) => {
  const call = await startCall(ctx);
  const other = await sideband(ctx, call.callId, await ctx.t.keyFor('mallory'));
  assert.is(await other.waitClose(), 4004);
  assert.equal([other.events[0]?.type, other.events[0]?.error.code, other.events[0]?.error.param], ['error', 'call_id_not_found', 'call_id']);
  const unknown = await sideband(ctx, 'rtc_doesnotexist');
  assert.is(await unknown.waitClose(), 4004);
  assert.is(unknown.events[0]?.error.code, 'call_id_not_found');

  const secret = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime' } } });
  const ephemeral = await sideband(ctx, call.callId, secret.body.value);
  assert.is((await ephemeral.waitFor('session.created')).session.id, call.sessionId, "an ephemeral key of the call's owner attaches");
  const sb = await sideband(ctx, call.callId);
  await sb.waitFor('session.created');

  const hung = await ctx.t.request('POST', `/v1/realtime/calls/${call.callId}/hangup`);
  assert.is(hung.status, 200, hung.text);
  assert.is(await sb.waitClose(), 4010);
  assert.is(await ephemeral.waitClose(), 4010);
  assert.is(sb.events.at(-1)?.error?.code, 'session_ended', sb.types().join(', '));
  const late = await sideband(ctx, call.callId);
  assert.is(await late.waitClose(), 4009);
  assert.equal([late.events[0]?.error.code, late.events[0]?.error.param], ['call_ended', 'call_id']);

  const sessions = await ctx.t.request('GET', '/v1/sessions');
  assert.equal(sessions.body.data.map((s: { id: string }) => s.id), [call.sessionId], 'the call made the only session; no sideband made one');
  await call.page.close();
});

Sideband(`at most ${MAX_SIDEBANDS_PER_CALL} sidebands per call (one more: too_many_sideband_connections, 4009; a closed one makes room); the browser hanging up closes them all 4010`, async (ctx) => {
  const call = await startCall(ctx);
  const open: RealtimeTestClient[] = [];
  for (let i = 0; i < MAX_SIDEBANDS_PER_CALL; i++) {
    const sb = await sideband(ctx, call.callId);
    await sb.waitFor('session.created');
    open.push(sb);
  }
  const extra = await sideband(ctx, call.callId);
  assert.is(await extra.waitClose(), 4009);
  assert.equal([extra.events[0]?.error.code, extra.events[0]?.error.param], ['too_many_sideband_connections', 'call_id']);
  await open.shift()!.close();
  const again = await sideband(ctx, call.callId);
  await again.waitFor('session.created');
  open.push(again);

  // The browser closes its peer connection (a page torn down without closing it is noticed only
  // when ICE gives up, many seconds later for a call without media).
  await callIn(call.page, 'hangup');
  for (const sb of open) assert.is(await sb.waitClose(), 4010);
  for (const sb of open) assert.is(sb.events.at(-1)?.error?.code, 'session_ended');
  await until(() => ctx.t.request('GET', `/v1/sessions/${call.sessionId}`), (r) => r.body.status === 'ended', 'the call to end');
  await call.page.close();
});

Sideband('attached between the answer and the connection: its events wait for the session, then run; session.created comes once (the engine\'s own)', async (ctx) => {
  const page = await ctx.browser.newPage();
  // The offer is posted, its answer kept back: the call stays pending until the page applies it.
  const posted = (await page.evaluate(`(async () => {
    const pc = new RTCPeerConnection();
    const dc = pc.createDataChannel('oai-events');
    window.late = { pc, dc, events: [], answer: '' };
    dc.onmessage = (e) => window.late.events.push(JSON.parse(e.data));
    await pc.setLocalDescription(await pc.createOffer());
    const body = new FormData();
    body.set('sdp', pc.localDescription.sdp);
    body.set('session', JSON.stringify({ type: 'realtime', output_modalities: ['text'] }));
    const res = await fetch(${JSON.stringify(ctx.t.url)} + '/v1/realtime/calls', { method: 'POST', body, headers: { Authorization: 'Bearer ' + ${JSON.stringify(ctx.t.key)} } });
    window.late.answer = await res.text();
    return { status: res.status, location: res.headers.get('location'), sessionId: res.headers.get('x-session-id') };
  })()`)) as { status: number; location: string; sessionId: string };
  assert.is(posted.status, 201);
  const sb = await sideband(ctx, posted.location.split('/').pop()!);
  ctx.t.llm.options.reply = 'Waited for you.';
  sb.send({ type: 'conversation.item.create', event_id: 'early_item', item: userText('Sent before the call connected.') });
  sb.send({ type: 'response.create', event_id: 'early_response' });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(sb.types(), [], 'nothing before the session runs');
  assert.is((await ctx.t.request('GET', `/v1/sessions/${posted.sessionId}`)).body.status, 'pending');

  await page.evaluate(`window.late.pc.setRemoteDescription({ type: 'answer', sdp: window.late.answer })`);
  const done = await sb.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  const t = sb.types();
  assert.is(t[0], 'session.created');
  assert.is(sb.ofType('session.created').length, 1);
  assert.ok(t.indexOf('conversation.item.added') < t.indexOf('response.created'), t.join(', '));
  assert.not.ok(t.includes('error'), t.join(', '));
  await page.close();
});

Sideband('a call that never connects: its sideband is closed 4010 when the session is cancelled', async (ctx) => {
  const body = new FormData();
  body.set('sdp', fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/sdp/chromium-audio-video-dc.sdp'), 'utf8'));
  const res = await ctx.t.request('POST', '/v1/realtime/calls', { body });
  assert.is(res.status, 201, res.text);
  const sb = await sideband(ctx, res.headers.get('location')!.split('/').pop()!);
  assert.is(await sb.waitClose(15_000), 4010);
  assert.equal(sb.types(), ['error']);
  assert.is(sb.events[0]!.error.code, 'session_ended');
  assert.is((await ctx.t.request('GET', `/v1/sessions/${res.headers.get('x-session-id')}`)).body.status, 'cancelled');
});

Sideband.run();

interface FleetCtx {
  pg: TestPostgres;
  redis: RedisServer;
  api: ServerProcess;
  worker: ServerProcess;
  key: string;
  dirs: string[];
  browser: TestBrowser;
}

/** Fleet mode: one API node, one worker (separate processes of src/main.ts) over a real PostgreSQL and Redis. */
const Fleet = suite<FleetCtx>('sideband in fleet mode: the socket on an API node, the call on a worker', {} as FleetCtx);
Fleet.before(async (ctx) => {
  ctx.dirs = [];
  [ctx.pg, ctx.redis] = await Promise.all([startPostgres(), startRedis()]);
  const databaseUrl = await ctx.pg.createDatabase();
  const env = (role: 'api' | 'worker', id: string): Record<string, string> => {
    const dir = tempDir();
    ctx.dirs.push(dir);
    return { DATA_DIR: dir, DATABASE_URL: databaseUrl, REDIS_URL: ctx.redis.url, NODE_ROLE: role, NODE_ID: id, FLEET_TOKEN: 'sideband-fleet-token-0123456789', WORKER_CAPACITY: '2', LLM_PROVIDER: 'offline', LOG_LEVEL: 'warn' };
  };
  // The first node on the empty store prints the bootstrap key.
  ctx.worker = await spawnServer(env('worker', 'w1'));
  ctx.key = ctx.worker.bootstrapKey!;
  ctx.api = await spawnServer(env('api', 'a1'));
  ctx.browser = await launchBrowser({ microphone: 'silence' });
});
Fleet.after(async (ctx) => {
  await ctx.browser?.close();
  for (const p of [ctx.api, ctx.worker]) if (p && p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all([ctx.api?.exited, ctx.worker?.exited]);
  await Promise.all([ctx.pg?.stop(), ctx.redis?.stop()]);
  for (const dir of ctx.dirs) fs.rmSync(dir, { recursive: true, force: true });
});

Fleet("a sideband on the API node is relayed to the call's worker: greeting, events both ways, the hangup's 4010; unknown and ended calls refused there", async (ctx) => {
  const page = await ctx.browser.newPage();
  const res = await callIn<CallStartResult>(page, 'start', { baseUrl: ctx.api.url, key: ctx.key, form: 'multipart', audio: false, video: false, channel: 'oai-events', session: { type: 'realtime', output_modalities: ['text'] } });
  assert.is(res.status, 201, res.answer);
  const callId = res.location!.split('/').pop()!;
  const connect = (id: string) => RealtimeTestClient.connect(ctx.api.url, { query: `call_id=${id}`, key: ctx.key });
  const sb = await connect(callId);
  assert.is((await sb.waitFor('session.created', { timeoutMs: 30_000 })).session.id, res.sessionId);
  sb.send({ type: 'conversation.item.create', item: userText('Hello through the relay.') });
  sb.send({ type: 'response.create' });
  const done = await sb.waitFor('response.done', { timeoutMs: 60_000 });
  await waitPage(page, (e) => e.type === 'response.done' && e.response.id === done.response.id, 'the response on the data channel', 60_000);
  sb.send({ type: 'response.cancel', event_id: 'relayed_cancel' });
  assert.is((await sb.waitFor('error')).error.event_id, 'relayed_cancel');

  const unknown = await connect('rtc_unknownunknownunknown');
  assert.is(await unknown.waitClose(), 4004);
  assert.is(unknown.events[0]?.error.code, 'call_id_not_found');

  const hung = await request(ctx.api.url, 'POST', `/v1/realtime/calls/${callId}/hangup`, { key: ctx.key });
  assert.is(hung.status, 200, hung.text);
  assert.is(await sb.waitClose(), 4010, 'the worker closed the sideband; the API node passed its code on');
  const late = await connect(callId);
  assert.is(await late.waitClose(), 4009);
  assert.is(late.events[0]?.error.code, 'call_ended');
  await page.close();
});

Fleet("a GPT-Live sideband on the API node is relayed to the session's worker: the attach notice, a command in, the REST hangup's session.closed on both", async (ctx) => {
  const live = await RealtimeTestClient.connect(ctx.api.url, { path: '/v1/live/sessions', key: ctx.key });
  live.send({ type: 'session.start', session: { model: 'gpt-live-1' } });
  const id = (await live.waitFor('session.started', { timeoutMs: 30_000 })).session.id as string;
  const sb = await RealtimeTestClient.connect(ctx.api.url, { path: `/v1/live/sessions/${id}/attach`, key: ctx.key });
  assert.is((await sb.waitFor('info', { timeoutMs: 30_000 })).code, 'sideband_attached');
  sb.send({ type: 'session.thinking.append', event_id: 'relayed_think', content: 'Keep it short.' });
  assert.is((await live.waitFor('session.thinking.appended')).client_event_id, 'relayed_think');
  const unknown = await RealtimeTestClient.connect(ctx.api.url, { path: '/v1/live/sessions/sess_unknown/attach', key: ctx.key });
  assert.is(await unknown.waitClose(), 4004);
  const hung = await request(ctx.api.url, 'POST', `/v1/live/sessions/${id}/hangup`, { key: ctx.key });
  assert.is(hung.status, 204, hung.text);
  assert.is((await sb.waitFor('session.closed', { timeoutMs: 30_000 })).reason, 'close_requested');
  assert.is((await live.waitFor('session.closed')).reason, 'close_requested');
  const late = await RealtimeTestClient.connect(ctx.api.url, { path: `/v1/live/sessions/${id}/attach`, key: ctx.key });
  assert.is(await late.waitClose(), 4009);
  assert.is(late.events[0]?.error.code, 'session_closed');
});

Fleet.run();
