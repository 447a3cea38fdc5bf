/**
 * Whisper's audio front end: the Slaney mel filter bank (librosa.filters.mel(sr=16000, n_fft=400,
 * n_mels, htk=False, norm='slaney')) and the log-mel spectrogram of Hugging Face's
 * WhisperFeatureExtractor, which models built on Whisper's encoder read (Smart Turn v3 reads
 * 8 s of it). One owner for both: the Whisper model converter writes the same bank into ggml files.
 *
 * logMelSpectrogram(), for exactly `frames` × 160 samples of 16 kHz audio:
 *  - optional zero-mean, unit-variance normalisation of the whole window (done in float32, as the
 *    reference does, before the spectrum);
 *  - centred frames: reflect-padded by n_fft/2 at both ends, a periodic Hann window of 400, hop 160,
 *    power spectrum |rfft|² in float64 (the reference analyses one frame more and drops it before
 *    anything else looks at it, so it is not computed here);
 *  - log10 of max(1e-10, mel · power), floored at (max − 8), then (x + 4) / 4.
 * Output: float32, mel-major ([nMels][frames]), the layout of an `input_features` tensor.
 * Cost for 8 s (800 frames) on one core: about 15 ms, most of it the transform (a mixed-radix FFT
 * of 400 points, two real frames per complex transform) and nothing of it the filter bank (each
 * triangle touches only its own bins).
 */

/** Whisper's only input rate (its front end here, and the native recogniser's). */
export const WHISPER_SAMPLE_RATE_HZ = 16000;
export const WHISPER_N_FFT = 400;
export const WHISPER_HOP = 160;
const BINS = WHISPER_N_FFT / 2 + 1;
const MEL_FLOOR = 1e-10;
const NORMALISE_EPS = 1e-7;

// ---------------------------------------------------------------------------------------------
// Mel filters

const F_SP_HZ = 200 / 3;
const MIN_LOG_HZ = 1000;
const MIN_LOG_MEL = MIN_LOG_HZ / F_SP_HZ;
const LOG_STEP = Math.log(6.4) / 27;

function hzToMel(hz: number): number {
  return hz >= MIN_LOG_HZ ? MIN_LOG_MEL + Math.log(Math.max(hz, 1e-10) / MIN_LOG_HZ) / LOG_STEP : hz / F_SP_HZ;
}

function melToHz(mel: number): number {
  return mel >= MIN_LOG_MEL ? MIN_LOG_HZ * Math.exp(LOG_STEP * (mel - MIN_LOG_MEL)) : mel * F_SP_HZ;
}

/** numpy.linspace(start, stop, n): i * step + start, the last value exactly `stop`. */
function linspace(start: number, stop: number, n: number): number[] {
  const step = (stop - start) / (n - 1);
  const out = Array.from({ length: n }, (_, i) => i * step + start);
  out[n - 1] = stop;
  return out;
}

/** The Slaney mel filter bank in float64: nMels rows of n_fft/2+1 weights. */
function melBank(nMels: number): Float64Array {
  const fftFreqs = linspace(0, WHISPER_SAMPLE_RATE_HZ / 2, BINS);
  const melF = linspace(hzToMel(0), hzToMel(WHISPER_SAMPLE_RATE_HZ / 2), nMels + 2).map(melToHz);
  const out = new Float64Array(nMels * BINS);
  for (let m = 0; m < nMels; m++) {
    const [f0, f1, f2] = [melF[m] ?? 0, melF[m + 1] ?? 0, melF[m + 2] ?? 0];
    const enorm = 2 / (f2 - f0);
    for (let k = 0; k < BINS; k++) {
      const lower = -(f0 - (fftFreqs[k] ?? 0)) / (f1 - f0);
      const upper = (f2 - (fftFreqs[k] ?? 0)) / (f2 - f1);
      // numpy's SIMD minimum/maximum return the second operand on ties, so the first weight is
      // -0 as in librosa's output (Math.max would give +0); kept for byte-identical ggml files.
      const lo = lower < upper ? lower : upper;
      out[m * BINS + k] = (0 > lo ? 0 : lo) * enorm;
    }
  }
  return out;
}

