/**
 * Cleans language-model output for speaking: the markup a chat model writes (markdown emphasis,
 * headings, list bullets, code fences and backticks, links, tables, HTML tags) and emoji must not
 * be read out ("asterisk asterisk", "smiling face with..."), while the words, numbers and sentence
 * punctuation must stay, since they carry the prosody. Numbers are left as digits: every engine
 * here reads them as words (espeak-ng and flite do it natively; Piper is phonemised by espeak-ng).
 *
 * `toAsciiSpeech` additionally folds text to ASCII for flite, which only knows English letters.
 * Neither function invents words beyond a few symbol names (&, %, +, =, @, °) that would
 * otherwise be dropped or spelled oddly.
 */

/** Pictographs, their modifiers, joiners and variation selectors, keycaps and flags. */
const EMOJI = /[\p{Extended_Pictographic}\p{Emoji_Modifier}\u{1F1E6}-\u{1F1FF}\u{FE0E}\u{FE0F}\u{200D}\u{20E3}]/gu;

const SYMBOL_WORDS: Array<[RegExp, string]> = [
  [/\s*&\s*/g, ' and '],
  [/(\d)\s*%/g, '$1 percent'],
  [/(\d)\s*°\s*([CF])\b/g, '$1 degrees $2'],
  [/(\d)\s*°/g, '$1 degrees'],
  [/(\d)\s*\+\s*(\d)/g, '$1 plus $2'],
  [/(\d)\s*=\s*(\d)/g, '$1 equals $2'],
  [/(\w)@(\w)/g, '$1 at $2'],
];

