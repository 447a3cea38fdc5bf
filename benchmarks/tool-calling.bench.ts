/**
 * Function calling by the embedded local model (LlamaCppModel over the server's local model, or
 * TOOL_BENCH_MODEL / TOOL_BENCH_GGUF: lib/local-model.ts), as the realtime engine asks for it: the
 * session's default instructions with the spoken-reply guidance (replyRequest()), the question,
 * and tool_choice 'auto'. 62 prompts:
 *  - relevant (26): one of the 2-4 tools offered answers the question; right = that tool, with its
 *    required arguments present and right by a simple check (the city, the minutes, the currencies);
 *    six use the playground's demo tools with the page's own questions;
 *  - irrelevant (25): tools are offered but none applies (a joke, a capital; six are a newcomer's
 *    first questions with the playground's tools); right = no call;
 *  - of those, 10 relevant and 7 irrelevant asked later in a conversation, after a turn answered in
 *    words or one answered by a call (each reported on its own too);
 *  - ambiguous (6): a tool may answer or the model may itself ("Is it cold outside?"); right = no
 *    call or a call to the plausible tool;
 *  - no tools (6): none offered; right = no call and no call written out as text (this model writes
 *    its calls as bare JSON, which without functions would be spoken);
 *  - follow-ups (11): the question asked first (the model's call on a sequence, as in a session),
 *    then its output; right = a reply in words with the output's value in it; three ask a later
 *    question that needs the earlier output ("So should I take an umbrella?").
 *
 * Reported (each over its kind): right call %, right tool with wrong arguments %, wrong tool %,
 * missed call %; spurious call % (irrelevant tools); ambiguous answered acceptably %; call written
 * as text % (no tools); replies in words with JSON, markup or tool syntax %; precision and recall;
 * answer uses the output % (follow-ups); latency from the request to the call (tool_call_start), to
 * the first text of a reply in words, and from a follow-up's request (the output sent) to its first
 * text and whole reply; prompt tokens evaluated per request. TOOL_BENCH_CALL_GATE=0 turns the call
 * gate (llama-cpp.ts's CALL_GATE) off and prints its curve: what each gate would keep of the
 * model's free choices, from each request's call probability (kept in params.call_probabilities).
 * Generation is greedy (node-llama-cpp's default), so --runs repeats the same choices and only adds
 * latency samples. Skipped (with an error saying so) when the model is not fetched.
 */
import path from 'node:path';
import { Logger } from '../src/core/log.js';
import type { ChatMessage, GenerateChunk, ToolDefinition } from '../src/providers/llm/base.js';
import { CALL_GATE, LlamaCppModel } from '../src/providers/llm/llama-cpp.js';
import { DEFAULT_INSTRUCTIONS } from '../src/sessions/session-config.js';
import { replyRequest } from '../src/realtime/reply-request.js';
import { DEMO_TOOLS } from '../playground/src/demo-tool-definitions.js';
import { summarise, type Benchmark, type Metric } from './lib/harness.js';
import { benchLocalModel } from './lib/local-model.js';

const MODELS_DIR = path.resolve(import.meta.dirname, '../models');
/** Reply limit: a call is about 20 tokens; a reply in words is cut here (the choice is made by then). */
const MAX_OUTPUT_TOKENS = 64;

const tool = (name: string, description: string, properties: Record<string, unknown>): ToolDefinition => ({
  name,
  description,
  parameters: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false },
});
export const TOOLS = {
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
  // The playground's demo tools (playground/src/demo-tools.ts), as its page offers them.
  localTime: { name: DEMO_TOOLS[0]!.name, description: DEMO_TOOLS[0]!.description, parameters: DEMO_TOOLS[0]!.parameters },
  background: { name: DEMO_TOOLS[1]!.name, description: DEMO_TOOLS[1]!.description, parameters: DEMO_TOOLS[1]!.parameters },
};
const PLAYGROUND: ToolKey[] = ['localTime', 'background'];
type ToolKey = keyof typeof TOOLS;
type Args = Record<string, unknown>;

interface Case {
  kind: 'relevant' | 'irrelevant' | 'ambiguous' | 'no tools';
  question: string;
  tools: ToolKey[];
  /** Relevant cases: the tool to call and a check of its arguments; ambiguous ones: the tool a call may use (or none). */
  expect?: { tool: ToolKey; check: (a: Args) => boolean };
  /** Turns of the conversation before the question (a later turn); none: the session's first question. */
  before?: ChatMessage[];
}

