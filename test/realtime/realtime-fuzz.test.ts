/**
 * Realtime fuzz: a seeded stream of hostile client events over real WebSockets to the real server
 * (test/helpers/realtime-server.ts: real engine, store and avatar; scripted model, tone voice, set
 * transcript; real Silero VAD). Cases are built from the real event shapes and then broken: wrong
 * types, missing and unknown fields, huge and tiny numbers, deep nesting, many elements, long
 * strings, unicode, bad base64, odd PCM, unknown types, valid events in odd orders, binary frames,
 * non-JSON, and a few oversize events and 15 MiB audio appends. Several connections run side by side, each sending
 * one case and then a probe event (an item retrieve that must fail with item_retrieve_invalid_item_id naming
 * the probe), so what a case caused is known and the session is shown to answer after every case.
 *
 * Asserts: no `server_error` event (the providers here never fail, so every error is the client's);
 * every error caused by an event that carried an event_id names it, and no error names an event
 * that was not sent; every connection stays open;
 * each session still answers a final valid text turn; /healthz keeps answering in time; nothing
 * escapes to the process (uncaught exceptions and unhandled rejections are collected while the
 * suite runs, so one escape does not end the run before the others are seen; the listeners are
 * removed afterwards, since `npm test` runs every test file in this one process).
 *
 * FUZZ_SEED replays a run; FUZZ_WS_CASES and FUZZ_WS_TIME_BUDGET_MS change its size.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Rng, checkCaseErrors, fuzzSeed, mutateObject, oddJson, oddString } from '../helpers/fuzz.js';
import { RealtimeTestClient, type ServerEvent } from '../helpers/realtime-client.js';
import { watchHealth } from '../helpers/health.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../helpers/realtime-server.js';

const CASES = Number(process.env.FUZZ_WS_CASES) || 3000;
/** Cases stop being issued after this long, so a loaded machine bounds the suite's time, not its coverage. */
const TIME_BUDGET_MS = Number(process.env.FUZZ_WS_TIME_BUDGET_MS) || 35_000;
/** A run on a very loaded machine must still have tried this many cases to count. */
const MIN_CASES = 300;
/** Connections fuzzed side by side (one ga, one older dialect, two ga with turn detection off at first). */
const CONNECTIONS = 4;
/** A case's probe must be answered within this long, or the session is taken as stuck. */
const CASE_TIMEOUT_MS = 30_000;
/** /healthz is asked this often while the fuzz runs. */
const HEALTH_INTERVAL_MS = 100;
/** /healthz must answer within this long: an event that blocks the event loop for seconds shows; load noise does not. */
const HEALTH_DEADLINE_MS = 2_000;
/**
 * Cases (by index) that send a valid 15 MiB base64 audio append, and an event over the 16 MiB
 * limit. Case n runs on connection n % CONNECTIONS: these land on the two where turn detection is
 * off, so minutes of audio are not run through the VAD.
 */
const HUGE_APPEND_AT = new Set([98, 1503]);
const OVERSIZE_AT = new Set([311, 2202]);
/** Base64 of this many bytes is 15 MiB of text (OpenAI's documented append limit). */
const HUGE_APPEND_BYTES = Math.floor((15 * 1024 * 1024 * 3) / 4) & ~1;

interface Built {
  /** Frames sent back to back: text, or binary. */
  frames: Array<string | Buffer>;
  /** The event_id the server can read from it (null when it has none, or it is unreadable). */
  eventId: string | null;
  describe: string;
}

/** What a connection has seen, for cases that refer to real items and responses. */
interface Known {
  itemIds: string[];
  assistantItemIds: string[];
  responseIds: string[];
}

const pcm = (rng: Rng, samples: number): string => {
  const out = new Int16Array(samples);
  const kind = rng.int(0, 3);
  for (let i = 0; i < samples; i++) {
    out[i] = kind === 0 ? 0 : kind === 1 ? (i % 40 < 20 ? 32767 : -32768) : kind === 2 ? Math.round(8000 * Math.sin(i / 7)) : rng.int(-32768, 32767);
  }
  return Buffer.from(out.buffer).toString('base64');
};

