import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { formatTimestamp, parseTimestamp, SyncedClock, systemClock } from '../../src/core/clock.js';

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

test('SyncedClock follows its reference (an hour off this node\'s clock) and runs on between readings', async () => {
  let offsetUs = 3_600_000_000;
  const clock = await SyncedClock.start(async () => Date.now() * 1000 + offsetUs, { resyncMs: 60_000 });
  try {
    assert.ok(Math.abs(clock.nowUs() - (Date.now() * 1000 + offsetUs)) < 50_000, 'on the reference');
    const a = clock.nowUs();
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(clock.nowUs() - a >= 25_000, 'runs between readings');
    // The reference steps forward: the next reading follows it.
    offsetUs += 60_000_000;
    assert.ok(await clock.sync());
    assert.ok(Math.abs(clock.nowUs() - (Date.now() * 1000 + offsetUs)) < 50_000, 'followed the step');
    // It steps back: the clock never goes backwards, it waits for the reference.
    const before = clock.nowUs();
    offsetUs -= 60_000_000;
    assert.ok(await clock.sync());
    assert.ok(clock.nowUs() >= before, 'never backwards');
    // A failing reference leaves it running on the last reading.
    let down = false;
    const failing = await SyncedClock.start(
      async () => {
        if (down) throw new Error('database down');
        return Date.now() * 1000;
      },
      { resyncMs: 60_000 },
    );
    down = true;
    assert.is(await failing.sync(), false);
    assert.ok(Math.abs(failing.nowUs() / 1000 - Date.now()) < 50, 'still on its last reading');
    failing.stop();
  } finally {
    clock.stop();
  }
});

test('SyncedClock.start fails when the reference cannot be read', async () => {
  try {
    await SyncedClock.start(async () => {
      throw new Error('no database');
    });
    assert.unreachable('started without a reading');
  } catch (err) {
    assert.match((err as Error).message, 'no database');
  }
});

test.run();