const has = (v: unknown, re: RegExp) => typeof v === 'string' && re.test(v);
const relevant = (question: string, tools: ToolKey[], expectTool: ToolKey, check: (a: Args) => boolean): Case => ({ kind: 'relevant', question, tools, expect: { tool: expectTool, check } });
const irrelevant = (question: string, tools: ToolKey[]): Case => ({ kind: 'irrelevant', question, tools });
/** A question a tool may answer or the model may answer itself (or ask back): right = no call, or a call to `tool`. */
const ambiguous = (question: string, tools: ToolKey[], tool: ToolKey): Case => ({ kind: 'ambiguous', question, tools, expect: { tool, check: () => true } });
/** The same case asked later in a conversation, after `before`. */
const later = (before: ChatMessage[], c: Case): Case => ({ ...c, before });
/** A turn answered in words (after one, this model's own reading of a call was 0.000 whatever the next question). */
const ANSWERED_IN_WORDS: ChatMessage[] = [
  { role: 'user', content: 'What is the capital of France?' },
  { role: 'assistant', content: 'The capital of France is Paris.' },
];
/** A turn answered with a call and its output. */
const ANSWERED_BY_A_CALL: ChatMessage[] = [
  { role: 'user', content: 'What is the weather like in Paris right now?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'call_earlier', name: 'get_weather', arguments: '{"city": "Paris"}' }] },
  { role: 'tool', toolCallId: 'call_earlier', content: '{"temperature_c": 17, "conditions": "light rain"}' },
  { role: 'assistant', content: 'It is 17 degrees with light rain in Paris.' },
];

export const CASES: Case[] = [
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
  relevant("What's the weather in Berlin?", ['weather', 'translate'], 'weather', (a) => has(a.city, /berlin/i)),
  relevant('What is the time in Sydney right now?', ['time', 'weather'], 'time', (a) => has(a.timezone, /sydney/i)),
  relevant('Set a timer for 5 minutes please.', ['timer', 'music'], 'timer', (a) => a.minutes === 5),
  relevant('Play something by Taylor Swift.', ['music', 'timer'], 'music', (a) => has(a.query, /taylor swift/i)),
  relevant('Convert 20 euros to dollars.', ['currency', 'time'], 'currency', (a) => a.amount === 20 && has(a.from, /^eur$/i) && has(a.to, /^usd$/i)),
  relevant("Translate 'where is the station' into Italian.", ['translate', 'music'], 'translate', (a) => has(a.text, /where is the station/i) && has(a.target_language, /italian|^it$/i)),
  // The playground's demo tools, with the page's own questions.
  relevant('What time is it where I am?', PLAYGROUND, 'localTime', () => true),
  relevant('What day of the week is it today?', PLAYGROUND, 'localTime', () => true),
  relevant('What is the date today?', PLAYGROUND, 'localTime', () => true),
  relevant('Make the background teal.', PLAYGROUND, 'background', (a) => has(a.color, /^teal$/i)),
  relevant('Change the page colour to dark blue.', PLAYGROUND, 'background', (a) => has(a.color, /blue|navy|^#/i)),
  relevant('Can you turn the background orange?', PLAYGROUND, 'background', (a) => has(a.color, /orange/i)),
  irrelevant('Tell me a joke about cats.', ['weather', 'time']),
  irrelevant('What is the capital of Italy?', ['weather', 'timer']),
  irrelevant('Who wrote Romeo and Juliet?', ['music', 'currency']),
  irrelevant('How are you today?', ['weather', 'time', 'timer']),
  irrelevant('What is two plus two?', ['translate', 'weather']),
  irrelevant('Give me a tip for sleeping better.', ['music', 'timer']),
  irrelevant('Who painted the Mona Lisa?', ['weather', 'time']),
  irrelevant('How many legs does a spider have?', ['timer', 'music']),
  irrelevant('What is photosynthesis?', ['currency', 'translate']),
  irrelevant('Can you recommend a good book?', ['weather', 'timer']),
  irrelevant('How far is the Moon from the Earth?', ['time', 'weather']),
  irrelevant('What is the boiling point of water?', ['weather', 'timer']),
  // A newcomer's first questions on the playground, its demo tools on.
  irrelevant('What is the capital of France?', PLAYGROUND),
  irrelevant('Give me one tip for sleeping better.', PLAYGROUND),
  irrelevant('What is the tallest mountain in the world?', PLAYGROUND),
  irrelevant('What does a bee make?', PLAYGROUND),
  irrelevant('Hello!', PLAYGROUND),
  irrelevant('Thank you, that is all.', PLAYGROUND),
  // Later in a conversation: after a turn answered in words, or one answered by a call.
  later(ANSWERED_IN_WORDS, relevant('What time is it where I am?', PLAYGROUND, 'localTime', () => true)),
  later(ANSWERED_IN_WORDS, relevant('Make the background teal.', PLAYGROUND, 'background', (a) => has(a.color, /^teal$/i))),
  later(ANSWERED_IN_WORDS, relevant('What time is it in Tokyo?', ['weather', 'time'], 'time', (a) => has(a.timezone, /tokyo/i))),
  later(ANSWERED_IN_WORDS, relevant('Set a timer for ten minutes.', ['timer', 'weather'], 'timer', (a) => a.minutes === 10)),
  later(ANSWERED_IN_WORDS, relevant('Play some jazz music.', ['music', 'weather'], 'music', (a) => has(a.query, /jazz/i))),
  later(ANSWERED_IN_WORDS, relevant('How much is 100 US dollars in euros?', ['currency', 'weather'], 'currency', (a) => a.amount === 100 && has(a.from, /^usd$/i) && has(a.to, /^eur$/i))),
  later(ANSWERED_IN_WORDS, relevant("What's the weather in Berlin?", ['weather', 'time'], 'weather', (a) => has(a.city, /berlin/i))),
  later(ANSWERED_IN_WORDS, relevant("Translate 'good morning' into Spanish.", ['translate', 'weather'], 'translate', (a) => has(a.text, /good morning/i) && has(a.target_language, /spanish|^es$/i))),
  later(ANSWERED_BY_A_CALL, relevant('What time is it in Tokyo?', ['weather', 'time'], 'time', (a) => has(a.timezone, /tokyo/i))),
  later(ANSWERED_BY_A_CALL, relevant('And what is the weather in London?', ['weather', 'time'], 'weather', (a) => has(a.city, /london/i))),
  later(ANSWERED_IN_WORDS, irrelevant('Give me one tip for sleeping better.', PLAYGROUND)),
  later(ANSWERED_IN_WORDS, irrelevant('What is the tallest mountain in the world?', PLAYGROUND)),
  later(ANSWERED_IN_WORDS, irrelevant('Thank you!', PLAYGROUND)),
  later(ANSWERED_IN_WORDS, irrelevant('Who wrote Romeo and Juliet?', ['music', 'currency'])),
  later(ANSWERED_IN_WORDS, irrelevant('What is two plus two?', ['translate', 'weather'])),
  later(ANSWERED_BY_A_CALL, irrelevant('Who painted the Mona Lisa?', ['weather', 'time'])),
  later(ANSWERED_BY_A_CALL, irrelevant('Thanks, that is all.', ['weather', 'time'])),
  ambiguous('Is it cold outside?', ['weather', 'time'], 'weather'),
  ambiguous('Do I need an umbrella today?', ['weather', 'localTime'], 'weather'),
  ambiguous('I am bored.', ['music', 'timer'], 'music'),
  ambiguous('What is the time difference between Paris and New York?', ['time', 'weather'], 'time'),
  ambiguous('Remind me in ten minutes.', ['timer', 'music'], 'timer'),
  ambiguous('Say hello in French.', ['translate', 'music'], 'translate'),
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
  /** A later question that needs the output (the reply to the first given as `answer`): right = no call and `uses` in the reply. */
  then?: { answer: string; question: string; uses: RegExp };
}

const FOLLOW_UPS: FollowUp[] = [
  { question: 'What is the weather like in Paris right now?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Paris' } }, output: '{"temperature_c": 17, "conditions": "light rain"}', uses: /17|rain/i },
  { question: 'How hot is it in Cairo?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Cairo' } }, output: '{"temperature_c": 35, "conditions": "sunny"}', uses: /35/ },
  { question: 'What time is it in Tokyo?', tools: ['weather', 'time'], call: { tool: 'time', arguments: { timezone: 'Asia/Tokyo' } }, output: '{"time": "14:05"}', uses: /14[:.]05|2[:.]05|five past two/i },
  { question: 'How much is 100 US dollars in euros?', tools: ['currency', 'weather'], call: { tool: 'currency', arguments: { amount: 100, from: 'USD', to: 'EUR' } }, output: '{"result": 92.4, "currency": "EUR"}', uses: /92/ },
  { question: "Translate 'good morning' into Spanish.", tools: ['translate', 'weather'], call: { tool: 'translate', arguments: { text: 'good morning', target_language: 'Spanish' } }, output: '{"translation": "buenos días"}', uses: /buenos d[ií]as/i },
  { question: 'Set a timer for ten minutes.', tools: ['timer', 'weather'], call: { tool: 'timer', arguments: { minutes: 10 } }, output: '{"ok": true, "ends_at": "10:15"}', uses: /10[:.]15|ten minutes|10 minutes/i },
  // The playground's demo tools, with outputs as the page makes them.
  { question: 'What time is it where I am?', tools: PLAYGROUND, call: { tool: 'localTime', arguments: {} }, output: '{"date":"2026-12-02","time":"09:41","weekday":"Wednesday","time_zone":"Europe/Paris","utc_offset":"+01:00"}', uses: /9[:.]41|nine forty[- ]one/i },
  { question: 'Make the background teal.', tools: PLAYGROUND, call: { tool: 'background', arguments: { color: 'teal' } }, output: '{"ok":true,"color":"teal"}', uses: /teal/i },
  // A later question answered from the earlier output.
  { question: 'What is the weather like in Paris right now?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Paris' } }, output: '{"temperature_c": 17, "conditions": "light rain"}', uses: /17|rain/i, then: { answer: 'It is 17 degrees with light rain in Paris.', question: 'So should I take an umbrella?', uses: /\byes\b|rain/i } },
  { question: 'What time is it in Tokyo?', tools: ['weather', 'time'], call: { tool: 'time', arguments: { timezone: 'Asia/Tokyo' } }, output: '{"time": "14:05"}', uses: /14[:.]05/, then: { answer: 'It is 14:05 in Tokyo.', question: 'Is it morning or afternoon there?', uses: /(?<!morning or )afternoon/i } },
  { question: 'How hot is it in Cairo?', tools: ['weather', 'time'], call: { tool: 'weather', arguments: { city: 'Cairo' } }, output: '{"temperature_c": 35, "conditions": "sunny"}', uses: /35/, then: { answer: 'It is 35 degrees and sunny in Cairo.', question: 'Is that hot?', uses: /\byes\b|\bhot\b|warm/i } },
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
  /** The call gate's reading: the model's probability of opening with a call (null: no gate, e.g. no tools). */
  callProbability: number | null;
}

