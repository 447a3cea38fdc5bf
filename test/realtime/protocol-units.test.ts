/**
 * Unit tests of the realtime engine's pure parts: the sentence splitter that feeds the voice, the
 * session.update merge (GA, rtAV flat and beta shapes), the conversation list, and client event
 * parsing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SentenceSplitter } from '../../src/realtime/sentences.js';
import { applySessionUpdate } from '../../src/realtime/session-update.js';
import { Conversation, parseMessageItem } from '../../src/realtime/conversation.js';
import { RealtimeError, decodePcm16, parseClientEvent, renameForDialect } from '../../src/realtime/protocol.js';

function split(chunks: string[]): string[] {
  const s = new SentenceSplitter();
  const out = chunks.flatMap((c) => s.push(c));
  const rest = s.flush();
  return rest ? [...out, rest] : out;
}

test('SentenceSplitter cuts sentences from token-sized chunks', () => {
  const text = 'Hello there. How are you today? I am fine! Thanks.';
  const chunks = text.match(/.{1,3}/gs) as string[];
  assert.equal(split(chunks), ['Hello there.', 'How are you today?', 'I am fine!', 'Thanks.']);
});

test('SentenceSplitter keeps abbreviations, initials and decimals inside a sentence', () => {
  assert.equal(split(['Dr. Smith paid 3.5 dollars e.g. for J. R. R. Tolkien books in the U.S. today. Done.']), [
    'Dr. Smith paid 3.5 dollars e.g. for J. R. R. Tolkien books in the U.S. today.',
    'Done.',
  ]);
});

test('SentenceSplitter speaks a long first clause on its own at a comma', () => {
  const pieces = split(['Well, that is a really interesting question, and the answer has two parts. First part.']);
  assert.equal(pieces[0], 'Well, that is a really interesting question,');
  assert.equal(pieces.slice(1), ['and the answer has two parts.', 'First part.']);
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
  assert.is(a.turnDetection?.segmenter.silenceDurationMs, 500);
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

test('applySessionUpdate rejects unknown fields, a transcription session, bad VAD values and G.711, naming the parameter', () => {
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ colour: 'red' }, 'unknown_parameter', 'session.colour'],
    [{ type: 'transcription' }, 'invalid_value', 'session.type'],
    [{ audio: { input: { turn_detection: { type: 'server_vad', threshold: 2 } } } }, 'invalid_value', 'session.audio.input.turn_detection.threshold'],
    [{ input_audio_format: 'g711_ulaw' }, 'unsupported_audio_format', 'session.input_audio_format'],
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
  assert.throws(() => c.delete('nope'), (e: RealtimeError) => e.code === 'item_not_found');
});

test('parseMessageItem refuses function calls and wrong content for the role', () => {
  assert.throws(() => parseMessageItem({ type: 'function_call', name: 'x' }, 'item'), (e: RealtimeError) => e.code === 'unsupported_item_type');
  assert.throws(() => parseMessageItem({ type: 'message', role: 'system', content: [{ type: 'input_audio', audio: 'AAAA' }] }, 'item'), (e: RealtimeError) => e.param === 'item.content[0].type');
  assert.throws(() => parseMessageItem({ type: 'message', role: 'user', content: [] }, 'item'), (e: RealtimeError) => e.param === 'item.content');
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
