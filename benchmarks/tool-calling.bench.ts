/**
 * Function calling by the embedded local model (LlamaCppModel over models/manifest.json's
 * llm-default), as the realtime engine asks for it: the session's default instructions, the
 * question, and tool_choice 'auto'. Three kinds of case:
 *  - relevant: one of the 2-4 tools offered answers the question; right = that tool, with its
 *    required arguments present and right by a simple check (the city, the minutes, the currencies);
 *  - irrelevant: tools are offered but none applies (a joke, a capital); right = no call;
 *  - no tools: none offered; right = no call and no call written out as text (this model writes its
 *    calls as bare JSON, which without functions would be spoken).
 * And follow-ups: the question, the right call and its output in the history; right = a reply in
 * words with the output's value in it.
 *
 * Reported (each over its kind): right call %, right tool with wrong arguments %, wrong tool %,
 * missed call %; spurious call % (irrelevant tools); call written as text % (no tools); precision
 * (right calls among all calls) and recall (right calls among relevant cases); answer uses the
 * output % (follow-ups); latency from the request to the call (tool_call_start), to the first text
 * of a reply in words, and of a follow-up's whole reply; prompt tokens evaluated per request (what
 * the sequence did not already hold: most of the latency). Generation is greedy (node-llama-cpp's
 * default), so --runs repeats the same choices and only adds latency samples; run with --runs 1.
 * Skipped (with an error saying so) when the model is not fetched.
 */
import path from 'node:path';
import { Logger } from '../src/core/log.js';
import { modelPath } from '../src/models/manifest.js';
import type { ChatMessage, GenerateChunk, ToolDefinition } from '../src/providers/llm/base.js';
import { DEFAULT_LLM_MODEL_NAME } from '../src/providers/llm/index.js';
import { LlamaCppModel } from '../src/providers/llm/llama-cpp.js';
import { DEFAULT_INSTRUCTIONS } from '../src/sessions/session-config.js';
import { summarise, type Benchmark, type Metric } from './lib/harness.js';

const MODELS_DIR = path.resolve(import.meta.dirname, '../models');
/** Reply limit: a call is about 20 tokens; a reply in words is cut here (the choice is made by then). */
const MAX_OUTPUT_TOKENS = 64;

const tool = (name: string, description: string, properties: Record<string, unknown>): ToolDefinition => ({
  name,
  description,
  parameters: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false },
});
const TOOLS = {
  weather: tool('get_weather', 'Get the current weather in a city.', { city: { type: 'string', description: 'The city name, e.g. Paris' } }),
  time: tool('get_time', 'Get the current local time in a time zone.', { timezone: { type: 'string', description: 'IANA time zone, e.g. Europe/Paris' } }),
  timer: tool('set_timer', 'Start a countdown timer.', { minutes: { type: 'integer', description: 'Duration in minutes' } }),
  music: tool('play_music', 'Play music matching a search.', { query: { type: 'string', description: 'A song, artist or genre' } }),
  currency: tool('convert_currency', 'Convert an amount of money between currencies.', {
    amount: { type: 'number' },
    from: { type: 'string', description: 'ISO 4217 code, e.g. USD' },
    to: { type: 'string', description: 'ISO 4217 code, e.g. EUR' },
  }),
  translate: tool('translate', 'Translate a text into another language.', {
    text: { type: 'string' },
    target_language: { type: 'string', description: 'The language to translate into, e.g. French' },
  }),
};
type ToolKey = keyof typeof TOOLS;
type Args = Record<string, unknown>;

interface Case {
  kind: 'relevant' | 'irrelevant' | 'no tools';
  question: string;
  tools: ToolKey[];
  /** Relevant cases: the tool to call and a check of its arguments. */
  expect?: { tool: ToolKey; check: (a: Args) => boolean };
}

const has = (v: unknown, re: RegExp) => typeof v === 'string' && re.test(v);
const relevant = (question: string, tools: ToolKey[], expectTool: ToolKey, check: (a: Args) => boolean): Case => ({ kind: 'relevant', question, tools, expect: { tool: expectTool, check } });

