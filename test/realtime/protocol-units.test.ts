/**
 * Unit tests of the realtime engine's pure parts: the sentence splitter that feeds the voice, the
 * session.update merge (GA, rtAV flat and beta shapes), the conversation list, and client event
 * parsing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SentenceSplitter } from '../../src/realtime/sentences.js';
import { effectiveRealtimeSession, legacySessionObject } from '../../src/realtime/session-object.js';
import { applySessionUpdate } from '../../src/realtime/session-update.js';
import { Conversation } from '../../src/realtime/conversation.js';
import { parseItem as parseMessageItem } from '../../src/realtime/items.js';
import { RealtimeError, type ServerEventDraft, binaryMessageRefused, decodePcm16, eventIdOf, parseClientEvent, renameForDialect } from '../../src/realtime/protocol.js';

/** The RealtimeError `fn` throws (fails the test when it throws nothing or something else). */
function thrown(fn: () => unknown): RealtimeError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, RealtimeError);
    return err as RealtimeError;
  }
  assert.unreachable('no error was thrown');
  throw new Error('unreachable');
}

/** `{"a":{"a":...0...}}` nested `depth` levels, written as text (JSON.stringify cannot write the deepest). */
const deepObjectText = (depth: number) => `${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}`;

function split(chunks: string[]): string[] {
  const s = new SentenceSplitter();
  const out = chunks.flatMap((c) => s.push(c));
  const rest = s.flush();
  return rest ? [...out, rest] : out;
}

test('a binary message is refused with the one invalid_event error both gateways send (a WebSocket, a call\'s data channel)', () => {
  assert.equal(binaryMessageRefused(), {
    type: 'error',
    error: { type: 'invalid_request_error', code: 'invalid_event', message: 'Binary messages are not supported; send JSON text events.', param: null, event_id: null },
  });
});

test('the older dialect\'s session object: flat modalities, formats, turn detection and limits, from the same effective session', () => {
  const session = effectiveRealtimeSession({ instructions: 'Be brief.', output_modalities: ['audio'], max_output_tokens: 200, voice: 'alloy' }, 'gpt-realtime');
  const legacy = legacySessionObject(session, { id: 'sess_1', expiresAt: 1_800_000_000, video: true });
  assert.equal(
    [legacy.id, legacy.object, legacy.model, legacy.modalities, legacy.instructions, legacy.voice, legacy.video, legacy.input_audio_format, legacy.max_response_output_tokens, legacy.expires_at],
    ['sess_1', 'realtime.session', 'gpt-realtime', ['audio'], 'Be brief.', 'alloy', true, 'pcm16', 200, 1_800_000_000],
  );
  assert.equal(legacy.turn_detection, session.audio.input.turn_detection);
  assert.not.ok('output_modalities' in legacy || 'audio' in legacy, 'no GA fields');
});

test('SentenceSplitter cuts sentences from token-sized chunks', () => {
  const text = 'Hello there. How are you today? I am fine! Thanks.';
  const chunks = text.match(/.{1,3}/gs) as string[];
  assert.equal(split(chunks), ['Hello there.', 'How are you today?', 'I am fine!', 'Thanks.']);
});

test('SentenceSplitter keeps abbreviations, initials and decimals inside a sentence', () => {
  assert.equal(split(['Yes. Dr. Smith paid 3.5 dollars e.g. for J. R. R. Tolkien books in the U.S. today. Done.']), [
    'Yes.',
    'Dr. Smith paid 3.5 dollars e.g. for J. R. R. Tolkien books in the U.S. today.',
    'Done.',
  ]);
});

test('SentenceSplitter speaks a long first clause on its own at a comma', () => {
  const pieces = split(['Well, that is a really interesting question, and the answer has two parts. First part.']);
  assert.equal(pieces[0], 'Well, that is a really interesting question,');
  assert.equal(pieces.slice(1), ['and the answer has two parts.', 'First part.']);
});

