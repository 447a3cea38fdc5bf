/**
 * PendingEvents: client events held while a connection's session starts keep their order, are
 * bounded in count, and an event that does not fit is refused with an error naming it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PendingEvents } from '../../src/signaling/pending-events.js';

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

test.run();
