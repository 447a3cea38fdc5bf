/**
 * The generated realtime event description (docs/realtime-events.schema.json, made by
 * `npm run docs:events` from the server's types) against what the engines really send and accept:
 *
 *  - scripted realtime sessions on the engine harness (a text turn, a voice turn with its
 *    transcription, a function call and its output, a barge-in and a cancel, errors, a
 *    session.update, item retrieve / truncate / delete) and an avatar-only session (segments,
 *    clear, listen, errors): EVERY server event they emit validates against `ServerEvent`, and
 *    every client event the scripts send validates against `ClientEvent`;
 *  - a seeded run of the realtime fuzz corpus (test/helpers/fuzz.ts) through an engine: each case
 *    the engine accepted (no error names its event_id) validates against `ClientEvent`, and every
 *    server event of the run against `ServerEvent`;
 *  - deliberately broken events (a field of the wrong type, a missing or unknown field on a server
 *    event, an unknown type) are rejected, and the engines reject the broken client events too, so
 *    a schema too loose to catch anything fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Logger } from '../../src/core/log.js';
import { FakeLanguageModels } from '../../src/providers/llm/fake-llm.js';
import { AvatarSessionEngine } from '../../src/realtime/avatar-engine.js';
import { type Json, newServerEventId } from '../../src/realtime/protocol.js';
import { engineHarness, TickingAvatar, type Harness, type SeenEvent } from '../helpers/engine-harness.js';
import { Rng, buildRealtimeCase, learnRealtime, type RealtimeKnown } from '../helpers/fuzz.js';
import { concatSamples, silence, toPcm16, tone } from '../../harness/measures/speech.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const schema = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs/realtime-events.schema.json'), 'utf8')) as { $id: string; $defs: Record<string, unknown> };
const ajv = new Ajv2020({ strict: true, allErrors: false });
ajv.addSchema(schema);
const validator = (name: string): ValidateFunction => {
  const v = ajv.getSchema(`${schema.$id}#/$defs/${name}`);
  if (!v) throw new Error(`the schema has no $defs/${name}`);
  return v;
};
const serverEvent = validator('ServerEvent');
const clientEvent = validator('ClientEvent');

const IN_HZ = 24_000;
const FUZZ_SEED = 2711;
const FUZZ_CASES = 300;

/** Server event types every scripted session together must have produced (so "all valid" is not vacuous). */
const MUST_SEE = [
  'session.created',
  'session.updated',
  'error',
  'conversation.item.added',
  'conversation.item.done',
  'conversation.item.retrieved',
  'conversation.item.truncated',
  'conversation.item.deleted',
  'conversation.item.input_audio_transcription.completed',
  'input_audio_buffer.speech_started',
  'input_audio_buffer.speech_stopped',
  'input_audio_buffer.committed',
  'response.created',
  'response.done',
  'response.output_item.added',
  'response.output_item.done',
  'response.content_part.added',
  'response.content_part.done',
  'response.output_text.delta',
  'response.output_text.done',
  'response.output_audio.delta',
  'response.output_audio_transcript.delta',
  'response.output_audio_transcript.done',
  'response.function_call_arguments.delta',
  'response.function_call_arguments.done',
  'response.output_image.delta',
  'output_audio_buffer.started',
  'output_audio_buffer.committed',
  'output_audio_buffer.stopped',
  'output_audio_buffer.cleared',
];

const seen = new Set<string>();

/** A server event as a client receives it: stamped with an event_id (as the transports do, GA dialect), as JSON. */
const onWire = (draft: SeenEvent): unknown => JSON.parse(JSON.stringify({ ...draft, event_id: newServerEventId() }));

/**
 * Fails naming each event that does not validate: its type and what ajv says against that type's
 * own entry (the union's complaint lists every branch). Server events are checked as sent (onWire).
 */
function assertValid(validate: ValidateFunction, events: readonly unknown[], what: string): void {
  const bad: string[] = [];
  for (const raw of events) {
    const event = validate === serverEvent ? onWire(raw as SeenEvent) : raw;
    const type = (event as SeenEvent).type;
    if (validate(event)) {
      if (validate === serverEvent) seen.add(type);
      continue;
    }
    const own = typeof type === 'string' && type in schema.$defs ? validator(type) : validate;
    own(event);
    bad.push(`${type}: ${ajv.errorsText(own.errors)} in ${JSON.stringify(event).slice(0, 300)}`);
  }
  assert.ok(events.length > 0, `${what}: no events to check`);
  assert.equal(bad, [], `${what}: events the schema rejects`);
}