test('SentenceSplitter speaks a first phrase of a few words on its own where the next phrase begins, once that word is complete', () => {
  const text = 'The capital of France is Paris. It is lovely in spring.';
  assert.equal(split(text.match(/.{1,3}/gs) as string[]), ['The capital of France', 'is Paris.', 'It is lovely in spring.']);
  const s = new SentenceSplitter();
  assert.equal(s.push('The capital of France i'), [], 'not before the next word is complete ("i" may be "island")');
  assert.equal(s.push('sland'), []);
  assert.equal(split(['I am fine and you?']), ['I am fine and you?'], 'too short to cut');
  assert.equal(split(['Sure thing, here it is.']), ['Sure thing, here it is.'], 'not after a pronoun');
  assert.equal(split(['It is one of the best.']), ['It is one of the best.'], 'nor before three words');
});

test('SentenceSplitter cuts at line breaks and flushes an unterminated tail', () => {
  assert.equal(split(['One line\nAnother line without a stop']), ['One line', 'Another line without a stop']);
});

test('applySessionUpdate merges audio fields and keeps the rest', () => {
  const a = applySessionUpdate(null, { type: 'realtime', instructions: 'Be brief.', audio: { output: { voice: 'alloy', speed: 1.2 } } }, 'm');
  const b = applySessionUpdate(a.raw, { audio: { input: { turn_detection: null } } }, 'm');
  assert.is(b.session.instructions, 'Be brief.');
  assert.is(b.session.audio.output.speed, 1.2);
  assert.is(b.session.audio.output.voice, 'alloy');
  assert.is(b.turnDetection, null);
  // The default: semantic_vad, eagerness auto (the judge at confidence 0.97, the pause's transcript after 32 ms of silence, 4 s at most).
  assert.is(a.session.audio.input.turn_detection && (a.session.audio.input.turn_detection as { type: string }).type, 'semantic_vad');
  assert.equal(a.turnDetection?.segmenter.endOfTurn, { pauseMs: 32, confidence: 0.97, fallbackSilenceMs: 700 });
  assert.is(a.turnDetection?.segmenter.silenceDurationMs, 4000);
  const c = applySessionUpdate(a.raw, { audio: { input: { turn_detection: { type: 'server_vad' } } } }, 'm');
  assert.equal(c.turnDetection?.segmenter, { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null });
});

test('applySessionUpdate takes rtAV flat fields without session.type and a later nested voice replaces the flat one', () => {
  const a = applySessionUpdate(null, { voice: 'alice', face: 'face1', modalities: ['audio', 'text', 'image'] }, 'm');
  assert.is(a.session.voice, 'alice');
  assert.is(a.session.face, 'face1');
  assert.equal(a.session.output_modalities, ['audio', 'text', 'image']);
  const b = applySessionUpdate(a.raw, { type: 'realtime', audio: { output: { voice: 'anthony' } }, output_modalities: ['text'] }, 'm');
  assert.is(b.session.voice, 'anthony');
  assert.equal(b.session.output_modalities, ['text']);
});

test('applySessionUpdate maps beta top-level fields to their GA places', () => {
  const s = applySessionUpdate(
    null,
    { modalities: ['text', 'audio'], voice: 'verse', input_audio_format: 'pcm16', turn_detection: { type: 'server_vad', silence_duration_ms: 300 }, input_audio_transcription: { model: 'whisper-1' }, temperature: 0.7 },
    'm',
  );
  assert.is(s.session.audio.output.voice, 'verse');
  assert.is(s.turnDetection?.segmenter.silenceDurationMs, 300);
  assert.is(s.transcription.model, 'whisper-1');
});

test('every voice field agrees, whichever spelling set it: nested (an OpenAI name or ours) or flat (issue 9)', () => {
  const a = applySessionUpdate(null, { type: 'realtime', audio: { output: { voice: 'marin' } } }, 'm');
  assert.equal([a.session.voice, a.session.audio.output.voice], ['marin', 'marin']);
  const b = applySessionUpdate(a.raw, { voice: 'alice' }, 'm');
  assert.equal([b.session.voice, b.session.audio.output.voice], ['alice', 'alice']);
  const c = applySessionUpdate(b.raw, { type: 'realtime', audio: { output: { voice: 'anthony' } } }, 'm');
  assert.equal([c.session.voice, c.session.audio.output.voice], ['anthony', 'anthony']);
  const d = applySessionUpdate(c.raw, { voice: 'alloy' }, 'm');
  assert.equal([d.session.voice, d.session.audio.output.voice], ['alloy', 'alloy']);
});

