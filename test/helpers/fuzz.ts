/**
 * Seeded randomness for the fuzz suites: a small PRNG (harness/random.ts's mulberry32, so a
 * failing case is replayed by its seed), pickers, and generators of hostile JSON values and
 * strings. The seed comes from FUZZ_SEED when set, else from the clock; suites print it so a
 * failure can be reproduced with `FUZZ_SEED=<seed> node --import tsx test/...`. For the calls
 * fuzz, the WebRTC wire formats: STUN messages (encoded with MESSAGE-INTEGRITY and FINGERPRINT,
 * decoded), ICE checks, and hostile datagrams for a call's UDP port.
 */
import { createHmac } from 'node:crypto';
import { Rng } from '../../harness/random.js';

// The PRNG is the harness's (the impaired link draws from it too); the suites import it from here.
export { Rng };

/** The suite's seed: FUZZ_SEED, or a fresh one. */
export function fuzzSeed(): number {
  const fromEnv = Number(process.env.FUZZ_SEED);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : (Date.now() % 2_147_483_647) + 1;
}

const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'null',
  'undefined',
  'NaN',
  '-1',
  '1e309',
  '0x10',
  '../../etc/passwd',
  '%00',
  '%2e%2e%2f',
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  '\ud800',
  '😀'.repeat(10),
  'é\u0301',
  '\r\nX-Injected: 1',
  'default',
  'alice',
  'h264',
  'vp8',
  'realtime',
  '00000000-0000-4000-8000-000000000000',
];

/** A hostile string: odd characters, boundaries, lengths from 0 to `maxLength`. */
export function oddString(rng: Rng, maxLength = 5000): string {
  switch (rng.int(0, 4)) {
    case 0:
      return rng.pick(ODD_STRINGS);
    case 1:
      return 'x'.repeat(rng.int(0, maxLength));
    case 2: {
      let s = '';
      const n = rng.int(1, 64);
      for (let i = 0; i < n; i++) s += String.fromCharCode(rng.int(0, 0xffff));
      return s;
    }
    case 3:
      return rng.bytes(rng.int(1, 32)).toString('base64');
    default:
      return rng.pick(ODD_STRINGS) + 'x'.repeat(rng.int(0, 300));
  }
}

/**
 * JSON text nested `depth` levels deep, built as text: deeper than JSON.stringify itself can
 * write (it recurses; a few thousand levels overflow the stack), for the parsers under test.
 */
export function deepJsonText(depth: number, rng: Rng): string {
  return rng.chance(0.5) ? '['.repeat(depth) + '0' + ']'.repeat(depth) : '{"a":'.repeat(depth) + '0' + '}'.repeat(depth);
}

/** A nested array `depth` levels deep: [[[...]]] (values built in memory stay JSON.stringify-able: use up to ~2000). */
export function deepArray(depth: number): unknown {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** A nested object `depth` levels deep: {"a":{"a":...}}. */
export function deepObject(depth: number): unknown {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

/** Any JSON value, mostly small, sometimes huge, deep or odd. */
export function oddJson(rng: Rng, depth = 0): unknown {
  switch (rng.int(0, 13)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -1, 1, 0.5, -0.0, 1e308, -1e308, 2 ** 53, 2 ** 31, 4096, 4097, 60, 61]);
    case 3:
    case 4:
      return oddString(rng);
    case 5:
      return depth > 3 ? [] : Array.from({ length: rng.int(0, 5) }, () => oddJson(rng, depth + 1));
    case 6:
      return depth > 3 ? {} : Object.fromEntries(Array.from({ length: rng.int(0, 5) }, () => [oddString(rng, 20), oddJson(rng, depth + 1)]));
    case 7:
      return deepArray(rng.pick([10, 100, 1000, 2000]));
    case 8:
      return deepObject(rng.pick([10, 100, 1000, 2000]));
    case 9:
      return Array.from({ length: rng.int(1000, 20_000) }, (_, i) => i);
    case 10:
      return { type: 'realtime' };
    case 11:
      return rng.int(-1e6, 1e6);
    case 12:
      return 'y'.repeat(rng.int(10_000, 200_000));
    default:
      return {};
  }
}

/** `base` with one field replaced, removed or added (a valid body turned slightly wrong). */
export function mutateObject(rng: Rng, base: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  const keys = Object.keys(out);
  const action = rng.int(0, 3);
  if (action === 0 && keys.length > 0) delete out[rng.pick(keys)];
  else if (action === 1 || keys.length === 0) out[oddString(rng, 30)] = oddJson(rng);
  else out[rng.pick(keys)] = oddJson(rng);
  return out;
}