const CASES: Case[] = [
  relevant('What is the weather like in Paris right now?', ['weather', 'time'], 'weather', (a) => has(a.city, /paris/i)),
  relevant('Is it going to be cold in Oslo today?', ['time', 'weather', 'timer'], 'weather', (a) => has(a.city, /oslo/i)),
  relevant('Will it rain in London this afternoon?', ['weather', 'currency', 'translate'], 'weather', (a) => has(a.city, /london/i)),
  relevant('What is the temperature in Cairo?', ['time', 'weather'], 'weather', (a) => has(a.city, /cairo/i)),
  relevant('What time is it in Tokyo?', ['weather', 'time'], 'time', (a) => has(a.timezone, /tokyo/i)),
  relevant('Can you tell me the current time in New York?', ['time', 'music', 'weather'], 'time', (a) => has(a.timezone, /new[ _]?york/i)),
  relevant('Set a timer for ten minutes.', ['timer', 'weather'], 'timer', (a) => a.minutes === 10),
  relevant('Start a 25 minute timer for my pizza.', ['music', 'timer', 'time'], 'timer', (a) => a.minutes === 25),
  relevant('Play some jazz music.', ['music', 'weather'], 'music', (a) => has(a.query, /jazz/i)),
  relevant('I want to listen to the Beatles.', ['timer', 'music', 'time', 'weather'], 'music', (a) => has(a.query, /beatles/i)),
  relevant('How much is 100 US dollars in euros?', ['currency', 'weather'], 'currency', (a) => a.amount === 100 && has(a.from, /^usd$/i) && has(a.to, /^eur$/i)),
  relevant('Convert 50 British pounds to Japanese yen.', ['time', 'currency', 'music'], 'currency', (a) => a.amount === 50 && has(a.from, /^gbp$/i) && has(a.to, /^jpy$/i)),
  relevant("Translate 'good morning' into Spanish.", ['translate', 'weather'], 'translate', (a) => has(a.text, /good morning/i) && has(a.target_language, /spanish|^es$/i)),
  relevant('How do you say thank you in German?', ['music', 'translate', 'timer'], 'translate', (a) => has(a.text, /thank you/i) && has(a.target_language, /german|^de$/i)),
  { kind: 'irrelevant', question: 'Tell me a joke about cats.', tools: ['weather', 'time'] },
  { kind: 'irrelevant', question: 'What is the capital of Italy?', tools: ['weather', 'timer'] },
  { kind: 'irrelevant', question: 'Who wrote Romeo and Juliet?', tools: ['music', 'currency'] },
  { kind: 'irrelevant', question: 'How are you today?', tools: ['weather', 'time', 'timer'] },
  { kind: 'irrelevant', question: 'What is two plus two?', tools: ['translate', 'weather'] },
  { kind: 'irrelevant', question: 'Give me a tip for sleeping better.', tools: ['music', 'timer'] },
  { kind: 'no tools', question: 'What is the weather like in Paris right now?', tools: [] },
  { kind: 'no tools', question: 'Set a timer for ten minutes.', tools: [] },
  { kind: 'no tools', question: 'What time is it in Tokyo?', tools: [] },
  { kind: 'no tools', question: 'Tell me a joke about cats.', tools: [] },
  { kind: 'no tools', question: 'What is the capital of Italy?', tools: [] },
  { kind: 'no tools', question: 'How are you today?', tools: [] },
];

interface FollowUp {
  question: string;
  tools: ToolKey[];
  call: { tool: ToolKey; arguments: Args };
  output: string;
  /** What the reply must contain to have used the output. */
  uses: RegExp;
}

const FOLLOW_UPS: FollowUp[] = [
  { question: 'What is the weather like in Paris right now?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Paris' } }, output: '{"temperature_c": 17, "conditions": "light rain"}', uses: /17|rain/i },
  { question: 'How hot is it in Cairo?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Cairo' } }, output: '{"temperature_c": 35, "conditions": "sunny"}', uses: /35/ },
  { question: 'What time is it in Tokyo?', tools: ['weather', 'time'], call: { tool: 'time', arguments: { timezone: 'Asia/Tokyo' } }, output: '{"time": "14:05"}', uses: /14[:.]05|2[:.]05|five past two/i },
  { question: 'How much is 100 US dollars in euros?', tools: ['currency', 'weather'], call: { tool: 'currency', arguments: { amount: 100, from: 'USD', to: 'EUR' } }, output: '{"result": 92.4, "currency": "EUR"}', uses: /92/ },
];

/** What one request produced. */
interface Reply {
  calls: { name: string; args: Args | null }[];
  text: string;
  /** Request → first tool_call_start, or null without a call. */
  callMs: number | null;
  /** Request → first text chunk, or null without text. */
  textMs: number | null;
  totalMs: number;
  /** Prompt tokens evaluated for it (not already held by the sequence it ran on). */
  evaluatedTokens: number;
}