test("reasoning ({effort}, gpt-realtime-2's) is echoed on the session, its effort checked", () => {
  const a = applySessionUpdate(null, { type: 'realtime', reasoning: { effort: 'high' } }, 'm');
  assert.equal(a.session.reasoning, { effort: 'high' });
  assert.equal(applySessionUpdate(a.raw, { type: 'realtime', instructions: 'Be brief.' }, 'm').session.reasoning, { effort: 'high' }, 'kept by an update that does not name it');
  assert.equal(applySessionUpdate(null, { type: 'realtime', reasoning: {} }, 'm').session.reasoning, { effort: 'low' }, "OpenAI's default");
  assert.is(applySessionUpdate(null, { type: 'realtime' }, 'm').session.reasoning, null);
  for (const [reasoning, code, param] of [[{ effort: 'extreme' }, 'invalid_value', 'session.reasoning.effort'], ['high', 'invalid_type', 'session.reasoning'], [{ effort: 'low', summary: 'auto' }, 'unknown_parameter', 'session.reasoning.summary']] as const) {
    try {
      applySessionUpdate(null, { type: 'realtime', reasoning }, 'm');
      assert.unreachable(`accepted ${JSON.stringify(reasoning)}`);
    } catch (err) {
      assert.equal([(err as { code?: string }).code, (err as { param?: string }).param], [code, param]);
    }
  }
});

test("OpenAI's custom voice form {id} names a voice in audio.output.voice, echoed in that form; a bad one is refused naming its field", () => {
  const a = applySessionUpdate(null, { type: 'realtime', audio: { output: { voice: { id: 'anthony' } } } }, 'm');
  assert.equal([a.session.voice, a.session.audio.output.voice], ['anthony', { id: 'anthony' }]);
  const b = applySessionUpdate(a.raw, { type: 'realtime', audio: { output: { voice: 'marin' } } }, 'm');
  assert.equal([b.session.voice, b.session.audio.output.voice], ['marin', 'marin']);
  const c = applySessionUpdate(b.raw, { voice: 'alice' }, 'm');
  assert.equal([c.session.voice, c.session.audio.output.voice], ['alice', 'alice'], 'the flat field names it as a string');
  const bad: Array<[unknown, string, string]> = [
    [{ id: 7 }, 'invalid_type', 'session.audio.output.voice.id'],
    [{}, 'missing_required_parameter', 'session.audio.output.voice.id'],
    [{ id: 'anthony', name: 'x' }, 'unknown_parameter', 'session.audio.output.voice.name'],
    [7, 'invalid_type', 'session.audio.output.voice'],
  ];
  for (const [voice, code, param] of bad) {
    try {
      applySessionUpdate(null, { type: 'realtime', audio: { output: { voice } } }, 'm');
      assert.unreachable(`accepted ${JSON.stringify(voice)}`);
    } catch (err) {
      assert.equal([(err as { code?: string }).code, (err as { param?: string }).param], [code, param], JSON.stringify(voice));
    }
  }
});