/** An event a fuzz suite saw: its type and, for errors, the error. */
interface SeenEvent {
  type: string;
  error?: { type?: unknown; code?: unknown; message?: unknown; event_id?: unknown };
}

/**
 * Errors that come later than the event that caused them, naming it when it had an event_id (null
 * when it had none): they may arrive during any later case. An MCP server's listing that failed.
 */
const LATER_ERRORS = new Set(['mcp_list_tools_failed']);

/**
 * Checks the errors one fuzz case caused: none is a server_error, each is well formed, and each
 * names the case's event (`eventId`) when it had one, or an event whose id starts with
 * `otherIdPrefix` (earlier cases' events whose work is still going on); failures are appended.
 */
export function checkCaseErrors(events: readonly SeenEvent[], built: { eventId: string | null; describe: string }, n: number, failures: string[], otherIdPrefix: string | null = null): void {
  for (const e of events) {
    if (e.type !== 'error') continue;
    const err = e.error ?? {};
    const what = `case ${n} (${built.describe}): ${JSON.stringify(err).slice(0, 300)}`;
    if (err.type === 'server_error' || err.code === 'server_error') failures.push(`server_error from ${what}`);
    if (typeof err.code !== 'string' || typeof err.message !== 'string' || err.message === '') failures.push(`malformed error from ${what}`);
    const id = err.event_id ?? null;
    if (id !== null && id !== built.eventId && !(otherIdPrefix !== null && String(id).startsWith(otherIdPrefix))) failures.push(`error names an event that was not sent, ${what}`);
    if (id === null && built.eventId !== null && !LATER_ERRORS.has(String(err.code))) failures.push(`error does not name its event ${built.eventId}, ${what}`);
  }
}

// ── The realtime event corpus (WebSocket and data-channel fuzz) ───────────────

/** Base64 of this many bytes is 15 MiB of text (OpenAI's documented append limit). */
const HUGE_APPEND_BYTES = Math.floor((15 * 1024 * 1024 * 3) / 4) & ~1;

/** What learnRealtime reads of a server event. */
type SeenRealtimeEvent = { type: string; [k: string]: any };

/** One case of the realtime event corpus. */
export interface RealtimeCase {
  /** Frames sent back to back: text, or binary. */
  frames: Array<string | Buffer>;
  /** The event_id the server can read from it (null when it has none, or it is unreadable). */
  eventId: string | null;
  describe: string;
}

