/**
 * /v1/realtime end to end over real WebSockets on loopback, with the real store and media plane
 * and scripted providers (harness/servers/realtime-server.ts): text turns with audio, transcript
 * and image events in the documented order, voice turns through the real Silero VAD, barge-in,
 * cancel, truncate/delete/retrieve, the older dialect, sessions made by REST, chat history and
 * usage.
 */
import sharp from 'sharp';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SPEECH_MS_PER_CHAR, startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { RealtimeTestClient, type ServerEvent } from '../../harness/clients/realtime-client.js';
import { speechPcm24k } from '../../harness/measures/speech.js';
import { ProviderError } from '../../src/providers/llm/base.js';
import { PAUSE_MS } from '../../src/realtime/speech-segmenter.js';

let t: RealtimeTestServer;

test.before(async () => {
  t = await startRealtimeTestServer();
});

test.after(async () => {
  await t?.close();
});

test.before.each(() => {
  t.resetProviders();
});

async function connect(query = 'model=gpt-realtime'): Promise<RealtimeTestClient> {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query });
  await c.waitFor('session.created');
  return c;
}

function say(c: RealtimeTestClient, text: string): void {
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
}

/** The event types of one response, from response.created to response.done. */
function responseTypes(c: RealtimeTestClient, from = 0): string[] {
  const types = c.types().slice(from);
  const start = types.indexOf('response.created');
  const end = types.indexOf('response.done', start);
  return types.slice(start, end + 1);
}

/** Collapses runs of the same type: a, b, b, b, c → a, b, c. */
function runs(types: string[]): string[] {
  return types.filter((x, i) => x !== types[i - 1]);
}

/** Sends PCM16 24 kHz as input_audio_buffer.append events of `chunkMs`. */
function appendAudio(c: RealtimeTestClient, pcm: Int16Array, chunkMs = 100): void {
  const step = (24000 * chunkMs) / 1000;
  for (let i = 0; i < pcm.length; i += step) {
    const part = pcm.subarray(i, Math.min(pcm.length, i + step));
    c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
  }
}

const silence = (ms: number) => new Int16Array((24000 * ms) / 1000);

test('a text turn streams audio, transcript and image deltas in order and ends with response.done', async () => {
  const c = await connect();
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'], instructions: 'Be kind.' } });
  await c.waitFor('session.updated');
  say(c, 'Hello there');
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done');
  const types = responseTypes(c);
  assert.equal(runs(types.filter((x) => !x.endsWith('.delta'))), [
    'response.created',
    'response.output_item.added',
    'conversation.item.added',
    'response.content_part.added',
    'response.output_audio.done',
    'response.output_audio_transcript.done',
    'response.content_part.done',
    'response.output_image.done',
    'response.output_item.done',
    'conversation.item.done',
    'response.done',
  ]);
  const audio = c.ofType('response.output_audio.delta');
  const images = c.ofType('response.output_image.delta');
  const transcript = c.ofType('response.output_audio_transcript.delta').map((e) => e.delta).join('');
  assert.ok(audio.length > 5, `audio deltas: ${audio.length}`);
  assert.ok(images.length > 5, `image deltas: ${images.length}`);
  assert.is(transcript, 'Hello from the avatar. It is a fine day to talk.');
  // Audio and images interleave (in sync), they do not come in two blocks.
  const firstImage = types.indexOf('response.output_image.delta');
  const lastAudio = types.lastIndexOf('response.output_audio.delta');
  assert.ok(firstImage < lastAudio, 'images arrive while audio plays');
  const jpeg = Buffer.from(images[0]?.delta as string, 'base64');
  assert.is(jpeg[0], 0xff);
  assert.is(jpeg[1], 0xd8);
  const samples = audio.reduce((n, e) => n + Buffer.from(e.delta, 'base64').length / 2, 0);
  const spokenChars = 'Hello from the avatar.'.length + 'It is a fine day to talk.'.length;
  assert.ok(Math.abs(samples / 24000 - (spokenChars * SPEECH_MS_PER_CHAR) / 1000) < 0.2, `audio ${samples / 24000}s`);
  assert.is(c.ofType('response.output_image.done')[0]?.total_frames, images.length);
  assert.is(done.response.status, 'completed');
  assert.is(done.response.usage.output_tokens, 11);
  assert.is(done.response.output[0].content[0].transcript, transcript);
  // The model saw the instructions and the user's words.
  const request = t.llm.requests.at(-1);
  assert.ok(request?.messages[0]?.content.startsWith('Be kind.'));
  assert.equal(request?.messages.at(-1), { role: 'user', content: 'Hello there' });
  // Chat history has both turns.
  const sessionId = c.events[0]?.session.id as string;
  const chat = await t.request('GET', `/v1/sessions/${sessionId}/chat`);
  assert.equal(chat.body.turns, [
    { role: 'user', content: 'Hello there' },
    { role: 'assistant', content: 'Hello from the avatar. It is a fine day to talk.' },
  ]);
  assert.is(chat.body.current_transcript, '');
  await c.close();
});

