/**
 * A scripted EndOfTurnModel for engine tests: each judgement's probability comes from a function
 * of the audio it is given (by default: "complete"), and resolves after `delayMs` on a timer (0:
 * on the next macrotask), so tests can make a judgement slower than the speaker's next word. It
 * records every judgement (how much audio it was given) so tests can check when it was asked.
 */
import { turnModelFailed, type EndOfTurnModel } from './base.js';

export interface FakeTurnOptions {
  /** Probability that the turn is complete, from the 16 kHz audio judged. */
  script?: (audio: Float32Array, call: number) => number;
  delayMs?: number;
}

export class FakeTurnModel implements EndOfTurnModel {
  readonly name = 'fake-turn';
  readonly sampleRateHz = 16000;
  readonly windowMs = 8000;
  /** Samples given to each judgement, in call order. */
  readonly judged: number[] = [];
  closed = false;

  constructor(private readonly options: FakeTurnOptions = {}) {}

  async completeProbability(audio: Float32Array): Promise<number> {
    if (this.closed) throw turnModelFailed('FakeTurnModel: completeProbability() after close()');
    const call = this.judged.length;
    this.judged.push(audio.length);
    const probability = this.options.script?.(audio, call) ?? 0.9;
    await new Promise((resolve) => setTimeout(resolve, this.options.delayMs ?? 0));
    return probability;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