const userText = (rng: Rng) => rng.pick(['Hi', 'What is the weather like?', 'Tell me a story.', oddString(rng, 2000), '😀 héllo \u0000 ok']);

/** A tiny real PNG (1x1), and images that only look like one. */
const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const imageUrl = (rng: Rng) =>
  rng.pick([`data:image/png;base64,${PNG_1X1}`, 'data:image/png;base64,AAAA', 'data:image/jpeg;base64,' + PNG_1X1, 'https://example.com/x.png', 'data:text/plain;base64,aGk=', oddString(rng, 200)]);

function validItem(rng: Rng): Record<string, unknown> {
  switch (rng.int(0, 8)) {
    case 6:
      return { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Look:' }, { type: 'input_image', image_url: imageUrl(rng), detail: rng.pick(['auto', 'low', 'high', 'huge']) }] };
    case 7:
      return { type: 'function_call', call_id: rng.pick(['call_fz1', 'call_fz2', oddString(rng, 80)]), name: rng.pick(['get_weather', 'f', '']), arguments: rng.pick(['{}', '{"city":"Paris"}', 'not json']) };
    case 8:
      return { type: 'function_call_output', call_id: rng.pick(['call_fz1', 'call_fz2', 'call_unknown']), output: rng.pick(['{"ok":true}', oddString(rng, 500)]) };
    case 0:
      return { type: 'message', role: 'user', content: [{ type: 'input_text', text: userText(rng) }] };
    case 1:
      return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: userText(rng) }] };
    case 2:
      return { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'Be brief.' }] };
    case 3:
      return { type: 'message', role: 'user', content: [{ type: 'input_audio', audio: pcm(rng, rng.int(1, 12_000)) }] };
    case 4:
      return { type: 'message', role: 'user', content: [{ type: 'input_audio', transcript: userText(rng) }] };
    default:
      return { id: `item_fz${rng.int(0, 50)}`, type: 'message', role: 'assistant', content: [{ type: 'output_audio', transcript: 'Earlier.' }] };
  }
}

function validSession(rng: Rng): Record<string, unknown> {
  return rng.pick<() => Record<string, unknown>>([
    () => ({ type: 'realtime', instructions: rng.pick(['Be brief.', oddString(rng, 3000)]) }),
    () => ({ type: 'realtime', output_modalities: rng.pick([['text'], ['audio'], ['audio', 'image'], ['text', 'image']]) }),
    () => ({ type: 'realtime', audio: { input: { turn_detection: rng.chance(0.5) ? null : { type: 'server_vad', threshold: rng.next(), silence_duration_ms: rng.int(0, 2000) } } } }),
    () => ({ type: 'realtime', audio: { input: { turn_detection: { type: 'semantic_vad', eagerness: rng.pick(['low', 'high', 'auto', 'medium']) } } } }),
    () => ({ type: 'realtime', audio: { output: { voice: rng.pick(['alloy', 'default', 'marin']), speed: rng.pick([0.25, 1, 1.5]) } } }),
    () => ({ type: 'realtime', audio: { input: { transcription: { model: 'whisper-1', language: 'en', prompt: 'x' }, format: { type: 'audio/pcm', rate: 24000 } } } }),
    () => ({ voice: rng.pick(['default', 'alice', 'nobody']), face: rng.pick(['default', 'nobody', null]), driving: rng.pick(['idle', 'nobody', null]) }),
    () => ({ modalities: ['text', 'audio'], turn_detection: null, input_audio_format: rng.pick(['pcm16', 'g711_ulaw', 'x']), temperature: 0.7 }),
    () => ({ type: 'realtime', tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: { a: { type: 'string' } } } }], tool_choice: 'auto' }),
    () => ({
      type: 'realtime',
      tools: rng.pick<unknown>([
        [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }, { type: 'mcp', server_label: 'x', server_url: 'http://127.0.0.1:1' }],
        [{ type: 'function', name: 'bad name!' }],
        [{ type: 'function', name: 'a', parameters: { type: 'array' } }],
        Array.from({ length: rng.pick([2, 129]) }, (_, i) => ({ type: 'function', name: `t${i}` })),
      ]),
      tool_choice: rng.pick<unknown>(['auto', 'none', 'required', { type: 'function', name: 'get_weather' }, { type: 'function', name: 'nope' }, 7]),
      parallel_tool_calls: rng.pick<unknown>([true, false, 'x']),
    }),
    () => ({ type: 'realtime', audio: { input: { format: { type: rng.pick(['audio/pcmu', 'audio/pcma', 'audio/opus']) }, turn_detection: { type: 'server_vad', idle_timeout_ms: rng.pick([1000, 5000, 10, 'x']) } }, output: { format: { type: rng.pick(['audio/pcmu', 'audio/pcm']) } } } }),
    () => ({ type: 'realtime', max_output_tokens: rng.pick([1, 4096, 'inf', 4097, 0]), tracing: 'auto', include: ['item.input_audio_transcription.logprobs'] }),
  ])();
}

