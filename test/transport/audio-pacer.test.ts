/**
 * AudioPacer (src/transport/audio-pacer.ts) on a clock the test moves: a tick's packets leave
 * their pts' distance apart, a packet on its own leaves at once, nothing waits more than
 * MAX_HOLD_MS, order is kept, and close() drops the rest.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AudioPacer, MAX_HOLD_MS, type PacerClock } from '../../src/transport/audio-pacer.js';

/** A clock whose time moves only when the test says, firing due timers in order. */
class TestClock implements PacerClock {
  now = 0;
  private timers: Array<{ at: number; fn: () => void; live: boolean }> = [];
  nowMs(): number {
    return this.now;
  }
  after(ms: number, fn: () => void) {
    const timer = { at: this.now + ms, fn, live: true };
    this.timers.push(timer);
    return { cancel: () => void (timer.live = false) };
  }
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      due.live = false;
      this.now = due.at;
      due.fn();
    }
    this.now = end;
  }
  get pending(): number {
    return this.timers.filter((t) => t.live).length;
  }
}

function pacer() {
  const clock = new TestClock();
  const sent: Array<{ id: number; at: number }> = [];
  const p = new AudioPacer<number>((id) => sent.push({ id, at: clock.now }), clock);
  return { clock, sent, p };
}

const Pacer = suite('audio pacer');

Pacer("a tick's two packets leave 20 ms apart, tick after tick, without drifting", () => {
  const { clock, sent, p } = pacer();
  for (let tick = 0; tick < 50; tick++) {
    p.push(2 * tick, tick * 40e6);
    p.push(2 * tick + 1, tick * 40e6 + 20e6);
    clock.advance(40);
  }
  assert.equal(sent.map((s) => s.id), [...Array(100).keys()]);
  assert.equal(sent.map((s) => s.at), [...Array(100).keys()].map((i) => i * 20));
});

Pacer('a late tick leaves at once and delays none after it', () => {
  const { clock, sent, p } = pacer();
  const tick = (n: number) => {
    p.push(2 * n, n * 40e6);
    p.push(2 * n + 1, n * 40e6 + 20e6);
  };
  tick(0);
  clock.advance(55); // tick 1 comes 15 ms late
  tick(1);
  clock.advance(25); // tick 2 on time, at 80
  tick(2);
  clock.advance(40);
  assert.equal(sent.map((s) => s.at), [0, 20, 55, 75, 80, 100]);
});

Pacer(`a burst after a stall drains within ${MAX_HOLD_MS} ms, in order, and close() drops what waits`, () => {
  const { clock, sent, p } = pacer();
  for (let i = 0; i < 6; i++) p.push(i, i * 20e6);
  clock.advance(100);
  assert.equal(sent.map((s) => [s.id, s.at]), [[0, 0], [1, 20], [2, 20], [3, 20], [4, 20], [5, 20]]);
  p.push(6, 120e6);
  p.push(7, 140e6);
  assert.is(p.queued, 1);
  p.close();
  clock.advance(100);
  assert.is(sent.length, 7);
  assert.is(clock.pending, 0);
  p.push(8, 160e6);
  assert.is(sent.length, 7, 'nothing is sent after close()');
});

Pacer.run();
