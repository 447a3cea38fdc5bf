/**
 * semantic_vad's judge: in each silence of a user's turn, whether the turn has ended. It weighs
 * what it knows, and its knowledge grows while the silence lasts:
 *  - the melody: an end-of-turn audio model (Smart Turn) hears the turn up to AUDIO_ASKED_AT_MS of
 *    silence (it is asked once: it hears a long trailing silence as an end whatever was said, and
 *    the silence is counted below);
 *  - the words of the pause's transcript, judged by rule (`wordClasses`: a last word that cannot
 *    end a sentence, one that rarely does, closing punctuation);
 *  - where the local language model reads them, its probability that the message ends after the
 *    last word (a `.`, `?`, `!` or the end of the user's turn next);
 *  - the silence itself: people pause mid-sentence, but rarely for long.
 * `endProbability` turns the evidence there is into the probability that the turn has ended (a
 * logistic model over the evidence's features, fitted on the turn-end benchmark's utterances:
 * turn-weights.ts); `TurnPolicy` adds the silence: a mid-turn pause has lasted `silentMs` with
 * probability PAUSE_SURVIVAL(silentMs), so after `silentMs` the odds that the turn has ended are
 * the evidence's odds divided by it. The turn ends once that reaches the session's confidence
 * (eagerness). A finished sentence then ends the turn as soon as its evidence is in, a clause that
 * trails off ("a table for") waits for seconds, and a turn heard with no evidence at all (no
 * model, no transcript) ends after about a second of silence.
 *
 * `TurnEndDetector` is the judge the segmenter consults frame by frame (speech-segmenter.ts,
 * TurnEndJudge): it asks the audio model, takes the words of the silence's pause when the
 * recognition stage has them (`TurnWordsSource`), and decides at every frame and again whenever
 * evidence arrives. Its state is one silence's; a new silence starts afresh. The words are judged
 * by rule the moment the transcript is in, and again when the model's reading follows: the
 * policy does not wait for evidence that is still coming, so the words' reading speeds up a
 * doubtful turn and never delays a clear one.
 *
 * The benchmark (benchmarks/turn-end.bench.ts) replays the same `TurnPolicy` over evidence it
 * measured, so the curve it draws is this code's.
 */
import type { EndOfTurnModel } from '../providers/turn/base.js';
import type { SilenceFrame, TurnEndJudge } from './speech-segmenter.js';
import { TURN_WEIGHTS } from './turn-weights.js';

/** The judge's fitted model (turn-weights.ts, written by the turn-end benchmark's fit). */
export interface TurnWeights {
  /** The logistic model's weights, in TURN_FEATURES' order. */
  weights: readonly number[];
  /** The log-logistic survival of mid-turn pauses: half of them are over by `medianMs`. */
  pause: { medianMs: number; steepness: number };
  /** Where the weights came from. */
  fitted: { date: string; commit: string; utterances: number; recognisers: string };
}

/** The silence after which the audio model is asked (it hears the turn up to then). */
export const AUDIO_ASKED_AT_MS = 160;

/** What is known of a silence's turn (null: not known, or never will be). */
export interface TurnEvidence {
  /** The audio model's probability that the turn is complete. */
  audio: number | null;
  /** The transcript of the turn up to the pause. */
  words: string | null;
  /** The language model's probability that the message ends after the words' last word. */
  wordsEnd: number | null;
}

export const NO_EVIDENCE: TurnEvidence = { audio: null, words: null, wordsEnd: null };

/**
 * The features `endProbability` weighs, in TURN_WEIGHTS' order. Absent evidence gives zeros and
 * its `has*` feature 0, so one model serves every combination of evidence.
 */
export const TURN_FEATURES = [
  'bias',
  'hasAudio',
  'audioLogit',
  'hasWords',
  'neverLast',
  'rarelyLast',
  'finished',
  'questionMark',
  'hasWordsEnd',
  'wordsEndDecades',
  'wordsEndLikely',
  'questionLikely',
] as const;
export type TurnFeature = (typeof TURN_FEATURES)[number];

/** The audio model's log-odds are kept within ±this (0.01..0.99): one verdict is never certainty. */
const AUDIO_LOGIT_LIMIT = 4.6;
/** The language model's probability in decades, kept within 10^-6..1. */
const WORDS_END_DECADES_FLOOR = -6;
/**
 * The language model's probability from which it calls the words an ending outright (a feature of
 * its own: on the benchmark, 96 % of the pauses after a question the model gave 0.1 or more were
 * the turn's end, against 86 % after a statement, a distinction the decades alone do not make).
 */
const WORDS_END_LIKELY = 0.1;

