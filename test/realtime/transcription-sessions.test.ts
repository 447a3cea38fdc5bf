/**
 * Transcription sessions (`session.type: "transcription"`, src/realtime/transcription-engine.ts)
 * over WebSocket: opened with ?intent=transcription or with a client secret minted for one, the
 * client's audio in, its turns and transcripts out, no response and no avatar; the input side
 * changed by session.update; what such a session does not have refused by name with the session
 * going on. Every server event is checked against the zod schemas @openai/agents-realtime parses
 * events with. The recogniser is the scripted one (harness/servers/realtime-server.ts), except in
 * the last suite, which runs the embedded Whisper as `npm start` does. A call (WebRTC) is in
 * test/realtime/calls.test.ts, openai-python's client in test/clients/openai-python.test.ts.
 */
import path from 'node:path';
import { createRequire } from 'node:module';
import * as assert from 'uvu/assert';
import { whisperModelPath } from '../../src/providers/asr/index.js';
import { DEFAULT_TRANSCRIPT, startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { REPO_ROOT, startTestServer, type TestServer } from '../../harness/servers/server.js';
import { RealtimeTestClient, type ServerEvent } from '../../harness/clients/realtime-client.js';
import { speechPcm24k } from '../../harness/measures/speech.js';
import { suiteNeeding } from '../helpers/skip.js';

const require = createRequire(import.meta.url);
const agentsDir = path.dirname(require.resolve('@openai/agents-realtime'));
const { realtimeServerEventSchema } = require(path.join(agentsDir, 'openaiRealtimeEvents.js')) as {
  realtimeServerEventSchema: { safeParse(v: unknown): { success: boolean; error?: { issues: unknown[] } } };
};

function invalidEvents(events: ServerEvent[]): string[] {
  return events.flatMap((e) => {
    const r = realtimeServerEventSchema.safeParse(e);
    return r.success ? [] : [`${e.type}: ${JSON.stringify(r.error?.issues).slice(0, 400)}`];
  });
}

const b64 = (pcm: Int16Array): string => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');
const SILENCE = new Int16Array(24_000 * 0.9);

/** A question between two silences, appended as a client streams it. */
function sendSpokenTurn(c: RealtimeTestClient, text: string): void {
  for (const pcm of [SILENCE, speechPcm24k(text), SILENCE]) c.send({ type: 'input_audio_buffer.append', audio: b64(pcm) });
}

interface Ctx {
  t: RealtimeTestServer;
  avatarsStarted: number;
}

const Ws = suiteNeeding<Ctx>('transcription sessions over WebSocket', null, { avatarsStarted: 0 } as Ctx);

Ws.before(async (ctx) => {
  // A transcription session renders nothing: an avatar started here would fail the session.
  ctx.t = await startRealtimeTestServer({
    runtime: {
      startAvatar: async () => {
        ctx.avatarsStarted++;
        throw new Error('a transcription session started an avatar');
      },
    },
  });
});

Ws.after(async (ctx) => {
  await ctx.t?.close();
});

Ws.after.each((ctx) => {
  ctx.t.resetProviders();
});

Ws('?intent=transcription opens a transcription session: its turns and their transcripts, no response and no avatar', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'intent=transcription' });
  try {
    const created = await c.waitFor('session.created');
    assert.is(created.session.type, 'transcription');
    assert.is(created.session.object, 'realtime.transcription_session');
    assert.match(created.session.id, /^sess_/);
    assert.equal(created.session.audio.input.turn_detection, { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 });
    assert.equal(created.session.audio.input.format, { type: 'audio/pcm', rate: 24_000 });
    assert.is(created.session.model, undefined, 'a transcription session names no model');
    sendSpokenTurn(c, 'What is the weather like today?');
    const completed = await c.waitFor('conversation.item.input_audio_transcription.completed');
    assert.is(completed.transcript, DEFAULT_TRANSCRIPT);
    const done = await c.waitFor((e) => e.type === 'conversation.item.done' && e.item.id === completed.item_id);
    assert.equal(done.item.content, [{ type: 'input_audio', transcript: DEFAULT_TRANSCRIPT }]);
    // A second turn: the items follow one another.
    sendSpokenTurn(c, 'And tomorrow?');
    const second = await c.waitFor((e) => e.type === 'input_audio_buffer.committed' && e.item_id !== completed.item_id);
    assert.is(second.previous_item_id, completed.item_id);
    await c.waitFor((e) => e.type === 'conversation.item.done' && e.item.id === second.item_id);
    const turn = c.types().filter((x) => x !== 'conversation.item.input_audio_transcription.delta');
    const from = turn.indexOf('input_audio_buffer.speech_started');
    assert.equal(turn.slice(from, from + 6), [
      'input_audio_buffer.speech_started',
      'input_audio_buffer.speech_stopped',
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.input_audio_transcription.completed',
      'conversation.item.done',
    ]);
    assert.equal(c.types().filter((x) => x.startsWith('response.') || x.startsWith('output_audio_buffer.')), [], 'no response, no output audio');
    assert.equal(invalidEvents(c.events), []);
    assert.is(ctx.avatarsStarted, 0);
    // The session's chat history has the transcripts.
    const chat = await ctx.t.request('GET', `/v1/sessions/${created.session.id}/chat`);
    assert.is(chat.status, 200, JSON.stringify(chat.body));
    assert.ok(JSON.stringify(chat.body).includes(DEFAULT_TRANSCRIPT), JSON.stringify(chat.body));
  } finally {
    await c.close();
  }
});

