/**
 * Stress and phrase marks carried from a clause's IPA onto its timed phonemes. espeak-ng's
 * synthesis events, which time a Piper clause's phonemes, name bare segments (`ɹ eɪ n ɪ ŋ`); the
 * IPA the same phonemiser writes for Piper has the marks the speaking face reads
 * (native/animation/src/viseme.rs `stress_of`, `phrase_mark_of`): `ɪz ɪt ɹˈeɪnɪŋ?`. This puts
 * the stress mark before the stressed vowel's name (`ˈeɪ`) and the punctuation after the segment
 * it follows (`ŋ?`); the clause's closing punctuation goes on its last spoken phoneme.
 *
 * Both sides are reduced to segment letters (NFD; stress, length, tie bars, diacritics, word
 * gaps, `(en)` language switches and `_` pauses dropped), so diphthongs match however they are
 * split into names, and aligned by longest common subsequence. The two are written apart and do
 * differ (the IPA of "already" has an `l` its events lack), so a name counts as aligned only when
 * all its letters match consecutive IPA letters and it joins a neighbour matched the same way
 * (or is the clause's only spoken name): a name in a stretch that does not align keeps no mark
 * rather than take one meant for another segment.
 *
 * Invariants: the result has the input's length, order and times; only names change, and only by
 * a leading `ˈ`/`ˌ` and a trailing `?` `.` `!` `,` `;`, which leave their viseme as it was.
 * Silence (`_`) is never marked. Not here: timing, phonemisation.
 */
import type { PhonemeTiming } from './base.js';

const SILENCE = '_';
const STRESS_MARKS = new Set(['ˈ', 'ˌ']);
const PHRASE_MARKS = new Set(['?', '.', '!', ',', ';']);
/** IPA vowel letters (after NFD): a stress mark goes on the first of these after it in its word. */
const VOWELS = new Set([...'aeiouyæɐɑɒɔəɘɚɛɜɝɞɤɨɪɵøœɶʉʊʌʏɯ']);

/** One segment letter of the clause's IPA, with the stress mark it carries (as the first vowel after the mark). */
interface IpaLetter {
  letter: string;
  stress: string;
}

interface ParsedIpa {
  letters: IpaLetter[];
  /** Punctuation and the index of the letter it follows (-1: before any). */
  phraseMarks: { after: number; mark: string }[];
}

/** A timed phoneme's letters, each pointing back at its phoneme. */
interface NameLetter {
  letter: string;
  phoneme: number;
}

/**
 * The phonemes with the marks of `ipa` (espeak-ng's IPA of the same clause, one string per
 * clause it split the text into, with its punctuation) added to their names.
 */
export function markPhonemes(phonemes: PhonemeTiming[], ipa: string[]): PhonemeTiming[] {
  const parsed = parseIpa(ipa);
  const names = nameLetters(phonemes);
  const ipaOf = matchLetters(parsed.letters, names);
  const aligned = alignedPhonemes(names, ipaOf, phonemes.length);
  const stress = new Map<number, string>();
  const after = new Map<number, string>();
  const phonemeAt = new Map<number, { phoneme: number; first: boolean; last: boolean }>();
  names.forEach((n, j) => {
    const i = ipaOf[j] ?? -1;
    if (i < 0 || !aligned[n.phoneme]) return;
    phonemeAt.set(i, { phoneme: n.phoneme, first: names[j - 1]?.phoneme !== n.phoneme, last: names[j + 1]?.phoneme !== n.phoneme });
  });
  parsed.letters.forEach((l, i) => {
    const at = phonemeAt.get(i);
    if (l.stress && at?.first) stress.set(at.phoneme, l.stress);
  });
  const lastLetter = parsed.letters.length - 1;
  const lastSpoken = names.at(-1)?.phoneme;
  for (const { after: i, mark } of parsed.phraseMarks) {
    const at = i === lastLetter && lastSpoken !== undefined ? { phoneme: lastSpoken, last: true } : phonemeAt.get(i);
    if (at?.last && !after.has(at.phoneme)) after.set(at.phoneme, mark);
  }
  return phonemes.map((p, k) => {
    const s = stress.get(k) ?? '';
    const m = after.get(k) ?? '';
    return s || m ? { ...p, phoneme: `${s}${p.phoneme}${m}` } : p;
  });
}