function validResponse(rng: Rng, known: Known): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  if (rng.chance(0.4)) r.output_modalities = rng.pick([['text'], ['audio'], ['audio', 'image']]);
  if (rng.chance(0.3)) r.instructions = rng.pick(['Answer in one word.', oddString(rng, 1000)]);
  if (rng.chance(0.3)) r.metadata = { topic: 'fuzz', n: String(rng.int(0, 99)) };
  if (rng.chance(0.2)) r.conversation = rng.pick(['auto', 'none']);
  if (rng.chance(0.2)) r.max_output_tokens = rng.pick([1, 3, 'inf', 4096]);
  if (rng.chance(0.2)) r.audio = { output: { voice: rng.pick(['alloy', 'default']) } };
  if (rng.chance(0.15)) r.tools = [{ type: 'function', name: rng.pick(['lookup', 'x y']), parameters: rng.pick<unknown>([{ type: 'object', properties: {} }, 'nope']) }];
  if (rng.chance(0.15)) r.tool_choice = rng.pick<unknown>(['auto', 'none', 'required', { type: 'function', name: 'lookup' }, {}]);
  if (rng.chance(0.2)) {
    r.input = [validItem(rng), ...(known.itemIds.length > 0 ? [{ type: 'item_reference', id: rng.pick(known.itemIds) }] : [])];
  }
  return r;
}

function anyItemId(rng: Rng, known: Known): unknown {
  if (known.itemIds.length > 0 && rng.chance(0.7)) return rng.pick(known.itemIds);
  return rng.chance(0.5) ? oddString(rng, 100) : rng.pick<unknown>([null, 0, -1, 1e308, true, [], {}, ['item_x'], { id: 'item_x' }]);
}

/** A valid event of some type, with no event_id yet. */
function validEvent(rng: Rng, known: Known): Record<string, unknown> {
  switch (rng.int(0, 13)) {
    case 0:
    case 1:
      return { type: 'session.update', session: validSession(rng) };
    case 2:
    case 3:
      return { type: 'conversation.item.create', item: validItem(rng), ...(rng.chance(0.2) ? { previous_item_id: rng.chance(0.5) ? 'root' : anyItemId(rng, known) } : {}) };
    case 4: {
      const assistant = known.assistantItemIds.length > 0 ? rng.pick(known.assistantItemIds) : anyItemId(rng, known);
      return { type: 'conversation.item.truncate', item_id: assistant, content_index: rng.pick([0, 0, 1]), audio_end_ms: rng.pick([0, 10, 500, 100_000]) };
    }
    case 5:
      return { type: 'conversation.item.delete', item_id: anyItemId(rng, known) };
    case 6:
      return { type: 'conversation.item.retrieve', item_id: anyItemId(rng, known) };
    case 7:
    case 8:
      return { type: 'input_audio_buffer.append', audio: pcm(rng, rng.pick([1, 480, 2400, 24_000])) };
    case 9:
      return { type: 'input_audio_buffer.commit' };
    case 10:
      return { type: 'input_audio_buffer.clear' };
    case 11:
    case 12:
      return { type: 'response.create', ...(rng.chance(0.8) ? { response: validResponse(rng, known) } : {}) };
    default:
      return { type: 'response.cancel', ...(rng.chance(0.4) && known.responseIds.length > 0 ? { response_id: rng.pick(known.responseIds) } : {}) };
  }
}