Ws('session.update changes the input side; what a transcription session has not is refused by name and the session goes on', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'intent=transcription' });
  try {
    await c.waitFor('session.created');
    const transcription = { model: 'gpt-4o-transcribe', language: 'en', prompt: 'weather' };
    c.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { transcription, turn_detection: null, noise_reduction: { type: 'near_field' } } }, include: ['item.input_audio_transcription.logprobs'] } });
    const updated = await c.waitFor('session.updated');
    assert.equal(updated.session.audio.input.transcription, transcription);
    assert.is(updated.session.audio.input.turn_detection, null);
    assert.equal(updated.session.include, ['item.input_audio_transcription.logprobs']);
    const refusals: Array<[Record<string, unknown>, string, string | null]> = [
      [{ type: 'response.create', event_id: 'ev_create' }, 'unsupported_in_transcription_session', 'type'],
      [{ type: 'conversation.item.create', event_id: 'ev_item', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } }, 'unsupported_in_transcription_session', 'type'],
      [{ type: 'session.update', event_id: 'ev_instructions', session: { instructions: 'Be brief.' } }, 'unknown_parameter', 'session.instructions'],
      [{ type: 'session.update', event_id: 'ev_output', session: { audio: { output: { voice: 'marin' } } } }, 'unknown_parameter', 'session.audio.output'],
      [{ type: 'session.update', event_id: 'ev_type', session: { type: 'realtime' } }, 'invalid_value', 'session.type'],
      [{ type: 'session.update', event_id: 'ev_idle', session: { audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 6000 } } } } }, 'invalid_value', 'session.audio.input.turn_detection.idle_timeout_ms'],
      [{ type: 'input_audio_buffer.commit', event_id: 'ev_empty' }, 'input_audio_buffer_commit_empty', null],
    ];
    for (const [event, code, param] of refusals) {
      c.send(event);
      const err = await c.waitFor((e) => e.type === 'error' && e.error.event_id === event.event_id);
      assert.is(err.error.code, code, JSON.stringify(err.error));
      if (param !== null) assert.is(err.error.param, param, JSON.stringify(err.error));
    }
    // Manual turns: the client commits; the refusals changed nothing.
    c.send({ type: 'input_audio_buffer.append', audio: b64(speechPcm24k('Is it going to rain?')) });
    c.send({ type: 'input_audio_buffer.commit' });
    const committed = await c.waitFor('input_audio_buffer.committed');
    const completed = await c.waitFor('conversation.item.input_audio_transcription.completed');
    assert.is(completed.item_id, committed.item_id);
    const asked = ctx.t.asr.requests.at(-1)!;
    assert.equal([asked.language, asked.prompt], ['en', 'weather'], 'the session\'s language and prompt reach the recogniser');
    c.send({ type: 'conversation.item.retrieve', item_id: committed.item_id });
    const retrieved = await c.waitFor('conversation.item.retrieved');
    assert.equal(retrieved.item.content, [{ type: 'input_audio', transcript: DEFAULT_TRANSCRIPT }]);
    c.send({ type: 'conversation.item.delete', item_id: committed.item_id });
    await c.waitFor((e) => e.type === 'conversation.item.deleted' && e.item_id === committed.item_id);
    c.send({ type: 'input_audio_buffer.append', audio: b64(SILENCE) });
    c.send({ type: 'input_audio_buffer.clear' });
    await c.waitFor('input_audio_buffer.cleared');
    assert.equal(c.types().filter((x) => x.startsWith('response.')), []);
    assert.equal(invalidEvents(c.events), []);
  } finally {
    await c.close();
  }
});

