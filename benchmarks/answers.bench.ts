/**
 * Everyday answers by the embedded local model (LlamaCppModel), asked as the realtime engine asks
 * for a spoken reply (replyRequest: the instructions, then the spoken-reply guidance, then the
 * question; no tools). The 53 questions of lib/answers/questions.ts (geography, science, history,
 * arithmetic, definitions, conversions, practical advice), then the 24 held out of every choice
 * made on them (HELD_OUT, reported on their own: a wording that only fits the 53 shows there), are
 * each asked under two instruction sets:
 *  - default: the session's DEFAULT_INSTRUCTIONS, what a session that sets none gets;
 *  - short: the instructions a voice client commonly sets, the endpoint bench's ("… Answer in one
 *    or two short sentences.").
 * Checked by rule (lib/answers/check.ts), never by another model: right (the facts present, advice
 * on topic, no refusal), markup (JSON, tool syntax, Markdown, emoji: what a voice would read out),
 * length (at most 2 sentences and 40 words; what "short" asks for).
 *
 * Reported per instruction set: right %, markup %, within length % (and its two halves), mean
 * words, answers cut at the token limit; first-token latency p50/p95 (request → first text);
 * tokens/s while generating (after the first token). Greedy decoding (node-llama-cpp's default):
 * accuracy and the answers repeat exactly, latency does not; --runs N only adds latency samples.
 *
 * The model: ANSWERS_BENCH_GGUF (a file) or ANSWERS_BENCH_MODEL (a models/manifest.json entry of
 * kind llm; default the server's, LLM_LOCAL_MODEL's choice, llm-default unless set), so two models
 * can be compared on the same set (ANSWERS_BENCH_MODEL=llm-qwen2.5-coder-1.5b npm run bench -- answers).
 * ANSWERS_BENCH_TEXT_ONLY=1 asks as for a text-only reply (no spoken-reply guidance). Skipped
 * (with an error saying so) when the model is not fetched.
 */
import path from 'node:path';
import { Logger } from '../src/core/log.js';
import { modelsDirFrom } from '../src/models/manifest.js';
import type { GenerateChunk } from '../src/providers/llm/base.js';
import { LlamaCppModel } from '../src/providers/llm/llama-cpp.js';
import { replyRequest } from '../src/realtime/reply-request.js';
import { DEFAULT_INSTRUCTIONS } from '../src/sessions/session-config.js';
import { checkAnswer, lengthOf, markupIn, MARKUP_RULES, MAX_SENTENCES, MAX_WORDS, type Length } from './lib/answers/check.js';
import { HELD_OUT, QUESTIONS, type Question } from './lib/answers/questions.js';
import { INSTRUCTIONS as SHORT_INSTRUCTIONS } from './lib/endpoint/websocket-measures.js';
import { percentile, summarise, type Benchmark, type Metric } from './lib/harness.js';
import { benchLocalModel } from './lib/local-model.js';

/** The server's MODELS_DIR (the repository's models/ unless set). */
const MODELS_DIR = modelsDirFrom(process.env);
/** A spoken reply's limit: two short sentences are 30-50 tokens; a longer answer is cut here. */
const MAX_OUTPUT_TOKENS = 96;
/** The server's defaults (LLM_THREADS, LLM_CONTEXT_TOKENS); one sequence, as one question is asked at a time. */
const THREADS = 1;
const CONTEXT_TOKENS = 4096;

/** What is asked: the set, then the questions held out of every choice made on it (whether each is held out). */
const ASKED: [Question, boolean][] = [...QUESTIONS.map((q): [Question, boolean] => [q, false]), ...HELD_OUT.map((q): [Question, boolean] => [q, true])];

const INSTRUCTION_SETS = [
  { name: 'default', instructions: DEFAULT_INSTRUCTIONS },
  { name: 'short', instructions: SHORT_INSTRUCTIONS },
] as const;
type SetName = (typeof INSTRUCTION_SETS)[number]['name'];

interface Answer {
  set: SetName;
  q: Question;
  text: string;
  right: boolean;
  why: string[];
  markup: string[];
  length: Length;
  /** Stopped by the token limit. */
  cut: boolean;
  /** One of HELD_OUT (reported on its own). */
  held: boolean;
  /** Request → first text chunk; null when nothing came. */
  firstMs: number | null;
  totalMs: number;
  outputTokens: number;
}


async function ask(model: LlamaCppModel, system: string, q: Question, modalities: string[]): Promise<Omit<Answer, 'set' | 'held' | 'right' | 'why' | 'markup' | 'length'>> {
  const request = replyRequest(system, modalities, [{ role: 'user', content: q.question }], MAX_OUTPUT_TOKENS);
  const started = performance.now();
  let text = '';
  let firstMs: number | null = null;
  let cut = false;
  let outputTokens = 0;
  for await (const c of model.generate({ ...request, signal: new AbortController().signal }) as AsyncIterable<GenerateChunk>) {
    if (c.type === 'text') {
      firstMs ??= performance.now() - started;
      text += c.text;
    } else if (c.type === 'done') {
      cut = c.finishReason === 'length';
      outputTokens = c.usage?.outputTokens ?? 0;
    }
  }
  return { q, text: text.trim(), cut, firstMs, totalMs: performance.now() - started, outputTokens };
}