/** The segment letters of the IPA strings and the punctuation between them. */
function parseIpa(ipa: string[]): ParsedIpa {
  const letters: IpaLetter[] = [];
  const phraseMarks: ParsedIpa['phraseMarks'] = [];
  let pending = '';
  let inSwitch = false;
  for (const c of ipa.join(' ').normalize('NFD')) {
    if (inSwitch) {
      inSwitch = c !== ')';
    } else if (c === '(') {
      inSwitch = true;
    } else if (STRESS_MARKS.has(c)) {
      pending = c;
    } else if (PHRASE_MARKS.has(c)) {
      phraseMarks.push({ after: letters.length - 1, mark: c });
      pending = '';
    } else if (/\s/.test(c)) {
      pending = '';
    } else if (isLetter(c)) {
      const stress = pending && VOWELS.has(c) ? pending : '';
      if (stress) pending = '';
      letters.push({ letter: c, stress });
    }
  }
  return { letters, phraseMarks };
}

function nameLetters(phonemes: PhonemeTiming[]): NameLetter[] {
  const out: NameLetter[] = [];
  phonemes.forEach((p, phoneme) => {
    if (p.phoneme === SILENCE) return;
    for (const c of p.phoneme.normalize('NFD')) if (isLetter(c)) out.push({ letter: c, phoneme });
  });
  return out;
}

/** A segment letter: not a mark, diacritic, tie bar, pause or punctuation. */
function isLetter(c: string): boolean {
  return /[\p{L}]/u.test(c) && !/[\p{Lm}]/u.test(c);
}

/**
 * For each name letter, the index of the IPA letter it is matched with by a longest common
 * subsequence (-1: unmatched).
 */
function matchLetters(ipa: IpaLetter[], names: NameLetter[]): number[] {
  const n = ipa.length;
  const m = names.length;
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * width + j] =
        ipa[i]?.letter === names[j]?.letter
          ? (lcs[(i + 1) * width + j + 1] ?? 0) + 1
          : Math.max(lcs[(i + 1) * width + j] ?? 0, lcs[i * width + j + 1] ?? 0);
    }
  }
  const out = new Array<number>(m).fill(-1);
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (ipa[i]?.letter === names[j]?.letter && lcs[i * width + j] === (lcs[(i + 1) * width + j + 1] ?? 0) + 1) out[j++] = i++;
    else if ((lcs[(i + 1) * width + j] ?? 0) >= (lcs[i * width + j + 1] ?? 0)) i++;
    else j++;
  }
  return out;
}

/**
 * Per phoneme, whether it is aligned: every letter matched, on consecutive IPA letters, and
 * joined the same way to the spoken phoneme before or after it (or the only spoken phoneme).
 */
function alignedPhonemes(names: NameLetter[], ipaOf: number[], count: number): boolean[] {
  const span: ({ first: number; last: number } | null)[] = new Array(count).fill(null);
  const whole = new Array<boolean>(count).fill(true);
  const order: number[] = [];
  names.forEach((n, j) => {
    const i = ipaOf[j] ?? -1;
    const s = span[n.phoneme];
    if (order.at(-1) !== n.phoneme) order.push(n.phoneme);
    if (i < 0 || (s && i !== s.last + 1)) whole[n.phoneme] = false;
    else span[n.phoneme] = s ? { first: s.first, last: i } : { first: i, last: i };
  });
  const intact = (p: number | undefined): boolean => p !== undefined && whole[p] === true && span[p] !== null;
  const joined = (a: number | undefined, b: number | undefined): boolean =>
    intact(a) && intact(b) && (span[a as number]?.last ?? -2) + 1 === span[b as number]?.first;
  const aligned = new Array<boolean>(count).fill(false);
  order.forEach((p, k) => {
    aligned[p] = intact(p) && (order.length === 1 || joined(order[k - 1], p) || joined(p, order[k + 1]));
  });
  return aligned;
}
