/**
 * Measures an uploaded voice sample so the closest offline voice can speak for it: the median
 * pitch (YIN, de Cheveigné & Kawahara 2002, over voiced frames) and the articulation rate
 * (syllable nuclei counted on the intensity envelope, after de Jong & Wempe 2009: peaks above a
 * silence threshold, separated by a dip, in voiced frames; divided by the time spent speaking,
 * pauses excluded). Pure and synchronous; the service caches the result per sample.
 *
 * It does not clone a voice: it picks pitch and rate settings for flite/espeak-ng/Piper voices.
 */

/** Analysis runs at ~16 kHz: plenty for 60..500 Hz pitch and the syllable envelope. */
const ANALYSIS_RATE_HZ = 16000;
/** Longest stretch analysed: pitch and rate settle within seconds, and uploads may be 600 s. */
const MAX_ANALYSED_SECONDS = 30;
/** YIN window 40 ms (two periods of 50 Hz), hop 10 ms. */
const WINDOW_S = 0.04;
const HOP_S = 0.01;
const MIN_PITCH_HZ = 60;
const MAX_PITCH_HZ = 500;
/** YIN's absolute threshold on the cumulative-mean-normalised difference; when no lag dips
 * below it, the global minimum still counts if it is below the fallback (breathy or synthetic
 * voices are less periodic than YIN's textbook threshold assumes). */
const YIN_THRESHOLD = 0.15;
const YIN_FALLBACK_THRESHOLD = 0.35;
/** A syllable peak must have a voiced frame within this many frames (±30 ms). */
const VOICED_NEIGHBOURHOOD_FRAMES = 3;
/** Frames quieter than this below the loudest (99th percentile) are silence. */
const SILENCE_BELOW_PEAK_DB = 25;
/** Intensity must fall this far between two peaks for them to be two syllables. */
const MIN_DIP_DB = 2;
/** Pauses longer than this are not speaking time. */
const MIN_PAUSE_S = 0.3;

export interface VoiceAnalysis {
  /** Median F0 of voiced frames, Hz (0 if nothing was voiced). */
  pitchHz: number;
  /** Syllable nuclei per second of speaking time (pauses excluded). */
  syllablesPerSecond: number;
  /** Seconds of voiced frames found. */
  voicedSeconds: number;
  /** Seconds of speaking time (pauses over 0.3 s excluded). */
  speakingSeconds: number;
  syllables: number;
}

/** Analyses mono samples (-1..1) at `sampleRateHz`. */
export function analyseVoice(samples: Float32Array, sampleRateHz: number): VoiceAnalysis {
  if (!(sampleRateHz >= 4000)) throw new RangeError(`sampleRateHz must be at least 4000, got ${sampleRateHz}`);
  const x = decimate(samples.subarray(0, Math.round(MAX_ANALYSED_SECONDS * sampleRateHz)), sampleRateHz);
  const rate = x.rate;
  const win = Math.round(WINDOW_S * rate);
  const hop = Math.round(HOP_S * rate);
  const frames = x.samples.length >= win ? Math.floor((x.samples.length - win) / hop) + 1 : 0;
  const db = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let i = f * hop; i < f * hop + win; i++) sum += (x.samples[i] ?? 0) ** 2;
    db[f] = 10 * Math.log10(sum / win + 1e-12);
  }
  const peakDb = percentile(Array.from(db), 0.99);
  const silenceDb = Math.max(peakDb - SILENCE_BELOW_PEAK_DB, -60);
  const pitches: number[] = [];
  const voiced = new Uint8Array(frames);
  const diff = new Float64Array(Math.floor(rate / MIN_PITCH_HZ) + 2);
  for (let f = 0; f < frames; f++) {
    if ((db[f] ?? -Infinity) < silenceDb) continue;
    const f0 = yinPitch(x.samples, f * hop, win, rate, diff);
    if (f0 > 0) {
      pitches.push(f0);
      voiced[f] = 1;
    }
  }
  const speaking = speakingFrames(db, silenceDb, Math.round(MIN_PAUSE_S / HOP_S));
  const syllables = countNuclei(smooth(db, 2), silenceDb, dilate(voiced, VOICED_NEIGHBOURHOOD_FRAMES));
  const speakingSeconds = speaking * HOP_S;
  return {
    pitchHz: pitches.length ? percentile(pitches, 0.5) : 0,
    syllablesPerSecond: speakingSeconds > 0 ? syllables / speakingSeconds : 0,
    voicedSeconds: pitches.length * HOP_S,
    speakingSeconds,
    syllables,
  };
}