test('a client that did not ask for images gets none, and every event carries an event_id', async () => {
  const c = await connect();
  say(c, 'Hi');
  c.send({ type: 'response.create' });
  await c.waitFor('response.done');
  assert.is(c.ofType('response.output_image.delta').length, 0);
  assert.is(c.ofType('response.output_image.done').length, 0);
  assert.ok(c.ofType('response.output_audio.delta').length > 0);
  for (const e of c.events) assert.match(e.event_id, /^event_/);
  await c.close();
});

test('a text-only session gets output_text deltas and no audio', async () => {
  const c = await connect();
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
  await c.waitFor('session.updated');
  say(c, 'Hi');
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done');
  assert.is(c.ofType('response.output_audio.delta').length, 0);
  assert.is(c.ofType('response.output_text.delta').map((e) => e.delta).join(''), 'Hello from the avatar. It is a fine day to talk.');
  assert.is(done.response.output[0].content[0].type, 'output_text');
  await c.close();
});

test('a voice turn (server_vad): speech_started, speech_stopped, committed, transcription, then the response', async () => {
  const c = await connect();
  // server_vad, so the turn's end is the silence window's (semantic_vad's is the model's call:
  // turn-taking.test.ts).
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad' } } } } });
  await c.waitFor('session.updated');
  const asked = t.asr.requests.length;
  const speech = speechPcm24k('Could you tell me what the weather is like today?');
  appendAudio(c, silence(300));
  appendAudio(c, speech);
  appendAudio(c, silence(900));
  const done = await c.waitFor('response.done');
  const types = c.types();
  const order = [
    'input_audio_buffer.speech_started',
    'input_audio_buffer.speech_stopped',
    'input_audio_buffer.committed',
    'conversation.item.added',
    'conversation.item.input_audio_transcription.completed',
    'conversation.item.done',
    'response.created',
  ].map((x) => types.indexOf(x));
  assert.ok(order.every((x, i) => x >= 0 && (i === 0 || x > (order[i - 1] as number))), `order: ${types.join(', ')}`);
  const started = c.ofType('input_audio_buffer.speech_started')[0] as ServerEvent;
  const stopped = c.ofType('input_audio_buffer.speech_stopped')[0] as ServerEvent;
  assert.is(started.item_id, stopped.item_id);
  assert.ok(started.audio_start_ms >= 0 && started.audio_start_ms < 400, `start ${started.audio_start_ms}`);
  const speechEndMs = 300 + (speech.length / 24000) * 1000;
  assert.ok(stopped.audio_end_ms > speechEndMs && stopped.audio_end_ms < speechEndMs + 800, `stop ${stopped.audio_end_ms} vs speech end ${speechEndMs}`);
  const completed = c.ofType('conversation.item.input_audio_transcription.completed')[0] as ServerEvent;
  assert.is(completed.transcript, 'What is the weather like today?');
  assert.is(completed.item_id, started.item_id);
  // The recogniser got the turn up to its pause, once (speculative transcription: the turn less
  // the last 500 − PAUSE_MS ms of the 500 ms silence window), and the model got the transcript.
  assert.is(t.asr.requests.length, asked + 1);
  const heardMs = ((t.asr.requests[asked]?.pcm.length ?? 0) / 24000) * 1000;
  const committedMs = stopped.audio_end_ms - started.audio_start_ms;
  const unheardMs = 500 - PAUSE_MS;
  assert.ok(committedMs - heardMs >= unheardMs - 100 && committedMs - heardMs <= unheardMs + 50, `heard ${heardMs} of ${committedMs} ms`);
  assert.equal(t.llm.requests.at(-1)?.messages.at(-1), { role: 'user', content: 'What is the weather like today?' });
  assert.is(done.response.status, 'completed');
  await c.close();
});

