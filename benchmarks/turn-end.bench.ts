/**
 * The turn-end benchmark: how soon each judge of the end of a user's turn decides after a finished
 * utterance, against how often it cuts in on one that goes on, the curve LiveKit's eot-bench draws.
 *
 * The utterances (lib/turn-end/corpus.ts): 96 texts (finished questions and statements, lists,
 * hesitations, pauses of 200–1,000 ms mid-clause, trailing conjunctions, and a finished sentence
 * that goes on), each spoken 4 times by 9 voices in rotation (Piper, flite, espeak-ng variants) at
 * 0.8, 1 or 1.25 of their rate, on digital silence or a live microphone's noise floor. The
 * server's own VAD, Smart Turn, Whisper (base and tiny.en) and local language model are measured
 * on every silence once (lib/turn-end/signals.ts, cached in target/turn-end/), and every judge is
 * replayed on those measurements (lib/turn-end/replay.ts):
 *  - server_vad at 200–1,200 ms of silence (300 and 500 ms are the points the issue names);
 *  - Smart Turn alone, as pipecat runs it (asked after 200 ms; a threshold from 0.1 to 0.9);
 *  - this server's semantic_vad judge (src/realtime/turn-judge.ts), with and without the local
 *    language model's reading of the words, with either recogniser for the pause's transcript,
 *    at confidences from 0.5 to 0.99 (the eagerness), with weights fitted on the other half of the
 *    texts (two folds by text, lib/turn-end/fit.ts), so no sentence judges itself.
 * For each setting: false cut-offs (% of utterances whose turn ended in a pause before the end,
 * a goes-on gap apart; and % of those with a pause inside a sentence), the decision latency from
 * the speech's last sample p50/p95, and goes-on utterances answered in their gap. The curves go in
 * `params.turn_end_curves` (the report draws them). For each recogniser: its word error rate on
 * the utterances (the transcript of the whole turn, after the last word) and its time per pause.
 *
 * Switches: TURN_END_LIMIT=N (the first N utterances, for a quick look); TURN_END_FIT=1 also
 * writes src/realtime/turn-weights.ts, the judge's weights fitted on every utterance (the
 * transcripts of every recogniser measured); TURN_END_RECOGNISER names the recogniser of the
 * headline (default: the server's default).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Benchmark, Metric } from './lib/harness.js';
import { summarise as summariseMetric } from './lib/harness.js';
import { corpusPlan } from './lib/turn-end/corpus.js';
import { corpusSignals, type RecogniserName, type UtteranceSignals } from './lib/turn-end/signals.js';
import { defaultJudge, replay, serverVad, smartTurnAlone, summarise, type Judge, type Outcome, type Point } from './lib/turn-end/replay.js';
import { fitLogistic, foldOf, rows } from './lib/turn-end/fit.js';
import { TurnPolicy } from '../src/realtime/turn-judge.js';
import { TURN_WEIGHTS } from '../src/realtime/turn-weights.js';
import { DEFAULT_SEMANTIC_EAGERNESS } from '../src/realtime/session-update.js';
import { DEFAULT_WHISPER_MODEL } from '../src/models/whisper-ggml.js';
import { currentCommit } from './lib/harness.js';
import { wordEdits } from '../harness/measures/word-errors.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const SIGNALS_DIR = path.join(ROOT, 'target', 'turn-end');
const FOLDS = 2;
const SERVER_VAD_MS = [200, 300, 400, 500, 600, 700, 800, 1000, 1200];
const SMART_TURN_THRESHOLDS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
const CONFIDENCES = [0.5, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99];

const bench: Benchmark = {
  name: 'turn-end',
  description: 'end-of-turn judges on 384 utterances by 9 voices (finished, lists, hesitations, mid-clause pauses, trailing conjunctions, goes-on): false cut-offs against decision latency, replayed on measured VAD, Smart Turn, Whisper and language-model signals',
  async run(ctx) {
    const limit = process.env.TURN_END_LIMIT ? Number(process.env.TURN_END_LIMIT) : undefined;
    const plan = await corpusPlan(limit);
    ctx.log(`turn-end corpus: ${plan.length} utterances by ${new Set(plan.map((u) => u.voice.id)).size} voices`);
    const signals = await corpusSignals(plan, SIGNALS_DIR, ctx.log);
    const utterances = signals.utterances;
    const nominal = DEFAULT_SEMANTIC_EAGERNESS;
    const defaultRecogniser = (process.env.TURN_END_RECOGNISER as RecogniserName | undefined) ?? DEFAULT_WHISPER_MODEL;

    // The judge of each fold: weights fitted without its texts (every recogniser's transcripts pooled).
    const folds = new Map<number, TurnPolicy>();
    for (let f = 0; f < FOLDS; f++) {
      const weights = fitLogistic(rows(utterances.filter((u) => foldOf(u, FOLDS) !== f), signals.recognisers));
      folds.set(f, new TurnPolicy({ ...TURN_WEIGHTS, weights }));
    }
    const points: Point[] = [];
    const runJudge = (judge: string, setting: string, knob: number, make: (u: UtteranceSignals) => Judge): Outcome[] => {
      const outcomes = utterances.map((u) => replay(u, make(u)));
      points.push(summarise(judge, setting, knob, outcomes));
      return outcomes;
    };
    for (const ms of SERVER_VAD_MS) runJudge('server_vad', `${ms} ms`, ms, () => serverVad(ms));
    for (const t of SMART_TURN_THRESHOLDS) runJudge('smart-turn alone', `threshold ${t}`, t, () => smartTurnAlone(t));
    const nominalOutcomes = new Map<string, Outcome[]>();
    for (const recogniser of signals.recognisers) {
      for (const languageModel of signals.languageModel ? [true, false] : [false]) {
        const name = `default (${recogniser}${languageModel ? ', language model' : ', no language model'})`;
        for (const confidence of CONFIDENCES) {
          const o = runJudge(name, `confidence ${confidence}`, confidence, (u) =>
            defaultJudge({ confidence, pauseMs: nominal.pause, recogniser, languageModel, audioModel: true, policy: folds.get(foldOf(u, FOLDS))! }),
          );
          if (confidence === nominal.confidence) nominalOutcomes.set(name, o);
        }
      }
    }

    const metrics: Metric[] = [];
    const nominalPoint = (judge: string, knob: number) => points.find((p) => p.judge === judge && p.knob === knob);
    const named: Array<[string, Point | undefined]> = [
      ['server_vad 300 ms', nominalPoint('server_vad', 300)],
      ['server_vad 500 ms', nominalPoint('server_vad', 500)],
      ['smart-turn alone 0.5', nominalPoint('smart-turn alone', 0.5)],
      ...[...nominalOutcomes.keys()].map((judge): [string, Point | undefined] => [`${judge} ${nominal.confidence}`, nominalPoint(judge, nominal.confidence)]),
    ];
    for (const [label, p] of named) {
      if (!p) continue;
      metrics.push({ ...summariseMetric(`[${label}] false cut-offs`, '%', [p.falseCutPercent]) });
      metrics.push({ ...summariseMetric(`[${label}] false cut-offs on sentences with a pause`, '%', [p.pausedCutPercent]) });
    }
    for (const [judge, outcomes] of nominalOutcomes) {
      metrics.push(summariseMetric(`[${judge} ${nominal.confidence}] decision after a finished utterance`, 'ms', outcomes.map((o) => o.latencyMs).filter((x): x is number => x !== null)));
    }
    for (const ms of [300, 500]) {
      const outcomes = utterances.map((u) => replay(u, serverVad(ms)));
      metrics.push(summariseMetric(`[server_vad ${ms} ms] decision after a finished utterance`, 'ms', outcomes.map((o) => o.latencyMs).filter((x): x is number => x !== null)));
    }

    const asr = recogniserFigures(utterances, signals.recognisers);
    metrics.push(...asr.metrics);
    const notes = [
      ...asr.notes,
      `Goal (issue 38): at most 5 % false cut-offs with the decision at most 300 ms (p50) after a finished utterance, for the default judge with and without local weights. Default: confidence ${nominal.confidence} (eagerness auto), the pause's transcript after ${nominal.pause} ms of silence, recogniser ${defaultRecogniser}.`,
      ...points.map((p) => `${p.judge}, ${p.setting}: false cut-offs ${p.falseCutPercent} % (sentences with a pause ${p.pausedCutPercent} %), goes-on answered in the gap ${p.answeredInGapPercent} %, decision p50 ${p.latencyP50} / p95 ${p.latencyP95} ms`),
      ...[...nominalOutcomes].map(([judge, o]) => `${judge} ${nominal.confidence}: cut after ${o.filter((x) => x.cut).map((x) => `"${x.cutAfter}" (${x.id})`).join(', ') || 'none'}`),
      `timings measured on this machine, one call at a time: ${timingNote(utterances, signals.recognisers)}`,
    ];
    if (process.env.TURN_END_FIT === '1') notes.push(writeWeights(utterances, signals.recognisers));
    return {
      params: {
        utterances: utterances.length,
        voices: [...new Set(utterances.map((u) => u.voice))].join(', '),
        kinds: Object.fromEntries([...new Set(utterances.map((u) => u.kind))].map((k) => [k, utterances.filter((u) => u.kind === k).length])),
        recognisers: signals.recognisers.join(', '),
        audio_model: signals.audioModel,
        language_model: signals.languageModel,
        signals_measured: signals.date,
        folds: FOLDS,
        turn_end_curves: points.map(({ cuts: _cuts, ...p }) => p),
      },
      metrics,
      notes,
    };
  },
};

/** Each recogniser's word error rate on the whole utterances and its time per pause (see the header). */
function recogniserFigures(utterances: UtteranceSignals[], recognisers: RecogniserName[]): { metrics: Metric[]; notes: string[] } {
  const metrics: Metric[] = [];
  const notes: string[] = [];
  for (const r of recognisers) {
    let edits = 0;
    let words = 0;
    const worst: Array<{ said: string; heard: string; rate: number }> = [];
    for (const u of utterances) {
      const heard = u.silences.find((s) => s.label === 'end')?.transcripts[r]?.text;
      if (heard === undefined) continue;
      const e = wordEdits(u.text, heard);
      edits += e.edits;
      words += e.words;
      if (e.edits > 0) worst.push({ said: u.text, heard, rate: e.edits / Math.max(1, e.words) });
    }
    const rate = Math.round((1000 * edits) / Math.max(1, words)) / 10;
    metrics.push(summariseMetric(`[${r}] word error rate on the whole utterances`, '%', [rate]));
    metrics.push(summariseMetric(`[${r}] transcription of a pause`, 'ms', utterances.flatMap((u) => u.silences.map((s) => s.transcripts[r]?.ms ?? NaN)).filter(Number.isFinite)));
    worst.sort((a, b) => b.rate - a.rate);
    notes.push(`${r}: word error rate ${rate} % over ${words} words; worst: ${worst.slice(0, 5).map((w) => `"${w.said}" → "${w.heard}"`).join('; ')}`);
  }
  return { metrics, notes };
}