async function ask(model: LlamaCppModel, messages: ChatMessage[], tools: ToolKey[]): Promise<Reply> {
  const started = performance.now();
  const reply: Reply = { calls: [], text: '', callMs: null, textMs: null, totalMs: 0, evaluatedTokens: 0, callProbability: null };
  model.lastCallProbability = null;
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
  reply.callProbability = model.lastCallProbability;
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

/** What a spoken reply must not hold: JSON, markup or code (an output read back counts). */
const SPOKEN_MARKUP = /[{}<>`]|\*\*|^\s*#/m;

/** A call written out as text: the JSON this model writes for calls, or the template's tag. */
const CALL_AS_TEXT = /\{\s*"name"\s*:|<tool_call>/;

type Outcome = 'right call' | 'wrong arguments' | 'wrong tool' | 'missed call' | 'no call' | 'plausible call' | 'spurious call' | 'call as text';

function judge(c: Case, r: Reply): Outcome {
  const call = r.calls[0];
  if (c.kind === 'relevant') {
    if (!call) return 'missed call';
    if (call.name !== TOOLS[c.expect!.tool].name) return 'wrong tool';
    return call.args && c.expect!.check(call.args) ? 'right call' : 'wrong arguments';
  }
  if (c.kind === 'ambiguous') return !call ? 'no call' : call.name === TOOLS[c.expect!.tool].name ? 'plausible call' : 'wrong tool';
  if (call) return 'spurious call';
  return c.kind === 'no tools' && CALL_AS_TEXT.test(r.text) ? 'call as text' : 'no call';
}

/**
 * The call gate's curve from a run with the gate off (TOOL_BENCH_CALL_GATE=0): for each gate, the
 * relevant cases still called right (the model's choice kept where its probability reached the
 * gate), the irrelevant ones still called, the ambiguous ones called.
 */
function gateCurve(results: { c: Case; r: Reply; outcome: Outcome }[]) {
  const pct = (n: number, d: number) => (d === 0 ? 0 : Math.round((1000 * n) / d) / 10);
  const kept = (x: { r: Reply }, gate: number) => (x.r.callProbability ?? 1) >= gate;
  const of = (kind: Case['kind']) => results.filter((x) => x.c.kind === kind);
  return [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95].map((gate) => ({
    gate,
    right: pct(of('relevant').filter((x) => x.outcome === 'right call' && kept(x, gate)).length, of('relevant').length),
    spurious: pct(of('irrelevant').filter((x) => x.outcome === 'spurious call' && kept(x, gate)).length, of('irrelevant').length),
    ambiguousCalls: pct(of('ambiguous').filter((x) => x.r.calls.length > 0 && kept(x, gate)).length, of('ambiguous').length),
  }));
}

const bench: Benchmark = {
  name: 'tool-calling',
  description: 'local model (llama-cpp) function calling: right tool and arguments, misses, spurious calls, latency',
  async run(ctx) {
    const { file } = benchLocalModel('TOOL_BENCH', MODELS_DIR);
    // The server's defaults (LLM_THREADS, LLM_CONTEXT_TOKENS, LLM_PARALLEL).
    // TOOL_BENCH_ONLY=follow-ups: the follow-ups alone (a quick look at the answers after outputs).
    const only = process.env.TOOL_BENCH_ONLY;
    const callGate = process.env.TOOL_BENCH_CALL_GATE ? Number(process.env.TOOL_BENCH_CALL_GATE) : undefined;
    const model = new LlamaCppModel({ modelFile: file, threads: 1, contextTokens: 4096, parallel: 2, maxOutputTokens: MAX_OUTPUT_TOKENS, log: new Logger('warn'), callGate });
    // As the engine asks for a spoken reply (replyRequest(): the instructions and the spoken-reply guidance).
    const system: ChatMessage = replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [], MAX_OUTPUT_TOKENS).messages[0]!;
    const results: { c: Case; r: Reply; outcome: Outcome }[] = [];
    const followUps: { f: FollowUp; r: Reply; used: boolean }[] = [];
    try {
      await model.load();
      for (let run = 0; run < ctx.runs; run++) {
        for (const c of only === 'follow-ups' ? [] : CASES) {
          // As a session does when its tools are set (not timed: the user is still speaking or typing).
          await model.prepare({ messages: [system], tools: c.tools.map((k) => TOOLS[k]), toolChoice: 'auto' });
          const r = await ask(model, [system, ...(c.before ?? []), { role: 'user', content: c.question }], c.tools);
          const outcome = judge(c, r);
          results.push({ c, r, outcome });
          if (run === 0) {
            const got = r.calls.length ? r.calls.map((k) => `${k.name}(${JSON.stringify(k.args)})`).join(' ') : JSON.stringify(r.text.slice(0, 80));
            ctx.log(`${c.kind.padEnd(10)} ${outcome.padEnd(15)} p=${r.callProbability?.toFixed(3) ?? '-    '} ${Math.round(r.totalMs).toString().padStart(6)} ms ${r.evaluatedTokens.toString().padStart(4)} tok  ${c.question} → ${got}`);
          }
        }
        for (const f of FOLLOW_UPS) {
          const t = TOOLS[f.call.tool];
          // As in a session: the question first (its call evaluated on a sequence), then the reply to
          // the output, which lands where the call was and evaluates only what follows it.
          await model.prepare({ messages: [system], tools: f.tools.map((k) => TOOLS[k]), toolChoice: 'auto' });
          const asked = await ask(model, [system, { role: 'user', content: f.question }], f.tools);
          const own = asked.calls[0]?.name === t.name && asked.calls[0].args ? asked.calls[0].args : f.call.arguments;
          const messages: ChatMessage[] = [
            system,
            { role: 'user', content: f.question },
            { role: 'assistant', content: '', toolCalls: [{ id: 'call_bench', name: t.name, arguments: JSON.stringify(own) }] },
            { role: 'tool', toolCallId: 'call_bench', content: f.output },
          ];
          if (f.then) messages.push({ role: 'assistant', content: f.then.answer }, { role: 'user', content: f.then.question });
          const r = await ask(model, messages, f.tools);
          const used = r.calls.length === 0 && (f.then?.uses ?? f.uses).test(r.text) && !SPOKEN_MARKUP.test(r.text);
          followUps.push({ f, r, used });
          if (run === 0) ctx.log(`follow-up  ${(used ? 'uses output' : 'does not').padEnd(15)} p=${r.callProbability?.toFixed(3) ?? '-    '} ${Math.round(r.totalMs).toString().padStart(6)} ms  ${f.then ? f.then.question : f.question} + ${f.output} → ${r.calls.length ? r.calls.map((k) => k.name).join(' ') : JSON.stringify(r.text.slice(0, 120))}`);
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
    const amb = of('ambiguous');
    const laterRel = rel.filter((x) => x.c.before);
    const laterIrr = irr.filter((x) => x.c.before);
    const spoken = [...results.filter((x) => x.r.calls.length === 0), ...followUps.filter((x) => x.r.calls.length === 0)];
    const markup = spoken.filter((x) => CALL_AS_TEXT.test(x.r.text) || SPOKEN_MARKUP.test(x.r.text)).length;
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
      ['right call, later in a conversation (relevant)', pct(count(laterRel, 'right call'), laterRel.length), `${count(laterRel, 'right call')}/${laterRel.length}`],
      ['spurious call, later in a conversation (irrelevant tools)', pct(count(laterIrr, 'spurious call'), laterIrr.length), `${count(laterIrr, 'spurious call')}/${laterIrr.length}`],
      ['answer uses the output (follow-ups)', pct(followUps.filter((x) => x.used).length, followUps.length), `${followUps.filter((x) => x.used).length}/${followUps.length}`],
      ['ambiguous: no call or the plausible tool', pct(amb.length - count(amb, 'wrong tool'), amb.length), `${amb.length - count(amb, 'wrong tool')}/${amb.length}`],
      ['ambiguous: a call', pct(count(amb, 'plausible call') + count(amb, 'wrong tool'), amb.length), `${count(amb, 'plausible call') + count(amb, 'wrong tool')}/${amb.length}`],
      ['replies in words with JSON, markup or tool syntax', pct(markup, spoken.length), `${markup}/${spoken.length}`],
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
    const curve = callGate === 0 ? gateCurve(results) : [];
    if (curve.length) {
      // Ungated choices: a gate t keeps a call only where the model's probability was at least t.
      ctx.log('');
      ctx.log('| call gate | right call (relevant) % | spurious call (irrelevant) % | call (ambiguous) % |');
      ctx.log('|---|---|---|---|');
      for (const c of curve) ctx.log(`| ${c.gate} | ${c.right} | ${c.spurious} | ${c.ambiguousCalls} |`);
    }

    const metrics: Metric[] = [
      ...rows.map(([name, value]) => summarise(name, '%', [value])),
      summarise('request → tool_call_start', 'ms', callMs),
      summarise('request → first text, replies in words', 'ms', textMs),
      summarise('follow-up: request → first text (the output sent → the answer starts)', 'ms', followUps.flatMap((x) => (x.r.textMs === null ? [] : [x.r.textMs]))),
      summarise('follow-up: request → end of reply', 'ms', followUps.map((x) => x.r.totalMs)),
      summarise('prompt tokens evaluated per request', 'tokens', evaluated),
    ];
    return {
      params: {
        model: path.basename(file),
        instructions: system.content,
        tool_choice: 'auto',
        threads: 1,
        context_tokens: 4096,
        sequences: 2,
        max_output_tokens: MAX_OUTPUT_TOKENS,
        cases: { relevant: rel.length / ctx.runs, irrelevant: irr.length / ctx.runs, no_tools: none.length / ctx.runs, follow_ups: FOLLOW_UPS.length },
        runs: ctx.runs,
        call_gate: callGate ?? CALL_GATE,
        ...(curve.length ? { gate_curve: curve } : {}),
        call_probabilities: results.map((x) => ({ kind: x.c.kind, question: x.c.question, p: x.r.callProbability, outcome: x.outcome })),
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
