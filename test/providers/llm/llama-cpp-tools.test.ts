/**
 * Function calling through the local GGUF provider (src/providers/llm/llama-cpp.ts): the mapping
 * of tool calls and their outputs into node-llama-cpp's chat history, tool_choice to the functions
 * given, tool schemas to the grammar's subset (none of which needs the model), and, with the real
 * default model (models/manifest.json's llm-default, fetched by npm run setup:models; skipped with
 * the reason printed when absent), calls streamed by the chunk contract for each tool_choice (also
 * one the model writes as a JSON code block), an abort in calling mode, and a reply that uses a
 * call's output. Generation is greedy (node-llama-cpp's default temperature 0), so each case gives
 * the same reply on every run.
 */
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { modelPath } from '../../../src/models/manifest.js';
import { Logger } from '../../../src/core/log.js';
import type { ChatMessage, GenerateChunk, GenerateRequest, ToolDefinition } from '../../../src/providers/llm/base.js';
import { ProviderError } from '../../../src/providers/llm/base.js';
import { DEFAULT_LLM_MODEL_NAME } from '../../../src/providers/llm/index.js';
import { CALL_GATE, LlamaCppModel, functionsFor, toGrammarSchema, toHistory } from '../../../src/providers/llm/llama-cpp.js';
import { copiedExamples, heardWords, namesIn, outputNote, said, standaloneQuestion } from '../../../src/providers/llm/llama-cpp-tools.js';
import { DEMO_TOOLS } from '../../../playground/src/demo-tool-definitions.js';
import { replyRequest } from '../../../src/realtime/reply-request.js';
import { DEFAULT_INSTRUCTIONS } from '../../../src/sessions/session-config.js';

const MODELS_DIR = path.resolve(import.meta.dirname, '../../../models');
const MODEL_FILE = modelPath(MODELS_DIR, DEFAULT_LLM_MODEL_NAME);

interface Ctx {
  model: LlamaCppModel;
}

const test = suite<Ctx>('LlamaCppModel tools', {} as Ctx);
/** With the model absent, its tests are registered as skipped (uvu counts them) and say why. */
const modelTest = MODEL_FILE ? test : test.skip;
if (!MODEL_FILE) {
  process.stdout.write(`LlamaCppModel tools: skipping the real-model tests: '${DEFAULT_LLM_MODEL_NAME}' is not fetched (run npm run setup:models)\n`);
}

test.before(async (ctx) => {
  if (!MODEL_FILE) return;
  ctx.model = new LlamaCppModel({ modelFile: MODEL_FILE, threads: 1, contextTokens: 2048, parallel: 2, maxOutputTokens: 48, log: new Logger('warn') });
  await ctx.model.load();
});

test.after(async (ctx) => {
  await ctx.model?.close();
});

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'Get the current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city name, e.g. Paris' } }, required: ['city'], additionalProperties: false },
};
const TIME: ToolDefinition = {
  name: 'get_time',
  description: 'Get the current local time in a time zone.',
  parameters: { type: 'object', properties: { timezone: { type: 'string', description: 'IANA time zone, e.g. Europe/Paris' } }, required: ['timezone'] },
};
const SYSTEM: ChatMessage = { role: 'system', content: 'You are a friendly avatar. Answer in one short spoken sentence.' };
const WEATHER_QUESTION: ChatMessage = { role: 'user', content: 'What is the weather like in Paris right now?' };

