/**
 * Wire conformance against OpenAI's own client code:
 *  - every GA server event this server sends in the common flows (session, text and voice turns,
 *    cancel, truncate/delete/retrieve, errors) validates against the zod schemas of
 *    `@openai/agents-realtime` (`realtimeServerEventSchema`, the union its SDK parses events with);
 *  - the `openai` npm SDK's realtime WebSocket client (`OpenAIRealtimeWS`) holds a conversation
 *    with the server. That client always connects with wss://, so the test puts a TLS terminator
 *    with a throwaway self-signed certificate (made by openssl) in front of the server.
 * Image events are the avatar's extension and are not in OpenAI's union; a client gets them only
 * when it asks for images, which these clients do not.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { createRequire } from 'node:module';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { RealtimeTestClient, type ServerEvent } from '../../harness/clients/realtime-client.js';
import { speechPcm24k } from '../../harness/measures/speech.js';
import { tempDir } from '../../harness/servers/server.js';

// The schemas module is not in the package's exports map: load it by its resolved file path.
const require = createRequire(import.meta.url);
const agentsDir = path.dirname(require.resolve('@openai/agents-realtime'));
const { realtimeServerEventSchema } = require(path.join(agentsDir, 'openaiRealtimeEvents.js')) as {
  realtimeServerEventSchema: { safeParse(v: unknown): { success: boolean; error?: { issues: unknown[] } } };
};

let t: RealtimeTestServer;

test.before(async () => {
  t = await startRealtimeTestServer();
});

test.after(async () => {
  await t?.close();
});

function validate(events: ServerEvent[]): string[] {
  const failures: string[] = [];
  for (const e of events) {
    const r = realtimeServerEventSchema.safeParse(e);
    if (!r.success) failures.push(`${e.type}: ${JSON.stringify(r.error?.issues).slice(0, 400)}`);
  }
  return failures;
}

test('every GA event of the common flows validates against the @openai/agents-realtime schemas', async () => {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.', audio: { output: { voice: 'marin' } }, tracing: 'auto' } });
  await c.waitFor('session.updated');
  // OpenAI's custom-voice form, echoed as given.
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: { id: 'marin' } } } } });
  const custom = await c.waitFor((e) => e.type === 'session.updated' && typeof e.session.audio.output.voice === 'object');
  assert.equal(custom.session.audio.output.voice, { id: 'marin' });
  // Text turn with audio.
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello' }] } });
  c.send({ type: 'response.create' });
  const first = await c.waitFor('response.done');
  // Voice turn through the VAD.
  const speech = speechPcm24k('Please describe the weather today.');
  const pad = new Int16Array(24000 * 0.9);
  for (const pcm of [pad, speech, pad]) c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(pcm.buffer).toString('base64') });
  const second = await c.waitFor((e) => e.type === 'response.done' && e.response.id !== first.response.id);
  // Truncate, retrieve, delete, cancel, errors.
  const itemId = second.response.output[0].id;
  c.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 100 });
  await c.waitFor('conversation.item.truncated');
  c.send({ type: 'conversation.item.retrieve', item_id: itemId });
  await c.waitFor('conversation.item.retrieved');
  c.send({ type: 'conversation.item.delete', item_id: itemId });
  await c.waitFor('conversation.item.deleted');
  t.llm.options.reply = 'A longer answer that will be cancelled. '.repeat(4);
  c.send({ type: 'response.create' });
  await c.waitFor((e) => e.type === 'response.output_audio.delta' && e.response_id !== second.response.id);
  c.send({ type: 'response.cancel' });
  await c.waitFor((e) => e.type === 'response.done' && e.response.status === 'cancelled');
  t.resetProviders();
  // A text-only response (output_text events).
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
  await c.waitFor((e) => e.type === 'session.updated' && e.session.output_modalities[0] === 'text');
  c.send({ type: 'response.create', response: { metadata: { kind: 'text' } } });
  await c.waitFor((e) => e.type === 'response.done' && e.response.metadata?.kind === 'text');
  c.send({ type: 'input_audio_buffer.clear' });
  await c.waitFor('input_audio_buffer.cleared');
  c.send({ type: 'nope', event_id: 'bad' });
  await c.waitFor('error');
  await c.close();

  const types = new Set(c.types());
  for (const expected of ['session.created', 'session.updated', 'conversation.item.added', 'conversation.item.done', 'response.created', 'response.output_item.added', 'response.content_part.added', 'response.output_audio.delta', 'response.output_audio_transcript.delta', 'response.output_audio.done', 'response.output_audio_transcript.done', 'response.content_part.done', 'response.output_item.done', 'response.done', 'input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.completed', 'conversation.item.truncated', 'conversation.item.retrieved', 'conversation.item.deleted', 'input_audio_buffer.cleared', 'response.output_text.delta', 'response.output_text.done', 'error']) {
    assert.ok(types.has(expected), `flow did not produce ${expected}`);
  }
  assert.equal(validate(c.events), []);
});

test('function calls, their outputs, images and item errors validate against the @openai/agents-realtime schemas, in OpenAI\'s order', async () => {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  try {
    await c.waitFor('session.created');
    const tool = { type: 'function', name: 'get_weather', description: 'Weather in a city.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
    c.send({ type: 'session.update', session: { type: 'realtime', tools: [tool], tool_choice: 'auto' } });
    const updated = await c.waitFor('session.updated');
    assert.equal(updated.session.tools, [tool]);
    t.llm.options = {
      reply: 'Let me look.',
      toolCalls: (r) => (r.messages.some((m) => m.role === 'tool') ? [] : [{ name: 'get_weather', arguments: '{"city":"Paris"}', callId: 'call_conf' }]),
    };
    // A camera frame with the question (a 1x1 PNG).
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }, { type: 'input_image', image_url: `data:image/png;base64,${png}` }] } });
    const from = c.events.length;
    c.send({ type: 'response.create' });
    const done = await c.waitFor((e) => e.type === 'response.done' && e.response.output.some((o: { type: string }) => o.type === 'function_call'));
    const order = c.events.slice(from).map((e) => e.type).filter((x) => !x.startsWith('response.output_audio') && x !== 'response.content_part.added' && x !== 'response.content_part.done');
    const call = done.response.output.find((o: { type: string }) => o.type === 'function_call');
    assert.equal([call.call_id, call.name, call.arguments, call.status], ['call_conf', 'get_weather', '{"city":"Paris"}', 'completed']);
    for (const x of ['response.function_call_arguments.delta', 'response.function_call_arguments.done']) assert.ok(order.includes(x), order.join(', '));
    assert.ok(order.indexOf('response.function_call_arguments.done') < order.lastIndexOf('response.done'));
    c.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_conf', output: '{"temperature_c":21}' } });
    await c.waitFor((e) => e.type === 'conversation.item.done' && e.item.type === 'function_call_output');
    t.llm.options = { reply: 'It is 21 degrees in Paris.' };
    c.send({ type: 'response.create' });
    await c.waitFor((e) => e.type === 'response.done' && e.response.id !== done.response.id);
    const lastRequest = t.llm.requests.at(-1)!;
    assert.equal(lastRequest.messages.at(-1), { role: 'tool', toolCallId: 'call_conf', content: '{"temperature_c":21}' });
    c.send({ type: 'conversation.item.retrieve', item_id: 'item_missing', event_id: 'ev_missing' });
    const err = await c.waitFor((e) => e.type === 'error' && e.error.event_id === 'ev_missing');
    assert.is(err.error.code, 'item_retrieve_invalid_item_id');
    // The SDK's item schema (0.14) has no input_image part although its own addImage() sends one:
    // it reads those two echoes as generic events, as it does OpenAI's. Everything else validates.
    const hasImage = (e: ServerEvent) => (e.item?.content ?? []).some((p: { type: string }) => p.type === 'input_image');
    assert.is(c.events.filter(hasImage).length, 2);
    assert.equal(validate(c.events.filter((e) => !hasImage(e))), []);
  } finally {
    t.resetProviders();
    await c.close();
  }
});

test('the openai npm SDK realtime WebSocket client holds a conversation with the server', async () => {
  const dir = tempDir('avatar-tls-');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
  const cert = fs.readFileSync(path.join(dir, 'cert.pem'));
  const port = new URL(t.url).port;
  const terminator = tls.createServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert }, (socket) => {
    const upstream = net.connect(Number(port), '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => terminator.listen(0, '127.0.0.1', resolve));
  const tlsPort = (terminator.address() as net.AddressInfo).port;
  try {
    const client = new OpenAI({ apiKey: t.key, baseURL: `https://127.0.0.1:${tlsPort}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime', options: { ca: cert } }, client);
    const seen: string[] = [];
    const errors: unknown[] = [];
    rt.on('event', (e: { type: string }) => seen.push(e.type));
    rt.on('error', (err: unknown) => errors.push(err));
    const done = new Promise<{ response: { status: string } }>((resolve) => rt.on('response.done', resolve as never));
    await new Promise<void>((resolve, reject) => {
      rt.socket.once('open', () => resolve());
      rt.socket.once('error', reject);
    });
    rt.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio'], instructions: 'Be brief.' } });
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello SDK' }] } });
    rt.send({ type: 'response.create' });
    const result = await done;
    rt.close();
    assert.is(result.response.status, 'completed');
    assert.equal(errors, []);
    assert.is(seen[0], 'session.created');
    assert.ok(seen.includes('response.output_audio.delta'));
    assert.equal(t.llm.requests.at(-1)?.messages.at(-1), { role: 'user', content: 'Hello SDK' });
  } finally {
    await new Promise<void>((resolve) => terminator.close(() => resolve()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