/** Every plain object inside `value` (events are small; depth is bounded by construction). */
function objectsIn(value: unknown, out: Record<string, unknown>[] = [], depth = 0): Record<string, unknown>[] {
  if (depth > 8 || value === null || typeof value !== 'object') return out;
  if (Array.isArray(value)) for (const v of value) objectsIn(v, out, depth + 1);
  else {
    out.push(value as Record<string, unknown>);
    for (const v of Object.values(value)) objectsIn(v, out, depth + 1);
  }
  return out;
}

/** A field deep inside the event replaced by something hostile. */
function mutateInside(rng: Rng, event: Record<string, unknown>): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(event)) as Record<string, unknown>;
  const targets = objectsIn(copy).slice(1);
  if (targets.length === 0) return mutateObject(rng, copy);
  const target = rng.pick(targets);
  const mutated = mutateObject(rng, target);
  for (const k of Object.keys(target)) delete target[k];
  Object.assign(target, mutated);
  return copy;
}

function withEventId(rng: Rng, event: Record<string, unknown>, n: number): { event: Record<string, unknown>; eventId: string | null } {
  const roll = rng.next();
  if (roll < 0.8) return { event: { event_id: `fz_${n}`, ...event }, eventId: `fz_${n}` };
  if (roll < 0.9) return { event, eventId: null };
  // An event_id the server must refuse (the error then has none to name).
  return { event: { ...event, event_id: rng.pick<unknown>([42, null, { a: 1 }, 'x'.repeat(600), ['fz']]) }, eventId: null };
}

const DEEP_PLACEHOLDER = '__fuzz_deep_value__';

function stringifyIfWritable(value: unknown): string | null {
  try {
    return JSON.stringify(value);
  } catch {
    return null;
  }
}