Ws('a client secret minted for a transcription session opens one without an intent; a key of another type cannot', async (ctx) => {
  const session = { type: 'transcription', audio: { input: { transcription: { model: 'gpt-4o-mini-transcribe', language: 'en' }, turn_detection: { type: 'semantic_vad', eagerness: 'high' } } } };
  const secret = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: { session } });
  assert.is(secret.status, 200, JSON.stringify(secret.body));
  assert.equal([secret.body.session.type, secret.body.session.object], ['transcription', 'realtime.transcription_session']);
  assert.equal(secret.body.session.audio.input.turn_detection, session.audio.input.turn_detection);
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: secret.body.value });
  try {
    const created = await c.waitFor('session.created');
    assert.equal([created.session.type, created.session.id], ['transcription', secret.body.session.id]);
    assert.equal(created.session.audio.input.transcription, session.audio.input.transcription);
    sendSpokenTurn(c, 'What is the weather like today?');
    const completed = await c.waitFor('conversation.item.input_audio_transcription.completed');
    assert.is(completed.transcript, DEFAULT_TRANSCRIPT);
    assert.equal(invalidEvents(c.events), []);
  } finally {
    await c.close();
  }
  const realtimeKey = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime' } } });
  const refused = await RealtimeTestClient.connect(ctx.t.url, { key: realtimeKey.body.value, query: 'intent=transcription' });
  const err = await refused.waitFor('error');
  assert.equal([err.error.code, err.error.param], ['invalid_value', 'intent'], 'a realtime key cannot open a transcription session');
  assert.is(await refused.waitClose(), 4009);
  assert.is(ctx.avatarsStarted, 0);
});

const WHISPER = whisperModelPath(path.join(REPO_ROOT, 'models'));
const Embedded = suiteNeeding<{ t: TestServer }>(
  'a transcription session on the embedded recogniser',
  WHISPER ? null : 'the Whisper model is not fetched (npm run setup:models)',
  {} as { t: TestServer },
);

Embedded.before(async (ctx) => {
  ctx.t = await startTestServer({ env: { LLM_PROVIDER: 'offline', PRELOAD_MODELS: 'false' } });
});

Embedded.after(async (ctx) => {
  await ctx.t?.close();
});

Embedded('spoken turns are transcribed by Whisper as they end', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'intent=transcription' });
  try {
    await c.waitFor('session.created');
    sendSpokenTurn(c, 'What is the weather like in Paris today?');
    const completed = await c.waitFor('conversation.item.input_audio_transcription.completed', { timeoutMs: 60_000 });
    assert.match(completed.transcript.toLowerCase(), /weather/);
    assert.match(completed.transcript.toLowerCase(), /paris/);
    assert.equal(c.types().filter((x) => x.startsWith('response.')), []);
    assert.equal(invalidEvents(c.events), []);
  } finally {
    await c.close();
  }
});

Ws.run();
Embedded.run();