async function ask(model: LlamaCppModel, messages: ChatMessage[], tools: ToolKey[]): Promise<Reply> {
  const started = performance.now();
  const reply: Reply = { calls: [], text: '', callMs: null, textMs: null, totalMs: 0, evaluatedTokens: 0 };
  const before = { ...model.promptStats };
  const args: string[] = [];
  const request = { messages, maxOutputTokens: MAX_OUTPUT_TOKENS, signal: new AbortController().signal, tools: tools.map((k) => TOOLS[k]), toolChoice: 'auto' as const };
  for await (const c of model.generate(request) as AsyncIterable<GenerateChunk>) {
    if (c.type === 'text') {
      reply.textMs ??= performance.now() - started;
      reply.text += c.text;
    } else if (c.type === 'tool_call_start') {
      reply.callMs ??= performance.now() - started;
      reply.calls.push({ name: c.name, args: null });
      args.push('');
    } else if (c.type === 'tool_call_arguments') {
      args[c.index] += c.delta;
    }
  }
  reply.totalMs = performance.now() - started;
  reply.evaluatedTokens = model.promptStats.promptTokens - before.promptTokens - (model.promptStats.reusedTokens - before.reusedTokens);
  reply.calls.forEach((call, i) => {
    try {
      call.args = JSON.parse(args[i] ?? '') as Args;
    } catch {
      call.args = null; // counted as wrong arguments
    }
  });
  return reply;
}

