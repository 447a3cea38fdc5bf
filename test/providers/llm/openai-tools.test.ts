/**
 * Function calling and images through the OpenAI-compatible provider (src/providers/llm/openai.ts)
 * against the scripted chat-completions server (harness/servers/chat-completions-server.ts): the
 * tools, tool_choice and parallel_tool_calls it sends; tool calls streamed back (parallel calls
 * interleaved by index, text before a call) as start and arguments chunks; the shapes some servers
 * stray into (arguments before the name, no index, a named call finishing 'stop'); images, tool
 * calls and tool outputs in the messages it sends; abort in the middle of a call.
 */
import OpenAI from 'openai';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { ChatMessage, GenerateChunk, GenerateRequest, ToolDefinition } from '../../../src/providers/llm/base.js';
import { IMAGE_NOTE, ProviderError } from '../../../src/providers/llm/base.js';
import { OpenAiModel } from '../../../src/providers/llm/openai.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ChatReply, type ChatScript } from '../../../harness/servers/chat-completions-server.js';

interface Ctx {
  server: ChatCompletionsServer;
  /** Answers the requests of the running test. */
  script: ChatScript;
}

const test = suite<Ctx>('OpenAiModel tools', {} as Ctx);

test.before.each(async (ctx) => {
  ctx.script = () => ({ text: 'ok' });
  ctx.server = await startChatCompletionsServer((body, n) => ctx.script(body, n));
});

test.after.each(async (ctx) => {
  await ctx.server.close();
});

