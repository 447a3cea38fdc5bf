/**
 * /v1/realtime: authentication variants and every kind of bad input. Each bad event gets an
 * `error` event with type, code, message, param and the offending event_id, and the connection
 * stays usable; unauthenticated sockets get an error and a documented close code.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { watchEventLoop } from '../helpers/event-loop.js';

let t: RealtimeTestServer;

test.before(async () => {
  t = await startRealtimeTestServer({ realtimeAuthTimeoutMs: 500 });
});

test.after(async () => {
  await t?.close();
});

async function connect(): Promise<RealtimeTestClient> {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  return c;
}

/** Sends `raw`, expects an error naming `eventId`, then checks the socket still answers. */
async function expectError(c: RealtimeTestClient, raw: string, eventId: string | null, code: string, param?: string | null): Promise<void> {
  const from = c.events.length;
  c.sendRaw(raw);
  const err = await c.waitFor('error', { from });
  assert.is(err.error.code, code, raw.slice(0, 200));
  assert.is(err.error.event_id, eventId);
  assert.type(err.error.message, 'string');
  assert.ok(err.error.message.length > 0);
  assert.is(err.error.type, 'invalid_request_error');
  if (param !== undefined) assert.is(err.error.param, param);
  const probe = `probe_${from}`;
  c.send({ type: 'conversation.item.retrieve', item_id: 'none', event_id: probe });
  await c.waitFor((e) => e.type === 'error' && e.error.event_id === probe, { from });
}

test('bad events get an error naming them and the connection stays usable', async () => {
  const c = await connect();
  await expectError(c, '{"type": "session.update", ', null, 'invalid_json');
  await expectError(c, JSON.stringify({ event_id: 'e1', type: 'conversation.explode' }), 'e1', 'invalid_event', 'type');
  await expectError(c, JSON.stringify({ event_id: 'e2' }), 'e2', 'invalid_event', 'type');
  await expectError(c, JSON.stringify({ event_id: 'e3', type: 'conversation.item.create' }), 'e3', 'invalid_type', 'item');
  await expectError(c, JSON.stringify({ event_id: 'e4', type: 'input_audio_buffer.append', audio: 'not base64!' }), 'e4', 'invalid_value', 'audio');
  await expectError(c, JSON.stringify({ event_id: 'e5', type: 'input_audio_buffer.append' }), 'e5', 'missing_required_parameter', 'audio');
  await expectError(c, JSON.stringify({ event_id: 'e6', type: 'input_audio_buffer.commit' }), 'e6', 'input_audio_buffer_commit_empty');
  await expectError(c, JSON.stringify({ event_id: 'e7', type: 'session.update' }), 'e7', 'missing_required_parameter', 'session');
  await expectError(c, JSON.stringify({ event_id: 'e8', type: 'session.update', session: { turn_detection: { type: 'server_vad', threshold: 'high' } } }), 'e8', 'invalid_value', 'session.audio.input.turn_detection.threshold');
  await expectError(c, JSON.stringify({ event_id: 'e9', type: 'conversation.item.truncate', item_id: 'x' }), 'e9', 'missing_required_parameter', 'content_index');
  await expectError(c, JSON.stringify({ event_id: 'e10', type: 'response.create', response: { conversation: 'other' } }), 'e10', 'invalid_value', 'response.conversation');
  // A voice for one response is checked when it is asked for, naming the event (not a response failing later).
  await expectError(c, JSON.stringify({ event_id: 'e10v', type: 'response.create', response: { audio: { output: { voice: 'V0PQ1Q5s==' } } } }), 'e10v', 'unknown_voice', 'response.audio.output.voice');
  await expectError(c, JSON.stringify({ event_id: 'e10w', type: 'response.create', response: { voice: 'ghost' } }), 'e10w', 'unknown_voice', 'response.voice');
  await expectError(c, JSON.stringify({ event_id: 'e10r', type: 'response.create', response: { reasoning: { effort: 'extreme' } } }), 'e10r', 'invalid_value', 'response.reasoning.effort');
  await expectError(c, JSON.stringify({ event_id: 'e10x', type: 'response.create', response: { audio: { output: { voice: { id: 'voice_ghost' } } } } }), 'e10x', 'unknown_voice', 'response.audio.output.voice.id');
  const big = JSON.stringify({ event_id: 'e11', type: 'input_audio_buffer.append', audio: 'A'.repeat(17 * 1024 * 1024) });
  await expectError(c, big, 'e11', 'message_too_large');
  // The session itself is fine: a turn still works.
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  c.send({ type: 'response.create' });
  assert.is((await c.waitFor('response.done')).response.status, 'completed');
  await c.close();
});

