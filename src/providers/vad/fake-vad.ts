/**
 * A deterministic VoiceActivityDetector for engine tests: the probability of each frame comes from
 * a scripted function of the frame index (and the frame), or, by default, from the frame's RMS
 * energy (loud frames are speech). No model, no timers: results resolve on the microtask queue, in
 * order. It records every frame index it scored so tests can check ordering and resets.
 */
import { checkFrame, type VoiceActivityDetector } from './base.js';

/** Default energy gate: -40 dBFS RMS. Test tones and synthetic "speech" sit far above it, digital
 * silence and light dither far below. */
const FAKE_VAD_SPEECH_RMS = 0.01;
const FAKE_VAD_SPEECH_PROBABILITY = 0.95;
const FAKE_VAD_SILENCE_PROBABILITY = 0.02;

export interface FakeVadOptions {
  /** Probability of frame `index` (0-based since creation or the last reset). Wins over energy. */
  script?: (index: number, frame: Float32Array) => number;
  /** RMS at or above which the energy rule says speech. */
  speechRms?: number;
  frameSamples?: number;
  sampleRateHz?: number;
}

export class FakeVad implements VoiceActivityDetector {
  readonly frameSamples: number;
  readonly sampleRateHz: number;
  /** Frame indices scored since creation, across resets (a reset restarts the index at 0). */
  readonly scored: number[] = [];
  resets = 0;
  closed = false;

  private index = 0;
  private readonly script: ((index: number, frame: Float32Array) => number) | undefined;
  private readonly speechRms: number;

  constructor(options: FakeVadOptions = {}) {
    this.frameSamples = options.frameSamples ?? 512;
    this.sampleRateHz = options.sampleRateHz ?? 16000;
    this.script = options.script;
    this.speechRms = options.speechRms ?? FAKE_VAD_SPEECH_RMS;
  }

  async probability(frame: Float32Array): Promise<number> {
    checkFrame('FakeVad', frame, this.frameSamples, this.closed);
    const index = this.index++;
    this.scored.push(index);
    if (this.script) return this.script(index, frame);
    let sum = 0;
    for (const x of frame) sum += x * x;
    const rms = Math.sqrt(sum / frame.length);
    return rms >= this.speechRms ? FAKE_VAD_SPEECH_PROBABILITY : FAKE_VAD_SILENCE_PROBABILITY;
  }

  reset(): void {
    this.index = 0;
    this.resets++;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