/** The Slaney mel filter bank, nMels rows of n_fft/2+1 float32 weights (as whisper.cpp files carry it). */
export function melFilters(nMels: number): Float32Array {
  return Float32Array.from(melBank(nMels));
}

/** A filter bank as the nonzero run of each triangle: [firstBin, weights]. */
interface SparseBank {
  first: Int32Array;
  weights: Float64Array[];
}

const sparseBanks = new Map<number, SparseBank>();

function sparseBank(nMels: number): SparseBank {
  let bank = sparseBanks.get(nMels);
  if (!bank) {
    const dense = melBank(nMels);
    const first = new Int32Array(nMels);
    const weights: Float64Array[] = [];
    for (let m = 0; m < nMels; m++) {
      const row = dense.subarray(m * BINS, (m + 1) * BINS);
      let lo = 0;
      while (lo < BINS && row[lo] === 0) lo++;
      let hi = BINS;
      while (hi > lo && row[hi - 1] === 0) hi--;
      first[m] = lo;
      weights.push(row.slice(lo, hi));
    }
    bank = { first, weights };
    sparseBanks.set(nMels, bank);
  }
  return bank;
}

// ---------------------------------------------------------------------------------------------
// FFT of 400 points

/** 400 = 4 · 4 · 5 · 5: radices of the recursive decimation in time. */
const FFT_RADICES = [4, 4, 5, 5];
const TW_RE = new Float64Array(WHISPER_N_FFT);
const TW_IM = new Float64Array(WHISPER_N_FFT);
for (let k = 0; k < WHISPER_N_FFT; k++) {
  TW_RE[k] = Math.cos((-2 * Math.PI * k) / WHISPER_N_FFT);
  TW_IM[k] = Math.sin((-2 * Math.PI * k) / WHISPER_N_FFT);
}
/** periodic Hann (numpy.hanning(401)[:-1], torch.hann_window(400)). */
const HANN = new Float64Array(WHISPER_N_FFT);
for (let i = 0; i < WHISPER_N_FFT; i++) HANN[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / WHISPER_N_FFT);

/**
 * out[outAt..outAt+n) = DFT of the n inputs in[inAt + j·stride], j < n (complex). A sub-transform
 * of size n uses the table's twiddles every WHISPER_N_FFT / n.
 */