test('a voice turn on a new session: semantic_vad (the default) with Smart Turn ends it well before its 4 s ceiling', async () => {
  const c = await connect();
  const created = c.ofType('session.created')[0] as ServerEvent;
  assert.equal(created.session.audio.input.turn_detection, { type: 'semantic_vad', eagerness: 'auto', create_response: true, interrupt_response: true });
  const speech = speechPcm24k('Could you tell me what the weather is like today?');
  appendAudio(c, silence(300));
  appendAudio(c, speech);
  // The silence after it arrives in real time, as from a microphone: the model's answer lands
  // while it is still coming (sent at once, the ceiling would be scored before the answer).
  for (let i = 0; i < 25; i++) {
    appendAudio(c, silence(100));
    await new Promise((r) => setTimeout(r, 100));
  }
  const done = await c.waitFor('response.done');
  const stops = c.ofType('input_audio_buffer.speech_stopped') as ServerEvent[];
  assert.is(stops.length, 1);
  // espeak's own trailing silence (~300 ms) is inside `speech`.
  const speechEndMs = 300 + (speech.length / 24000) * 1000;
  const stop = stops[0] as ServerEvent;
  assert.ok(stop.audio_end_ms < speechEndMs + 1000, `stop ${stop.audio_end_ms} vs speech end ${speechEndMs}`);
  assert.is((c.ofType('conversation.item.input_audio_transcription.completed')[0] as ServerEvent).transcript, 'What is the weather like today?');
  assert.is(done.response.status, 'completed');
  await c.close();
});

test('barge-in: user speech during a response cancels it at once, status cancelled, reason turn_detected', async () => {
  const c = await connect();
  t.llm.options.reply = 'This is a long answer that keeps going. '.repeat(6);
  say(c, 'Tell me a story');
  c.send({ type: 'response.create' });
  await c.waitFor('response.output_audio.delta');
  await new Promise((r) => setTimeout(r, 300));
  const speech = speechPcm24k('Stop, please wait a moment.');
  const from = c.events.length;
  appendAudio(c, speech);
  const started = await c.waitFor('input_audio_buffer.speech_started', { from });
  const done = await c.waitFor('response.done', { from });
  assert.is(done.response.status, 'cancelled');
  assert.equal(done.response.status_details, { type: 'cancelled', reason: 'turn_detected' });
  // Nothing of the old response after speech_started: audio and video stopped on the spot.
  const after = c.events.slice(c.events.indexOf(started));
  assert.is(after.filter((e) => e.type === 'response.output_audio.delta' && e.response_id === done.response.id).length, 0);
  // The kept transcript is what was heard: a prefix of the reply, not all of it.
  const kept = done.response.output[0].content[0].transcript as string;
  assert.ok(kept.length < 'This is a long answer that keeps going. '.repeat(6).trim().length, kept);
  assert.ok('This is a long answer that keeps going. '.repeat(6).startsWith(kept), kept);
  assert.is(done.response.output[0].status, 'incomplete');
  await c.close();
});

test('response.cancel stops the response; cancelling again is an error naming the event', async () => {
  const c = await connect();
  t.llm.options.reply = 'One sentence here. Another sentence there. And a third one.';
  say(c, 'Talk');
  c.send({ type: 'response.create' });
  await c.waitFor('response.output_audio.delta');
  c.send({ type: 'response.cancel' });
  const done = await c.waitFor('response.done');
  assert.is(done.response.status, 'cancelled');
  assert.is(done.response.status_details.reason, 'client_cancelled');
  c.send({ type: 'response.cancel', event_id: 'cancel_2' });
  const err = await c.waitFor('error');
  assert.is(err.error.code, 'response_cancel_not_active');
  assert.is(err.error.event_id, 'cancel_2');
  await c.close();
});

