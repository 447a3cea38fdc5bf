/**
 * The audio vocabulary shared by the providers, the realtime engine and the media plane, so that
 * none of them has to import another for it: the realtime API's PCM format (both directions) and
 * the phoneme timings voices give and the avatar's lips follow.
 */

/** The realtime API's audio, in and out: PCM16 mono, little-endian, 24 kHz. */
export const PCM_RATE_HZ = 24000;
export const PCM_SAMPLES_PER_MS = PCM_RATE_HZ / 1000;

/** One phoneme of synthesised speech, in ns relative to the start of its chunk of audio. */
export interface PhonemeTiming {
  phoneme: string;
  startNs: number;
  endNs: number;
}
