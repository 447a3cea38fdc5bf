/**
 * The voice-activity-detection seam: a detector turns one fixed-size frame of mono float audio
 * (-1..1) at its own sample rate into a speech probability 0..1. It keeps per-stream state
 * (recurrent state, context samples), so one detector serves one input stream and its frames must
 * be given in stream order, one at a time. Implementations: silero.ts (Silero VAD v5 on
 * onnxruntime-node) and fake-vad.ts (deterministic, for engine tests). The turn logic on top
 * (OpenAI `server_vad`) is in segmenter.ts.
 */

export interface VoiceActivityDetector {
  /** Samples per frame that probability() accepts (exactly this many). */
  readonly frameSamples: number;
  /** Sample rate the frames must have. */
  readonly sampleRateHz: number;
  /** Speech probability 0..1 of the next frame of the stream. Calls must not overlap. */
  probability(frame: Float32Array): Promise<number>;
  /** Forgets the stream state: the next frame is treated as the start of a new stream. */
  reset(): void;
  /** Releases what the detector holds; probability() rejects afterwards. */
  close(): Promise<void>;
}

/** Thrown for a frame of the wrong size or a call after close(): both are caller bugs. */
export class VadError extends Error {
  override name = 'VadError';
}

/** Checks a frame before it reaches a model, with a message that names the detector. */
export function checkFrame(name: string, frame: Float32Array, frameSamples: number, closed: boolean): void {
  if (closed) throw new VadError(`${name}: probability() after close()`);
  if (frame.length !== frameSamples) {
    throw new VadError(`${name}: frame has ${frame.length} samples, expected ${frameSamples}`);
  }
}
