/**
 * semantic_vad's judge of a pause: the end-of-turn model hears the melody of the last seconds,
 * and its verdict is checked against the words (the speculative transcript of the same pause,
 * when the engine has one):
 *  - a turn whose last word cannot end an English sentence ("a table for", "tell me about the",
 *    "and") is not complete, whatever its melody: synthetic and flat-voiced speech often falls at
 *    the end of a fragment, and this is the cheap guard against answering someone who has not
 *    finished;
 *  - words that make a finished sentence (closing punctuation, nothing dangling) lift an
 *    "incomplete" verdict to WORDS_FINISHED_PROBABILITY: below the first bar (a short pause is
 *    still the model's call), over the later, lower ones (JUDGEMENTS in speech-segmenter.ts), so a
 *    finished sentence the model hears as unfinished ends its turn after about 0.5 s of silence
 *    instead of the ceiling's seconds.
 * Waiting for the transcript costs little: the reply needs it anyway.
 */
import type { EndOfTurnModel } from '../providers/turn/base.js';

/** The probability reported when the words say the sentence is unfinished. */
const UNFINISHED_WORDS_PROBABILITY = 0.1;
/** The least probability reported when the words make a finished sentence (see the header). */
export const WORDS_FINISHED_PROBABILITY = 0.35;

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

function lastWord(text: string): string | null {
  return /([A-Za-z']+)[^A-Za-z']*$/.exec(text)?.[1]?.toLowerCase() ?? null;
}

/** `model`, with its verdicts checked against `wordsSoFar()` (null: no transcript to check). */
export function checkedByWords(model: EndOfTurnModel, wordsSoFar: () => Promise<string | null>): EndOfTurnModel {
  return {
    name: `${model.name}+words`,
    sampleRateHz: model.sampleRateHz,
    windowMs: model.windowMs,
    async completeProbability(audio) {
      const probability = await model.completeProbability(audio);
      const words = await wordsSoFar();
      if (words === null) return probability;
      if (soundsUnfinished(words)) return Math.min(probability, UNFINISHED_WORDS_PROBABILITY);
      if (soundsFinished(words)) return Math.max(probability, WORDS_FINISHED_PROBABILITY);
      return probability;
    },
    close: () => model.close(),
  };
}