/** Box-filtered integer decimation to about 16 kHz (enough anti-aliasing for pitch). */
function decimate(samples: Float32Array, rateHz: number): { samples: Float32Array; rate: number } {
  const factor = Math.max(1, Math.floor(rateHz / ANALYSIS_RATE_HZ));
  if (factor === 1) return { samples, rate: rateHz };
  const out = new Float32Array(Math.floor(samples.length / factor));
  for (let i = 0; i < out.length; i++) {
    let s = 0;
    for (let k = 0; k < factor; k++) s += samples[i * factor + k] ?? 0;
    out[i] = s / factor;
  }
  return { samples: out, rate: rateHz / factor };
}

/** YIN pitch of one window, or 0 when it is not periodic enough. */
function yinPitch(x: Float32Array, start: number, win: number, rate: number, d: Float64Array): number {
  const minLag = Math.floor(rate / MAX_PITCH_HZ);
  const maxLag = Math.min(Math.floor(rate / MIN_PITCH_HZ), win - 1, d.length - 1);
  const span = win - maxLag;
  for (let lag = 1; lag <= maxLag; lag++) {
    let s = 0;
    for (let i = 0; i < span; i++) {
      const v = (x[start + i] ?? 0) - (x[start + i + lag] ?? 0);
      s += v * v;
    }
    d[lag] = s;
  }
  // Cumulative mean normalised difference, in place.
  let running = 0;
  d[0] = 1;
  for (let lag = 1; lag <= maxLag; lag++) {
    running += d[lag] ?? 0;
    d[lag] = running > 0 ? ((d[lag] ?? 0) * lag) / running : 1;
  }
  let best = minLag;
  let found = -1;
  for (let lag = minLag; lag <= maxLag; lag++) {
    if ((d[lag] ?? 1) < (d[best] ?? 1)) best = lag;
    if ((d[lag] ?? 1) < YIN_THRESHOLD) {
      while (lag + 1 <= maxLag && (d[lag + 1] ?? 1) < (d[lag] ?? 1)) lag++;
      found = lag;
      break;
    }
  }
  if (found < 0) {
    if ((d[best] ?? 1) >= YIN_FALLBACK_THRESHOLD || best === minLag || best === maxLag) return 0;
    found = best;
  }
  // Parabolic interpolation around the minimum.
  const a = d[found - 1] ?? 1;
  const b = d[found] ?? 1;
  const c = d[found + 1] ?? 1;
  const denom = a - 2 * b + c;
  const shift = denom > 0 ? (0.5 * (a - c)) / denom : 0;
  return rate / (found + Math.max(-0.5, Math.min(0.5, shift)));
}

/** Frames that are sound, or silence shorter than a pause (`minPauseFrames`). */
function speakingFrames(db: Float64Array, silenceDb: number, minPauseFrames: number): number {
  let count = 0;
  let run = 0;
  let seenSound = false;
  for (let f = 0; f < db.length; f++) {
    if ((db[f] ?? -Infinity) >= silenceDb) {
      if (seenSound && run < minPauseFrames) count += run; // a short gap inside speech
      run = 0;
      seenSound = true;
      count++;
    } else {
      run++;
    }
  }
  return count;
}

/** Peaks above the threshold in voiced frames, each separated from the last by a dip. */
function countNuclei(db: Float64Array, silenceDb: number, voiced: Uint8Array): number {
  let count = 0;
  let lastPeak = -Infinity;
  let minSincePeak = Infinity;
  for (let f = 1; f + 1 < db.length; f++) {
    const v = db[f] ?? -Infinity;
    minSincePeak = Math.min(minSincePeak, v);
    const isPeak = v >= (db[f - 1] ?? -Infinity) && v > (db[f + 1] ?? -Infinity);
    if (!isPeak || v < silenceDb + MIN_DIP_DB || !voiced[f]) continue;
    if (lastPeak === -Infinity || (lastPeak - minSincePeak >= MIN_DIP_DB && v - minSincePeak >= MIN_DIP_DB)) {
      count++;
      lastPeak = v;
      minSincePeak = v;
    } else if (v > lastPeak) {
      lastPeak = v; // the same syllable, higher: keep the higher peak as reference
      minSincePeak = v;
    }
  }
  return count;
}

/** Marks every frame within `radius` of a marked one. */
function dilate(marks: Uint8Array, radius: number): Uint8Array {
  const out = new Uint8Array(marks.length);
  for (let i = 0; i < marks.length; i++) {
    if (!marks[i]) continue;
    out.fill(1, Math.max(0, i - radius), Math.min(marks.length, i + radius + 1));
  }
  return out;
}

function smooth(x: Float64Array, radius: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    let s = 0;
    let n = 0;
    for (let k = Math.max(0, i - radius); k <= Math.min(x.length - 1, i + radius); k++) {
      s += x[k] ?? 0;
      n++;
    }
    out[i] = s / n;
  }
  return out;
}

function percentile(values: number[], q: number): number {
  if (values.length === 0) return -Infinity;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}