test('applySessionUpdate rejects unknown fields, a change to a transcription session, bad VAD values and formats, and bad tools, naming the parameter', () => {
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ colour: 'red' }, 'unknown_parameter', 'session.colour'],
    [{ type: 'transcription' }, 'invalid_value', 'session.type'],
    [{ audio: { input: { turn_detection: { type: 'server_vad', threshold: 2 } } } }, 'invalid_value', 'session.audio.input.turn_detection.threshold'],
    [{ input_audio_format: 'g722' }, 'unsupported_audio_format', 'session.input_audio_format'],
    [{ audio: { input: { format: { type: 'audio/pcmu', rate: 16000 } } } }, 'invalid_value', 'session.audio.input.format.rate'],
    [{ tools: [{ type: 'function', name: 'ok' }, { type: 'function', name: 'x', parameters: { type: 'string' } }] }, 'invalid_value', 'session.tools[1].parameters.type'],
    [{ tools: [{ type: 'function', name: 'bad name' }] }, 'invalid_value', 'session.tools[0].name'],
    [{ tools: [{ type: 'function', name: 'a' }, { type: 'function', name: 'a' }] }, 'duplicate_tool_name', 'session.tools[1].name'],
    [{ tools: [{ type: 'mcp', server_label: 'x', connector_id: 'connector_gmail' }] }, 'unsupported_mcp_target', 'session.tools[0].connector_id'],
    [{ tools: [{ type: 'mcp', server_url: 'https://example.com' }] }, 'missing_required_parameter', 'session.tools[0].server_label'],
    [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'ftp://example.com' }] }, 'invalid_value', 'session.tools[0].server_url'],
    [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://a.example' }, { type: 'mcp', server_label: 'x', server_url: 'https://b.example' }] }, 'duplicate_server_label', 'session.tools[1].server_label'],
    [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://example.com', headers: { Host: 'evil' } }] }, 'invalid_value', 'session.tools[0].headers.Host'],
    [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://example.com', require_approval: 'sometimes' }] }, 'invalid_value', 'session.tools[0].require_approval'],
    [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://example.com', allowed_tools: { names: ['a'] } }] }, 'unknown_parameter', 'session.tools[0].allowed_tools.names'],
    [{ tools: [{ type: 'function', name: 'a' }], tool_choice: { type: 'mcp', server_label: 'x' } }, 'invalid_value', 'session.tool_choice.type'],
    [{ tools: [{ type: 'function', name: 'a' }], tool_choice: { type: 'function', name: 'b' } }, 'invalid_value', 'session.tool_choice.name'],
    [{ tools: [{ type: 'function', name: 'a', parameters: { type: 'object', properties: { x: { description: 'y'.repeat(70_000) } } } }] }, 'string_above_max_length', 'session.tools[0].parameters'],
    [{ parallel_tool_calls: 'yes' }, 'invalid_type', 'session.parallel_tool_calls'],
    [{ audio: { output: { speed: 9 } } }, 'invalid_value', 'session.audio.output.speed'],
  ];
  for (const [update, code, param] of cases) {
    try {
      applySessionUpdate(null, update, 'm');
      assert.unreachable(`accepted ${JSON.stringify(update)}`);
    } catch (err) {
      assert.instance(err, RealtimeError);
      assert.is((err as RealtimeError).code, code, JSON.stringify(update));
      assert.is((err as RealtimeError).param, param);
    }
  }
});

test('Conversation inserts after previous_item_id or at root and lists messages in order', () => {
  const c = new Conversation('conv_1');
  const a = parseMessageItem({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first' }] }, 'item').item;
  const b = parseMessageItem({ id: 'b', type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'second' }] }, 'item').item;
  const r = parseMessageItem({ id: 'r', type: 'message', role: 'system', content: [{ type: 'input_text', text: 'zeroth' }] }, 'item').item;
  assert.is(c.insert(a), null);
  assert.is(c.insert(b, a.id), a.id);
  assert.is(c.insert(r, 'root'), null);
  assert.equal(c.messages().map((m) => m.content), ['zeroth', 'first', 'second']);
  assert.throws(() => c.insert({ ...b }), (e: RealtimeError) => e.code === 'item_already_exists');
  assert.throws(() => c.delete('nope'), (e: RealtimeError) => e.code === 'item_delete_invalid_item_id');
});

test('Conversation refuses a function_call_output whose call it does not hold and a previous_item_id it lacks, before and at insert', () => {
  const c = new Conversation('conv_1');
  const output = parseMessageItem({ type: 'function_call_output', call_id: 'call_1', output: '{}' }, 'item').item;
  const call = parseMessageItem({ type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' }, 'item').item;
  assert.throws(() => c.checkPlace(output, null), (e: RealtimeError) => e.code === 'invalid_call_id' && e.param === 'item.call_id');
  assert.throws(() => c.insert(output), (e: RealtimeError) => e.code === 'invalid_call_id');
  assert.throws(() => c.checkPlace(call, 'nope'), (e: RealtimeError) => e.param === 'previous_item_id');
  c.insert(call);
  c.checkPlace(output, call.id);
  assert.is(c.insert(output, call.id), call.id);
});

test('parseItem refuses MCP items, a function call without its call_id, and wrong content for the role', () => {
  assert.throws(() => parseMessageItem({ type: 'mcp_call', name: 'x' }, 'item'), (e: RealtimeError) => e.code === 'unsupported_item_type');
  assert.throws(() => parseMessageItem({ type: 'function_call', name: 'x' }, 'item'), (e: RealtimeError) => e.code === 'missing_required_parameter' && e.param === 'item.call_id');
  assert.throws(() => parseMessageItem({ type: 'message', role: 'system', content: [{ type: 'input_audio', audio: 'AAAA' }] }, 'item'), (e: RealtimeError) => e.param === 'item.content[0].type');
  assert.throws(() => parseMessageItem({ type: 'message', role: 'user', content: [] }, 'item'), (e: RealtimeError) => e.param === 'item.content');
});

test('parseMessageItem bounds an item: 100,000 characters of text and transcripts, 32 parts (issue 8)', () => {
  const long = 'x'.repeat(100_001);
  const part = (text: string) => ({ type: 'input_text', text });
  let err = thrown(() => parseMessageItem({ type: 'message', role: 'user', content: [part(long)] }, 'item'));
  assert.equal([err.code, err.param], ['string_above_max_length', 'item.content[0].text']);
  err = thrown(() => parseMessageItem({ type: 'message', role: 'user', content: [{ type: 'input_audio', transcript: long }] }, 'item'));
  assert.equal([err.code, err.param], ['string_above_max_length', 'item.content[0].transcript']);
  err = thrown(() => parseMessageItem({ type: 'message', role: 'user', content: [part('x'.repeat(60_000)), part('y'.repeat(60_000))] }, 'item'));
  assert.equal([err.code, err.param], ['string_above_max_length', 'item.content[1].text']);
  err = thrown(() => parseMessageItem({ type: 'message', role: 'user', content: Array.from({ length: 33 }, () => part('a')) }, 'item'));
  assert.equal([err.code, err.param], ['array_above_max_length', 'item.content']);
  assert.is((parseMessageItem({ type: 'message', role: 'user', content: [part('x'.repeat(100_000))] }, 'item').item as { content: unknown[] }).content.length, 1);
});

test('Conversation.overflow names the oldest items beyond 1000 items or 1,000,000 characters, sparing the one kept', () => {
  const c = new Conversation('conv_1');
  const add = (id: string, chars: number) => c.insert(parseMessageItem({ id, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x'.repeat(chars) }] }, 'item').item);
  for (let i = 0; i < 10; i++) add(`big${i}`, 100_000);
  assert.equal(c.overflow(() => false), []);
  add('big10', 100_000);
  assert.equal(c.overflow(() => false), ['big0']);
  assert.equal(c.overflow((id) => id === 'big0'), ['big1']);
  const many = new Conversation('conv_2');
  for (let i = 0; i < 1002; i++) many.insert(parseMessageItem({ id: `i${i}`, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }, 'item').item);
  assert.equal(many.overflow(() => false), ['i0', 'i1']);
});

test('applySessionUpdate bounds the strings it keeps: instructions, names, a transcription prompt; long keys are not echoed whole', () => {
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ instructions: 'x'.repeat(100_001) }, 'string_above_max_length', 'session.instructions'],
    [{ model: 'm'.repeat(201) }, 'string_above_max_length', 'session.model'],
    [{ audio: { input: { transcription: { model: 'whisper-1', prompt: 'p'.repeat(4001) } } } }, 'string_above_max_length', 'session.audio.input.transcription.prompt'],
  ];
  for (const [update, code, param] of cases) {
    const err = thrown(() => applySessionUpdate(null, update, 'm'));
    assert.equal([err.code, err.param], [code, param]);
  }
  const err = thrown(() => applySessionUpdate(null, { ['k'.repeat(100_000)]: 1 }, 'm'));
  assert.is(err.code, 'unknown_parameter');
  assert.ok((err.param ?? '').length < 100 && err.message.length < 200, err.message.slice(0, 300));
  assert.is(applySessionUpdate(null, { instructions: 'x'.repeat(100_000) }, 'm').session.instructions.length, 100_000);
});

test('parseClientEvent names what is wrong with a message', () => {
  const code = (text: string) => {
    try {
      parseClientEvent(text);
      return 'ok';
    } catch (err) {
      return (err as RealtimeError).code;
    }
  };
  assert.is(code('{not json'), 'invalid_json');
  assert.is(code('[1,2]'), 'invalid_event');
  assert.is(code('{"event_id":"e1"}'), 'invalid_event');
  assert.is(code('{"type":"session.explode"}'), 'invalid_event');
  assert.is(code('{"type":"response.create"}'), 'ok');
});

test('parseClientEvent refuses events nested deeper than 64 levels, naming the field, without recursing (issue 8)', () => {
  // The event object is level 1: response (2), metadata (3), then 61 more levels is exactly 64.
  const at = (levels: number) => `{"event_id":"e1","type":"response.create","response":{"metadata":${deepObjectText(levels)}}}`;
  assert.is(parseClientEvent(at(62)).type, 'response.create');
  for (const levels of [63, 5000, 100_000]) {
    const err = thrown(() => parseClientEvent(at(levels)));
    assert.is(err.code, 'nesting_too_deep');
    assert.is(err.param, 'response.metadata.a');
  }
  // Arrays count too, and a message that never closes its brackets is refused before JSON.parse sees it.
  assert.is(thrown(() => parseClientEvent(`{"type":"session.update","session":{"tools":${'['.repeat(70)}${']'.repeat(70)}}}`)).param, 'session.tools[0]');
  assert.is(thrown(() => parseClientEvent('['.repeat(1_000_000))).code, 'nesting_too_deep');
  // Brackets and escaped quotes inside strings are not nesting.
  const quoted = JSON.stringify({ type: 'response.create', response: { metadata: { k: '[{'.repeat(1000) + '\\"'.repeat(1000) } } });
  assert.is(parseClientEvent(quoted).type, 'response.create');
});

test('parseClientEvent refuses events of more than 100,000 elements unparsed, naming the field (issue 8)', () => {
  // 16 MiB of {} would take JSON.parse seconds and hundreds of MB to build.
  const many = (n: number, item: string) => `{"event_id":"many","type":"response.create","response":{"input":[${Array(n).fill(item).join(',')}]}}`;
  let err = thrown(() => parseClientEvent(many(2_000_000, '{}')));
  assert.equal([err.code, err.param], ['too_many_elements', 'response.input']);
  err = thrown(() => parseClientEvent(many(200_000, '0')));
  assert.is(err.code, 'too_many_elements');
  assert.is(eventIdOf(many(200_000, '0')), 'many');
  assert.is(parseClientEvent(many(20_000, '{"type":"item_reference","id":"x"}')).type, 'response.create');
  // Commas and brackets inside strings are text, not elements.
  assert.is(parseClientEvent(JSON.stringify({ type: 'response.create', response: { instructions: ',[{'.repeat(200_000) } })).type, 'response.create');
});

test('eventIdOf finds the event_id of a message that is too deep or malformed, and never one over 512 characters', () => {
  assert.is(eventIdOf(`{"type":"response.create","event_id":"deep_1","response":${deepObjectText(100_000)}}`), 'deep_1');
  assert.is(eventIdOf('{"event_id":"cut_\\u00e9","type":"session.upd'), 'cut_é');
  assert.is(eventIdOf('{"x":{"event_id":"inner"},"type":"a"}'), null);
  assert.is(eventIdOf(JSON.stringify({ event_id: 'x'.repeat(513), type: 'response.create' })), null);
  assert.is(eventIdOf(JSON.stringify({ event_id: 'x'.repeat(512), type: 'response.create' })), 'x'.repeat(512));
});

test('decodePcm16 checks base64 of any size up to the event limit without a stack overflow (issue 8)', () => {
  const samples = new Int16Array((15 * 1024 * 1024 * 3) / 4 / 2);
  samples[0] = 1234;
  samples[samples.length - 1] = -5;
  const decoded = decodePcm16(Buffer.from(samples.buffer).toString('base64'), 'audio');
  assert.is(decoded.length, samples.length);
  assert.is(decoded[0], 1234);
  assert.is(decoded[samples.length - 1], -5);
  const huge = Buffer.alloc(12 * 1024 * 1024).toString('base64');
  assert.is(thrown(() => decodePcm16(`${huge.slice(0, -4)}!AAA`, 'audio')).code, 'invalid_value');
  for (const bad of ['QUJD\nREVG', 'QUJD-_EF', 'AAA', 'AA=A', '====', 'AAAA====', 'QUJDRA']) {
    assert.is(thrown(() => decodePcm16(bad, 'audio')).param, 'audio', bad);
  }
  assert.is(decodePcm16('', 'audio').length, 0);
});

test('decodePcm16 takes strict base64 with whole samples only', () => {
  assert.equal(Array.from(decodePcm16(Buffer.from(Int16Array.from([1, -2]).buffer).toString('base64'), 'audio')), [1, -2]);
  assert.throws(() => decodePcm16('###', 'audio'), (e: RealtimeError) => e.code === 'invalid_value' && e.param === 'audio');
  assert.throws(() => decodePcm16(Buffer.from([1, 2, 3]).toString('base64'), 'audio'), (e: RealtimeError) => /even number/.test(e.message));
});

test('renameForDialect gives older names and drops events the older dialect lacks', () => {
  assert.is(renameForDialect('response.output_audio.delta', 'legacy'), 'response.audio.delta');
  assert.is(renameForDialect('response.output_image.delta', 'legacy'), 'response.video.delta');
  assert.is(renameForDialect('conversation.item.added', 'legacy'), 'conversation.item.created');
  assert.is(renameForDialect('conversation.item.done', 'legacy'), null);
  assert.is(renameForDialect('response.done', 'legacy'), 'response.done');
  assert.is(renameForDialect('conversation.item.added', 'ga'), 'conversation.item.added');
});

test.run();

// The server event vocabulary is a type (src/realtime/server-events.ts): a misspelt event name, a
// field an event does not have, or a missing field fails `npm run typecheck` (part of `npm test`).
// Each `@ts-expect-error` below fails the typecheck if the union ever stops catching that mistake.
test('server events: misspelt names and fields are type errors', () => {
  const good: ServerEventDraft[] = [
    { type: 'output_audio_buffer.started', response_id: 'resp_1' },
    { type: 'response.output_image.done', response_id: 'resp_1', item_id: 'item_1', output_index: 0, content_index: 0, total_frames: 3 },
    { type: 'conversation.item.truncated', item_id: 'item_1', content_index: 0, audio_end_ms: 120 },
  ];
  // @ts-expect-error misspelt event name
  const misspeltName: ServerEventDraft = { type: 'output_audio_buffer.stoped', response_id: 'resp_1' };
  // @ts-expect-error a field the event does not have (GA says audio_end_ms)
  const wrongField: ServerEventDraft = { type: 'conversation.item.truncated', item_id: 'item_1', content_index: 0, audio_end: 120 };
  // @ts-expect-error a required field missing (response_id)
  const missingField: ServerEventDraft = { type: 'response.output_audio.delta', item_id: 'item_1', output_index: 0, content_index: 0, delta: '' };
  // @ts-expect-error an event this server never sends (DTMF)
  const notOurs: ServerEventDraft = { type: 'input_audio_buffer.dtmf_event_received', event: '1', received_at: 0 };
  // The drafts are values too: each is stamped and renamed like any other event.
  for (const draft of [...good, misspeltName, wrongField, missingField, notOurs]) assert.type(draft.type, 'string');
});