/** A harness whose sent client events are kept, to be validated too. */
async function recorded(options: Parameters<typeof engineHarness>[0] = {}): Promise<Harness & { sent: Json[] }> {
  const h = await engineHarness(options);
  const sent: Json[] = [];
  return Object.assign(h, {
    sent,
    send(event: Json) {
      sent.push(event);
      h.engine.receive(JSON.stringify(event));
    },
  });
}

const ask = (text: string) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
const WEATHER = { type: 'function', name: 'get_weather', description: 'The weather.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const errorOf = (e: SeenEvent) => e.error as { code: string; event_id: string | null };

const Schema = suite('realtime event schema');

Schema('a text turn, a spoken turn cut by a cancel, errors, session.update and item events: every event validates', async () => {
  const h = await recorded({ initial: { audio: { input: { turn_detection: null } } } });
  try {
    h.send({ type: 'session.update', event_id: 'upd', session: { type: 'realtime', instructions: 'Be brief.', tracing: 'auto', truncation: 'auto' } });
    await h.waitFor((e) => e.type === 'session.updated');
    h.send(ask('Hello?'));
    h.send({ type: 'response.create', event_id: 'text', response: { output_modalities: ['text'] } });
    await h.waitFor((e) => e.type === 'response.done');
    let from = h.events.length;
    h.send(ask('Tell me more.'));
    h.send({ type: 'response.create', event_id: 'spoken' });
    await h.waitFor((e) => e.type === 'response.output_audio.delta', { from, tick: true });
    h.send({ type: 'response.cancel', event_id: 'cancel' });
    const cancelled = await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
    assert.is((cancelled.response as Json).status, 'cancelled');
    const assistant = h.events.findLast((e) => e.type === 'conversation.item.added' && (e.item as Json).role === 'assistant')!;
    const itemId = (assistant.item as Json).id as string;
    from = h.events.length;
    h.send({ type: 'conversation.item.retrieve', event_id: 'get', item_id: itemId });
    h.send({ type: 'conversation.item.truncate', event_id: 'cut', item_id: itemId, content_index: 0, audio_end_ms: 100 });
    h.send({ type: 'conversation.item.delete', event_id: 'del', item_id: itemId });
    h.send({ type: 'conversation.item.retrieve', event_id: 'missing', item_id: 'item_nope' });
    h.send({ type: 'response.cancel', event_id: 'idle_cancel' });
    h.send({ type: 'input_audio_buffer.commit', event_id: 'empty_commit' });
    h.send({ type: 'output_audio_buffer.clear', event_id: 'clear' });
    await h.waitFor((e) => e.type === 'error' && errorOf(e).event_id === 'empty_commit', { from });
    assertValid(serverEvent, h.events, 'realtime session');
    assertValid(clientEvent, h.sent, 'the client events sent');
  } finally {
    await h.close();
  }
});

Schema('a voice turn (VAD, transcription, response) and a barge-in: every event validates', async () => {
  const h = await recorded({ transcript: 'What time is it?' });
  try {
    const speak = (parts: Float32Array[]) => {
      const pcm = toPcm16(concatSamples(parts));
      for (let i = 0; i < pcm.length; i += IN_HZ / 50) {
        const part = pcm.subarray(i, i + IN_HZ / 50);
        h.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
      }
    };
    speak([tone(220, 800, IN_HZ, 0.3), silence(1200, IN_HZ)]);
    await h.waitFor((e) => e.type === 'response.output_audio.delta', { tick: true });
    const from = h.events.length;
    speak([tone(220, 800, IN_HZ, 0.3), silence(1200, IN_HZ)]);
    const cut = await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
    assert.is((cut.response as Json).status, 'cancelled');
    await h.waitFor((e) => e.type === 'response.done' && e !== cut, { from, tick: true });
    assertValid(serverEvent, h.events, 'voice session');
    assertValid(clientEvent, h.sent, 'the appends sent');
  } finally {
    await h.close();
  }
});

Schema('a function call and its output: every event validates', async () => {
  const llm = new FakeLanguageModels({ toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}', callId: 'call_1' }] });
  const h = await recorded({ deps: { llm } });
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', tools: [WEATHER], output_modalities: ['text'] } });
    h.send(ask('Weather in Paris?'));
    h.send({ type: 'response.create' });
    await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.ok(h.events.some((e) => e.type === 'response.function_call_arguments.done'));
    h.send({ type: 'conversation.item.create', event_id: 'out', previous_item_id: null, item: { type: 'function_call_output', call_id: 'call_1', output: '{"c":21}' } });
    await h.waitFor((e) => e.type === 'conversation.item.done' && (e.item as Json).type === 'function_call_output');
    assertValid(serverEvent, h.events, 'function call session');
    assertValid(clientEvent, h.sent, 'the client events sent');
  } finally {
    await h.close();
  }
});

/** An avatar-only engine on the ticking avatar, its events collected (as test/realtime/avatar-engine.test.ts builds it). */
async function avatarSession(): Promise<{ engine: AvatarSessionEngine; avatar: TickingAvatar; events: SeenEvent[]; sent: Json[]; send(e: Json): void }> {
  const events: SeenEvent[] = [];
  const sent: Json[] = [];
  const avatar = new TickingAvatar();
  const engine = new AvatarSessionEngine(
    { sessionId: 'sess_a', userId: 'u1', transport: 'websocket', expiresAt: 0, initial: { type: 'avatar' }, frames: { width: 512, height: 512, fps: 25 } },
    {
      send: (event) => events.push(event as SeenEvent),
      sendBinary: () => undefined,
      backlogBytes: () => 0,
      avatar,
      assets: { require: async () => undefined },
      recorder: { addUsage: async () => undefined },
      log: new Logger('silent'),
    },
  );
  await engine.start();
  return { engine, avatar, events, sent, send: (e) => (sent.push(e), engine.receive(JSON.stringify(e))) };
}

const pcmTone = (ms: number) => Buffer.from(toPcm16(tone(200, ms, IN_HZ, 0.25)).buffer).toString('base64');

Schema('an avatar-only session (segments, clear, listen, session.update, errors): every event validates', async () => {
  const a = await avatarSession();
  try {
    a.send({ type: 'session.update', event_id: 'u', session: { audio: { input: { format: { type: 'audio/pcm', rate: 24000 } } } } });
    a.send({ type: 'output_audio_buffer.append', event_id: 'a1', audio: pcmTone(200), segment_id: 'first' });
    a.send({ type: 'output_audio_buffer.commit', event_id: 'c1' });
    a.send({ type: 'avatar.listen', listening: true });
    await a.engine.idle();
    for (let i = 0; i < 10; i++) a.avatar.tick();
    a.send({ type: 'output_audio_buffer.append', audio: pcmTone(400) });
    await a.engine.idle();
    a.avatar.tick();
    a.send({ type: 'output_audio_buffer.clear', event_id: 'clr' });
    a.send({ type: 'output_audio_buffer.commit', event_id: 'nothing' });
    a.send({ type: 'response.create', event_id: 'realtime_only' });
    await a.engine.idle();
    for (let i = 0; i < 3; i++) a.avatar.tick();
    const types = new Set(a.events.map((e) => e.type));
    for (const t of ['output_audio_buffer.started', 'output_audio_buffer.committed', 'output_audio_buffer.stopped', 'output_audio_buffer.cleared', 'response.output_image.delta', 'error']) {
      assert.ok(types.has(t), `the avatar session sent ${t}`);
    }
    assertValid(serverEvent, a.events, 'avatar-only session');
    assertValid(clientEvent, a.sent.filter((e) => e.type !== 'response.create'), 'the avatar client events sent');
  } finally {
    await a.engine.close();
  }
});

Schema('the fuzz corpus: each case the engine accepts is a valid ClientEvent; every server event of the run validates', async () => {
  const h = await engineHarness({ reply: { reply: 'Fine.' } });
  const known: RealtimeKnown = { itemIds: [], assistantItemIds: [], responseIds: [] };
  const rng = new Rng(FUZZ_SEED);
  const cases: Array<{ eventId: string; event: unknown }> = [];
  try {
    for (let n = 0; n < FUZZ_CASES; n++) {
      const c = buildRealtimeCase(rng, n, known);
      for (const frame of c.frames) if (typeof frame === 'string') h.engine.receive(frame);
      await h.engine.idle();
      h.avatar.tick();
      learnRealtime(known, h.events);
      if (c.eventId === null || c.frames.length !== 1 || typeof c.frames[0] !== 'string') continue;
      try {
        cases.push({ eventId: c.eventId, event: JSON.parse(c.frames[0]) });
      } catch {
        // not JSON: the engine refused it before any type
      }
    }
    for (let i = 0; i < 50; i++) h.avatar.tick();
    await h.engine.idle();
    const refused = new Set(h.events.filter((e) => e.type === 'error').map((e) => errorOf(e).event_id));
    const accepted = cases.filter((c) => !refused.has(c.eventId)).map((c) => c.event);
    assert.ok(accepted.length >= 20, `the engine accepted ${accepted.length} of ${cases.length} fuzz cases`);
    assert.ok(cases.length - accepted.length >= 20, 'the corpus also holds refused cases');
    assertValid(clientEvent, accepted, 'accepted fuzz cases');
    assertValid(serverEvent, h.events, 'the fuzz run');
  } finally {
    await h.close();
  }
});

Schema('together the sessions sent every kind of event they can without a model failing', () => {
  assert.equal(MUST_SEE.filter((t) => !seen.has(t)), []);
  for (const t of MUST_SEE) assert.ok(t in schema.$defs);
});

const Loose = suite('realtime event schema: broken events are rejected');

/** A valid server event of each shape the broken cases start from. */
const SERVER_SAMPLES: Record<string, Json> = {
  transcript: { type: 'response.output_audio_transcript.delta', event_id: 'event_1', response_id: 'resp_1', item_id: 'item_1', output_index: 0, content_index: 0, delta: 'Hi' },
  segment: { type: 'output_audio_buffer.stopped', event_id: 'event_2', segment_id: 'seg', played_ms: 120, interrupted: false },
  error: { type: 'error', event_id: 'event_3', error: { type: 'invalid_request_error', code: 'invalid_value', message: 'No.', param: null, event_id: null } },
};

Loose('the samples themselves validate (so each rejection below is the break, not the sample)', () => {
  assertValid(serverEvent, Object.values(SERVER_SAMPLES), 'samples');
});

Loose('server events: a wrong field type, a missing or unknown field and an unknown type are rejected', () => {
  const { transcript, segment, error } = SERVER_SAMPLES as Record<string, Json>;
  const broken: Array<[string, unknown]> = [
    ['delta as a number', { ...transcript, delta: 5 }],
    ['no item_id', { ...transcript, item_id: undefined }],
    ['a field its type lacks', { ...transcript, frame_index: 3 }],
    ['interrupted as a string', { ...segment, interrupted: 'no' }],
    ['an unknown type', { ...transcript, type: 'response.output_smell.delta' }],
    ['no type', { ...transcript, type: undefined }],
    ['error.message missing', { ...error, error: { type: 'x', code: null } }],
    ['event_id null', { ...segment, event_id: null }],
  ];
  for (const [why, event] of broken) assert.not.ok(serverEvent(JSON.parse(JSON.stringify(event))), `rejected: ${why}`);
});

const BAD_CLIENT: Array<[string, Json]> = [
  ['audio as a number', { type: 'input_audio_buffer.append', event_id: 'b1', audio: 5 }],
  ['an unknown type', { type: 'input_audio_buffer.smell', event_id: 'b2' }],
  ['item_id missing', { type: 'conversation.item.retrieve', event_id: 'b3' }],
  ['content_index as a string', { type: 'conversation.item.truncate', event_id: 'b4', item_id: 'item_1', content_index: '0', audio_end_ms: 0 }],
  ['session as a string', { type: 'session.update', event_id: 'b5', session: 'fast' }],
  ['response_id as a number', { type: 'response.cancel', event_id: 'b6', response_id: 7 }],
];

const BAD_AVATAR_CLIENT: Array<[string, Json]> = [
  ['listening as a string', { type: 'avatar.listen', event_id: 'v1', listening: 'yes' }],
  ['an empty segment_id', { type: 'output_audio_buffer.append', event_id: 'v2', audio: 'AAAA', segment_id: '' }],
  ['audio missing', { type: 'output_audio_buffer.append', event_id: 'v3' }],
];

Loose('client events: broken ones are rejected by the schema and by the engines alike', async () => {
  for (const [why, event] of [...BAD_CLIENT, ...BAD_AVATAR_CLIENT]) assert.not.ok(clientEvent(event), `the schema rejects: ${why}`);
  const h = await engineHarness();
  const a = await avatarSession();
  try {
    for (const [, event] of BAD_CLIENT) h.send(event);
    for (const [, event] of BAD_AVATAR_CLIENT) a.send(event);
    await h.engine.idle();
    await a.engine.idle();
    const refused = (events: SeenEvent[]) => events.filter((e) => e.type === 'error').map((e) => errorOf(e).event_id).sort();
    assert.equal(refused(h.events), BAD_CLIENT.map(([, e]) => e.event_id).sort());
    assert.equal(refused(a.events), BAD_AVATAR_CLIENT.map(([, e]) => e.event_id).sort());
  } finally {
    await h.close();
    await a.engine.close();
  }
});

Schema.run();
Loose.run();
