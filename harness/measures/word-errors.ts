/**
 * Word error rate, as recognisers are compared: the word edit distance (substitutions, insertions,
 * deletions) between a reference and a transcript over the reference's length. Words are compared
 * in lower case without punctuation ("What's" and "whats" differ; numbers are words as written).
 */

/** The words of `text`, lower case, without punctuation. */
export function words(text: string): string[] {
  return text.toLowerCase().split(/[^a-z0-9']+/).filter(Boolean);
}

/** Edits that turn `reference`'s words into `hypothesis`'s, and the reference's word count. */
export function wordEdits(reference: string, hypothesis: string): { edits: number; words: number } {
  const [r, h] = [words(reference), words(hypothesis)];
  let prev = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const cur = [i];
    for (let j = 1; j <= h.length; j++) {
      cur[j] = Math.min((prev[j - 1] ?? 0) + (r[i - 1] === h[j - 1] ? 0 : 1), (prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1);
    }
    prev = cur;
  }
  return { edits: prev[h.length] ?? 0, words: r.length };
}

/** Word error rate of one transcript (edits over the reference's words; a reference of no words counts as one). */
export function wer(reference: string, hypothesis: string): number {
  const { edits, words: n } = wordEdits(reference, hypothesis);
  return edits / Math.max(1, n);
}