test('conversation.item.truncate keeps the transcript heard by audio_end_ms; delete and retrieve work', async () => {
  const c = await connect();
  t.llm.options.reply = 'First sentence is short. Second sentence is here. Third one closes it.';
  say(c, 'Go');
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done');
  const itemId = done.response.output[0].id as string;
  const firstMs = ('First sentence is short.'.length * SPEECH_MS_PER_CHAR);
  c.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: firstMs + 10 });
  const truncated = await c.waitFor('conversation.item.truncated');
  assert.is(truncated.audio_end_ms, firstMs + 10);
  c.send({ type: 'conversation.item.retrieve', item_id: itemId });
  const retrieved = await c.waitFor('conversation.item.retrieved');
  assert.is(retrieved.item.content[0].transcript, 'First sentence is short.');
  c.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 999_999, event_id: 'tr_big' });
  assert.is((await c.waitFor((e) => e.type === 'error' && e.error.event_id === 'tr_big')).error.param, 'audio_end_ms');
  c.send({ type: 'conversation.item.delete', item_id: itemId });
  assert.is((await c.waitFor('conversation.item.deleted')).item_id, itemId);
  c.send({ type: 'conversation.item.retrieve', item_id: itemId, event_id: 'gone' });
  assert.is((await c.waitFor((e) => e.type === 'error' && e.error.event_id === 'gone')).error.code, 'item_retrieve_invalid_item_id');
  // The next response no longer sees the deleted answer.
  say(c, 'Again');
  c.send({ type: 'response.create' });
  await c.waitFor((e) => e.type === 'response.done' && e.response.id !== done.response.id);
  assert.not.ok(t.llm.requests.at(-1)?.messages.some((m) => m.role === 'assistant'));
  await c.close();
});

test('an out-of-band response (conversation none) uses its own input and adds nothing to the conversation', async () => {
  const c = await connect();
  c.send({
    type: 'response.create',
    response: { conversation: 'none', output_modalities: ['text'], metadata: { topic: 'x' }, input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Classify this' }] }] },
  });
  const done = await c.waitFor('response.done');
  assert.is(done.response.conversation_id, null);
  assert.equal(done.response.metadata, { topic: 'x' });
  assert.is(c.ofType('conversation.item.added').length, 0);
  assert.equal(t.llm.requests.at(-1)?.messages.at(-1), { role: 'user', content: 'Classify this' });
  await c.close();
});

test('a provider failure becomes an error event and a failed response; the session goes on', async () => {
  const c = await connect();
  t.llm.options.error = new ProviderError('llm_request_failed', 'upstream said no', { statusCode: 500 });
  say(c, 'Hi');
  c.send({ type: 'response.create' });
  const err = await c.waitFor('error');
  assert.is(err.error.code, 'llm_request_failed');
  const done = await c.waitFor('response.done');
  assert.is(done.response.status, 'failed');
  t.resetProviders();
  c.send({ type: 'response.create' });
  const next = await c.waitFor((e) => e.type === 'response.done' && e.response.id !== done.response.id);
  assert.is(next.response.status, 'completed');
  await c.close();
});

test('the older dialect gets the older event names, video frames with video=true, and never GA-only events', async () => {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'voice=alice&video=true' });
  const created = await c.waitFor('session.created');
  assert.is(created.session.voice, 'alice');
  assert.is(created.session.video, true);
  say(c, 'Hello');
  c.send({ type: 'response.create' });
  await c.waitFor('response.done');
  const types = new Set(c.types());
  for (const name of ['conversation.item.created', 'response.audio.delta', 'response.audio_transcript.delta', 'response.video.delta', 'response.done']) {
    assert.ok(types.has(name), `missing ${name}`);
  }
  for (const name of ['conversation.item.added', 'conversation.item.done', 'response.output_audio.delta', 'response.output_image.delta']) {
    assert.not.ok(types.has(name), `unexpected ${name}`);
  }
  await c.close();
});