/** What a connection has seen, for cases that refer to real items and responses. */
export interface RealtimeKnown {
  itemIds: string[];
  assistantItemIds: string[];
  responseIds: string[];
  /** A live MCP server the session may declare (the fuzz test starts one), else an unreachable URL is used. */
  mcpUrl?: string;
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

function validItem(rng: Rng, known?: RealtimeKnown): Record<string, unknown> {
  switch (rng.int(0, 10)) {
    case 9:
      return { type: 'mcp_approval_response', approval_request_id: rng.pick([known && known.itemIds.length > 0 ? rng.pick(known.itemIds) : 'item_x', 'mcpr_unknown', oddString(rng, 80)]), approve: rng.pick<unknown>([true, false, 'yes']), reason: rng.pick<unknown>([undefined, 'no', 7]) };
    case 10:
      return rng.pick<Record<string, unknown>>([
        { type: 'mcp_call', server_label: 'x', name: 'get_weather', arguments: '{}' },
        { type: 'mcp_list_tools', server_label: 'x', tools: [] },
        { type: 'mcp_approval_request', server_label: 'x', name: 'send_email', arguments: '{}' },
      ]);
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

function mcpTool(rng: Rng, known: RealtimeKnown): Record<string, unknown> {
  return {
    type: 'mcp',
    server_label: rng.pick(['tools', 'other', 'bad label!']),
    server_url: rng.pick([known.mcpUrl ?? 'http://127.0.0.1:1/mcp', 'http://127.0.0.1:1/mcp', 'https://example.com/mcp', 'file:///etc/passwd', oddString(rng, 100)]),
    require_approval: rng.pick<unknown>(['always', 'never', { never: { read_only: true } }, { always: { tool_names: ['send_email'] } }, 'sometimes']),
    ...(rng.chance(0.3) ? { allowed_tools: rng.pick<unknown>([['get_weather'], { read_only: true }, 'x']) } : {}),
    ...(rng.chance(0.3) ? { headers: rng.pick<unknown>([{ 'X-Key': 'k' }, { Host: 'evil' }, { 'X-Key': 'a\r\nb' }, 7]) } : {}),
    ...(rng.chance(0.1) ? { connector_id: 'connector_gmail' } : {}),
  };
}

function validSession(rng: Rng, known: RealtimeKnown): Record<string, unknown> {
  return rng.pick<() => Record<string, unknown>>([
    () => ({ type: 'realtime', tools: [mcpTool(rng, known), ...(rng.chance(0.3) ? [mcpTool(rng, known)] : [])], tool_choice: rng.pick<unknown>(['auto', 'required', { type: 'mcp', server_label: 'tools' }]) }),
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

function validResponse(rng: Rng, known: RealtimeKnown): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  if (rng.chance(0.4)) r.output_modalities = rng.pick([['text'], ['audio'], ['audio', 'image']]);
  if (rng.chance(0.3)) r.instructions = rng.pick(['Answer in one word.', oddString(rng, 1000)]);
  if (rng.chance(0.3)) r.metadata = { topic: 'fuzz', n: String(rng.int(0, 99)) };
  if (rng.chance(0.2)) r.conversation = rng.pick(['auto', 'none']);
  if (rng.chance(0.2)) r.max_output_tokens = rng.pick([1, 3, 'inf', 4096]);
  if (rng.chance(0.2)) r.audio = { output: { voice: rng.pick(['alloy', 'default']) } };
  if (rng.chance(0.15)) r.tools = [{ type: 'function', name: rng.pick(['lookup', 'x y']), parameters: rng.pick<unknown>([{ type: 'object', properties: {} }, 'nope']) }];
  else if (rng.chance(0.05)) r.tools = [mcpTool(rng, known)];
  if (rng.chance(0.15)) r.tool_choice = rng.pick<unknown>(['auto', 'none', 'required', { type: 'function', name: 'lookup' }, {}]);
  if (rng.chance(0.2)) {
    r.input = [validItem(rng), ...(known.itemIds.length > 0 ? [{ type: 'item_reference', id: rng.pick(known.itemIds) }] : [])];
  }
  return r;
}

function anyItemId(rng: Rng, known: RealtimeKnown): unknown {
  if (known.itemIds.length > 0 && rng.chance(0.7)) return rng.pick(known.itemIds);
  return rng.chance(0.5) ? oddString(rng, 100) : rng.pick<unknown>([null, 0, -1, 1e308, true, [], {}, ['item_x'], { id: 'item_x' }]);
}

/** A valid event of some type, with no event_id yet. */
function validEvent(rng: Rng, known: RealtimeKnown): Record<string, unknown> {
  switch (rng.int(0, 13)) {
    case 0:
    case 1:
      return { type: 'session.update', session: validSession(rng, known) };
    case 2:
    case 3:
      return { type: 'conversation.item.create', item: validItem(rng, known), ...(rng.chance(0.2) ? { previous_item_id: rng.chance(0.5) ? 'root' : anyItemId(rng, known) } : {}) };
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

/**
 * Case `n` of the realtime event corpus (the WebSocket fuzz's, and the calls fuzz's on a data
 * channel): valid events and events turned slightly wrong, deep nesting, odd audio, non-events,
 * bursts. `hugeAppendAt` and `oversizeAt` name the cases that send a 15 MiB append and a 17 MiB
 * event (a transport that cannot carry them passes none).
 */
export function buildRealtimeCase(rng: Rng, n: number, known: RealtimeKnown, big: { hugeAppendAt?: ReadonlySet<number>; oversizeAt?: ReadonlySet<number> } = {}): RealtimeCase {
  if (big.hugeAppendAt?.has(n)) {
    const audio = Buffer.alloc(HUGE_APPEND_BYTES, 0).toString('base64');
    return { frames: [JSON.stringify({ event_id: `fz_${n}`, type: 'input_audio_buffer.append', audio })], eventId: `fz_${n}`, describe: `append of ${audio.length} base64 characters` };
  }
  if (big.oversizeAt?.has(n)) {
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
    const garbage = rng.pick<() => RealtimeCase>([
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


/** Notes the items and responses a case's events made, for later cases to refer to. */
export function learnRealtime(known: RealtimeKnown, events: readonly SeenRealtimeEvent[]): void {
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

// ── WebRTC wire formats (the calls fuzz) ─────────────────────────────────────

/** RFC 5389's magic cookie. */
export const STUN_MAGIC_COOKIE = 0x2112a442;

/** STUN attribute types used by ICE (RFC 5389, RFC 8445). */
export const STUN_ATTR = {
  username: 0x0006,
  messageIntegrity: 0x0008,
  errorCode: 0x0009,
  xorMappedAddress: 0x0020,
  priority: 0x0024,
  useCandidate: 0x0025,
  fingerprint: 0x8028,
  iceControlled: 0x8029,
  iceControlling: 0x802a,
} as const;

export interface StunAttribute {
  type: number;
  value: Buffer;
}

export interface StunMessage {
  /** 0x0001 binding request, 0x0101 success response, 0x0111 error response, 0x0011 indication. */
  type: number;
  transactionId: Buffer;
  attributes: StunAttribute[];
}

function crc32(data: Buffer): number {
  let c = 0xffffffff;
  for (const byte of data) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

function stunAttribute(type: number, value: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16BE(type, 0);
  head.writeUInt16BE(value.length, 2);
  return Buffer.concat([head, value, Buffer.alloc((4 - (value.length % 4)) % 4)]);
}

/**
 * A STUN message: `attributes`, then MESSAGE-INTEGRITY keyed with `integrityKey` (the ICE
 * password of the agent that checks it) when given, then FINGERPRINT unless `fingerprint` is false.
 */
export function encodeStun(message: StunMessage, integrityKey: string | null, fingerprint = true): Buffer {
  const header = (bodyLength: number) => {
    const h = Buffer.alloc(20);
    h.writeUInt16BE(message.type, 0);
    h.writeUInt16BE(bodyLength, 2);
    h.writeUInt32BE(STUN_MAGIC_COOKIE, 4);
    message.transactionId.copy(h, 8, 0, 12);
    return h;
  };
  let body = Buffer.concat(message.attributes.map((a) => stunAttribute(a.type, a.value)));
  if (integrityKey !== null) {
    // The HMAC covers the message with its length already counting the MESSAGE-INTEGRITY attribute.
    const hmac = createHmac('sha1', integrityKey).update(Buffer.concat([header(body.length + 24), body])).digest();
    body = Buffer.concat([body, stunAttribute(STUN_ATTR.messageIntegrity, hmac)]);
  }
  if (fingerprint) {
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE((crc32(Buffer.concat([header(body.length + 8), body])) ^ 0x5354554e) >>> 0);
    body = Buffer.concat([body, stunAttribute(STUN_ATTR.fingerprint, crc)]);
  }
  return Buffer.concat([header(body.length), body]);
}

/** A STUN message's type, transaction id and attributes; null when it is not STUN. */
export function decodeStun(packet: Buffer): StunMessage | null {
  if (packet.length < 20 || (packet[0]! & 0xc0) !== 0 || packet.readUInt32BE(4) !== STUN_MAGIC_COOKIE) return null;
  const attributes: StunAttribute[] = [];
  const end = Math.min(packet.length, 20 + packet.readUInt16BE(2));
  for (let at = 20; at + 4 <= end; ) {
    const type = packet.readUInt16BE(at);
    const length = packet.readUInt16BE(at + 2);
    attributes.push({ type, value: packet.subarray(at + 4, at + 4 + length) });
    at += 4 + length + ((4 - (length % 4)) % 4);
  }
  return { type: packet.readUInt16BE(0), transactionId: packet.subarray(8, 20), attributes };
}

/** XOR-MAPPED-ADDRESS of an IPv4 address and port. */
export function xorMappedAddress(address: string, port: number): Buffer {
  const value = Buffer.alloc(8);
  value.writeUInt8(0x01, 1);
  value.writeUInt16BE(port ^ (STUN_MAGIC_COOKIE >>> 16), 2);
  const ip = address.split('.').reduce((n, part) => (n << 8) | Number(part), 0) >>> 0;
  value.writeUInt32BE((ip ^ STUN_MAGIC_COOKIE) >>> 0, 4);
  return value;
}

/** An ICE connectivity check (binding request) from the controlling agent, nominating its pair. */
export function iceBindingRequest(rng: Rng, username: string, password: string, opts: { nominate?: boolean; controlling?: boolean } = {}): Buffer {
  const priority = Buffer.alloc(4);
  priority.writeUInt32BE(0x6e0001ff);
  const attributes: StunAttribute[] = [
    { type: STUN_ATTR.username, value: Buffer.from(username) },
    { type: STUN_ATTR.priority, value: priority },
    { type: opts.controlling === false ? STUN_ATTR.iceControlled : STUN_ATTR.iceControlling, value: rng.bytes(8) },
  ];
  if (opts.nominate ?? true) attributes.push({ type: STUN_ATTR.useCandidate, value: Buffer.alloc(0) });
  return encodeStun({ type: 0x0001, transactionId: rng.bytes(12), attributes }, password);
}

/** A binding success response to `request`, integrity-protected with this agent's own password. */
export function iceBindingSuccess(request: StunMessage, password: string, from: { address: string; port: number }): Buffer {
  return encodeStun({ type: 0x0101, transactionId: request.transactionId, attributes: [{ type: STUN_ATTR.xorMappedAddress, value: xorMappedAddress(from.address, from.port) }] }, password);
}

/** What a hostile datagram at a call's port knows of the call (its ICE credentials, when the attacker has them). */
export interface UdpTarget {
  /** The server's ICE ufrag and password (from its answer) and the client's ufrag. */
  serverUfrag: string;
  serverPwd: string;
  clientUfrag: string;
}

/**
 * A hostile datagram for a WebRTC port (RFC 7983 demultiplexes on the first byte: 0-3 STUN,
 * 20-63 DTLS, 128-191 RTP/RTCP): random bytes, STUN with bad lengths, a wrong magic cookie,
 * bogus or truncated attributes, wrong or right-looking credentials with a bad integrity, DTLS
 * records with lying lengths, unknown content types and handshakes cut short, RTP and RTCP with
 * bad versions, huge CSRC counts, extension lengths past the end, and SRTP-looking packets that
 * cannot authenticate. Returns the packet and a word on what it is.
 */
export function hostileDatagram(rng: Rng, target: UdpTarget): { packet: Buffer; kind: string } {
  const txid = () => rng.bytes(12);
  switch (rng.int(0, 13)) {
    case 0:
      return { packet: rng.bytes(rng.int(0, 1500)), kind: 'random bytes' };
    case 1: {
      // A binding request whose header length lies.
      const p = iceBindingRequest(rng, `${target.serverUfrag}:${target.clientUfrag}`, target.serverPwd);
      p.writeUInt16BE(rng.pick([0, 4, 0xfffc, p.length, p.length + 400]), 2);
      return { packet: rng.chance(0.5) ? p : p.subarray(0, rng.int(0, p.length)), kind: 'STUN with a lying length' };
    }
    case 2: {
      const p = iceBindingRequest(rng, `${target.serverUfrag}:${target.clientUfrag}`, target.serverPwd);
      p.writeUInt32BE(rng.int(0, 0xffffffff) >>> 0, 4);
      return { packet: p, kind: 'STUN with a wrong magic cookie' };
    }
    case 3: {
      // The right username, the wrong password.
      return { packet: iceBindingRequest(rng, `${target.serverUfrag}:${target.clientUfrag}`, rng.bytes(16).toString('base64')), kind: 'STUN with wrong credentials' };
    }
    case 4: {
      return { packet: iceBindingRequest(rng, `${oddString(rng, 40)}:${oddString(rng, 40)}`.slice(0, 500), target.serverPwd), kind: 'STUN for another username' };
    }
    case 5: {
      // Attributes of odd types and lengths, some running past the end.
      const attributes: StunAttribute[] = Array.from({ length: rng.int(1, 40) }, () => ({ type: rng.int(0, 0xffff), value: rng.bytes(rng.int(0, 64)) }));
      let p = encodeStun({ type: rng.pick([0x0001, 0x0101, 0x0111, 0x0011, rng.int(0, 0x3fff)]), transactionId: txid(), attributes }, rng.chance(0.5) ? target.serverPwd : null, rng.chance(0.5));
      if (rng.chance(0.3)) {
        p = Buffer.from(p);
        p.writeUInt16BE(0xffff, 22); // the first attribute claims 64 KiB
      }
      return { packet: p, kind: 'STUN with bogus attributes' };
    }
    case 6: {
      // A success response to a transaction the server never started, and an error response.
      const attributes: StunAttribute[] = [{ type: STUN_ATTR.xorMappedAddress, value: xorMappedAddress('10.1.2.3', rng.int(1, 65535)) }];
      const type = rng.pick([0x0101, 0x0111]);
      if (type === 0x0111) attributes.push({ type: STUN_ATTR.errorCode, value: Buffer.from([0, 0, 4, 87, ...Buffer.from('Role Conflict')]) });
      return { packet: encodeStun({ type, transactionId: txid(), attributes }, rng.chance(0.5) ? target.serverPwd : null), kind: 'unsolicited STUN response' };
    }
    case 7: {
      // A DTLS record with a lying length, an unknown content type or epoch, or random content.
      const record = Buffer.alloc(13 + rng.int(0, 300));
      record[0] = rng.pick([20, 21, 22, 23, 24, 25, 63]);
      record.writeUInt16BE(rng.pick([0xfefd, 0xfeff, 0x0303, rng.int(0, 0xffff)]), 1);
      record.writeUInt16BE(rng.int(0, 3), 3);
      rng.bytes(6).copy(record, 5);
      record.writeUInt16BE(rng.pick([0, record.length - 13, 0xffff, rng.int(0, 0xffff)]), 11);
      rng.bytes(record.length - 13).copy(record, 13);
      return { packet: record, kind: 'DTLS record' };
    }
    case 8: {
      // A DTLS ClientHello cut short, or with a fragment that lies about its offset and length.
      const body = rng.bytes(rng.int(0, 200));
      const handshake = Buffer.alloc(12);
      handshake[0] = rng.pick([1, 2, 11, 12, 14, 16, 20, 255]);
      handshake.writeUIntBE(rng.int(0, 0xffffff), 1, 3);
      handshake.writeUInt16BE(rng.int(0, 3), 4);
      handshake.writeUIntBE(rng.int(0, 0xffffff), 6, 3);
      handshake.writeUIntBE(rng.pick([body.length, 0xffffff, 0]), 9, 3);
      const fragment = Buffer.concat([handshake, body]);
      const record = Buffer.alloc(13);
      record[0] = 22;
      record.writeUInt16BE(0xfeff, 1);
      record.writeUInt16BE(fragment.length, 11);
      return { packet: Buffer.concat([record, fragment]), kind: 'DTLS handshake fragment' };
    }
    case 9:
    case 10: {
      // RTP (or RTCP by payload type) that cannot be what it claims: versions, CSRC counts,
      // extensions and padding past the end; an SRTP auth tag that cannot match.
      const header = Buffer.alloc(12);
      header[0] = (rng.pick([2, 2, 2, 0, 1, 3]) << 6) | (rng.chance(0.3) ? 0x20 : 0) | (rng.chance(0.3) ? 0x10 : 0) | rng.int(0, 15);
      header[1] = rng.pick([rng.int(0, 127), 111, 96, 102, 0x80 | 72, 200, 201, 205, 206]);
      header.writeUInt16BE(rng.int(0, 0xffff), 2);
      header.writeUInt32BE(rng.int(0, 0xffffffff) >>> 0, 4);
      header.writeUInt32BE(rng.int(0, 0xffffffff) >>> 0, 8);
      const rest = rng.bytes(rng.int(0, 1200));
      if (rest.length >= 4 && rng.chance(0.3)) rest.writeUInt16BE(0xffff, 2); // an extension length past the end
      return { packet: Buffer.concat([header, rest]), kind: 'RTP' };
    }
    case 11: {
      // RTCP compounds: lengths that lie, reports with many blocks, a NACK or PLI for anything.
      const n = rng.int(1, 5);
      const parts = Array.from({ length: n }, () => {
        const count = rng.int(0, 31);
        const words = rng.pick([1, rng.int(0, 300), 0xffff]);
        const part = Buffer.alloc(4 + 4 * Math.min(words, rng.int(1, 80)));
        part[0] = 0x80 | count;
        part[1] = rng.pick([200, 201, 202, 203, 204, 205, 206, 207, rng.int(192, 223)]);
        part.writeUInt16BE(words, 2);
        rng.bytes(part.length - 4).copy(part, 4);
        return part;
      });
      return { packet: Buffer.concat(parts), kind: 'RTCP' };
    }
    case 12:
      return { packet: Buffer.alloc(rng.pick([1, 2, 19, 20, 1500, 9000, 65507]), rng.int(0, 255)), kind: 'a datagram of one repeated byte' };
    default: {
      // Bytes in the gaps of RFC 7983's demultiplexing (4-19, 64-127, 192-255).
      const p = rng.bytes(rng.int(1, 600));
      p[0] = rng.pick([rng.int(4, 19), rng.int(64, 127), rng.int(192, 255)]);
      return { packet: p, kind: 'unclassified first byte' };
    }
  }
}