/** A user text item and a response to it; resolves with the response.done. */
async function textTurn(c: RealtimeTestClient, text = 'Hi', response: Record<string, unknown> = {}): Promise<any> {
  const from = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  c.send({ type: 'response.create', response: { output_modalities: ['text'], ...response } });
  return c.waitFor('response.done', { from });
}

test('response.create with metadata nested 5,000 levels deep is refused, naming the field, and the session is not wedged (issue 8)', async () => {
  const c = await connect();
  const deep = `${'{"a":'.repeat(5000)}"x"${'}'.repeat(5000)}`;
  await expectError(c, `{"type":"response.create","event_id":"deep","response":{"metadata":${deep}}}`, 'deep', 'nesting_too_deep', 'response.metadata.a');
  await expectError(c, `{"type":"session.update","event_id":"deep2","session":{"tools":[${deep}]}}`, 'deep2', 'nesting_too_deep', 'session.tools[0]');
  assert.is((await textTurn(c)).response.status, 'completed');
  c.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Still fine.' } });
  assert.is((await c.waitFor('session.updated')).session.instructions, 'Still fine.');
  assert.is(c.ofType('error').filter((e) => e.error.type === 'server_error').length, 0);
  await c.close();
});

test('response.metadata is OpenAI metadata: up to 16 string pairs, keys up to 64 and values up to 512 characters, echoed in response.done', async () => {
  const c = await connect();
  const bad: unknown[] = [
    Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])),
    { ['k'.repeat(65)]: 'v' },
    { k: 'v'.repeat(513) },
    { k: 1 },
    { k: { nested: 'v' } },
  ];
  for (const [i, metadata] of bad.entries()) {
    await expectError(c, JSON.stringify({ type: 'response.create', event_id: `m${i}`, response: { metadata } }), `m${i}`, 'invalid_value', 'response.metadata');
  }
  await expectError(c, JSON.stringify({ type: 'response.create', event_id: 'm_type', response: { metadata: ['a'] } }), 'm_type', 'invalid_type', 'response.metadata');
  const done = await textTurn(c, 'Hi', { metadata: { topic: 'weather', turn: '3' } });
  assert.equal(done.response.metadata, { topic: 'weather', turn: '3' });
  await c.close();
});

test('a valid 15 MiB input_audio_buffer.append is accepted (no stack overflow in the base64 check) (issue 8)', async () => {
  const c = await connect();
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
  await c.waitFor('session.updated');
  const audio = Buffer.alloc(((15 * 1024 * 1024) / 4) * 3).toString('base64');
  assert.is(audio.length, 15 * 1024 * 1024);
  const from = c.events.length;
  c.sendRaw(JSON.stringify({ type: 'input_audio_buffer.append', event_id: 'huge', audio }));
  c.send({ type: 'input_audio_buffer.commit', event_id: 'commit' });
  const committed = await c.waitFor((e) => e.type === 'input_audio_buffer.committed' || e.type === 'error', { from });
  assert.is(committed.type, 'input_audio_buffer.committed', JSON.stringify(committed));
  await c.close();
});