test('toHistory() puts tool calls and their outputs in the model turn that made them, and a note on the outputs after it', () => {
  const history = toHistory([
    SYSTEM,
    WEATHER_QUESTION,
    { role: 'assistant', content: 'Let me check.', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' }, { id: 'call_2', name: 'get_time', arguments: '{"timezone": "Europe/Paris"}' }] },
    { role: 'tool', toolCallId: 'call_2', content: '14:05' },
    { role: 'tool', toolCallId: 'call_1', content: '{"temperature_c": 17}' },
    { role: 'assistant', content: 'It is 17 degrees at 14:05.' },
    { role: 'user', content: 'Thanks!' },
  ]);
  assert.equal(history, [
    { type: 'system', text: SYSTEM.content },
    { type: 'user', text: WEATHER_QUESTION.content },
    {
      type: 'model',
      response: [
        'Let me check.',
        { type: 'functionCall', name: 'get_weather', params: { city: 'Paris' }, result: { temperature_c: 17 }, startsNewChunk: true },
        { type: 'functionCall', name: 'get_time', params: { timezone: 'Europe/Paris' }, result: '14:05' },
      ],
    },
    // In the order the outputs came; the answer that followed them is the model's next turn.
    { type: 'user', text: '(get_time and get_weather returned the above. Answer my request with them in one short spoken sentence, saying what they returned.)' },
    { type: 'model', response: ['It is 17 degrees at 14:05.'] },
    { type: 'user', text: 'Thanks!' },
  ]);
});

test('toHistory() ends with the note when the reply follows the outputs; an output for a call cut off is not noted', () => {
  const history = toHistory([
    WEATHER_QUESTION,
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' }] },
    { role: 'tool', toolCallId: 'call_1', content: ' {"temperature_c": 17}\n' },
  ]);
  assert.equal(history.at(-1), { type: 'user', text: '(get_weather returned the above. Answer my request with it in one short spoken sentence, saying what it returned.)' });
  assert.equal(outputNote(['a', 'b']), '(a and b returned the above. Answer my request with them in one short spoken sentence, saying what they returned.)');
});

test('toHistory() keeps a call without output (result undefined) and makes an output without its call a user turn', () => {
  const history = toHistory([
    { role: 'tool', toolCallId: 'call_gone', content: 'sunny' }, // its call was cut off with older turns
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: 'not json' }] },
  ]);
  assert.equal(history, [
    { type: 'user', text: 'Function output: sunny' },
    { type: 'model', response: [{ type: 'functionCall', name: 'get_weather', params: 'not json', result: undefined, startsNewChunk: true }] },
  ]);
});

test('standaloneQuestion(): the instructions and the newest question, only when turns come before it and it is the user speaking', () => {
  const system: ChatMessage = { role: 'system', content: 'Be brief.' };
  const capital: ChatMessage = { role: 'user', content: 'What is the capital of France?' };
  const answer: ChatMessage = { role: 'assistant', content: 'Paris.' };
  const time: ChatMessage = { role: 'user', content: 'What time is it where I am?' };
  assert.equal(standaloneQuestion(toHistory([system, capital, answer, time])), [
    { type: 'system', text: 'Be brief.' },
    { type: 'user', text: 'What time is it where I am?' },
  ]);
  assert.equal(standaloneQuestion(toHistory([capital, answer, time])), [{ type: 'user', text: 'What time is it where I am?' }], 'no instructions: the question alone');
  assert.is(standaloneQuestion(toHistory([system, time])), null, 'the question is already alone');
  const called: ChatMessage[] = [
    system,
    time,
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_local_time', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'call_1', content: '{"time":"09:41"}' },
  ];
  assert.is(standaloneQuestion(toHistory(called)), null, 'the reply follows an output (its note ends the history)');
});

