/**
 * semantic_vad's judge of a pause: two listeners, combined.
 *  - The end-of-turn model hears the melody of the last seconds (Smart Turn: did the voice end?).
 *  - The words of the speculative transcript of the same pause (when the engine has one) say
 *    whether a sentence can end there. The local language model reads them best: the
 *    probability it gives to the message ending after the last word (a full stop, a question
 *    mark, the end of the user's turn) is ~0.5 after "Where are you from", ~0.0001 after "What
 *    time zone" or "a table for" (measured on Qwen2.5 0.5B, docs/realtime.md, Turns); it costs the evaluation of
 *    the user's words, which the early reply then reuses. Without a local model, the words are
 *    judged by rule (soundsUnfinished / soundsFinished below).
 * The two are added as log-odds (`combine`): each can overrule a weak verdict of the other, and
 * neither vetoes. A finished question that Smart Turn hears as unfinished (synthetic and
 * flat-voiced speech often ends on a rising or level melody) is answered at the first judgement
 * instead of the ceiling's seconds; a fragment that Smart Turn hears as finished (a voice that
 * falls at "What time zone", then goes on) waits until the silence itself is evidence (the
 * judgement at 8× the candidate silence, which hears the whole silence; JUDGEMENTS in
 * speech-segmenter.ts), and a fragment whose melody also goes on waits for the ceiling.
 * Waiting for the words costs little: the reply needs them anyway.
 */
import type { EndOfTurnModel } from '../providers/turn/base.js';

/** What the words of a pause say (see the header); null where there is no transcript. */
export interface TurnWords {
  /** The transcript of the turn up to the pause. */
  text: string;
  /**
   * The language model's probability that the message ends after these words (punctuation
   * removed), or null where no local model read them (the words are then judged by rule).
   */
  endProbability: number | null;
}

/** Log-odds kept within ±this for the audio model (0.01..0.99): one verdict is never certainty. */
const AUDIO_LOGIT_LIMIT = 4.6;

/**
 * The language model's probability as log-odds for the end of the turn: 4 per decade around
 * 10^-2.7 (the measured gap between finished sentences, 10^-0.1..10^-2.3 and "Tell me more" at
 * 10^-2.8, and fragments, 10^-3.1 for "The thing is" down to 10^-5), from −6 to +4. A fragment at
 * 10^-3.8 ("What time zone") then holds against a "complete" of 0.95 from the audio at the first
 * two bars and ends only once the whole silence is heard; a finished sentence ends the turn at
 * the first bar unless the audio is fairly sure it goes on (under 0.02), and at the second
 * (640 ms of silence under eagerness auto) whatever the audio says (espeak's voices end
 * finished questions on a level melody that Smart Turn hears as unfinished at 0.01).
 */
export function languageModelLogit(probability: number): number {
  const decades = Math.log10(Math.max(probability, 1e-6));
  return clamp(4 * (decades + 2.7), -6, 4);
}

/**
 * Log-odds of the words judged by rule, on the language model's scale: a dangling article or
 * conjunction as a sure fragment (−6), a last word that rarely ends a statement (a preposition,
 * "is") as a likely one (−4: it holds until the whole silence is heard, so "Where are you from."
 * without its question mark waits about 1.3 s, not the ceiling), a finished sentence (+2).
 */
export function ruleLogit(text: string): number {
  if (soundsUnfinished(text)) return lastWordNeverEnds(text) ? -6 : -4;
  if (soundsFinished(text)) return 2;
  return 0;
}

/** The log-odds the words add to the audio's (0: no transcript, nothing to add). */
export function wordsLogit(words: TurnWords | null): number {
  if (words === null || words.text.trim() === '') return 0;
  return words.endProbability === null ? ruleLogit(words.text) : languageModelLogit(words.endProbability);
}

/** The audio model's probability and the words' log-odds, combined (see the header). */
export function combine(audioProbability: number, words: TurnWords | null): number {
  const p = clamp(audioProbability, 0, 1);
  const audio = clamp(Math.log(p / (1 - p)), -AUDIO_LOGIT_LIMIT, AUDIO_LOGIT_LIMIT);
  return 1 / (1 + Math.exp(-(audio + wordsLogit(words))));
}

/** Last words after which an English sentence cannot end: articles, possessives, conjunctions, fillers. */
const NEVER_LAST = new Set(['a', 'an', 'the', 'my', 'your', 'our', 'their', 'and', 'but', 'or', 'nor', 'because', 'although', 'though', 'unless', 'whether', 'um', 'uh', 'er', 'erm', 'hmm']);

/**
 * Last words that end a question or an exclamation ("Where are you from?", "What is it like?")
 * but rarely a statement: prepositions, subordinators, and "is"/"was" as in "my favourite colour
 * is". Whisper puts a full stop after most fragments, so a full stop does not make them final.
 */
const RARELY_LAST = new Set(['for', 'to', 'of', 'in', 'on', 'at', 'with', 'about', 'from', 'by', 'into', 'onto', 'than', 'like', 'that', 'which', 'if', 'when', 'while', 'so', 'his', 'its', 'is', 'are', 'was', 'were']);

/** True when `text` (a transcript) stops where a sentence cannot: see NEVER_LAST and RARELY_LAST, or trailing off ("...", "-"). */
export function soundsUnfinished(text: string): boolean {
  const trimmed = text.trim();
  if (trimmed === '') return false;
  if (/(\.\.\.|…|-|—)$/.test(trimmed)) return true;
  const last = lastWord(trimmed);
  if (!last) return false;
  if (NEVER_LAST.has(last)) return true;
  return RARELY_LAST.has(last) && !/[?!]$/.test(trimmed);
}

/**
 * True when `text` plainly ends a sentence: closing punctuation after a word that is not in
 * NEVER_LAST or RARELY_LAST ("Where are you from?" is finished, but so is what Whisper makes of a
 * speaker who stopped at "tell me about the...": "Can you tell me about?"; such endings are left to
 * the model).
 */
export function soundsFinished(text: string): boolean {
  const trimmed = text.trim();
  if (!/[.?!]["')\]]*$/.test(trimmed) || /(\.\.\.|…)$/.test(trimmed)) return false;
  const last = lastWord(trimmed);
  return last !== null && !NEVER_LAST.has(last) && !RARELY_LAST.has(last);
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

function lastWordNeverEnds(text: string): boolean {
  const last = lastWord(text.trim());
  return (last !== null && NEVER_LAST.has(last)) || /(\.\.\.|…|-|—)$/.test(text.trim());
}

function lastWord(text: string): string | null {
  return /([A-Za-z']+)[^A-Za-z']*$/.exec(text)?.[1]?.toLowerCase() ?? null;
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, Number.isFinite(x) ? x : x > 0 ? hi : lo));
}

/** `model`, with its verdicts combined with the words of the pause, `wordsSoFar()` (null: none). */
export function judgedWithWords(model: EndOfTurnModel, wordsSoFar: () => Promise<TurnWords | null>): EndOfTurnModel {
  return {
    name: `${model.name}+words`,
    sampleRateHz: model.sampleRateHz,
    windowMs: model.windowMs,
    async completeProbability(audio) {
      const probability = await model.completeProbability(audio);
      return combine(probability, await wordsSoFar());
    },
    close: () => model.close(),
  };
}