/** Medians of each evidence source's compute time. */
function timingNote(utterances: UtteranceSignals[], recognisers: RecogniserName[]): string {
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length ? s[Math.floor(s.length / 2)] : null;
  };
  const silences = utterances.flatMap((u) => u.silences).filter((s) => s.audio.length > 0);
  const parts = [`Smart Turn ${med(silences.flatMap((s) => s.audio.map((a) => a.ms)))} ms`];
  for (const r of recognisers) {
    parts.push(`Whisper ${r} ${med(silences.map((s) => s.transcripts[r]?.ms ?? NaN).filter(Number.isFinite))} ms`);
    parts.push(`the language model's reading (after ${r}) ${med(silences.map((s) => s.transcripts[r]?.wordsEndMs ?? NaN).filter(Number.isFinite))} ms`);
  }
  return `${parts.join(', ')} (medians over ${silences.length} silences)`;
}

/** Fits the judge on every utterance and writes src/realtime/turn-weights.ts (TURN_END_FIT=1); the pause's shape is kept. */
function writeWeights(utterances: UtteranceSignals[], recognisers: RecogniserName[]): string {
  const weights = fitLogistic(rows(utterances, recognisers));
  const file = path.join(ROOT, 'src', 'realtime', 'turn-weights.ts');
  const fitted = { date: new Date().toISOString().slice(0, 10), commit: currentCommit(ROOT), utterances: utterances.length, recognisers: recognisers.join(', ') };
  const q = (x: string) => `'${x.replace(/'/g, "\\'")}'`;
  fs.writeFileSync(
    file,
    `/**
 * semantic_vad's judge's weights (turn-judge.ts): the logistic model over TURN_FEATURES and the
 * pause survival's shape. Written by \`TURN_END_FIT=1 npm run bench -- turn-end\` from the
 * benchmark's utterances (benchmarks/lib/turn-end/fit.ts says how; the pause's shape is chosen on
 * the benchmark's curve and kept by the fit); do not edit the weights by hand.
 */
import type { TurnWeights } from './turn-judge.js';

export const TURN_WEIGHTS: TurnWeights = {
  /** In TURN_FEATURES' order. */
  weights: [${weights.join(', ')}],
  pause: { medianMs: ${TURN_WEIGHTS.pause.medianMs}, steepness: ${TURN_WEIGHTS.pause.steepness} },
  fitted: { date: ${q(fitted.date)}, commit: ${q(fitted.commit)}, utterances: ${fitted.utterances}, recognisers: ${q(fitted.recognisers)} },
};
`,
  );
  return `fitted on ${utterances.length} utterances (transcripts of ${fitted.recognisers}): weights [${weights.join(', ')}], written to src/realtime/turn-weights.ts`;
}

export default bench;
