/**
 * flite voices (CMU US slt, rms, awb, kal16; 16 kHz) through the native addon: more natural than
 * espeak-ng and still light (measured real-time factor ~0.013). flite reads ASCII English only,
 * so text is folded to ASCII after cleaning (native-voice.ts). Phoneme timings come from the utterance's segment
 * end times (CMU phones mapped to IPA natively). Rate stretches durations (1 / (rate × speed));
 * pitch sets the intonation model's mean F0 in Hz.
 */
import { NativeVoice, type NativeSynthesis } from './native-voice.js';

export const FLITE_VOICES = ['slt', 'rms', 'awb', 'kal16'] as const;
/** Range flite's intonation model handles (Hz); analysed pitches are clamped into it. */
export const FLITE_MIN_PITCH_HZ = 50;
export const FLITE_MAX_PITCH_HZ = 400;

export interface FliteVoiceSettings {
  /** slt (US female), rms (US male, low), awb (Scottish male), kal16 (US male). */
  voice: string;
  /** Mean pitch in Hz; unset keeps the voice's own. */
  pitch?: number;
  /** Speaking rate relative to the voice's own. */
  rate?: number;
}

export class FliteVoice extends NativeVoice {
  readonly engine = 'flite';

  constructor(
    id: string,
    readonly settings: FliteVoiceSettings,
  ) {
    super(id);
  }

  protected synthesis(speed: number): NativeSynthesis {
    const { voice, pitch, rate = 1 } = this.settings;
    const pitchHz = pitch === undefined ? undefined : Math.min(FLITE_MAX_PITCH_HZ, Math.max(FLITE_MIN_PITCH_HZ, pitch));
    return { engine: this.engine, options: { voice, rate: rate * speed, pitchHz } };
  }
}
