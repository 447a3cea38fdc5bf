/**
 * Silero VAD v5 (onnxruntime-node, one intra-op thread): time per 32 ms frame of 16 kHz speech,
 * over every frame of several passes of a spoken sentence, after a warm-up pass.
 */
import { SileroVad, SILERO_FRAME_SAMPLES } from '../src/providers/vad/silero.js';
import { speak } from '../harness/measures/speech.js';
import { summarise, type Benchmark } from './lib/harness.js';

const PASSES = 5;

const bench: Benchmark = {
  name: 'vad',
  description: 'Silero VAD v5 per-frame cost (32 ms frames at 16 kHz)',
  async run(ctx) {
    const speech = speak('The quick brown fox jumps over the lazy dog and runs into the forest.', 16_000);
    const samples: number[] = [];
    for (let run = 0; run < ctx.runs; run++) {
      const vad = await SileroVad.create();
      for (let pass = 0; pass <= PASSES; pass++) {
        vad.reset();
        for (let at = 0; at + SILERO_FRAME_SAMPLES <= speech.length; at += SILERO_FRAME_SAMPLES) {
          const t0 = performance.now();
          await vad.probability(speech.subarray(at, at + SILERO_FRAME_SAMPLES));
          if (pass > 0) samples.push(performance.now() - t0); // pass 0 warms up
        }
      }
      await vad.close();
    }
    return {
      params: { frame_ms: 32, sample_rate_hz: 16_000, intra_op_threads: 1, passes: PASSES, runs: ctx.runs },
      metrics: [summarise('probability()', 'ms/frame', samples, 1000 / (samples.reduce((a, b) => a + b, 0) / samples.length))],
    };
  },
};

export default bench;
