/**
 * The WebSocket playground's frame clock (playground/src/frame-clock.ts), on the event order the
 * server sends (a tick's PCM, then its JPEG with pts_ms) and an audio context whose output is
 * heard 50 ms after its render time:
 *  - a reply's frames are due when their own sound is heard: the lead and the output latency
 *    after they arrive, not on arrival (what the page did before: the picture 110 ms early here);
 *  - each later frame keeps to the audio clock, whenever it arrives; the last delta of a reply,
 *    cut mid-tick, does not move that;
 *  - idle frames (before, between and after replies, after a cut) come the same delay after they
 *    arrive, so the picture does not jump when speech starts or ends;
 *  - playback restarting after an underrun fixes the clock again; nothing is due before it came.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { FrameClock, heardAt, type AudioClock } from '../../playground/src/frame-clock.js';

const LEAD_S = 0.06;
const OUTPUT_MS = 50;
const TICK_MS = 40;

/** The audio clock at page time `nowMs` (context time = now / 1000 − 4 s), heard OUTPUT_MS after rendering. */
function clockAt(nowMs: number): AudioClock {
  const currentTime = nowMs / 1000 - 4;
  return { currentTime, contextTime: currentTime - OUTPUT_MS / 1000, performanceTime: nowMs };
}

/** A player as the page's: gapless from its end, or restarted LEAD_S ahead of now. */
function player(clock: FrameClock) {
  let next = 0;
  return (nowMs: number, ms: number) => {
    const t = clockAt(nowMs).currentTime;
    const restarted = next < t;
    if (restarted) next = t + LEAD_S;
    next += ms / 1000;
    clock.audioScheduled(next, restarted);
  };
}

test('idle frames come the lead and the output latency after they arrive', () => {
  const clock = new FrameClock(LEAD_S);
  for (const at of [5000, 5040, 5080]) {
    const due = clock.due(at - 4000, at, clockAt(at));
    assert.equal(Math.round(due.atMs - at), LEAD_S * 1000 + OUTPUT_MS);
    assert.is(due.synced, false);
  }
});

test("a reply's frames are due when their sound is heard, whenever they arrive", () => {
  const clock = new FrameClock(LEAD_S);
  const play = player(clock);
  // Idle frames at pts 960 and 1000 (arriving 4 s after the session's start on this page's clock).
  clock.due(960, 4960, clockAt(4960));
  // Speech starts 25 ms into the tick at pts 1000: its first delta (15 ms) arrives at 5041, its frame at 5045.
  play(5041, 15);
  const first = clock.due(1000, 5045, clockAt(5045));
  assert.is(first.synced, true);
  // The delta's 15 ms are the tick's last 15 ms; the tick starts 25 ms before them on the audio clock.
  const soundHeard = heardAt(clockAt(5041).currentTime + LEAD_S, clockAt(5045));
  assert.equal(Math.round(first.atMs), Math.round(soundHeard - 25));
  // Drawn on arrival, the mouth would open 106 ms before its sound is heard.
  assert.equal(Math.round(soundHeard - 5045), 106);
  // Later ticks keep to the audio clock: a frame that came 30 ms late is still due at its own time.
  play(5081, TICK_MS);
  const second = clock.due(1040, 5115, clockAt(5115));
  assert.equal(Math.round(second.atMs - first.atMs), TICK_MS);
  // The reply's last delta ends mid-tick (10 ms): the clock stays.
  play(5121, 10);
  const last = clock.due(1080, 5125, clockAt(5125));
  assert.equal(Math.round(last.atMs - first.atMs), 2 * TICK_MS);
  assert.is(last.synced, true);
  // Once the audio has played out, frames are idle again, the same delay after they arrive.
  const after = clock.due(1400, 5445, clockAt(5445));
  assert.is(after.synced, false);
  assert.equal(Math.round(after.atMs - 5445), LEAD_S * 1000 + OUTPUT_MS);
});

test('a cut (barge-in) sends frames back to the idle delay; an underrun fixes the clock again', () => {
  const clock = new FrameClock(LEAD_S);
  const play = player(clock);
  play(5000, TICK_MS);
  const a = clock.due(1000, 5004, clockAt(5004));
  assert.is(a.synced, true);
  clock.audioStopped();
  const cut = clock.due(1040, 5044, clockAt(5044));
  assert.is(cut.synced, false);
  assert.equal(Math.round(cut.atMs - 5044), LEAD_S * 1000 + OUTPUT_MS);
  // A new reply; then its audio stalls in the network, playback restarts with a whole tick, and a frame was lost in between.
  play(6000, 20);
  const b = clock.due(2000, 6004, clockAt(6004));
  play(6500, TICK_MS);
  const c = clock.due(2080, 6504, clockAt(6504));
  assert.is(c.synced, true);
  // After the restart the frame is due with its own (re-started) sound: the tick's start.
  assert.equal(Math.round(c.atMs), Math.round(heardAt(clockAt(6500).currentTime + LEAD_S, clockAt(6504))));
  assert.ok(c.atMs > b.atMs + 400);
});

test('nothing is due before it arrived', () => {
  const clock = new FrameClock(LEAD_S);
  const play = player(clock);
  play(5000, TICK_MS);
  clock.due(1000, 5004, clockAt(5004));
  // A frame of an old tick arriving a second late (its sound long played, the audio still going).
  play(5040, 2000);
  const late = clock.due(1040, 6200, clockAt(6200));
  assert.ok(late.atMs >= 6200);
});

test.run();
