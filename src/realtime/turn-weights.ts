/**
 * semantic_vad's judge's weights (turn-judge.ts): the logistic model over TURN_FEATURES and the
 * pause survival's shape. Written by `TURN_END_FIT=1 npm run bench -- turn-end` from the
 * benchmark's utterances (benchmarks/lib/turn-end/fit.ts says how; the pause's shape is chosen on
 * the benchmark's curve and kept by the fit); do not edit the weights by hand.
 */
import type { TurnWeights } from './turn-judge.js';

export const TURN_WEIGHTS: TurnWeights = {
  /** In TURN_FEATURES' order. */
  weights: [0.371, 0.127, 0.071, -0.663, -2.963, -1.017, 0.997, 0.943, 0.964, 0.63],
  pause: { medianMs: 450, steepness: 4 },
  fitted: { date: '2026-12-02', commit: 'e73b2b9-dirty', utterances: 384, recognisers: 'base, tiny.en' },
};
