/**
 * The idle-core reading (src/core/idle-cores.ts) that sizes Whisper's threads per call: the rule
 * (one thread per idle core, rounded, at least one, at most the configured), and the sampler
 * seeing a core this process keeps busy.
 */
import os from 'node:os';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SAMPLE_MS, idleCores, threadsForIdleCores } from '../../src/core/idle-cores.js';

test('threadsForIdleCores(): one per idle core, rounded, from one to the most allowed', () => {
  assert.is(threadsForIdleCores(2, 1.8), 2);
  assert.is(threadsForIdleCores(2, 1.4), 1);
  assert.is(threadsForIdleCores(2, 0.1), 1);
  assert.is(threadsForIdleCores(2, 7.5), 2);
  assert.is(threadsForIdleCores(8, 3.6), 4);
});

test('the sampler sees a core kept busy: idle cores fall by about one (whatever else the machine does)', async () => {
  const release = idleCores.hold();
  try {
    const until = performance.now() + 8 * SAMPLE_MS;
    let lowest = Infinity;
    // Busy in 20 ms slices, so the sampler's timer still runs in between.
    while (performance.now() < until) {
      const slice = performance.now() + 20;
      while (performance.now() < slice);
      await new Promise((r) => setImmediate(r));
      lowest = Math.min(lowest, idleCores.now);
    }
    assert.ok(lowest <= os.cpus().length - 0.5, `idle cores ${lowest.toFixed(2)} of ${os.cpus().length} while one is busy`);
  } finally {
    release();
  }
});

test.run();
