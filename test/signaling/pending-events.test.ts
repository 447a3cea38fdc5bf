/**
 * PendingEvents and EventGate: client events held while a connection's session starts keep their
 * order, are bounded in count, and an event that does not fit is refused with an error naming it;
 * a gate hands them on once, in order, and drops everything once shut.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EventGate, PendingEvents } from '../../src/signaling/pending-events.js';

test('events wait in order and are handed over once', () => {
  const pending = new PendingEvents();
  assert.is(pending.push('{"type":"a"}'), null);
  assert.is(pending.push('{"type":"b"}'), null);
  assert.equal(pending.drain(), ['{"type":"a"}', '{"type":"b"}']);
  assert.equal(pending.drain(), []);
});

test('past 256 events the next is refused with session_not_ready naming its event_id; draining makes room', () => {
  const pending = new PendingEvents();
  for (let i = 0; i < 256; i++) assert.is(pending.push(`{"type":"x","event_id":"ev_${i}"}`), null);
  const refused = pending.push('{"type":"response.create","event_id":"ev_late"}') as { type: string; error: { code: string; event_id: string | null } } | null;
  assert.ok(refused);
  assert.is(refused.type, 'error');
  assert.is(refused.error.code, 'session_not_ready');
  assert.is(refused.error.event_id, 'ev_late');
  assert.is(pending.drain().length, 256);
  assert.is(pending.push('{"type":"x"}'), null);
});

test('the total size is bounded too', () => {
  const pending = new PendingEvents();
  const big = `{"type":"x","pad":"${'a'.repeat(20 * 1024 * 1024)}"}`;
  assert.is(pending.push(big), null);
  const refused = pending.push(big) as { error: { code: string } } | null;
  assert.is(refused?.error.code, 'session_not_ready');
});

test('a gate holds events until it opens, hands them on first and in order, then passes each straight on', () => {
  const refused: unknown[] = [];
  const gate = new EventGate((e) => refused.push(e));
  gate.receive('a');
  gate.receive('b');
  assert.not.ok(gate.isOpen);
  const got: string[] = [];
  gate.open((text) => {
    got.push(text);
    // An event that arrives while the held ones are handed on goes after them.
    if (text === 'a') gate.receive('c');
  });
  assert.ok(gate.isOpen);
  gate.receive('d');
  assert.equal(got, ['a', 'b', 'c', 'd']);
  assert.equal(refused, []);
});

test('a full gate answers the refused event through its refuse callback; a shut gate drops everything', () => {
  const refused: Array<{ error: { code: string; event_id: string | null } }> = [];
  const gate = new EventGate((e) => refused.push(e as never));
  for (let i = 0; i < 256; i++) gate.receive(`{"type":"x","event_id":"ev_${i}"}`);
  gate.receive('{"type":"x","event_id":"ev_over"}');
  assert.is(refused.length, 1);
  assert.is(refused[0]!.error.code, 'session_not_ready');
  assert.is(refused[0]!.error.event_id, 'ev_over');
  gate.shut();
  const got: string[] = [];
  gate.open((text) => got.push(text));
  gate.receive('late');
  assert.equal(got, [], 'nothing is handed on after shut()');
  assert.not.ok(gate.isOpen);
});

test.run();