test('session.update switches face, voice and driving mid-session and rejects unknown assets', async () => {
  const c = await connect();
  c.send({ type: 'session.update', session: { face: 'face1', voice: 'anthony', driving: 'idle' } });
  const updated = await c.waitFor('session.updated');
  assert.is(updated.session.face, 'face1');
  assert.is(updated.session.voice, 'anthony');
  assert.is(updated.session.driving, 'idle');
  c.send({ type: 'session.update', event_id: 'bad_face', session: { face: 'no-such-face' } });
  const err = await c.waitFor('error');
  assert.is(err.error.code, 'unknown_face');
  assert.is(err.error.param, 'session.face');
  assert.is(err.error.event_id, 'bad_face');
  await c.close();
});

test('a session made by POST /v1/sessions is attached by session_id and outlives the socket; an auto-created one ends with it', async () => {
  const made = await t.request('POST', '/v1/sessions', { json: { model: 'gpt-realtime', voice: 'alice', instructions: 'Speak like a pirate.' } });
  assert.is(made.status, 200);
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: `session_id=${made.body.id}` });
  const created = await c.waitFor('session.created');
  assert.is(created.session.id, made.body.id);
  assert.is(created.session.instructions, 'Speak like a pirate.');
  await c.close();
  await new Promise((r) => setTimeout(r, 200));
  assert.is((await t.request('GET', `/v1/sessions/${made.body.id}`)).body.status, 'active');
  // Another user's session does not exist for you.
  const other = await t.keyFor('someone-else');
  const d = await RealtimeTestClient.connect(t.url, { key: other, query: `session_id=${made.body.id}` });
  assert.is((await d.waitFor('error')).error.code, 'session_not_found');
  assert.is(await d.waitClose(), 4004);
  await t.request('DELETE', `/v1/sessions/${made.body.id}`);

  const auto = await connect();
  const id = auto.events[0]?.session.id as string;
  say(auto, 'Hi');
  auto.send({ type: 'response.create' });
  await auto.waitFor('response.done');
  await auto.close();
  let ended: any = null;
  for (let i = 0; i < 50 && ended?.status !== 'ended'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    ended = (await t.request('GET', `/v1/sessions/${id}`)).body;
  }
  assert.is(ended.status, 'ended');
  const usage = await t.request('GET', '/v1/usage');
  const record = usage.body.data.find((u: { session_id: string }) => u.session_id === id);
  assert.ok(record, 'usage record written');
  assert.is(record.output_tokens, 11);
  assert.ok(record.audio_seconds_out > 1, JSON.stringify(record));
  assert.is(record.frames_out, 0); // no images were asked for
});

test("a session's output_size sets the avatar's frames: 1280x720 image deltas where the default is 512x512", async () => {
  const sizeOfFirstImage = async (c: RealtimeTestClient) => {
    c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
    await c.waitFor('session.updated');
    say(c, 'Hello there');
    c.send({ type: 'response.create' });
    await c.waitFor('response.output_image.delta');
    const meta = await sharp(Buffer.from(c.ofType('response.output_image.delta')[0]!.delta as string, 'base64')).metadata();
    c.send({ type: 'response.cancel' });
    await c.waitFor('response.done');
    await c.close();
    return `${meta.width}x${meta.height}`;
  };
  assert.is(await sizeOfFirstImage(await connect()), '512x512');
  const made = await t.request('POST', '/v1/sessions', { json: { model: 'gpt-realtime', output_size: '1280x720' } });
  assert.is(made.status, 200, made.text);
  const wide = await RealtimeTestClient.connect(t.url, { key: t.key, query: `session_id=${made.body.id}` });
  await wide.waitFor('session.created');
  assert.is(await sizeOfFirstImage(wide), '1280x720');
  await t.request('DELETE', `/v1/sessions/${made.body.id}`);
});

test('DELETE of an attached session closes its socket with 4010', async () => {
  const made = await t.request('POST', '/v1/sessions', { json: { model: 'gpt-realtime' } });
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: `session_id=${made.body.id}` });
  await c.waitFor('session.created');
  await t.request('DELETE', `/v1/sessions/${made.body.id}`);
  assert.is((await c.waitFor('error')).error.code, 'session_ended');
  assert.is(await c.waitClose(), 4010);
});

test.run();