/** A call written out as text: the JSON this model writes for calls, or the template's tag. */
const CALL_AS_TEXT = /\{\s*"name"\s*:|<tool_call>/;

type Outcome = 'right call' | 'wrong arguments' | 'wrong tool' | 'missed call' | 'no call' | 'spurious call' | 'call as text';

function judge(c: Case, r: Reply): Outcome {
  const call = r.calls[0];
  if (c.kind === 'relevant') {
    if (!call) return 'missed call';
    if (call.name !== TOOLS[c.expect!.tool].name) return 'wrong tool';
    return call.args && c.expect!.check(call.args) ? 'right call' : 'wrong arguments';
  }
  if (call) return 'spurious call';
  return c.kind === 'no tools' && CALL_AS_TEXT.test(r.text) ? 'call as text' : 'no call';
}

const bench: Benchmark = {
  name: 'tool-calling',
  description: 'local model (llama-cpp) function calling: right tool and arguments, misses, spurious calls, latency',
  async run(ctx) {
    const file = modelPath(MODELS_DIR, DEFAULT_LLM_MODEL_NAME);
    if (!file) throw new Error(`the local model '${DEFAULT_LLM_MODEL_NAME}' is not fetched (run npm run setup:models)`);
    // The server's defaults (LLM_THREADS, LLM_CONTEXT_TOKENS, LLM_PARALLEL).
    const model = new LlamaCppModel({ modelFile: file, threads: 1, contextTokens: 4096, parallel: 2, maxOutputTokens: MAX_OUTPUT_TOKENS, log: new Logger('warn') });
    const system: ChatMessage = { role: 'system', content: DEFAULT_INSTRUCTIONS };
    const results: { c: Case; r: Reply; outcome: Outcome }[] = [];
    const followUps: { f: FollowUp; r: Reply; used: boolean }[] = [];
    try {
      await model.load();
      for (let run = 0; run < ctx.runs; run++) {
        for (const c of CASES) {
          const r = await ask(model, [system, { role: 'user', content: c.question }], c.tools);
          const outcome = judge(c, r);
          results.push({ c, r, outcome });
          if (run === 0) {
            const got = r.calls.length ? r.calls.map((k) => `${k.name}(${JSON.stringify(k.args)})`).join(' ') : JSON.stringify(r.text.slice(0, 80));
            ctx.log(`${c.kind.padEnd(10)} ${outcome.padEnd(15)} ${Math.round(r.totalMs).toString().padStart(6)} ms ${r.evaluatedTokens.toString().padStart(4)} tok  ${c.question} → ${got}`);
          }
        }
        for (const f of FOLLOW_UPS) {
          const t = TOOLS[f.call.tool];
          const messages: ChatMessage[] = [
            system,
            { role: 'user', content: f.question },
            { role: 'assistant', content: '', toolCalls: [{ id: 'call_bench', name: t.name, arguments: JSON.stringify(f.call.arguments) }] },
            { role: 'tool', toolCallId: 'call_bench', content: f.output },
          ];
          const r = await ask(model, messages, f.tools);
          const used = r.calls.length === 0 && f.uses.test(r.text);
          followUps.push({ f, r, used });
          if (run === 0) ctx.log(`follow-up  ${(used ? 'uses output' : 'does not').padEnd(15)} ${Math.round(r.totalMs).toString().padStart(6)} ms  ${f.question} + ${f.output} → ${r.calls.length ? r.calls.map((k) => k.name).join(' ') : JSON.stringify(r.text.slice(0, 120))}`);
        }
      }
    } finally {
      await model.close();
    }

    const of = (kind: Case['kind']) => results.filter((x) => x.c.kind === kind);
    const pct = (n: number, d: number) => (d === 0 ? 0 : Math.round((1000 * n) / d) / 10);
    const count = (list: typeof results, o: Outcome) => list.filter((x) => x.outcome === o).length;
    const rel = of('relevant');
    const irr = of('irrelevant');
    const none = of('no tools');
    const calls = results.filter((x) => x.r.calls.length > 0).length;
    const right = count(rel, 'right call');
    const rows: Array<[string, number, string]> = [
      ['right call (relevant)', pct(right, rel.length), `${right}/${rel.length}`],
      ['right tool, wrong arguments (relevant)', pct(count(rel, 'wrong arguments'), rel.length), `${count(rel, 'wrong arguments')}/${rel.length}`],
      ['wrong tool (relevant)', pct(count(rel, 'wrong tool'), rel.length), `${count(rel, 'wrong tool')}/${rel.length}`],
      ['missed call (relevant)', pct(count(rel, 'missed call'), rel.length), `${count(rel, 'missed call')}/${rel.length}`],
      ['spurious call (irrelevant tools)', pct(count(irr, 'spurious call'), irr.length), `${count(irr, 'spurious call')}/${irr.length}`],
      ['call written as text (no tools)', pct(count(none, 'call as text'), none.length), `${count(none, 'call as text')}/${none.length}`],
      ['precision (right calls / calls made)', pct(right, calls), `${right}/${calls}`],
      ['recall (right calls / relevant)', pct(right, rel.length), `${right}/${rel.length}`],
      ['answer uses the output (follow-ups)', pct(followUps.filter((x) => x.used).length, followUps.length), `${followUps.filter((x) => x.used).length}/${followUps.length}`],
    ];
    const callMs = results.flatMap((x) => (x.r.callMs === null ? [] : [x.r.callMs]));
    const textMs = results.flatMap((x) => (x.r.calls.length === 0 && x.r.textMs !== null ? [x.r.textMs] : []));
    const evaluated = [...results, ...followUps].map((x) => x.r.evaluatedTokens);
    const mean = (v: number[]) => (v.length ? Math.round(v.reduce((a, b) => a + b, 0) / v.length) : NaN);
    ctx.log('');
    ctx.log('| tool calling | % | cases |');
    ctx.log('|---|---|---|');
    for (const [name, value, n] of rows) ctx.log(`| ${name} | ${value} | ${n} |`);
    ctx.log(`| mean latency, request → tool_call_start | ${mean(callMs)} ms | ${callMs.length} calls |`);
    ctx.log(`| mean latency, request → first text (replies in words) | ${mean(textMs)} ms | ${textMs.length} replies |`);
    ctx.log(`| mean prompt tokens evaluated per request (not held by the sequence) | ${mean(evaluated)} | ${evaluated.length} requests |`);

    const metrics: Metric[] = [
      ...rows.map(([name, value]) => summarise(name, '%', [value])),
      summarise('request → tool_call_start', 'ms', callMs),
      summarise('request → first text, replies in words', 'ms', textMs),
      summarise('follow-up: request → end of reply', 'ms', followUps.map((x) => x.r.totalMs)),
      summarise('prompt tokens evaluated per request', 'tokens', evaluated),
    ];
    return {
      params: {
        model: path.basename(file),
        instructions: DEFAULT_INSTRUCTIONS,
        tool_choice: 'auto',
        threads: 1,
        context_tokens: 4096,
        sequences: 2,
        max_output_tokens: MAX_OUTPUT_TOKENS,
        cases: { relevant: rel.length / ctx.runs, irrelevant: irr.length / ctx.runs, no_tools: none.length / ctx.runs, follow_ups: FOLLOW_UPS.length },
        runs: ctx.runs,
      },
      metrics,
      notes: [
        ...rows.map(([name, value, n]) => `${name}: ${value} % (${n})`),
        `Mean latency request → tool_call_start: ${mean(callMs)} ms over ${callMs.length} calls; request → first text of a reply in words: ${mean(textMs)} ms; prompt tokens evaluated per request: ${mean(evaluated)} (the tools' description is most of a prompt with tools; cases change the tools, so most of it is evaluated again, unlike a session's turns, whose tools stay).`,
        'A case is one request with the session default instructions, the question and tool_choice auto; the sequences keep their evaluated prompts between cases as in the server (consecutive cases with the same tools reuse the tools\' description).',
        'Wrong arguments: the right tool with a required argument missing or failing the case\'s check (e.g. city must name the city asked about).',
        'Greedy decoding: further runs repeat the same choices; the percentages are of all runs.',
      ],
    };
  },
};

export default bench;