function buildCase(rng: Rng, n: number, known: Known): Built {
  if (HUGE_APPEND_AT.has(n)) {
    const audio = Buffer.alloc(HUGE_APPEND_BYTES, 0).toString('base64');
    return { frames: [JSON.stringify({ event_id: `fz_${n}`, type: 'input_audio_buffer.append', audio })], eventId: `fz_${n}`, describe: `append of ${audio.length} base64 characters` };
  }
  if (OVERSIZE_AT.has(n)) {
    return { frames: [JSON.stringify({ event_id: `fz_${n}`, type: 'input_audio_buffer.append', audio: 'A'.repeat(17 * 1024 * 1024) })], eventId: `fz_${n}`, describe: 'a 17 MiB event' };
  }
  const roll = rng.next();
  if (roll < 0.25) {
    const { event, eventId } = withEventId(rng, validEvent(rng, known), n);
    return { frames: [JSON.stringify(event)], eventId, describe: `valid ${String(event.type)}` };
  }
  if (roll < 0.55) {
    const base = validEvent(rng, known);
    for (;;) {
      const mutated = rng.chance(0.5) ? mutateInside(rng, base) : mutateObject(rng, base);
      if (rng.chance(0.8)) mutated.type = base.type;
      const { event, eventId } = withEventId(rng, mutated, n);
      const text = stringifyIfWritable(event);
      // oddJson's deepest values are beyond what JSON.stringify can write; the depth cases send those as text.
      if (text === null) continue;
      return { frames: [text], eventId: typeof event.event_id === 'string' && event.event_id.length <= 512 ? eventId : null, describe: `mutated ${String(base.type)}` };
    }
  }
  if (roll < 0.7) {
    // Deep nesting somewhere a client value is kept or echoed.
    // Built as text: JSON.stringify itself cannot write a value this deep.
    const depth = rng.pick([63, 65, 200, 1000, 5000, 20_000]);
    const objects = rng.chance(0.5);
    const deepText = objects ? `${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}` : `${'['.repeat(depth)}0${']'.repeat(depth)}`;
    const deep = DEEP_PLACEHOLDER;
    const shapes: Array<Record<string, unknown>> = [
      { type: 'response.create', response: { metadata: { a: deep } } },
      { type: 'response.create', response: { metadata: deep } },
      { type: 'session.update', session: { type: 'realtime', tools: [deep] } },
      { type: 'session.update', session: { type: 'realtime', tracing: deep, prompt: deep } },
      { type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: deep, noise_reduction: deep } } } },
      { type: 'session.update', session: { type: 'realtime', tool_choice: deep, include: deep } },
      { type: 'conversation.item.create', item: { type: deep } },
      { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x', extra: deep }] } },
      { type: 'response.create', response: { input: [deep] } },
      { type: 'input_audio_buffer.append', audio: deep },
      { type: deep },
    ];
    const { event, eventId } = withEventId(rng, rng.pick(shapes), n);
    return { frames: [JSON.stringify(event).split(JSON.stringify(DEEP_PLACEHOLDER)).join(deepText)], eventId, describe: `depth ${depth} (${objects ? 'objects' : 'arrays'}) in ${String(typeof event.type === 'string' ? event.type : 'type')}` };
  }
  if (roll < 0.8) {
    // Audio that is not what it claims to be.
    const audio = rng.pick<() => string>([
      () => 'not base64!',
      () => Buffer.from([1, 2, 3]).toString('base64'),
      () => 'AAAA'.repeat(rng.int(1, 100)) + '=',
      () => '====',
      () => 'QUJD\nREVG',
      () => 'QUJD-_EF',
      () => '😀'.repeat(rng.int(1, 100)),
      () => 'A'.repeat(rng.int(1, 300_000)),
      () => '',
      () => pcm(rng, rng.int(1, 100)).replace(/=+$/, ''),
    ])();
    const type = rng.pick(['input_audio_buffer.append', 'conversation.item.create']);
    const event = type === 'input_audio_buffer.append' ? { type, audio } : { type, item: { type: 'message', role: 'user', content: [{ type: 'input_audio', audio }] } };
    const { event: e, eventId } = withEventId(rng, event, n);
    return { frames: [JSON.stringify(e)], eventId, describe: `odd audio in ${type}` };
  }
  if (roll < 0.92) {
    // Not an event at all.
    const id = `fz_${n}`;
    const garbage = rng.pick<() => Built>([
      () => ({ frames: ['{"type": "session.update", '], eventId: null, describe: 'truncated JSON' }),
      () => ({ frames: [oddString(rng, 2000)], eventId: null, describe: 'a string' }),
      () => ({ frames: [stringifyIfWritable(oddJson(rng)) ?? '[[[]]]'], eventId: null, describe: 'odd JSON' }),
      () => ({ frames: [JSON.stringify({ event_id: id, type: oddString(rng, 200) })], eventId: id, describe: 'unknown type' }),
      () => ({ frames: [JSON.stringify({ event_id: id })], eventId: id, describe: 'no type' }),
      () => ({ frames: [JSON.stringify({ event_id: id, type: rng.pick([1, null, [], {}, true]) })], eventId: id, describe: 'type not a string' }),
      () => ({ frames: ['['.repeat(rng.pick([100, 10_000, 100_000]))], eventId: null, describe: 'unclosed brackets' }),
      () => ({ frames: [`{"event_id":"${id}","type":"response.create","response":${'['.repeat(50_000)}${']'.repeat(50_000)}}`], eventId: id, describe: 'deep raw' }),
      () => ({ frames: [`{"event_id":"${id}","type":"response.create","response":{"metadata":{"k":"${'\\"'.repeat(rng.int(1, 5000))}"}}}`], eventId: id, describe: 'escaped quotes' }),
      () => ({ frames: [`{"event_id":"${id}","type":"response.create","response":{"input":[${Array(rng.pick([1000, 200_000])).fill(rng.pick(['{}', '0', '[]'])).join(',')}]}}`], eventId: id, describe: 'many elements' }),
      () => ({ frames: [rng.bytes(rng.int(1, 2000))], eventId: null, describe: 'binary frame' }),
      () => ({ frames: [''], eventId: null, describe: 'empty text' }),
      () => ({ frames: [JSON.stringify({ event_id: id, type: 'auth', api_key: 'avs_x' })], eventId: id, describe: 'auth after authentication' }),
    ])();
    return garbage;
  }
  // Valid events in odd orders: several at once, without waiting.
  const burst = Array.from({ length: rng.int(2, 5) }, () => validEvent(rng, known));
  return { frames: burst.map((e) => JSON.stringify(e)), eventId: null, describe: `burst ${burst.map((e) => String(e.type)).join(', ')}` };
}

