/**
 * semantic_vad's judge's weights (turn-judge.ts): the logistic model over TURN_FEATURES and the
 * pause survival's shape. Written by `TURN_END_FIT=1 npm run bench -- turn-end` from the
 * benchmark's utterances (benchmarks/lib/turn-end/fit.ts says how; the pause's shape is chosen on
 * the benchmark's curve and kept by the fit); do not edit the weights by hand.
 */
import type { TurnWeights } from './turn-judge.js';

export const TURN_WEIGHTS: TurnWeights = {
  /** In TURN_FEATURES' order. */
  weights: [0.37, 0.13, 0.076, -0.643, -2.96, -0.987, 1.013, 0.811, -0.608, 0.261, 1.791, 0.258],
  pause: { medianMs: 450, steepness: 4 },
  fitted: { date: '2026-12-02', commit: 'dd93f88', utterances: 384, recognisers: 'base, tiny.en' },
};
