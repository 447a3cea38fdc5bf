/**
 * The end-of-turn seam: a model that hears the end of what someone has said and judges whether
 * they have finished their turn ("I'd like to book a table for" has not; "for two, please" has).
 * It reads only the last `windowMs` of the audio it is given, mono float (-1..1) at its own
 * sample rate, and keeps no state between calls, so one model serves every stream of the process
 * and calls may overlap. Implementations: smart-turn.ts (Smart Turn v3 on onnxruntime-node) and
 * fake-turn.ts (scripted, for engine tests). The judge that weighs it with the words and the
 * silence (OpenAI `semantic_vad`) is realtime/turn-judge.ts.
 */
import { ProviderError } from '../provider-error.js';

export { ProviderError };

export interface EndOfTurnModel {
  /** What the model is, for logs and benchmark reports. */
  readonly name: string;
  /** Sample rate the audio must have. */
  readonly sampleRateHz: number;
  /** Audio the model reads, counted back from the end of what it is given. */
  readonly windowMs: number;
  /** Probability 0..1 that the speaker has finished, judged from the end of `audio`. */
  completeProbability(audio: Float32Array): Promise<number>;
  /** Releases what the model holds; completeProbability() rejects afterwards. */
  close(): Promise<void>;
}

export function turnModelFailed(message: string, cause?: unknown): ProviderError {
  return new ProviderError('turn_model_failed', message, { cause });
}