test('conversation items are bounded: text over 100,000 characters is refused naming the part; the oldest items go beyond 1,000,000 characters (issue 8)', async () => {
  const c = await connect();
  const sessionId = (c.events[0] as any).session.id as string;
  await expectError(
    c,
    JSON.stringify({ type: 'conversation.item.create', event_id: 'long', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x'.repeat(100_001) }] } }),
    'long',
    'string_above_max_length',
    'item.content[0].text',
  );
  // 41 items of 100,000 characters: the conversation keeps the newest 10 and says which it dropped;
  // the chat history records 4,000,000 characters (40 turns) and no more.
  const ids: string[] = [];
  for (let i = 0; i < 41; i++) {
    const id = `item_big${i}`;
    ids.push(id);
    c.send({ type: 'conversation.item.create', item: { id, type: 'message', role: 'user', content: [{ type: 'input_text', text: `${i} `.padEnd(100_000, 'x') }] } });
  }
  await c.waitFor((e) => e.type === 'conversation.item.done' && e.item.id === 'item_big40', { timeoutMs: 60_000 });
  const deleted = c.ofType('conversation.item.deleted').map((e) => e.item_id);
  assert.equal(deleted, ids.slice(0, 31));
  c.send({ type: 'conversation.item.retrieve', item_id: 'item_big30', event_id: 'gone' });
  assert.is((await c.waitFor((e) => e.type === 'error' && e.error.event_id === 'gone')).error.code, 'item_retrieve_invalid_item_id');
  c.send({ type: 'conversation.item.retrieve', item_id: 'item_big31' });
  assert.is((await c.waitFor('conversation.item.retrieved')).item.id, 'item_big31');
  const chat = await t.request('GET', `/v1/sessions/${sessionId}/chat`);
  assert.is(chat.status, 200);
  const recorded = chat.body.turns.reduce((n: number, turn: { content: string }) => n + turn.content.length, 0);
  assert.is(chat.body.turns.length, 40);
  assert.ok(recorded <= 4_000_000, `${recorded} characters recorded`);
  // The session still answers, and the model is given the conversation as it now is: the new
  // question pushed the oldest kept item (31) out too.
  t.llm.requests.length = 0;
  assert.is((await textTurn(c, 'And now?')).response.status, 'completed');
  assert.is(c.ofType('conversation.item.deleted').at(-1)?.item_id, 'item_big31');
  const sent = t.llm.requests[0]?.messages.map((m) => m.content.slice(0, 4)) ?? [];
  assert.equal(sent.slice(1), ['32 x', '33 x', '34 x', '35 x', '36 x', '37 x', '38 x', '39 x', '40 x', 'And ']);
  await c.close();
});

test('a second response while one is active is refused; the first completes', async () => {
  const c = await connect();
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  c.send({ type: 'response.create' });
  c.send({ type: 'response.create', event_id: 'second' });
  const err = await c.waitFor('error');
  assert.is(err.error.code, 'conversation_already_has_active_response');
  assert.is(err.error.event_id, 'second');
  assert.is((await c.waitFor('response.done')).response.status, 'completed');
  assert.is(c.ofType('response.created').length, 1);
  await c.close();
});

test('committing less than 100 ms of audio is refused; a manual commit with turn detection off transcribes it', async () => {
  const c = await connect();
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
  await c.waitFor('session.updated');
  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(2 * 1200).toString('base64') }); // 50 ms
  c.send({ type: 'input_audio_buffer.commit', event_id: 'short' });
  assert.is((await c.waitFor('error')).error.code, 'input_audio_buffer_commit_empty');
  c.send({ type: 'input_audio_buffer.clear' });
  await c.waitFor('input_audio_buffer.cleared');
  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(2 * 24000).toString('base64') }); // 1 s
  c.send({ type: 'input_audio_buffer.commit' });
  const committed = await c.waitFor('input_audio_buffer.committed');
  const done = await c.waitFor('conversation.item.input_audio_transcription.completed');
  assert.is(done.item_id, committed.item_id);
  assert.is(c.ofType('response.created').length, 0); // manual turns: no automatic response
  await c.close();
});

test('auth by header, by the browser subprotocol (echoing realtime) and by a first auth message', async () => {
  const a = await connect();
  await a.close();

  const b = await RealtimeTestClient.connect(t.url, { key: null, query: 'model=gpt-realtime', protocols: ['realtime', `openai-insecure-api-key.${t.key}`] });
  assert.is(b.ws.protocol, 'realtime');
  await b.waitFor('session.created');
  await b.close();

  const c = await RealtimeTestClient.connect(t.url, { key: null, query: 'model=gpt-realtime' });
  c.send({ type: 'session.update', event_id: 'early', session: {} });
  const early = await c.waitFor('error');
  assert.is(early.error.code, 'not_authenticated');
  assert.is(early.error.event_id, 'early');
  c.send({ type: 'auth', api_key: t.key });
  await c.waitFor('session.created');
  assert.is(c.ofType('session.updated').length, 0); // the early event was not processed
  await c.close();
});