/** Text a voice can read aloud: markup and emoji removed, whitespace collapsed. May be empty. */
export function normalizeSpeechText(text: string): string {
  let t = text.normalize('NFC');
  // Control characters are not speech (and a NUL stops espeak-ng and flite: "text must not contain NUL characters").
  t = t.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, ' ');
  // Code fences: keep what is inside (a model sometimes fences plain prose), drop the fence lines.
  t = t.replace(/^\s*(```|~~~)[^\n]*$/gm, ' ');
  // Images and links: keep their visible text; bare URLs become "a link".
  t = t.replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1');
  t = t.replace(/\[([^\]]+)\]\([^)]*\)/g, '$1');
  t = t.replace(/<(https?:\/\/[^>]+)>/g, 'a link');
  t = t.replace(/\bhttps?:\/\/[^\s)]*[^\s).,;:!?]/g, 'a link');
  // HTML tags and entities.
  t = t.replace(/<\/?[a-zA-Z][^>]*>/g, ' ');
  t = t.replace(/&nbsp;/g, ' ').replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"');
  // Line starts: headings, block quotes, bullets, numbered-list markers, horizontal rules.
  t = t.replace(/^\s{0,3}#{1,6}\s+/gm, '');
  t = t.replace(/^\s*>+\s?/gm, '');
  t = t.replace(/^\s*(?:[-*+•]|\d{1,3}[.)])\s+/gm, '');
  t = t.replace(/^\s*([-*_=])(\s*\1){2,}\s*$/gm, ' ');
  // Table rows: cells become a spoken list; separator rows vanish.
  t = t.replace(/^\s*\|?(\s*:?-{2,}:?\s*\|)+\s*:?-*:?\s*$/gm, ' ');
  t = t.replace(/^\s*\|(.*)\|\s*$/gm, (_m, cells: string) => cells.split('|').map((c) => c.trim()).filter(Boolean).join(', ') + '.');
  // Emphasis and code markers around words (bold, italic, strike, inline code).
  t = t.replace(/(\*{1,3}|~~)(?=\S)([^*~\n]*?\S)\1/g, '$2');
  t = t.replace(/(?<!\w)(_{1,3})(?=\S)([^_\n]*?\S)\1(?!\w)/g, '$2');
  t = t.replace(/`+([^`]*)`+/g, '$1');
  t = t.replace(/[*`~_]/g, ' '); // what is left, e.g. snake_case names: spoken as words
  t = t.replace(/(^|\s)[-=]{2,}(?=\s|$)/g, ' '); // rules and dividers inside a line
  t = t.replace(EMOJI, ' ');
  for (const [pattern, words] of SYMBOL_WORDS) t = t.replace(pattern, words);
  // Typographic punctuation to plain forms every engine knows.
  t = t.replace(/[\u2018\u2019\u201B\u2032]/g, "'").replace(/[\u201C\u201D\u201F\u2033]/g, '"');
  t = t.replace(/\u2026/g, '...').replace(/\s+[\u2013\u2014]\s+|[\u2014]/g, ', ').replace(/\u2013/g, '-');
  t = t.replace(/[#|\\^{}<>[\]]/g, ' ');
  // Paragraph and line breaks end a clause: a line without closing punctuation gets a comma
  // rather than running into the next one.
  t = t.replace(/([^\s.,;:!?])[ \t]*\n+/g, '$1,\n');
  // A letter held for emphasis ("sooooo") is said as three; a run of hundreds would be spelled
  // out for minutes.
  t = t.replace(/(\p{L})\1{3,}/gu, '$1$1$1');
  t = t.replace(/\s+/g, ' ').trim();
  t = t.replace(/\s+([.,;:!?])/g, '$1').replace(/([,;:])(?:\s*[,;:])+/g, '$1').replace(/^[,;:.\s]+/, '');
  t = t.replace(/,$/, '.');
  return t;
}

/** Characters a native engine reads in one call at most (speechPieces). */
export const MAX_SPEECH_PIECE_CHARS = 200;
/** A word longer than this (a hash, an identifier, a run of digits) is cut into parts of this size. */
const MAX_SPEECH_WORD_CHARS = 40;

/**
 * `sentence` cut into pieces of at most MAX_SPEECH_PIECE_CHARS at word boundaries (a clause mark
 * where there is one), its over-long words cut too. A native engine reads each piece in one
 * uninterruptible call that holds its lock: bounded pieces keep one call, and so an abort or
 * another session's turn, within a second or two, whatever the text (a 1,700-letter "word" read
 * slowly was one 25-minute utterance, half a minute of CPU).
 */
export function speechPieces(sentence: string): string[] {
  const words = sentence.split(' ').flatMap((w) => (w.length <= MAX_SPEECH_WORD_CHARS ? [w] : w.match(new RegExp(`.{1,${MAX_SPEECH_WORD_CHARS}}`, 'gsu'))!));
  const pieces: string[] = [];
  let piece = '';
  for (const word of words) {
    if (piece !== '' && piece.length + 1 + word.length > MAX_SPEECH_PIECE_CHARS) {
      pieces.push(piece);
      piece = word;
    } else piece = piece === '' ? word : `${piece} ${word}`;
  }
  if (piece !== '') pieces.push(piece);
  return pieces;
}

/** `text` folded to printable ASCII (accents dropped, other letters removed), for flite. */
export function toAsciiSpeech(text: string): string {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .replace(/[^\x20-\x7e]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Splits text into sentences (at . ! ? followed by space and not by a lower-case letter, or at
 * the end), so a long text starts speaking after its first sentence instead of after all of it.
 * Abbreviation-safe enough for chat replies; the realtime engine usually sends one sentence.
 */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(/[.!?]+["')\]]*(?:\s+|$)/g)) {
    const end = m.index + m[0].length;
    const sentence = text.slice(start, m.index + m[0].trimEnd().length).trim();
    const next = text[end];
    if (next !== undefined && /\p{Ll}/u.test(next)) continue; // "e.g. this", "3 p.m. today"
    if (/\b(?:Mr|Mrs|Ms|Dr|St|vs|etc|e\.g|i\.e)\.$/i.test(sentence)) continue;
    if (sentence) out.push(sentence);
    start = end;
  }
  const rest = text.slice(start).trim();
  if (rest) out.push(rest);
  return out;
}

/**
 * Splits a sentence into clauses at , ; : followed by whitespace (so "1,000" stays whole), each
 * keeping its punctuation. Lets a slow engine (Piper) start speaking after the first clause.
 */
export function splitClauses(sentence: string): string[] {
  return sentence
    .split(/(?<=[,;:])\s+/)
    .map((c) => c.trim())
    .filter((c) => /[\p{L}\p{N}]/u.test(c));
}