function fft(
  inRe: Float64Array, inIm: Float64Array, inAt: number, stride: number,
  outRe: Float64Array, outIm: Float64Array, outAt: number, n: number, level: number,
  scratchRe: Float64Array, scratchIm: Float64Array,
): void {
  if (n === 1) {
    outRe[outAt] = inRe[inAt]!;
    outIm[outAt] = inIm[inAt]!;
    return;
  }
  const p = FFT_RADICES[level]!;
  const m = n / p;
  for (let q = 0; q < p; q++) fft(inRe, inIm, inAt + q * stride, stride * p, outRe, outIm, outAt + q * m, m, level + 1, scratchRe, scratchIm);
  // X[k + s·m] = Σ_q W_n^{q(k + s·m)} · Y_q[k]
  const step = WHISPER_N_FFT / n;
  for (let k = 0; k < m; k++) {
    for (let s = 0; s < p; s++) {
      let re = 0;
      let im = 0;
      const e = k + s * m;
      for (let q = 0; q < p; q++) {
        const yr = outRe[outAt + q * m + k]!;
        const yi = outIm[outAt + q * m + k]!;
        const t = ((q * e) % n) * step;
        const wr = TW_RE[t]!;
        const wi = TW_IM[t]!;
        re += yr * wr - yi * wi;
        im += yr * wi + yi * wr;
      }
      scratchRe[s] = re;
      scratchIm[s] = im;
    }
    for (let s = 0; s < p; s++) {
      outRe[outAt + k + s * m] = scratchRe[s]!;
      outIm[outAt + k + s * m] = scratchIm[s]!;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Log-mel spectrogram

export interface LogMelOptions {
  /** Frames in the output (the input must hold frames × 160 samples). */
  frames: number;
  nMels?: number;
  /** Zero-mean, unit-variance normalisation of the waveform first (WhisperFeatureExtractor's do_normalize). */
  normalize?: boolean;
}

/** Whisper log-mel features of 16 kHz mono audio; see the module header. */
export function logMelSpectrogram(audio: Float32Array, options: LogMelOptions): Float32Array {
  const { frames, nMels = 80, normalize = false } = options;
  const n = frames * WHISPER_HOP;
  if (audio.length !== n) throw new RangeError(`logMelSpectrogram: ${frames} frames need ${n} samples, got ${audio.length}`);
  let x = audio;
  if (normalize) {
    // float32 arithmetic as the reference (its padded buffer is float32): mean and variance in
    // float64 sums, the result rounded to float32 per sample.
    let sum = 0;
    for (let i = 0; i < n; i++) sum += x[i]!;
    const mean = Math.fround(sum / n);
    let sq = 0;
    for (let i = 0; i < n; i++) sq += (x[i]! - mean) ** 2;
    const scale = Math.fround(Math.sqrt(Math.fround(sq / n) + NORMALISE_EPS));
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = Math.fround(x[i]! - mean) / scale;
    x = out;
  }
  // Reflect padding by n_fft/2 (numpy 'reflect': the edge sample is not repeated).
  const pad = WHISPER_N_FFT / 2;
  const padded = new Float64Array(n + 2 * pad);
  for (let i = 0; i < n; i++) padded[pad + i] = x[i]!;
  for (let i = 1; i <= pad; i++) {
    padded[pad - i] = x[Math.min(i, n - 1)]!;
    padded[pad + n - 1 + i] = x[Math.max(n - 1 - i, 0)]!;
  }

  const bank = sparseBank(nMels);
  const logSpec = new Float64Array(nMels * frames);
  const inRe = new Float64Array(WHISPER_N_FFT);
  const inIm = new Float64Array(WHISPER_N_FFT);
  const outRe = new Float64Array(WHISPER_N_FFT);
  const outIm = new Float64Array(WHISPER_N_FFT);
  const scratchRe = new Float64Array(5);
  const scratchIm = new Float64Array(5);
  const powerA = new Float64Array(BINS);
  const powerB = new Float64Array(BINS);
  let maxLog = -Infinity;
  const melOf = (power: Float64Array, frame: number): void => {
    for (let m = 0; m < nMels; m++) {
      const w = bank.weights[m]!;
      const first = bank.first[m]!;
      let e = 0;
      for (let j = 0; j < w.length; j++) e += w[j]! * power[first + j]!;
      const v = Math.log10(e > MEL_FLOOR ? e : MEL_FLOOR);
      logSpec[m * frames + frame] = v;
      if (v > maxLog) maxLog = v;
    }
  };
  // Two real frames per complex transform: frame a in the real part, frame b in the imaginary.
  for (let f = 0; f < frames; f += 2) {
    const hasB = f + 1 < frames;
    for (let i = 0; i < WHISPER_N_FFT; i++) {
      inRe[i] = padded[f * WHISPER_HOP + i]! * HANN[i]!;
      inIm[i] = hasB ? padded[(f + 1) * WHISPER_HOP + i]! * HANN[i]! : 0;
    }
    fft(inRe, inIm, 0, 1, outRe, outIm, 0, WHISPER_N_FFT, 0, scratchRe, scratchIm);
    for (let k = 0; k < BINS; k++) {
      const j = (WHISPER_N_FFT - k) % WHISPER_N_FFT;
      // A[k] = (Z[k] + conj Z[N−k]) / 2, B[k] = (Z[k] − conj Z[N−k]) / 2i
      const ar = (outRe[k]! + outRe[j]!) / 2;
      const ai = (outIm[k]! - outIm[j]!) / 2;
      const br = (outIm[k]! + outIm[j]!) / 2;
      const bi = (outRe[j]! - outRe[k]!) / 2;
      powerA[k] = ar * ar + ai * ai;
      powerB[k] = br * br + bi * bi;
    }
    melOf(powerA, f);
    if (hasB) melOf(powerB, f + 1);
  }
  const floor = maxLog - 8;
  const out = new Float32Array(nMels * frames);
  for (let i = 0; i < out.length; i++) out[i] = ((logSpec[i]! > floor ? logSpec[i]! : floor) + 4) / 4;
  return out;
}