test('a large message before authentication is refused unparsed: no stall, and the socket can still authenticate (issue 8)', async () => {
  // Its own server with the default auth timeout: sending 48 MiB on a loaded machine can take longer than the suite's 500 ms.
  const own = await startRealtimeTestServer();
  const c = await RealtimeTestClient.connect(own.url, { key: null, query: 'model=gpt-realtime' });
  // 48 MiB of empty objects: JSON.parse took ~15 s and gigabytes for it, holding up every session.
  const huge = `[${'{},'.repeat(16 * 1024 * 1024)}{}]`;
  const loop = watchEventLoop(10);
  let worstGapMs: number;
  try {
    await new Promise<void>((resolve, reject) => c.ws.send(huge, (err) => (err ? reject(err) : resolve())));
    loop.reset();
    assert.is((await c.waitFor('error')).error.code, 'not_authenticated');
  } finally {
    worstGapMs = loop.stop();
  }
  // Seconds of parsing before; the bytes arriving and one length check now. 3 s separates the two on any machine.
  assert.ok(worstGapMs < 3000, `the event loop stalled ${Math.round(worstGapMs)} ms`);
  c.send({ type: 'auth', api_key: own.key });
  await c.waitFor('session.created');
  await c.close();
  await own.close();
});

test('an ephemeral key connects with the session config it was issued for', async () => {
  const secret = await t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime', instructions: 'Ephemeral rules.' } } });
  assert.is(secret.status, 200);
  const c = await RealtimeTestClient.connect(t.url, { key: null, query: 'model=gpt-realtime', protocols: ['realtime', `openai-insecure-api-key.${secret.body.value}`] });
  const created = await c.waitFor('session.created');
  assert.is(created.session.instructions, 'Ephemeral rules.');
  await c.close();
});

test('bad credentials get an error and close 4001; no credentials close 4008 after the timeout', async () => {
  const bad = await RealtimeTestClient.connect(t.url, { key: 'avs_nope', query: 'model=gpt-realtime' });
  assert.is((await bad.waitFor('error')).error.code, 'invalid_api_key');
  assert.is(await bad.waitClose(), 4001);

  const badMessage = await RealtimeTestClient.connect(t.url, { key: null });
  badMessage.send({ type: 'auth', api_key: 'avs_wrong' });
  assert.is((await badMessage.waitFor('error')).error.code, 'invalid_api_key');
  assert.is(await badMessage.waitClose(), 4001);

  const silent = await RealtimeTestClient.connect(t.url, { key: null });
  assert.is((await silent.waitFor('error')).error.code, 'authentication_timeout');
  assert.is(await silent.waitClose(), 4008);
  assert.not.ok(silent.types().includes('session.created'));
});

test('no free worker: an error event and close 1013 (try again later)', async () => {
  const small = await startRealtimeTestServer({ env: { WORKER_CAPACITY: '1' } });
  try {
    const first = await RealtimeTestClient.connect(small.url, { key: small.key, query: 'model=m' });
    await first.waitFor('session.created');
    const second = await RealtimeTestClient.connect(small.url, { key: small.key, query: 'model=m' });
    assert.is((await second.waitFor('error')).error.code, 'no_worker_available');
    assert.is(await second.waitClose(), 1013);
    await first.close();
  } finally {
    await small.close();
  }
});

test('paths other than /v1/realtime refuse the upgrade', async () => {
  await RealtimeTestClient.connect(t.url.replace(/\/?$/, '/v1/elsewhere'), { key: t.key }).then(
    () => assert.unreachable('upgrade accepted'),
    (err: Error) => assert.match(err.message, /404/),
  );
});

test.run();
