/**
 * Fitting semantic_vad's judge (src/realtime/turn-weights.ts) on the turn-end benchmark's signals:
 * a logistic regression of "this silence is the turn's end" on the evidence's features
 * (turn-judge.ts, turnFeatures), by Newton's method with a small L2 penalty (none on the bias).
 *
 * Rows: every measured silence labelled 'end' (1) or 'continue' / 'gap' (0); goes-on gaps after a
 * finished sentence are left out (the words and the melody of a finished sentence are right to
 * say "ended" there). Each silence gives one row per combination of evidence the judge can hold
 * while it waits (EVIDENCE_STAGES: nothing yet, the melody alone, then the words by rule, then the
 * model's reading; and the same without the melody), so one model serves every moment of a silence
 * and deployments without the language model or the audio model; with nothing known, it is the
 * share of silences that end a turn. The rows of every recogniser measured are pooled, so the
 * weights serve whichever one a deployment chooses (ASR_WHISPER_MODEL). Folds are by text: the
 * cross-validated curve judges each utterance with weights fitted without its sentence.
 *
 * Deterministic: the same signals give the same weights.
 */
import { AUDIO_ASKED_AT_MS, TURN_FEATURES, turnFeatures, type TurnEvidence } from '../../../src/realtime/turn-judge.js';
import type { RecogniserName, UtteranceSignals } from './signals.js';

/** L2 penalty on every weight but the bias. */
const L2 = 0.5;
const NEWTON_STEPS = 50;

/** Which evidence a judge may hold at some moment of a silence. */
const EVIDENCE_STAGES: ReadonlyArray<{ audio: boolean; words: boolean; wordsEnd: boolean }> = [
  { audio: false, words: false, wordsEnd: false },
  { audio: true, words: false, wordsEnd: false },
  { audio: true, words: true, wordsEnd: false },
  { audio: true, words: true, wordsEnd: true },
  { audio: false, words: true, wordsEnd: false },
  { audio: false, words: true, wordsEnd: true },
];

export interface Row {
  x: number[];
  y: 0 | 1;
}

/** The rows of `utterances` (see the header), with the transcripts of each of `recognisers`. */
export function rows(utterances: UtteranceSignals[], recognisers: readonly RecogniserName[], audioAskedAtMs = AUDIO_ASKED_AT_MS): Row[] {
  const out: Row[] = [];
  for (const recogniser of recognisers) for (const u of utterances) {
    for (const s of u.silences) {
      if (s.label === 'sentence-end' || s.audio.length === 0) continue;
      const y = s.label === 'end' ? 1 : 0;
      const audio = s.audio.find((a) => a.heardMs === audioAskedAtMs)?.p ?? null;
      const t = s.transcripts[recogniser];
      for (const stage of EVIDENCE_STAGES) {
        const e: TurnEvidence = {
          audio: stage.audio ? audio : null,
          words: stage.words && t && t.text !== '' ? t.text : null,
          wordsEnd: stage.wordsEnd && t ? t.wordsEnd : null,
        };
        if ((stage.audio && e.audio === null) || (stage.words && e.words === null) || (stage.wordsEnd && e.wordsEnd === null)) continue;
        out.push({ x: turnFeatures(e), y });
      }
    }
  }
  return out;
}

/** Logistic regression weights for `data` (see the header). */
export function fitLogistic(data: Row[]): number[] {
  const d = TURN_FEATURES.length;
  let w: number[] = new Array<number>(d).fill(0);
  for (let step = 0; step < NEWTON_STEPS; step++) {
    const grad = new Array<number>(d).fill(0);
    const hess = Array.from({ length: d }, () => new Array<number>(d).fill(0));
    for (const { x, y } of data) {
      const z = x.reduce((sum, xi, i) => sum + xi * w[i]!, 0);
      const p = 1 / (1 + Math.exp(-z));
      const r = p * (1 - p);
      for (let i = 0; i < d; i++) {
        grad[i]! += (p - y) * x[i]!;
        if (x[i] === 0) continue;
        for (let j = 0; j < d; j++) hess[i]![j]! += r * x[i]! * x[j]!;
      }
    }
    for (let i = 1; i < d; i++) {
      grad[i]! += L2 * w[i]!;
      hess[i]![i]! += L2;
    }
    // A feature no row has (a column of zeros) gets weight 0.
    for (let i = 0; i < d; i++) if (hess[i]![i] === 0) hess[i]![i] = 1;
    const delta = solve(hess, grad);
    w = w.map((wi, i) => wi - delta[i]!);
    if (Math.max(...delta.map(Math.abs)) < 1e-9) break;
  }
  return w.map((x) => Math.round(x * 1000) / 1000);
}

/** Solves a·x = b by Gaussian elimination with partial pivoting (a is small and symmetric positive definite). */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let pivot = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[pivot]![c]!)) pivot = r;
    [m[c], m[pivot]] = [m[pivot]!, m[c]!];
    for (let r = c + 1; r < n; r++) {
      const f = m[r]![c]! / m[c]![c]!;
      for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let sum = m[r]![n]!;
    for (let k = r + 1; k < n; k++) sum -= m[r]![k]! * x[k]!;
    x[r] = sum / m[r]![r]!;
  }
  return x;
}

/** The fold of an utterance: by its text, so no sentence is in both. */
export function foldOf(u: UtteranceSignals, folds: number): number {
  let h = 0;
  for (const ch of u.text) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return h % folds;
}