interface ConnState {
  client: RealtimeTestClient;
  known: Known;
  /** Problems found (with the case that caused them). */
  failures: string[];
  cases: number;
}

function learn(known: Known, events: readonly ServerEvent[]): void {
  for (const e of events) {
    if (e.type === 'conversation.item.added' || e.type === 'conversation.item.created') {
      const id = e.item?.id;
      if (typeof id === 'string' && !known.itemIds.includes(id)) {
        known.itemIds.push(id);
        if (e.item.role === 'assistant') known.assistantItemIds.push(id);
      }
    }
    if (e.type === 'conversation.item.deleted') known.itemIds = known.itemIds.filter((i) => i !== e.item_id);
    if (e.type === 'response.created' && typeof e.response?.id === 'string') known.responseIds.push(e.response.id);
  }
  for (const list of [known.itemIds, known.assistantItemIds, known.responseIds]) if (list.length > 40) list.splice(0, list.length - 40);
}

async function connect(t: RealtimeTestServer, index: number): Promise<RealtimeTestClient> {
  const query = index === 1 ? 'model=gpt-realtime&voice=default' : 'model=gpt-realtime';
  const client = await RealtimeTestClient.connect(t.url, { key: t.key, query });
  await client.waitFor('session.created');
  if (index >= 2) {
    client.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    await client.waitFor('session.updated');
  }
  return client;
}