test('copiedExamples(): a value of a parameter with an example that says nothing the conversation says; codes, said values and parameters without examples are not judged', () => {
  const translate = { type: 'object', properties: { text: { type: 'string' }, target_language: { type: 'string', description: 'The language to translate into, e.g. French' } } };
  const zone = { type: 'object', properties: { timezone: { type: 'string', description: 'IANA time zone, e.g. Europe/Paris' } } };
  const currency = { type: 'object', properties: { from: { type: 'string', description: 'ISO 4217 code, e.g. USD' } } };
  const trip = { type: 'object', properties: { trip: { type: 'object', properties: { city: { type: 'string', examples: ['Lisbon'] } } } } };
  const heard = (text: string) => heardWords([{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: text }]);
  // The 0.5B model's fill-ins: the example where the user gave no value.
  assert.equal(copiedExamples({ text: 'Two plus two', target_language: 'French' }, translate, heard('What is two plus two?')), [{ path: 'target_language', words: ['french'] }]);
  assert.equal(copiedExamples({ timezone: 'Australia/Paris' }, zone, heard('What is the time in Sydney right now?')), [{ path: 'timezone', words: ['paris'] }]);
  assert.equal(copiedExamples({ trip: { city: 'Lisbon' } }, trip, heard('Book me a trip.')), [{ path: 'trip.city', words: ['lisbon'] }]);
  // The example itself when the user said it; a value the conversation gives; a code.
  assert.equal(copiedExamples({ text: 'Hello', target_language: 'French' }, translate, heard('Say hello in French.')), []);
  assert.equal(copiedExamples({ timezone: 'Europe/Paris' }, zone, heard('What time is it in Paris?')), []);
  assert.equal(copiedExamples({ timezone: 'Australia/Sydney' }, zone, heard('What is the time in Sydney right now?')), []);
  assert.equal(copiedExamples({ from: 'USD' }, currency, heard('How much is 100 dollars in pounds?')), []);
  // A value of the example's kind that the conversation does not say is filled in as well (the
  // same weights on an Intel Xeon: "What is two plus two?" → target_language "English"): its own
  // words are banned from the second try.
  assert.equal(copiedExamples({ text: 'Two plus two', target_language: 'English' }, translate, heard('What is two plus two?')), [{ path: 'target_language', words: ['english'] }]);
  assert.equal(copiedExamples({ timezone: 'Asia/Tokyo' }, zone, heard('What time is it?')), [{ path: 'timezone', words: ['asia', 'tokyo'] }]);
  // A parameter with no example is not judged (a guess the model may make: "Is it cold outside?" → city "London").
  const weather = { type: 'object', properties: { city: { type: 'string' } } };
  assert.equal(copiedExamples({ city: 'London' }, weather, heard('Is it cold outside?')), []);
  assert.equal(copiedExamples('not an object', zone, heard('What time is it?')), []);
});

test('said(): a word of the value the conversation says, or one of four letters or more that starts the other ("euro"/"euros"); namesIn(): the capitalised words after the first', () => {
  const heard = heardWords([{ role: 'user', content: 'Convert 20 euros, please.' }, { role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'f', arguments: '{"city":"Oslo"}' }] }]);
  assert.ok(said('EURO', heard));
  assert.ok(said('Oslo, Norway', heard));
  assert.not.ok(said('Spanish', heard));
  assert.not.ok(said('eu', heard)); // words of under three letters are not words here
  assert.equal(namesIn([{ role: 'user', content: 'Is it raining in London?' }, { role: 'assistant', content: 'Yes.' }, { role: 'user', content: 'What time is it in New York and Tokyo?' }]), ['New', 'York', 'Tokyo']);
  assert.equal(namesIn([{ role: 'user', content: 'What is two plus two?' }]), []);
});

test('functionsFor() maps tool_choice: none gives nothing, auto all, required forces, a name gives only that one', () => {
  const tools = [WEATHER, TIME];
  assert.equal(functionsFor({ tools, toolChoice: 'none' }), { functions: undefined, force: false });
  assert.equal(functionsFor({ tools: [] }), { functions: undefined, force: false });
  const auto = functionsFor({ tools });
  assert.equal([Object.keys(auto.functions ?? {}), auto.force], [['get_weather', 'get_time'], false]);
  const required = functionsFor({ tools, toolChoice: 'required' });
  assert.equal([Object.keys(required.functions ?? {}), required.force], [['get_weather', 'get_time'], true]);
  const named = functionsFor({ tools, toolChoice: { type: 'function', name: 'get_time' } });
  assert.equal([Object.keys(named.functions ?? {}), named.force], [['get_time'], true]);
  try {
    functionsFor({ tools, toolChoice: { type: 'function', name: 'get_stock' } });
    assert.unreachable();
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).status, 400);
  }
});