/** The features of `e` (see TURN_FEATURES). */
export function turnFeatures(e: TurnEvidence): number[] {
  const f: Record<TurnFeature, number> = {
    bias: 1,
    hasAudio: 0,
    audioLogit: 0,
    hasWords: 0,
    neverLast: 0,
    rarelyLast: 0,
    finished: 0,
    questionMark: 0,
    hasWordsEnd: 0,
    wordsEndDecades: 0,
    wordsEndLikely: 0,
    questionLikely: 0,
  };
  if (e.audio !== null) {
    const p = clamp(e.audio, 1e-6, 1 - 1e-6);
    f.hasAudio = 1;
    f.audioLogit = clamp(Math.log(p / (1 - p)), -AUDIO_LOGIT_LIMIT, AUDIO_LOGIT_LIMIT);
  }
  const words = e.words?.trim() ?? '';
  if (words !== '') {
    const c = wordClasses(words);
    f.hasWords = 1;
    f.neverLast = c.neverLast ? 1 : 0;
    f.rarelyLast = c.rarelyLast ? 1 : 0;
    f.finished = c.finished ? 1 : 0;
    f.questionMark = c.questionMark ? 1 : 0;
    if (e.wordsEnd !== null) {
      f.hasWordsEnd = 1;
      f.wordsEndDecades = clamp(Math.log10(Math.max(e.wordsEnd, 1e-12)), WORDS_END_DECADES_FLOOR, 0);
      f.wordsEndLikely = e.wordsEnd >= WORDS_END_LIKELY ? 1 : 0;
      f.questionLikely = c.questionMark && e.wordsEnd >= WORDS_END_LIKELY ? 1 : 0;
    }
  }
  return TURN_FEATURES.map((name) => f[name]);
}

/** The probability that the turn has ended, from the evidence alone (the silence apart). */
export function endProbability(e: TurnEvidence, weights: readonly number[] = TURN_WEIGHTS.weights): number {
  const f = turnFeatures(e);
  let z = 0;
  for (let i = 0; i < f.length; i++) z += (f[i] ?? 0) * (weights[i] ?? 0);
  return 1 / (1 + Math.exp(-z));
}

/**
 * The share of mid-turn pauses that last longer than `silentMs`: a log-logistic survival with its
 * median and shape in TURN_WEIGHTS (chosen on the benchmark's curve).
 */
export function pauseSurvival(silentMs: number, shape: TurnWeights['pause'] = TURN_WEIGHTS.pause): number {
  if (silentMs <= 0) return 1;
  return 1 / (1 + (silentMs / shape.medianMs) ** shape.steepness);
}

/**
 * The decision rule (see the header): the probability that the turn has ended after `silentMs`
 * of silence given the evidence, and whether it reaches `confidence`.
 */
export class TurnPolicy {
  constructor(private readonly weights: TurnWeights = TURN_WEIGHTS) {}

  /** P(ended | evidence, a silence of silentMs so far). */
  probability(e: TurnEvidence, silentMs: number): number {
    const p = endProbability(e, this.weights.weights);
    const pausing = (1 - p) * pauseSurvival(silentMs, this.weights.pause);
    return p / (p + pausing);
  }

  /** That probability when it reaches `confidence` (the turn ends), else null. */
  decide(e: TurnEvidence, silentMs: number, confidence: number): number | null {
    const p = this.probability(e, silentMs);
    return p >= confidence ? p : null;
  }
}

// ---- the words, by rule ----

/** What the rules read in a transcript's ending (see wordClasses). */
export interface WordClasses {
  /** The last word cannot end an English sentence (an article, a conjunction, a filler), or it trails off ("...", "-"). */
  neverLast: boolean;
  /** The last word ends questions more than statements (a preposition, "is"), with no ? or ! after it. */
  rarelyLast: boolean;
  /** Closing punctuation after a word that is in neither list. */
  finished: boolean;
  /** It ends with a question mark. */
  questionMark: boolean;
}

/** Last words after which an English sentence cannot end: articles, possessives, conjunctions, fillers. */
const NEVER_LAST = new Set(['a', 'an', 'the', 'my', 'your', 'our', 'their', 'and', 'but', 'or', 'nor', 'because', 'although', 'though', 'unless', 'whether', 'um', 'uh', 'er', 'erm', 'hmm']);

/**
 * Last words that end a question or an exclamation ("Where are you from?", "What is it like?")
 * but rarely a statement: prepositions, subordinators, and "is"/"was" as in "my favourite colour
 * is". Whisper puts a full stop after most fragments, so a full stop does not make them final.
 */
const RARELY_LAST = new Set(['for', 'to', 'of', 'in', 'on', 'at', 'with', 'about', 'from', 'by', 'into', 'onto', 'than', 'like', 'that', 'which', 'if', 'when', 'while', 'so', 'his', 'its', 'is', 'are', 'was', 'were', 'then']);

