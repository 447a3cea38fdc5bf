import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { formatTimestamp, parseTimestamp, systemClock } from '../../src/core/clock.js';

test('formatTimestamp writes UTC ISO 8601 without zone, with microseconds', () => {
  assert.is(formatTimestamp(Date.UTC(2026, 0, 2, 3, 4, 5, 678) * 1000 + 901), '2026-01-02T03:04:05.678901');
  assert.is(formatTimestamp(0), '1970-01-01T00:00:00.000000');
});

test('parseTimestamp reads what formatTimestamp writes, ISO with zones, and Unix seconds', () => {
  const us = Date.UTC(2026, 5, 7, 8, 9, 10, 111) * 1000 + 222;
  assert.is(parseTimestamp(formatTimestamp(us)), us);
  assert.is(parseTimestamp('2026-06-07T10:09:10.111222+02:00'), us);
  assert.is(parseTimestamp('2026-06-07'), Date.UTC(2026, 5, 7) * 1000);
  assert.is(parseTimestamp('1767225600'), 1767225600 * 1_000_000);
  assert.is(parseTimestamp('1767225600.5'), 1767225600.5 * 1_000_000);
  assert.is(parseTimestamp('tomorrow'), null);
  assert.is(parseTimestamp('2026-13-45'), null);
});

test('systemClock counts microseconds near Date.now()', () => {
  const diffMs = Math.abs(systemClock.nowUs() / 1000 - Date.now());
  assert.ok(diffMs < 50, `drift ${diffMs} ms`);
});

test.run();