/** One valid text turn at the end: the session must still answer (a response still running is cancelled first). */
async function finalTurn(client: RealtimeTestClient): Promise<string | null> {
  client.send({ type: 'session.update', event_id: 'final_update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
  await client.waitFor((e) => e.type === 'session.updated' || (e.type === 'error' && e.error.event_id === 'final_update'), { from: client.events.length - 1, timeoutMs: CASE_TIMEOUT_MS });
  client.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Are you still there?' }] } });
  for (let attempt = 0; attempt < 5; attempt++) {
    const from = client.events.length;
    // Its own output limit: the fuzz may have left the session's at a token or two, which the
    // model honours (the reply would then be incomplete, rightly).
    client.send({ type: 'response.create', event_id: `final_${attempt}`, response: { output_modalities: ['text'], max_output_tokens: 'inf' } });
    const first = await client.waitFor((e) => e.type === 'response.created' || (e.type === 'error' && e.error.event_id === `final_${attempt}`), { from, timeoutMs: CASE_TIMEOUT_MS });
    if (first.type === 'response.created') {
      const done = await client.waitFor((e) => e.type === 'response.done' && e.response.id === first.response.id, { from, timeoutMs: CASE_TIMEOUT_MS });
      return done.response.status === 'completed' && done.response.output[0]?.content?.[0]?.text ? null : `final turn ended ${JSON.stringify(done.response.status_details)}`;
    }
    if (first.error.code !== 'conversation_already_has_active_response') return `final turn refused: ${JSON.stringify(first.error)}`;
    const cancelFrom = client.events.length;
    client.send({ type: 'response.cancel' });
    await client.waitFor((e) => e.type === 'response.done' || e.type === 'error', { from: cancelFrom, timeoutMs: CASE_TIMEOUT_MS });
  }
  return 'final turn: a response stayed active through five cancels';
}

test('thousands of hostile realtime events: no server_error, errors name their events, sessions answer, /healthz responsive', async () => {
  const seed = fuzzSeed();
  console.log(`  realtime fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
  const escaped: string[] = [];
  const onEscape = (err: unknown) => escaped.push(String((err as Error)?.stack ?? err).slice(0, 500));
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  const t = await startRealtimeTestServer();
  const healthWatch = watchHealth(t.url, HEALTH_DEADLINE_MS, HEALTH_INTERVAL_MS);
  let health = { asked: 0, worstMs: 0, failed: [] as string[] };
  const started = performance.now();
  const conns: ConnState[] = [];
  try {
    for (let i = 0; i < CONNECTIONS; i++) conns.push({ client: await connect(t, i), known: { itemIds: [], assistantItemIds: [], responseIds: [] }, failures: [], cases: 0 });
    const worker = async (conn: ConnState, index: number) => {
      // Each connection draws its own cases (index, index + CONNECTIONS, ...) from its own stream,
      // so a seed replays the same cases on the same connection.
      const rng = new Rng(seed + index * 7919);
      for (let n = index; n < CASES && performance.now() - started < TIME_BUDGET_MS && conn.failures.length < 20; n += CONNECTIONS) {
        const { client } = conn;
        const built = buildCase(rng, n, conn.known);
        const from = client.events.length;
        for (const frame of built.frames) client.ws.send(frame);
        const probe = `probe_${n}`;
        client.send({ type: 'conversation.item.retrieve', item_id: '__fuzz_probe__', event_id: probe });
        try {
          await client.waitFor((e) => e.type === 'error' && e.error?.event_id === probe, { from, timeoutMs: CASE_TIMEOUT_MS });
        } catch (err) {
          conn.failures.push(`case ${n} (${built.describe}): the session did not answer: ${(err as Error).message.slice(0, 300)}`);
          return;
        }
        const caused = client.events.slice(from).filter((e) => !(e.type === 'error' && e.error?.event_id === probe));
        // An error may name an earlier case (a response it started failing later), never an event that was not sent.
        checkCaseErrors(caused, built, n, conn.failures, 'fz_');
        learn(conn.known, caused);
        conn.cases++;
      }
    };
    await Promise.all(conns.map((c, i) => worker(c, i)));
    for (const conn of conns) {
      if (conn.client.closeCode !== null) conn.failures.push(`connection closed ${conn.client.closeCode} ${conn.client.closeReason}`);
      else if (conn.failures.length === 0) {
        const problem = await finalTurn(conn.client).catch((err: Error) => err.message.slice(0, 300));
        if (problem) conn.failures.push(problem);
      }
    }
  } finally {
    health = await healthWatch.stop();
    for (const conn of conns) await conn.client.close();
    await t.close();
    process.off('uncaughtException', onEscape);
    process.off('unhandledRejection', onEscape);
  }
  const seconds = (performance.now() - started) / 1000;
  const issued = conns.reduce((n, c) => n + c.cases, 0);
  const errorCodes = new Map<string, number>();
  for (const c of conns) for (const e of c.client.ofType('error')) errorCodes.set(e.error.code, (errorCodes.get(e.error.code) ?? 0) + 1);
  console.log(
    `  ${issued} cases in ${seconds.toFixed(1)} s over ${CONNECTIONS} connections; error codes ${JSON.stringify(Object.fromEntries([...errorCodes].sort((a, b) => b[1] - a[1])))}; /healthz asked ${health.asked} times, worst ${Math.round(health.worstMs)} ms`,
  );
  const failures = conns.flatMap((c) => c.failures);
  assert.equal(failures.slice(0, 15), [], `${failures.length} problems (seed ${seed})`);
  assert.equal(health.failed.slice(0, 10), [], `/healthz was not responsive (seed ${seed})`);
  assert.equal(escaped.slice(0, 5), [], `${escaped.length} errors escaped to the process (seed ${seed})`);
  assert.ok(issued >= MIN_CASES, `only ${issued} cases ran in ${TIME_BUDGET_MS} ms`);
});

test.run();