/** The rules' reading of a transcript's ending (see WordClasses). */
export function wordClasses(text: string): WordClasses {
  const trimmed = text.trim();
  const last = lastWord(trimmed);
  const trailsOff = /(\.\.\.|…|-|—)$/.test(trimmed);
  const questionMark = /\?["')\]]*$/.test(trimmed);
  const closed = /[.?!]["')\]]*$/.test(trimmed) && !/(\.\.\.|…)$/.test(trimmed);
  const neverLast = trailsOff || (last !== null && NEVER_LAST.has(last));
  const rarelyLast = !neverLast && last !== null && RARELY_LAST.has(last) && !/[?!]["')\]]*$/.test(trimmed);
  return { neverLast, rarelyLast, finished: closed && last !== null && !NEVER_LAST.has(last) && !RARELY_LAST.has(last), questionMark };
}

/**
 * The words as they were spoken: the transcript without the punctuation Whisper closes it with
 * (it puts a full stop after most fragments), which is what the language model is asked to
 * continue. Null when nothing is left.
 */
export function spokenWords(text: string): string | null {
  const words = text.trim().replace(/[\s.,;:!?…"'()\]\-—]+$/u, '');
  return words === '' ? null : words;
}

function lastWord(text: string): string | null {
  return /([A-Za-z']+)[^A-Za-z']*$/.exec(text)?.[1]?.toLowerCase() ?? null;
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, Number.isFinite(x) ? x : x > 0 ? hi : lo));
}

// ---- the judge the segmenter consults ----

/** The words of one pause, as the recognition stage learns them (each null when it never will). */
export interface PauseWords {
  /** The pause's transcript. */
  transcript: Promise<string | null>;
  /** The language model's reading of it: the probability that the message ends there. */
  endProbability: Promise<number | null>;
}

/** Where the judge finds the words of a pause (the speculative transcription of that pause), or null. */
export type TurnWordsSource = (pause: number) => PauseWords | null;

/** One silence the detector is judging. */
interface Judged {
  run: number;
  evidence: TurnEvidence;
  audioAsked: boolean;
  wordsPause: number | null;
  /** The latest frame shown: its silence and its requestEnd. */
  frame: SilenceFrame;
  decided: boolean;
}

export class TurnEndDetector implements TurnEndJudge {
  private judged: Judged | null = null;

  constructor(
    private readonly audioModel: EndOfTurnModel | null,
    private readonly words: TurnWordsSource,
    private readonly onError: (err: unknown) => void,
    private readonly policy: TurnPolicy = new TurnPolicy(),
  ) {}

  onSilence(frame: SilenceFrame): number | null {
    let j = this.judged;
    if (j === null || j.run !== frame.run) {
      j = { run: frame.run, evidence: { ...NO_EVIDENCE }, audioAsked: false, wordsPause: null, frame, decided: false };
      this.judged = j;
    }
    j.frame = frame;
    if (!j.audioAsked && this.audioModel && frame.silentMs >= AUDIO_ASKED_AT_MS) {
      j.audioAsked = true;
      this.askAudio(j, this.audioModel, frame);
    }
    if (j.wordsPause === null && frame.pause !== null) {
      j.wordsPause = frame.pause;
      this.takeWords(j, frame.pause);
    }
    const p = this.policy.decide(j.evidence, frame.silentMs, frame.endOfTurn.confidence);
    if (p !== null) j.decided = true;
    return p;
  }

  onSilenceEnd(run: number): void {
    if (this.judged?.run === run) this.judged = null;
  }

  private askAudio(j: Judged, model: EndOfTurnModel, frame: SilenceFrame): void {
    let audio: Float32Array;
    try {
      audio = frame.audio(model.windowMs, model.sampleRateHz);
    } catch (err) {
      this.onError(err);
      return;
    }
    model.completeProbability(audio).then(
      (p) => this.learn(j, { audio: p }),
      (err: unknown) => this.onError(err),
    );
  }

  private takeWords(j: Judged, pause: number): void {
    const words = this.words(pause);
    if (!words) return;
    // A failure of either is the recognition stage's to report; here it is only absent evidence.
    words.transcript.then(
      (text) => (text === null ? undefined : this.learn(j, { words: text })),
      () => undefined,
    );
    words.endProbability.then(
      (p) => (p === null ? undefined : this.learn(j, { wordsEnd: p })),
      () => undefined,
    );
  }

  /** New evidence about silence `j`: decide again, at the silence of its latest frame. */
  private learn(j: Judged, e: Partial<TurnEvidence>): void {
    if (this.judged !== j || j.decided) return;
    Object.assign(j.evidence, e);
    const p = this.policy.decide(j.evidence, j.frame.silentMs, j.frame.endOfTurn.confidence);
    if (p === null) return;
    j.decided = true;
    j.frame.requestEnd(p);
  }
}
