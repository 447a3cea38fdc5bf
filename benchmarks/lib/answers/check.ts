/**
 * The answers benchmark's rules (answers.bench.ts), kept apart from the model so a unit test
 * (test/benchmarks/answers-check.test.ts) can hold them:
 *  - right: a fact question's facts all present (questions.ts), an advice answer on topic; neither
 *    a refusal;
 *  - markup: what a voice would read out or choke on: JSON and braces, a tool call's tag or a chat
 *    template's special token, backticks, Markdown headings, bullets, bold and numbered lists, a
 *    stray hash sign ("#Au"), HTML-like tags, emoji;
 *  - length: sentences and words, as a listener hears them. Sentence ends are `.`, `!`, `?` or `…`
 *    before a space or the end, and line breaks; a dot after a common abbreviation ("Mt. Everest",
 *    "e.g.", "U.S."), inside a number ("3.5") or after a list item's number ("1. Go to bed") ends
 *    nothing, so a list of four items is four sentences. Text cut off without a stop counts as a
 *    sentence.
 */
import type { Question } from './questions.js';

/** The length a voice session asks for ("one or two short sentences"): at most this many of each. */
export const MAX_SENTENCES = 2;
export const MAX_WORDS = 40;

/** A refusal or a disclaimer instead of an answer ("I'm sorry to hear…" is sympathy, not one). */
const REFUSAL =
  /\b(?:I(?:'|’)?m sorry,? but|I am sorry,? but|I apologi[sz]e|I (?:can(?:'|’)?t|cannot|am unable to|(?:'|’)?m unable to|am not able to|(?:'|’)?m not able to) (?:help|assist|provide|answer|give|offer)|as an AI\b|as a language model|I don(?:'|’)?t have (?:personal|the ability|access))/i;

export interface Verdict {
  right: boolean;
  /** Why not: the facts missing, a wrong claim, a refusal; empty when right. */
  why: string[];
}

export function checkAnswer(q: Question, answer: string): Verdict {
  const why: string[] = [];
  if (q.topic === 'advice') {
    if (!q.facts.some((re) => re.test(answer))) why.push('off topic');
  } else {
    for (const re of q.facts) if (!re.test(answer)) why.push(`missing ${re.source}`);
    if (q.not?.test(answer)) why.push(`wrong claim ${q.not.source}`);
  }
  if (REFUSAL.test(answer)) why.push('refusal');
  return { right: why.length === 0, why };
}

/** Each kind of markup, by name, with what finds it. */
export const MARKUP_RULES: ReadonlyArray<readonly [string, RegExp]> = [
  ['json/braces', /[{}]/],
  ['tool tag', /<\/?tool_call>|<\/?function/i],
  ['special token', /<\||\|>/],
  ['backticks', /`/],
  ['heading', /^[ \t]{0,3}#{1,6}[ \t]/m],
  ['hash sign', /(?:^|[^#])#[^\s#]/], // "#Au", "#1": read out as "hash"
  ['bullet', /^[ \t]*[-*•+][ \t]+\S/m],
  ['bold', /\*\*|__\S/],
  ['numbered list', /(?:^|\n)[ \t]*1[.)][ \t]+\S|(?:^|\s)1[.)]\s+\S[\s\S]*?\s2[.)]\s+\S/],
  ['html tag', /<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?\/?>/i],
  ['emoji', /\p{Extended_Pictographic}/u],
];

/** The names of the markup rules the answer breaks; empty for plain speech. */
export function markupIn(answer: string): string[] {
  return MARKUP_RULES.filter(([, re]) => re.test(answer)).map(([name]) => name);
}

/** Words after which a dot ends no sentence (lower case, without the dot). */
const ABBREVIATIONS = new Set(['mt', 'mr', 'mrs', 'ms', 'dr', 'st', 'prof', 'sr', 'jr', 'vs', 'approx', 'ca', 'fig', 'jan', 'feb', 'aug', 'sept', 'oct', 'nov', 'dec']);
/** Units, which end a sentence as often as not ("It is 12 in."): abbreviations only before more of it. */
const UNITS = new Set(['ft', 'in', 'lb', 'lbs', 'oz', 'km']);

/** Whether the dot that follows `word` belongs to it rather than ending a sentence. */
function abbreviated(word: string, next: string): boolean {
  const w = word.replace(/^[("'“‘]+/, '');
  if (/^(?:\p{L}\.)+\p{L}$/u.test(w)) return true; // e.g, i.e, a.m, U.S: initials
  const lower = w.toLowerCase();
  if (lower === 'etc') return !/^\s*\p{Lu}/u.test(next); // "…, etc. Then" ends one; "etc. and" does not
  if (UNITS.has(lower)) return /^\s*[\p{Ll}\p{N}]/u.test(next);
  return ABBREVIATIONS.has(lower);
}

/** The answer's sentences, as a listener hears them. */
export function sentences(text: string): string[] {
  const out: string[] = [];
  const ends = /[.!?…]+["'”’)\]]*(?=\s|$)|\n+/g;
  let start = 0;
  for (const m of text.matchAll(ends)) {
    const end = m.index + m[0].length;
    if (m[0] === '.') {
      const before = text.slice(start, m.index).match(/(\S+)$/)?.[1] ?? '';
      if (abbreviated(before, text.slice(end))) continue;
      if (/(?:^|\n)[ \t]*\d{1,2}$/.test(text.slice(0, m.index))) continue; // a list's "1." starts its item
    }
    push(out, text.slice(start, end));
    start = end;
  }
  push(out, text.slice(start));
  return out;
}

function push(out: string[], piece: string): void {
  const s = piece.trim();
  if (/[\p{L}\p{N}]/u.test(s)) out.push(s); // a stray stop or bullet is no sentence
}

/** Spoken words: "8,849", "don't" and "Mt" are one each. */
export function words(text: string): number {
  return text.match(/[\p{L}\p{N}]+(?:[’'.,-][\p{L}\p{N}]+)*/gu)?.length ?? 0;
}

export interface Length {
  sentences: number;
  words: number;
  /** At most MAX_SENTENCES and MAX_WORDS. */
  within: boolean;
}

export function lengthOf(answer: string): Length {
  const s = sentences(answer).length;
  const w = words(answer);
  return { sentences: s, words: w, within: s <= MAX_SENTENCES && w <= MAX_WORDS };
}
