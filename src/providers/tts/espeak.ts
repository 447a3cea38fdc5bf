/**
 * espeak-ng voices (formant synthesis, 22.05 kHz) through the native addon: the lightest engine
 * here (measured real-time factor ~0.001, first chunk in about a millisecond), robotic but
 * always intelligible, with exact phoneme timings from espeak-ng's own phoneme events (IPA).
 * Rate is words per minute (175 × the voice's rate × the request's speed, within espeak-ng's
 * 80..450), pitch and range espeak-ng's 0..100 scales.
 */
import { NativeVoice, type NativeSynthesis } from './native-voice.js';

/** espeak-ng's normal rate, words per minute, and the range it accepts. */
export const ESPEAK_NORMAL_WPM = 175;
const ESPEAK_MIN_WPM = 80;
const ESPEAK_MAX_WPM = 450;

export interface EspeakVoiceSettings {
  /** espeak-ng voice and variant: "en-us", "en-us+f3", "en-us+m3". */
  voice: string;
  /** Base pitch 0..100 (50 = the voice's normal). */
  pitch?: number;
  /** Pitch range 0..100 (50 = normal). */
  range?: number;
  /** Speaking rate relative to espeak-ng's normal 175 wpm. */
  rate?: number;
}

export function espeakWordsPerMinute(rate: number, speed: number): number {
  return Math.round(Math.min(ESPEAK_MAX_WPM, Math.max(ESPEAK_MIN_WPM, ESPEAK_NORMAL_WPM * rate * speed)));
}

export class EspeakVoice extends NativeVoice {
  readonly engine = 'espeak-ng';

  constructor(
    id: string,
    readonly settings: EspeakVoiceSettings,
  ) {
    super(id);
  }

  protected synthesis(speed: number): NativeSynthesis {
    const { voice, pitch, range, rate = 1 } = this.settings;
    return { engine: this.engine, options: { voice, rateWpm: espeakWordsPerMinute(rate, speed), pitch, range } };
  }
}