const pct = (n: number, d: number) => (d === 0 ? 0 : Math.round((1000 * n) / d) / 10);
const mean = (v: number[]) => (v.length ? Math.round((10 * v.reduce((a, b) => a + b, 0)) / v.length) / 10 : NaN);
/** Tokens per second after the first: the generation rate, without the prompt's evaluation. */
const rate = (a: Answer) => (a.firstMs !== null && a.outputTokens > 1 && a.totalMs > a.firstMs ? (a.outputTokens - 1) / ((a.totalMs - a.firstMs) / 1000) : null);
const oneLine = (s: string, n: number) => JSON.stringify(s.length > n ? `${s.slice(0, n)}…` : s);

const bench: Benchmark = {
  name: 'answers',
  description: 'local model (llama-cpp) everyday answers: right facts, markup, spoken length, latency',
  async run(ctx) {
    const { file, name } = benchLocalModel('ANSWERS_BENCH', MODELS_DIR);
    const modalities = process.env.ANSWERS_BENCH_TEXT_ONLY === '1' ? ['text'] : ['audio'];
    const model = new LlamaCppModel({ modelFile: file, threads: THREADS, contextTokens: CONTEXT_TOKENS, parallel: 1, maxOutputTokens: MAX_OUTPUT_TOKENS, log: new Logger('warn') });
    const answers: Answer[] = [];
    try {
      await model.load();
      for (let run = 0; run < ctx.runs; run++) {
        for (const set of INSTRUCTION_SETS) {
          for (const [q, held] of ASKED) {
            const got = await ask(model, set.instructions, q, modalities);
            const verdict = checkAnswer(q, got.text);
            const a: Answer = { ...got, set: set.name, held, right: verdict.right, why: verdict.why, markup: markupIn(got.text), length: lengthOf(got.text) };
            answers.push(a);
            if (run === 0) {
              const flags = [...a.markup, ...(a.length.within ? [] : [`${a.length.sentences}s/${a.length.words}w`]), ...(a.cut ? ['cut'] : [])].join(',');
              ctx.log(`${set.name.padEnd(7)} ${(a.right ? 'right' : 'WRONG').padEnd(5)} ${Math.round(a.firstMs ?? NaN).toString().padStart(5)} ms ${flags.padEnd(14)} ${q.question} → ${oneLine(a.text, 100)}`);
            }
          }
        }
      }
    } finally {
      await model.close();
    }

    const first = answers.slice(0, INSTRUCTION_SETS.length * ASKED.length); // greedy: later runs repeat the answers
    const rows = INSTRUCTION_SETS.map(({ name: set }) => {
      const of = first.filter((a) => a.set === set && !a.held);
      const held = first.filter((a) => a.set === set && a.held);
      const all = answers.filter((a) => a.set === set);
      const firstMs = all.flatMap((a) => (a.firstMs === null ? [] : [a.firstMs]));
      const rates = all.flatMap((a) => rate(a) ?? []);
      return {
        set,
        n: of.length,
        right: of.filter((a) => a.right).length,
        heldN: held.length,
        heldRight: held.filter((a) => a.right).length,
        markup: of.filter((a) => a.markup.length > 0).length,
        sentences: of.filter((a) => a.length.sentences <= MAX_SENTENCES).length,
        words: of.filter((a) => a.length.words <= MAX_WORDS).length,
        within: of.filter((a) => a.length.within).length,
        cut: of.filter((a) => a.cut).length,
        meanWords: mean(of.map((a) => a.length.words)),
        firstMs,
        rates,
      };
    });

    ctx.log('');
    ctx.log(`| ${name}: instructions | right % | right, held out % | markup/JSON % | ≤ ${MAX_SENTENCES} sentences % | ≤ ${MAX_WORDS} words % | within length % | mean words | cut at ${MAX_OUTPUT_TOKENS} tokens | first token p50 / p95 ms | tokens/s (p50) |`);
    ctx.log('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      ctx.log(
        `| ${r.set} | ${pct(r.right, r.n)} (${r.right}/${r.n}) | ${pct(r.heldRight, r.heldN)} (${r.heldRight}/${r.heldN}) | ${pct(r.markup, r.n)} (${r.markup}) | ${pct(r.sentences, r.n)} | ${pct(r.words, r.n)} | ${pct(r.within, r.n)} (${r.within}/${r.n}) | ${r.meanWords} | ${r.cut} | ${Math.round(percentile(r.firstMs, 50))} / ${Math.round(percentile(r.firstMs, 95))} | ${Math.round(10 * percentile(r.rates, 50)) / 10} |`,
      );
    }
    const wrong = first.filter((a) => !a.right);
    const broken = first.filter((a) => a.markup.length > 0);
    const long = first.filter((a) => !a.length.within);
    ctx.log('');
    ctx.log(`wrong (${wrong.length}):`);
    for (const a of wrong) ctx.log(`  [${a.set}${a.held ? ', held out' : ''}] ${a.q.question} (${a.why.join('; ')}) → ${JSON.stringify(a.text)}`);
    ctx.log(`markup (${broken.length}):`);
    for (const a of broken) ctx.log(`  [${a.set}] ${a.markup.join(', ')}: ${a.q.question} → ${JSON.stringify(a.text)}`);
    ctx.log(`over the length (${long.length}):`);
    for (const a of long) ctx.log(`  [${a.set}] ${a.length.sentences} sentences, ${a.length.words} words${a.cut ? ', cut' : ''}: ${a.q.question} → ${JSON.stringify(a.text)}`);

    const metrics: Metric[] = rows.flatMap((r) => [
      summarise(`right (${r.set})`, '%', [pct(r.right, r.n)]),
      summarise(`right, held out (${r.set})`, '%', [pct(r.heldRight, r.heldN)]),
      summarise(`markup or JSON (${r.set})`, '%', [pct(r.markup, r.n)]),
      summarise(`within ${MAX_SENTENCES} sentences and ${MAX_WORDS} words (${r.set})`, '%', [pct(r.within, r.n)]),
      summarise(`answer words (${r.set})`, 'words', first.filter((a) => a.set === r.set).map((a) => a.length.words)),
      summarise(`request → first token (${r.set})`, 'ms', r.firstMs),
      summarise(`tokens/s while generating (${r.set})`, 'tokens/s', r.rates),
    ]);
    const markupCounts = Object.fromEntries(MARKUP_RULES.map(([rule]) => [rule, broken.filter((a) => a.markup.includes(rule)).length]).filter(([, n]) => n));
    return {
      params: {
        model: name,
        model_file: path.basename(file),
        instructions: Object.fromEntries(INSTRUCTION_SETS.map((s) => [s.name, replyRequest(s.instructions, modalities, [], MAX_OUTPUT_TOKENS).messages[0]!.content])),
        modalities,
        questions: QUESTIONS.length,
        held_out: HELD_OUT.length,
        by_topic: Object.fromEntries([...new Set(QUESTIONS.map((q) => q.topic))].map((t) => [t, QUESTIONS.filter((q) => q.topic === t).length])),
        length_rule: { max_sentences: MAX_SENTENCES, max_words: MAX_WORDS },
        threads: THREADS,
        context_tokens: CONTEXT_TOKENS,
        sequences: 1,
        max_output_tokens: MAX_OUTPUT_TOKENS,
        decoding: 'greedy',
        runs: ctx.runs,
      },
      metrics,
      notes: [
        ...rows.map(
          (r) =>
            `${r.set}: right ${pct(r.right, r.n)} % (${r.right}/${r.n}), held out ${pct(r.heldRight, r.heldN)} % (${r.heldRight}/${r.heldN}), markup or JSON ${pct(r.markup, r.n)} % (${r.markup}), within length ${pct(r.within, r.n)} % (≤ ${MAX_SENTENCES} sentences ${pct(r.sentences, r.n)} %, ≤ ${MAX_WORDS} words ${pct(r.words, r.n)} %), mean ${r.meanWords} words, ${r.cut} cut at ${MAX_OUTPUT_TOKENS} tokens; first token p50 ${Math.round(percentile(r.firstMs, 50))} ms, p95 ${Math.round(percentile(r.firstMs, 95))} ms; ${Math.round(10 * percentile(r.rates, 50)) / 10} tokens/s p50 while generating.`,
        ),
        `Markup found, by rule: ${JSON.stringify(markupCounts)}.`,
        ...wrong.map((a) => `Wrong [${a.set}${a.held ? ', held out' : ''}]: ${a.q.question} → ${oneLine(a.text, 200)}`),
        ...broken.map((a) => `Markup [${a.set}] (${a.markup.join(', ')}): ${a.q.question} → ${oneLine(a.text, 200)}`),
        ...long.map((a) => `Over the length [${a.set}] (${a.length.sentences} sentences, ${a.length.words} words): ${a.q.question} → ${oneLine(a.text, 200)}`),
        'Each question is one request on one sequence, which keeps the evaluated instructions between questions as a session does; first-token latency is therefore the question\'s evaluation, not the instructions\'.',
        'Greedy decoding: the answers (and so every percentage) are the same on every run; only latency varies. On a shared machine it varies a lot.',
      ],
    };
  },
};

export default bench;
