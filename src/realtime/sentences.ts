/**
 * Cuts a streamed reply into pieces a voice can speak while the rest is still being written:
 * sentences (. ! ? … or a line break, followed by a space), and, so that the first words are heard
 * soon, a long first clause at a comma, semicolon, colon or dash, or a first phrase of a few words
 * where the next phrase begins (before a verb such as "is", a conjunction or a preposition: "The
 * capital of France | is Paris."), which the voice can speak while the model writes the rest
 * (a local model writes about 20 tokens a second, so a sentence's last words cost it ~250 ms).
 * Abbreviations ("Dr.", "e.g."), decimals ("3.5") and ellipses inside a sentence do not end it.
 * Text is given in arbitrary chunks (LLM tokens); `push` returns the pieces completed so far and
 * `flush` the remainder.
 */

/** A first clause longer than this is spoken on its own at the next comma/semicolon/colon. */
const FIRST_CLAUSE_MIN_CHARS = 12;
/** A first phrase of at least this many words is spoken on its own before a PHRASE_STARTS word. */
const FIRST_PHRASE_MIN_WORDS = 3;
/** Words that begin a new phrase: the first phrase may end before them. */
const PHRASE_STARTS = new Set([
  'is', 'are', 'was', 'were', 'has', 'have', 'had', 'will', 'would', 'can', 'could', 'should', 'might', 'may',
  'and', 'but', 'or', 'so', 'because', 'although', 'while', 'which', 'who', 'that', 'where', 'when', 'if',
  'in', 'on', 'at', 'with', 'for', 'from', 'about', 'to', 'by', 'after', 'before', 'during',
]);
/** Words a first phrase does not end on ("here it | is", "one of the | best"): pronouns, articles, function words. */
const PHRASE_NEVER_ENDS = new Set([
  'i', 'you', 'he', 'she', 'it', 'we', 'they', 'this', 'that', 'there', 'here', 'what', 'which', 'who',
  'a', 'an', 'the', 'my', 'your', 'his', 'her', 'its', 'our', 'their', 'of', 'to', 'and', 'or', 'but', 'not', 'very',
]);
/** Any clause longer than this is cut at the next comma etc. (keeps synthesis chunks short). */
const LONG_CLAUSE_MIN_CHARS = 160;

const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'e.g', 'i.e', 'approx', 'no', 'fig', 'inc', 'ltd', 'co', 'mt',
]);

export class SentenceSplitter {
  private buffer = '';
  private emitted = 0;

  /** Adds text; returns the pieces that are complete. */
  push(text: string): string[] {
    this.buffer += text;
    const out: string[] = [];
    for (;;) {
      const end = this.findEnd();
      if (end < 0) break;
      const piece = this.buffer.slice(0, end).trim();
      this.buffer = this.buffer.slice(end);
      if (piece !== '') {
        out.push(piece);
        this.emitted++;
      }
    }
    return out;
  }

  /** The rest, once the reply is complete (empty string when nothing is left). */
  flush(): string {
    const rest = this.buffer.trim();
    this.buffer = '';
    if (rest !== '') this.emitted++;
    return rest;
  }

  /** Index just past the end of the first complete piece in the buffer, or -1. */
  private findEnd(): number {
    const b = this.buffer;
    const clauseLimit = this.emitted === 0 ? FIRST_CLAUSE_MIN_CHARS : LONG_CLAUSE_MIN_CHARS;
    for (let i = 0; i < b.length; i++) {
      const c = b[i] as string;
      const next = b[i + 1];
      if (c === '\n') {
        if (b.slice(0, i).trim() !== '') return i + 1;
        continue;
      }
      // Needs the following character to decide (a space ends a sentence, a digit continues "3.5").
      if (next === undefined) return -1;
      const spaceAfter = next === ' ' || next === '\n' || next === '\t';
      if ((c === '.' || c === '!' || c === '?' || c === '…') && spaceAfter) {
        if (c === '.' && this.isAbbreviation(i)) continue;
        return i + 1;
      }
      if ((c === ',' || c === ';' || c === ':' || c === '—') && spaceAfter && i >= clauseLimit) return i + 1;
      if (this.emitted === 0 && c === ' ' && i >= FIRST_CLAUSE_MIN_CHARS && this.phraseStartsAfter(i)) return i;
    }
    return -1;
  }

  /**
   * Whether the first phrase may end at the space at `space`: it has FIRST_PHRASE_MIN_WORDS words
   * or more, and the word after the space is complete (a space or punctuation follows it) and
   * begins a new phrase.
   */
  private phraseStartsAfter(space: number): boolean {
    const before = this.buffer.slice(0, space);
    const words = before.trim().split(/\s+/);
    if (!/[A-Za-z0-9']$/.test(before) || words.length < FIRST_PHRASE_MIN_WORDS) return false;
    if (PHRASE_NEVER_ENDS.has((words.at(-1) as string).toLowerCase())) return false;
    const next = /^ ([A-Za-z']+)[ ,.;:!?]/.exec(this.buffer.slice(space));
    return next !== null && PHRASE_STARTS.has((next[1] as string).toLowerCase());
  }

  private isAbbreviation(dotIndex: number): boolean {
    const before = this.buffer.slice(0, dotIndex);
    const word = /([A-Za-z.]+)$/.exec(before)?.[1]?.toLowerCase() ?? '';
    if (ABBREVIATIONS.has(word)) return true;
    // Single capital initials ("J. R. R.") and dotted acronyms ("U.S.").
    return /^[a-z]$/.test(word) || /^([a-z]\.)+[a-z]$/.test(word);
  }
}