const WEATHER: ToolDefinition = {
  name: 'get_weather',
  description: 'The current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TIME: ToolDefinition = { name: 'get_time', description: 'The local time in a city.', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

function model(ctx: Ctx): OpenAiModel {
  return new OpenAiModel({ baseUrl: ctx.server.baseUrl, apiKey: null, model: 'test-model', maxOutputTokens: 100, contextTokens: 4096, firstTokenTimeoutMs: 5000, tokenGapTimeoutMs: 5000, speculative: true });
}

function request(extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Paris and Oslo?' },
    ],
    maxOutputTokens: null,
    signal: new AbortController().signal,
    ...extra,
  };
}

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const out: GenerateChunk[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

/** Each call's start and concatenated arguments, by index, from a reply's chunks. */
function callsOf(chunks: GenerateChunk[]): { callId: string; name: string; arguments: string }[] {
  const calls: { callId: string; name: string; arguments: string }[] = [];
  for (const c of chunks) {
    if (c.type === 'tool_call_start') calls[c.index] = { callId: c.callId, name: c.name, arguments: '' };
    if (c.type === 'tool_call_arguments') {
      const call = calls[c.index];
      assert.ok(call, `arguments of call ${c.index} before its start`);
      call.arguments += c.delta;
    }
  }
  return calls;
}

test('generate() sends tools as function tools, tool_choice auto by default, and no tool fields without tools', async (ctx) => {
  await collect(model(ctx).generate(request({ tools: [WEATHER, TIME] })));
  await collect(model(ctx).generate(request()));
  await collect(model(ctx).generate(request({ tools: [], toolChoice: 'required', parallelToolCalls: false })));
  const [withTools, without, empty] = ctx.server.requests;
  assert.equal(withTools!.tools, [
    { type: 'function', function: { name: 'get_weather', description: 'The current weather in a city.', parameters: WEATHER.parameters } },
    { type: 'function', function: { name: 'get_time', description: 'The local time in a city.', parameters: TIME.parameters } },
  ]);
  assert.is(withTools!.tool_choice, 'auto');
  assert.not.ok('parallel_tool_calls' in withTools!, 'left to the server unless set');
  for (const body of [without!, empty!]) {
    assert.not.ok('tools' in body || 'tool_choice' in body || 'parallel_tool_calls' in body, JSON.stringify(body));
  }
});

test('generate() maps every toolChoice to its chat-completions form and sends parallel_tool_calls when set', async (ctx) => {
  const choices: NonNullable<GenerateRequest['toolChoice']>[] = ['auto', 'none', 'required', { type: 'function', name: 'get_time' }];
  for (const toolChoice of choices) await collect(model(ctx).generate(request({ tools: [WEATHER, TIME], toolChoice })));
  await collect(model(ctx).generate(request({ tools: [WEATHER], parallelToolCalls: false })));
  await collect(model(ctx).generate(request({ tools: [WEATHER], parallelToolCalls: true })));
  const sent = ctx.server.requests.map((b) => b.tool_choice);
  assert.equal(sent, ['auto', 'none', 'required', { type: 'function', function: { name: 'get_time' } }, 'auto', 'auto']);
  assert.is(ctx.server.requests[4]!.parallel_tool_calls, false);
  assert.is(ctx.server.requests[5]!.parallel_tool_calls, true);
});

test("generate() reassembles parallel calls streamed interleaved by index: each start before its arguments, then done 'tool_calls'", async (ctx) => {
  ctx.script = () => ({
    toolCalls: [
      { id: 'call_paris', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { id: 'call_oslo', name: 'get_weather', arguments: ['{"ci', 'ty":', '"Os', 'lo"}'] },
    ],
    interleave: true,
    usage: { prompt_tokens: 40, completion_tokens: 20 },
  });
  const chunks = await collect(model(ctx).generate(request({ tools: [WEATHER] })));
  assert.equal(chunks.slice(0, 4), [
    { type: 'tool_call_start', index: 0, callId: 'call_paris', name: 'get_weather' },
    { type: 'tool_call_start', index: 1, callId: 'call_oslo', name: 'get_weather' },
    { type: 'tool_call_arguments', index: 0, delta: '{"city' },
    { type: 'tool_call_arguments', index: 1, delta: '{"ci' },
  ]);
  assert.equal(
    chunks.filter((c) => c.type === 'tool_call_arguments').map((c) => (c as { index: number }).index),
    [0, 1, 0, 1, 0, 1, 1],
    'argument pieces passed on as they arrive',
  );
  assert.equal(callsOf(chunks), [
    { callId: 'call_paris', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { callId: 'call_oslo', name: 'get_weather', arguments: '{"city":"Oslo"}' },
  ]);
  assert.equal(chunks.at(-1), { type: 'done', finishReason: 'tool_calls', usage: { inputTokens: 40, outputTokens: 20 } });
  assert.not.ok(chunks.some((c) => c.type === 'text'));
});

test('generate() streams text, then a tool call, in the order the model produced them', async (ctx) => {
  ctx.script = () => ({ text: 'Let me check that. ', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] });
  const chunks = await collect(model(ctx).generate(request({ tools: [WEATHER] })));
  assert.equal(
    chunks.map((c) => c.type),
    ['text', 'text', 'text', 'text', 'tool_call_start', 'tool_call_arguments', 'tool_call_arguments', 'tool_call_arguments', 'done'],
  );
  assert.is(chunks.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join(''), 'Let me check that. ');
  assert.equal(callsOf(chunks), [{ callId: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
  assert.is((chunks.at(-1) as { finishReason: string }).finishReason, 'tool_calls');
});

test("generate() reports 'tool_calls' for a call a named tool_choice forced, which the OpenAI API finishes with 'stop'", async (ctx) => {
  ctx.script = () => ({ toolCalls: [{ name: 'get_time', arguments: '{"city":"Oslo"}' }], finishReason: 'stop' });
  const chunks = await collect(model(ctx).generate(request({ tools: [WEATHER, TIME], toolChoice: { type: 'function', name: 'get_time' } })));
  assert.equal(callsOf(chunks), [{ callId: 'call_1', name: 'get_time', arguments: '{"city":"Oslo"}' }]);
  assert.is((chunks.at(-1) as { finishReason: string }).finishReason, 'tool_calls');
  // 'length' stays 'length' (a call may be cut short), and a reply without calls says 'stop'.
  ctx.script = (_body, n) => (n === 1 ? { toolCalls: [{ name: 'get_time', arguments: '{"ci' }], finishReason: 'length' } : { text: 'Hi', finishReason: 'stop' });
  assert.is((((await collect(model(ctx).generate(request({ tools: [TIME] })))).at(-1)) as { finishReason: string }).finishReason, 'length');
  assert.is((((await collect(model(ctx).generate(request({ tools: [TIME] })))).at(-1)) as { finishReason: string }).finishReason, 'stop');
});

test('generate() holds argument pieces that come before the name, and tells calls without index apart by id', async (ctx) => {
  ctx.script = (_body, n) =>
    n === 0
      ? {
          deltas: [
            { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
            { tool_calls: [{ index: 0, id: 'call_late', type: 'function', function: { name: 'get_weather', arguments: '"Rome"' } }] },
            { tool_calls: [{ index: 0, function: { arguments: '}' } }] },
          ],
        }
      : {
          // Whole calls in one delta each, with no index (as some servers send them).
          deltas: [
            { tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] },
            { tool_calls: [{ id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"city":' } }] },
            { tool_calls: [{ function: { arguments: '"Oslo"}' } }] },
          ],
        };
  const late = await collect(model(ctx).generate(request({ tools: [WEATHER] })));
  assert.equal(late.slice(0, 3), [
    { type: 'tool_call_start', index: 0, callId: 'call_late', name: 'get_weather' },
    { type: 'tool_call_arguments', index: 0, delta: '{"city":"Rome"' },
    { type: 'tool_call_arguments', index: 0, delta: '}' },
  ]);
  const noIndex = await collect(model(ctx).generate(request({ tools: [WEATHER, TIME] })));
  assert.equal(callsOf(noIndex), [
    { callId: 'call_a', name: 'get_weather', arguments: '{"city":"Rome"}' },
    { callId: 'call_b', name: 'get_time', arguments: '{"city":"Oslo"}' },
  ]);
  assert.is((noIndex.at(-1) as { finishReason: string }).finishReason, 'tool_calls');
});

test('generate() gives a call streamed without an id one of its own, and throws for a call that never gets a name', async (ctx) => {
  ctx.script = (_body, n) =>
    n === 0
      ? { deltas: [{ tool_calls: [{ index: 0, type: 'function', function: { name: 'get_time', arguments: '{}' } }] }] }
      : { deltas: [{ tool_calls: [{ index: 0, id: 'call_x', function: { arguments: '{}' } }] }] };
  const chunks = await collect(model(ctx).generate(request({ tools: [TIME] })));
  const start = chunks[0] as Extract<GenerateChunk, { type: 'tool_call_start' }>;
  assert.is(start.type, 'tool_call_start');
  assert.match(start.callId, /^call_[0-9A-Za-z]{24}$/);
  try {
    await collect(model(ctx).generate(request({ tools: [TIME] })));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'llm_request_failed');
    assert.match((err as ProviderError).message, /without a function name/);
  }
});

test('generate() sends a user message with images as text and image_url parts, each image in place of its note', async (ctx) => {
  const jpeg = 'data:image/jpeg;base64,/9j/AAAA';
  const png = 'data:image/png;base64,iVBORw0KGgo=';
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Just text.' },
    // Two images noted, both shown.
    { role: 'user', content: `Compare ${IMAGE_NOTE} with ${IMAGE_NOTE}`, images: [{ url: jpeg, detail: 'low' }, { url: png, detail: 'high' }] },
    // An older image only noted (not shown), the newest shown.
    { role: 'user', content: `${IMAGE_NOTE} ${IMAGE_NOTE} What is this?`, images: [{ url: png, detail: 'auto' }] },
    // No notes in the text: text first, then the image.
    { role: 'user', content: 'Look:', images: [{ url: jpeg, detail: 'auto' }] },
  ];
  await collect(model(ctx).generate({ messages, maxOutputTokens: null, signal: new AbortController().signal }));
  assert.equal(ctx.server.requests[0]!.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Just text.' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Compare' },
        { type: 'image_url', image_url: { url: jpeg, detail: 'low' } },
        { type: 'text', text: 'with' },
        { type: 'image_url', image_url: { url: png, detail: 'high' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'text', text: IMAGE_NOTE },
        { type: 'image_url', image_url: { url: png, detail: 'auto' } },
        { type: 'text', text: 'What is this?' },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Look:' },
        { type: 'image_url', image_url: { url: jpeg, detail: 'auto' } },
      ],
    },
  ]);
});

test("generate() sends an assistant's tool calls as tool_calls (content null when it said nothing) and tool messages with their tool_call_id", async (ctx) => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris and Oslo?' },
    {
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'call_paris', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { id: 'call_oslo', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      ],
    },
    { role: 'tool', toolCallId: 'call_paris', content: '{"temp":21}' },
    { role: 'tool', toolCallId: 'call_oslo', content: '{"temp":9}' },
    { role: 'assistant', content: 'Paris 21, Oslo 9. Checking the time.', toolCalls: [{ id: 'call_t', name: 'get_time', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'call_t', content: '12:00' },
    { role: 'assistant', content: 'It is noon.', toolCalls: [] },
  ];
  await collect(model(ctx).generate({ messages, tools: [WEATHER, TIME], maxOutputTokens: null, signal: new AbortController().signal }));
  assert.equal(ctx.server.requests[0]!.messages.slice(2), [
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_paris', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { id: 'call_oslo', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_paris', content: '{"temp":21}' },
    { role: 'tool', tool_call_id: 'call_oslo', content: '{"temp":9}' },
    {
      role: 'assistant',
      content: 'Paris 21, Oslo 9. Checking the time.',
      tool_calls: [{ id: 'call_t', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'call_t', content: '12:00' },
    { role: 'assistant', content: 'It is noon.' },
  ]);
});

test("generate() cuts a long conversation without leaving a tool message whose call was cut away", async (ctx) => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'q'.repeat(5000) },
    { role: 'assistant', content: 'c'.repeat(3000), toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'call_1', content: 'r'.repeat(1000) },
    { role: 'user', content: 'And now?' },
  ];
  // contextTokens 1024 with 100 reserved: 3696 characters; the output and the question fit, the call does not.
  const small = new OpenAiModel({ baseUrl: ctx.server.baseUrl, apiKey: null, model: 'test-model', maxOutputTokens: 100, contextTokens: 1024, firstTokenTimeoutMs: 5000, tokenGapTimeoutMs: 5000, speculative: true });
  await collect(small.generate({ messages, maxOutputTokens: null, signal: new AbortController().signal }));
  assert.equal(ctx.server.requests[0]!.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'And now?' },
  ]);
});