test('toGrammarSchema() turns what the grammar subset reads as null into what it can generate', () => {
  assert.equal(
    toGrammarSchema({
      type: 'object',
      description: 'args',
      properties: {
        unit: { anyOf: [{ type: 'string', enum: ['C', 'F'] }, { type: 'null' }] },
        when: { type: ['string', 'null'], format: 'date' },
        extra: { type: 'object' },
        tags: { type: 'array', items: { type: 'string', pattern: '^[a-z]+$' }, maxItems: 3 },
        email: { type: 'string', format: 'email', minLength: 3 },
        free: {},
      },
      required: ['unit'],
      additionalProperties: false,
    }),
    {
      type: 'object',
      description: 'args',
      properties: {
        unit: { oneOf: [{ enum: ['C', 'F'] }, { type: 'null' }] },
        when: { oneOf: [{ type: 'string', format: 'date' }, { type: 'null' }] },
        extra: { type: 'object', additionalProperties: true },
        tags: { type: 'array', items: { type: 'string' }, maxItems: 3 },
        email: { type: 'string', minLength: 3 },
        free: { oneOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'object', additionalProperties: true }, { type: 'array' }] },
      },
      additionalProperties: false,
      required: ['unit'],
    },
  );
});

/** Runs a request to its end; checks the stream contract and returns the text, the calls and the finish reason. */
async function generate(model: LlamaCppModel, request: Partial<GenerateRequest> & Pick<GenerateRequest, 'messages'>) {
  const chunks: GenerateChunk[] = [];
  for await (const c of model.generate({ maxOutputTokens: null, signal: new AbortController().signal, ...request })) chunks.push(c);
  assert.is(chunks.filter((c) => c.type === 'done').length, 1, 'exactly one done');
  const done = chunks.at(-1);
  assert.ok(done?.type === 'done', 'done comes last');
  const calls: { callId: string; name: string; arguments: string }[] = [];
  let text = '';
  for (const c of chunks) {
    if (c.type === 'text') text += c.text;
    else if (c.type === 'tool_call_start') {
      assert.is(c.index, calls.length, 'calls are announced in order');
      calls.push({ callId: c.callId, name: c.name, arguments: '' });
    } else if (c.type === 'tool_call_arguments') {
      const call = calls[c.index];
      assert.ok(call, `arguments of call ${c.index} after its start`);
      call.arguments += c.delta;
    }
  }
  for (const call of calls) {
    assert.match(call.callId, /^call_[0-9A-Za-z]{24}$/);
    JSON.parse(call.arguments); // valid JSON
  }
  return { text, calls, finishReason: done.type === 'done' ? done.finishReason : null, chunks };
}

modelTest('tool_choice auto: a weather question calls get_weather with the city, then finishes with tool_calls', async (ctx) => {
  const started = performance.now();
  const { calls, finishReason } = await generate(ctx.model, { messages: [SYSTEM, WEATHER_QUESTION], tools: [WEATHER, TIME] });
  process.stdout.write(`LlamaCppModel tools: call after ${Math.round(performance.now() - started)} ms\n`);
  assert.is(calls.length, 1);
  assert.is(calls[0]!.name, 'get_weather');
  assert.equal(JSON.parse(calls[0]!.arguments), { city: 'Paris' });
  assert.is(finishReason, 'tool_calls');
});

// The playground's demo tools (playground/src/demo-tool-definitions.ts), which the page offers by default.
const PLAYGROUND_TOOLS: ToolDefinition[] = DEMO_TOOLS.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));

