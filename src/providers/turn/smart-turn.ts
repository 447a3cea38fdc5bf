/**
 * Smart Turn v3.2 (Pipecat's end-of-turn model, BSD-2-Clause, fetched from the pipecat-ai wheel:
 * models/manifest.json `turn-smart-turn-v3`) on onnxruntime-node's CPU provider. Model I/O:
 * `input_features` float32 [1, 80, 800] = Whisper log-mel features (normalised waveform) of exactly
 * the last 8 s of 16 kHz audio, zeros in front when there is less; output `logits` [1, 1] is already
 * a sigmoid probability that the turn is complete. The session is loaded once per process and
 * shared (onnxruntime's Run is thread-safe and the model keeps no state). Measured on the 2-core
 * machine: about 20 ms for the features (on the event loop) and 45 ms for the model (on
 * onnxruntime's own thread, one intra-op thread so a judgement does not take both cores from the
 * media pipeline).
 */
import * as ort from 'onnxruntime-node';
import { modelPath } from '../../models/manifest.js';
import { logMelSpectrogram, WHISPER_HOP, WHISPER_SAMPLE_RATE_HZ } from '../../audio/whisper-mel.js';
import { turnModelFailed, type EndOfTurnModel } from './base.js';

export const SMART_TURN_MODEL = 'turn-smart-turn-v3';
const WINDOW_MS = 8000;
const WINDOW_SAMPLES = (WHISPER_SAMPLE_RATE_HZ * WINDOW_MS) / 1000;
const FRAMES = WINDOW_SAMPLES / WHISPER_HOP;
const N_MELS = 80;

export class SmartTurn implements EndOfTurnModel {
  readonly name = 'smart-turn-v3.2';
  readonly sampleRateHz = WHISPER_SAMPLE_RATE_HZ;
  readonly windowMs = WINDOW_MS;
  private closed = false;

  private constructor(private readonly session: ort.InferenceSession) {}

  /** The model from MODELS_DIR, or null when it is not installed (then turns end on silence alone). */
  static async load(modelsDir: string): Promise<SmartTurn | null> {
    const file = modelPath(modelsDir, SMART_TURN_MODEL);
    if (file === null) return null;
    try {
      const session = await ort.InferenceSession.create(file, {
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
      });
      return new SmartTurn(session);
    } catch (err) {
      throw turnModelFailed(`Smart Turn: cannot load ${file}: ${(err as Error).message}`, err);
    }
  }

  async completeProbability(audio: Float32Array): Promise<number> {
    if (this.closed) throw turnModelFailed('Smart Turn: completeProbability() after close()');
    const window = new Float32Array(WINDOW_SAMPLES);
    const tail = audio.subarray(Math.max(0, audio.length - WINDOW_SAMPLES));
    window.set(tail, WINDOW_SAMPLES - tail.length);
    const features = logMelSpectrogram(window, { frames: FRAMES, nMels: N_MELS, normalize: true });
    const out = await this.session.run({ input_features: new ort.Tensor('float32', features, [1, N_MELS, FRAMES]) });
    const probability = (out[this.session.outputNames[0] ?? 'logits']?.data as Float32Array | undefined)?.[0];
    if (probability === undefined || !Number.isFinite(probability)) throw turnModelFailed('Smart Turn: the model returned no probability');
    return probability;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.release();
  }
}