test("aborting in the middle of a tool call ends generate() with 'aborted' and closes the upstream request", async (ctx) => {
  ctx.script = () => ({ toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: ['{"ci', 'ty":"Paris"}'] }], ending: 'hang' });
  const controller = new AbortController();
  const chunks: GenerateChunk[] = [];
  for await (const c of model(ctx).generate(request({ tools: [WEATHER], signal: controller.signal }))) {
    chunks.push(c);
    if (c.type === 'tool_call_arguments') controller.abort();
  }
  assert.equal(chunks, [
    { type: 'tool_call_start', index: 0, callId: 'call_1', name: 'get_weather' },
    { type: 'tool_call_arguments', index: 0, delta: '{"ci' },
    { type: 'done', finishReason: 'aborted', usage: null },
  ]);
  // The hanging stream ends only when the client goes away.
  await ctx.server.whenIdle();
});

test('the scripted server answers a non-stream request with one chat.completion, and errors, cut streams and a failing script as a server would', async (ctx) => {
  ctx.script = (_body, n) => {
    const replies: ChatReply[] = [
      { text: 'Hello there', toolCalls: [{ id: 'call_9', name: 'get_time', arguments: '{"city":"Oslo"}' }] },
      { status: 400, errorMessage: 'bad tools' },
      { text: 'Partial answer', ending: 'cut' },
    ];
    const reply = replies[n];
    if (!reply) throw new Error(`no reply for request ${n}`);
    return reply;
  };
  const client = new OpenAI({ apiKey: 'none', baseURL: ctx.server.baseUrl, maxRetries: 0 });
  const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] });
  assert.is(completion.choices[0]?.message.content, 'Hello there');
  assert.equal(completion.choices[0]?.message.tool_calls, [{ id: 'call_9', type: 'function', function: { name: 'get_time', arguments: '{"city":"Oslo"}' } }]);
  assert.is(completion.choices[0]?.finish_reason, 'tool_calls');
  assert.ok(completion.usage && completion.usage.total_tokens > 0);
  try {
    await collect(model(ctx).generate(request()));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).statusCode, 400);
    assert.match((err as ProviderError).message, /bad tools/);
  }
  const seen: GenerateChunk[] = [];
  try {
    for await (const c of model(ctx).generate(request())) seen.push(c);
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'llm_request_failed');
    assert.equal(seen.map((c) => c.type), ['text', 'text']);
  }
  try {
    await collect(model(ctx).generate(request()));
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).statusCode, 500);
    assert.match((err as ProviderError).message, /The test script failed: no reply for request 3/);
  }
  assert.is(ctx.server.requests.length, 4, 'a failed script is not retried');
});

test.run();