modelTest('the call gate: with the playground tools, a question none fits is answered in words, one that fits calls', async (ctx) => {
  const system: ChatMessage = { role: 'system', content: 'You are a helpful assistant.' };
  // Ungated, this model called get_local_time for it (the tool bench, TOOL_BENCH_CALL_GATE=0).
  const capital = await generate(ctx.model, { messages: [system, { role: 'user', content: 'What is the capital of France?' }], tools: PLAYGROUND_TOOLS });
  const leaning = ctx.model.lastCallProbability;
  assert.ok(leaning !== null && leaning > 0 && leaning < CALL_GATE, `call probability ${leaning}`);
  assert.is(capital.calls.length, 0);
  assert.match(capital.text, /Paris/);
  assert.not.match(capital.text, /[{}<>`]/);
  const time = await generate(ctx.model, { messages: [system, { role: 'user', content: 'What time is it where I am?' }], tools: PLAYGROUND_TOOLS });
  assert.ok((ctx.model.lastCallProbability ?? 0) >= CALL_GATE, `call probability ${ctx.model.lastCallProbability}`);
  assert.equal(time.calls.map((c) => c.name), ['get_local_time']);
});

modelTest('a call the model writes as a JSON code block instead of its <tool_call> tag is a call, not text', async (ctx) => {
  const timer: ToolDefinition = { name: 'set_timer', description: 'Start a countdown timer.', parameters: { type: 'object', properties: { minutes: { type: 'integer' } }, required: ['minutes'] } };
  // Without the alternate call starts, this reply was the text "```json\n{\n  \"name\": \"set_timer\", ...".
  const { text, calls } = await generate(ctx.model, { messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Set a timer for ten minutes.' }], tools: [timer, WEATHER] });
  assert.is(text, '');
  assert.equal(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['set_timer', { minutes: 10 }]]);
});

modelTest('tool_choice none: no call, a text reply', async (ctx) => {
  const { text, calls, finishReason } = await generate(ctx.model, { messages: [SYSTEM, WEATHER_QUESTION], tools: [WEATHER, TIME], toolChoice: 'none' });
  assert.is(calls.length, 0);
  assert.ok(text.trim().length > 0);
  assert.is(finishReason, 'stop');
});

modelTest('tool_choice required: a call even for a question no tool answers', async (ctx) => {
  const { text, calls, finishReason } = await generate(ctx.model, {
    messages: [SYSTEM, { role: 'user', content: 'Tell me a joke about cats.' }],
    tools: [WEATHER, TIME],
    toolChoice: 'required',
  });
  assert.is(text, '');
  assert.is(calls.length, 1);
  assert.ok(['get_weather', 'get_time'].includes(calls[0]!.name), calls[0]!.name);
  assert.is(finishReason, 'tool_calls');
});

modelTest('tool_choice naming a function: a call to that function', async (ctx) => {
  const { calls } = await generate(ctx.model, { messages: [SYSTEM, WEATHER_QUESTION], tools: [WEATHER, TIME], toolChoice: { type: 'function', name: 'get_time' } });
  assert.equal(calls.map((c) => c.name), ['get_time']);
  assert.ok(typeof JSON.parse(calls[0]!.arguments).timezone === 'string');
});

modelTest("aborting a reply that must call ends it with 'aborted', no throw (node-llama-cpp throws in calling mode)", async (ctx) => {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 200); // the prompt (about 200 tokens, new) takes seconds
  const chunks: GenerateChunk[] = [];
  try {
    const request = { messages: [SYSTEM, { role: 'user' as const, content: 'Is it sunny in Lisbon today?' }], tools: [WEATHER, TIME], toolChoice: 'required' as const };
    for await (const c of ctx.model.generate({ ...request, maxOutputTokens: null, signal: controller.signal })) chunks.push(c);
  } finally {
    clearTimeout(timer);
  }
  assert.equal(chunks, [{ type: 'done', finishReason: 'aborted', usage: null }]);
});

modelTest('a session prepared with tools: its first question evaluates only itself; after a turn answered in words, a question a tool fits still calls', async (ctx) => {
  const system: ChatMessage = { role: 'system', content: 'You are a helpful assistant. Keep answers short.' };
  await ctx.model.prepare({ messages: [system], tools: PLAYGROUND_TOOLS, toolChoice: 'auto' });
  const capital: ChatMessage = { role: 'user', content: 'What is the capital of France?' };
  const before = { ...ctx.model.promptStats };
  const first = await generate(ctx.model, { messages: [system, capital], tools: PLAYGROUND_TOOLS });
  const evaluated = ctx.model.promptStats.promptTokens - before.promptTokens - (ctx.model.promptStats.reusedTokens - before.reusedTokens);
  // The instructions and the tools' description (~330 tokens) were evaluated ahead; the question and the headers follow.
  assert.ok(evaluated <= 24, `${evaluated} prompt tokens evaluated by the first reply`);
  assert.is(first.calls.length, 0);
  assert.match(first.text, /Paris/);
  const conversation: ChatMessage[] = [system, capital, { role: 'assistant', content: first.text }];
  // Read with the conversation before it, this model's probability of calling is 0.000 here (0.90 asked first).
  const time = await generate(ctx.model, { messages: [...conversation, { role: 'user', content: 'What time is it where I am?' }], tools: PLAYGROUND_TOOLS });
  assert.equal(time.calls.map((c) => c.name), ['get_local_time']);
  assert.ok((ctx.model.lastCallProbability ?? 0) >= CALL_GATE, `call probability ${ctx.model.lastCallProbability}`);
  const tip = await generate(ctx.model, { messages: [...conversation, { role: 'user', content: 'Give me one tip for sleeping better.' }], tools: PLAYGROUND_TOOLS });
  assert.is(tip.calls.length, 0, `no call for a question no tool fits: ${JSON.stringify(tip.text)}`);
  assert.not.match(tip.text, /[{}<>`]/);
});

modelTest('an argument copied from its example: tried again with the names the user said, else answered in words', async (ctx) => {
  const translate: ToolDefinition = {
    name: 'translate',
    description: 'Translate a text into another language.',
    parameters: { type: 'object', properties: { text: { type: 'string' }, target_language: { type: 'string', description: 'The language to translate into, e.g. French' } }, required: ['text', 'target_language'] },
  };
  // As a spoken session asks (the default instructions and the spoken-reply guidance). Without this
  // check the model called translate("Two plus two", "French"), 0.97 sure. The check is narrow: a
  // value unlike the example passes (under this file's SYSTEM the model writes "English" at once).
  const spoken = replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [], 'inf').messages[0]!;
  const sum = await generate(ctx.model, { messages: [spoken, { role: 'user', content: 'What is two plus two?' }], tools: [translate, WEATHER] });
  assert.is(sum.calls.length, 0, `no call: ${JSON.stringify(sum.calls)}`);
  assert.ok(sum.text.trim().length > 0);
  assert.not.match(sum.text, /[{}<>`]/);
  // Ungated, "Australia/Paris" (the example's city); tried again, the city the user named.
  const sydney = await generate(ctx.model, { messages: [spoken, { role: 'user', content: 'What is the time in Sydney right now?' }], tools: [TIME, WEATHER] });
  assert.equal(sydney.calls.map((c) => c.name), ['get_time']);
  assert.match(JSON.parse(sydney.calls[0]!.arguments).timezone, /Sydney/);
});

modelTest("after the call's output, the reply uses it; the turn evaluates only what follows the call", async (ctx) => {
  // With the note after the output (outputNote()) this model answers from it 10 times in 11 on the
  // tool bench; a failure here means the output or the note no longer reaches it.
  const question: ChatMessage = { role: 'user', content: 'How hot is it in Cairo?' };
  const start = ctx.model.promptStats.promptTokens;
  const first = await generate(ctx.model, { messages: [SYSTEM, question], tools: [WEATHER, TIME] });
  const firstPrompt = ctx.model.promptStats.promptTokens - start;
  const call = first.calls[0];
  assert.ok(call, 'a call to answer');
  assert.equal([call.name, JSON.parse(call.arguments)], ['get_weather', { city: 'Cairo' }]);
  const before = { ...ctx.model.promptStats };
  const second = await generate(ctx.model, {
    messages: [
      SYSTEM,
      question,
      { role: 'assistant', content: '', toolCalls: [{ id: call.callId, name: call.name, arguments: call.arguments }] },
      { role: 'tool', toolCallId: call.callId, content: '{"temperature_c": 35, "conditions": "sunny"}' },
    ],
    tools: [WEATHER, TIME],
  });
  process.stdout.write(`LlamaCppModel tools: reply after the output: ${JSON.stringify(second.text)}\n`);
  assert.is(second.calls.length, 0, 'an answer in words, not the call again');
  assert.match(second.text, /35/);
  assert.is(second.finishReason, 'stop');
  const prompt = ctx.model.promptStats.promptTokens - before.promptTokens;
  const reused = ctx.model.promptStats.reusedTokens - before.reusedTokens;
  // The sequence holds the first prompt and the call up to its arguments (generation stops there);
  // what follows (the call's end, the output's turn and the note after it, about 80 tokens) is evaluated.
  assert.ok(reused > firstPrompt, `reused ${reused} tokens; the first turn's prompt was ${firstPrompt}`);
  assert.ok(prompt - reused <= 100, `${prompt - reused} of ${prompt} prompt tokens evaluated after the call`);
});

test.run();
