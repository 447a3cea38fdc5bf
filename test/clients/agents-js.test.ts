/**
 * The OpenAI Agents SDK for JavaScript (@openai/agents-realtime: RealtimeAgent, RealtimeSession,
 * its WebSocket transport, which in Node connects with `ws` and a Bearer header) against this
 * server, unchanged but for the URL and key: an agent with a get_weather function tool is asked
 * "What's the weather in Paris?". The server runs in this process with a real chat-completions
 * server as its language model (client-harness.ts); the SDK must run the tool the model calls,
 * send its output (function_call_output, then response.create once the call's response is done)
 * and hear the answer built from it. A second test sends a camera image first (addImage without a
 * response) in a text-only session. A third has the agent hold a hosted MCP tool (hostedMcpTool,
 * require approval): the server lists and calls it on a real MCP server, the SDK approves the call
 * (tool_approval_requested → session.approve, which sends only the mcp_approval_response item), and
 * the server's own next response runs the call and speaks its outcome.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { z } from 'zod';
import { OpenAIRealtimeWebSocket, RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
import { hostedMcpTool } from '@openai/agents-core';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { startMcpServer, type TestMcpServer } from '../../harness/servers/mcp-server.js';
import type { GenerateRequest } from '../../src/providers/llm/base.js';
import WebSocket from 'ws';
import { concatSamples, speechPcm24k } from '../../harness/measures/speech.js';
// The SDK's own event schemas (zod), as its transports parse every server event; not in its exports map.
import { realtimeServerEventSchema } from '../../node_modules/@openai/agents-realtime/dist/openaiRealtimeEvents.js';
import { until } from '../../harness/servers/wait.js';
import { startWeatherServer, toolRequests, WEATHER_MARK, type WeatherServer } from './client-harness.js';

/** A 1x1 PNG (one red pixel). */
const RED_PIXEL_PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const ANSWER_TIMEOUT_MS = 60_000;

interface Ctx {
  w: WeatherServer;
}

interface SessionRun {
  /** Raw server events, in arrival order (the transport's `*` events). */
  events: Array<{ type: string; [field: string]: any }>;
  errors: unknown[];
  toolCalls: Array<{ city: string }>;
  toolStarts: Array<{ name: string; arguments: string }>;
  toolEnds: Array<{ name: string; result: string }>;
  /** The answer after the tool's output: the transcript (or text) of the first response created after the tool ran. */
  answer: string;
  describe(): string;
}

async function askForTheWeather(ctx: Ctx, options: { image?: boolean; modality?: 'text' | 'audio' } = {}): Promise<SessionRun> {
  const run: Omit<SessionRun, 'answer' | 'describe'> = { events: [], errors: [], toolCalls: [], toolStarts: [], toolEnds: [] };
  const describe = () =>
    [
      `server events: ${run.events.map((e) => e.type).join(', ')}`,
      `errors: ${JSON.stringify(run.errors).slice(0, 2000)}`,
      `tool starts: ${JSON.stringify(run.toolStarts)}; ends: ${JSON.stringify(run.toolEnds)}`,
    ].join('\n');
  const getWeather = tool({
    name: 'get_weather',
    description: 'Get the current weather in a city.',
    parameters: z.object({ city: z.string().describe("The city's name, e.g. Paris.") }),
    execute: async ({ city }) => {
      run.toolCalls.push({ city });
      return `Sunny, 22 degrees Celsius in ${city}.`;
    },
  });
  const agent = new RealtimeAgent({
    name: 'Weather assistant',
    instructions: 'You answer questions about the weather. Always use the get_weather tool, then say its result in one sentence.',
    tools: [getWeather],
  });
  const session = new RealtimeSession(agent, {
    transport: new OpenAIRealtimeWebSocket(),
    model: 'gpt-realtime',
    ...(options.modality ? { config: { outputModalities: [options.modality] } } : {}),
  });
  session.on('transport_event', (event) => run.events.push(event as SessionRun['events'][number]));
  session.on('error', (error) => run.errors.push(error.error instanceof Error ? error.error.message : error.error));
  session.on('agent_tool_start', (_context, _agent, t, details) => {
    const call = details.toolCall;
    run.toolStarts.push({ name: t.name, arguments: call.type === 'function_call' ? call.arguments : '' });
  });
  session.on('agent_tool_end', (_context, _agent, t, result) => run.toolEnds.push({ name: t.name, result }));
  try {
    await session.connect({ apiKey: ctx.w.server.key, url: `${ctx.w.realtimeUrl}?model=gpt-realtime` });
    if (options.image) session.addImage(RED_PIXEL_PNG, { triggerResponse: false });
    session.sendMessage("What's the weather in Paris?");
    const answer = await until(
      async () => answerAfterTool(run.events),
      (a) => a !== null || run.errors.length > 0,
      `an answer after the tool's output\n${describe()}`,
      ANSWER_TIMEOUT_MS,
    );
    return { ...run, answer: answer ?? '', describe };
  } finally {
    session.close();
  }
}

/** The transcript or text of the first response created after function_call_output went in, once that response is done. */
function answerAfterTool(events: SessionRun['events']): string | null {
  const output = events.findIndex((e) => e.type === 'conversation.item.added' && e.item?.type === 'function_call_output');
  if (output < 0) return null;
  const created = events.findIndex((e, i) => i > output && e.type === 'response.created');
  if (created < 0) return null;
  const id = events[created]!.response.id as string;
  if (!events.some((e) => e.type === 'response.done' && e.response?.id === id)) return null;
  const said = events.find((e) => (e.type === 'response.output_audio_transcript.done' || e.type === 'response.output_text.done') && e.response_id === id);
  return said ? ((said.transcript ?? said.text) as string) : '';
}

const Js = suite<Ctx>('@openai/agents-realtime (JS) RealtimeSession over WebSocket, scripted language model over HTTP', {} as Ctx);

Js.before.each(async (ctx) => {
  ctx.w = await startWeatherServer();
});

Js.after.each(async (ctx) => {
  await ctx.w?.close();
});

function assertRoundTrip(ctx: Ctx, run: SessionRun): void {
  const why = run.describe();
  assert.equal(run.errors, [], why);
  assert.equal(run.toolCalls, [{ city: 'Paris' }], `the tool runs exactly once, with the model's arguments\n${why}`);
  assert.is(run.toolStarts.length, 1, why);
  assert.equal(JSON.parse(run.toolStarts[0]!.arguments), { city: 'Paris' }, why);
  assert.match(run.toolEnds[0]?.result ?? '', WEATHER_MARK, why);
  assert.match(run.answer, WEATHER_MARK, `the answer quotes the tool's output\n${why}`);
  // One function-call response, its item complete when the SDK ran it, and one answer.
  const call = run.events.find((e) => e.type === 'response.output_item.done' && e.item?.type === 'function_call');
  assert.ok(call, why);
  assert.is(call.item.status, 'completed', why);
  assert.is(call.item.name, 'get_weather', why);
  const added = run.events.find((e) => e.type === 'response.output_item.added' && e.item?.type === 'function_call');
  assert.is(added?.item.status, 'in_progress', `a call announced as completed would be run twice\n${why}`);
  const { offered, afterOutput } = toolRequests(ctx.w.llm, 'get_weather');
  assert.ok(offered.length >= 1, why);
  assert.is(afterOutput.length, 1, why);
}

Js('RealtimeSession runs get_weather when the model calls it, sends its output and hears the answer built from it (audio)', async (ctx) => {
  const run = await askForTheWeather(ctx);
  assertRoundTrip(ctx, run);
  assert.ok(
    run.events.some((e) => e.type === 'response.output_audio.delta'),
    `the answer is spoken\n${run.describe()}`,
  );
});

Js('addImage (no response) then a question: the image is accepted and the tool round trip works in a text-only session', async (ctx) => {
  const run = await askForTheWeather(ctx, { image: true, modality: 'text' });
  assertRoundTrip(ctx, run);
  const why = run.describe();
  const image = run.events.find((e) => e.type === 'conversation.item.added' && e.item?.role === 'user' && e.item.content?.some((c: any) => c.type === 'input_image'));
  assert.ok(image, `the image message is in the conversation\n${why}`);
  const imageResponse = run.events.findIndex((e) => e.type === 'response.created');
  const question = run.events.findIndex((e) => e.type === 'conversation.item.added' && e.item?.content?.some((c: any) => c.type === 'input_text'));
  assert.ok(question >= 0 && imageResponse > question, `no response to the image alone (triggerResponse: false)\n${why}`);
  assert.not.ok(
    run.events.some((e) => e.type === 'response.output_audio.delta'),
    why,
  );
});

Js.run();

interface McpCtx {
  t: RealtimeTestServer;
  mcp: TestMcpServer;
}

const JsMcp = suite<McpCtx>('@openai/agents-realtime (JS) with a hosted MCP tool the server runs', {} as McpCtx);

JsMcp.before(async (ctx) => {
  ctx.mcp = await startMcpServer();
  ctx.t = await startRealtimeTestServer({ env: { MCP_ALLOWED_HOSTS: '127.0.0.1', MCP_ALLOW_PRIVATE_ADDRESSES: 'true', } });
  // A spoken preamble and the weather tool when the user has spoken; the tool's outcome read after.
  ctx.t.llm.options = {
    reply: (r: GenerateRequest) => (r.messages.at(-1)?.role === 'tool' ? `It is ${r.messages.at(-1)!.content}` : 'Let me check.'),
    toolCalls: (r: GenerateRequest) => (r.messages.at(-1)?.role === 'user' ? [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] : []),
  };
});

JsMcp.after(async (ctx) => {
  await ctx.t?.close();
  await ctx.mcp?.close();
});

JsMcp('hostedMcpTool with approval: listed, approved by session.approve, called by the server, its outcome spoken', async (ctx) => {
  const events: Array<{ type: string; [field: string]: any }> = [];
  const errors: unknown[] = [];
  const approvals: string[] = [];
  const completed: Array<{ name: string; output: string | null }> = [];
  const agent = new RealtimeAgent({
    name: 'Weather assistant',
    instructions: 'Use the weather tool.',
    tools: [hostedMcpTool({ serverLabel: 'weather', serverUrl: ctx.mcp.url, requireApproval: 'always', headers: { 'X-Api-Key': 'js-secret' } })],
  });
  const transport = new OpenAIRealtimeWebSocket();
  const sent: string[] = [];
  const send = transport.sendEvent.bind(transport);
  transport.sendEvent = (event) => {
    sent.push(event.type);
    send(event);
  };
  const session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });
  session.on('transport_event', (event) => events.push(event as (typeof events)[number]));
  session.on('error', (error) => errors.push(error.error instanceof Error ? error.error.message : error.error));
  session.on('tool_approval_requested', (_context, _agent, request) => {
    if (request.type !== 'mcp_approval_request') return;
    approvals.push((request.approvalItem.rawItem as { name?: string }).name ?? '');
    void session.approve(request.approvalItem);
  });
  session.on('mcp_tool_call_completed', (_context, _agent, call) => completed.push({ name: call.name, output: call.output }));
  const describe = () => `server events: ${events.map((e) => e.type).join(', ')}\nclient events: ${sent.join(', ')}\nerrors: ${JSON.stringify(errors).slice(0, 2000)}`;
  try {
    await session.connect({ apiKey: ctx.t.key, url: `${ctx.t.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime` });
    await until(
      async () => events.some((e) => e.type === 'mcp_list_tools.completed'),
      (listed) => listed || errors.length > 0,
      `the MCP server listed\n${describe()}`,
      ANSWER_TIMEOUT_MS,
    );
    session.sendMessage("What's the weather in Paris?");
    const answer = await until(
      async () => events.find((e) => e.type === 'response.done' && e.response.output.some((o: any) => o.type === 'mcp_call')) ?? null,
      (done) => done !== null || errors.length > 0,
      'a response with the call and its answer',
      ANSWER_TIMEOUT_MS,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${describe()}`);
    });
    const why = describe();
    assert.equal(errors, [], why);
    assert.equal(approvals, ['get_weather'], why);
    assert.equal(answer!.response.output.map((o: any) => o.type), ['mcp_call', 'message'], why);
    assert.is(answer!.response.output[1].content[0].transcript, 'It is Sunny and 21 degrees in Paris.', why);
    assert.ok(events.some((e) => e.type === 'response.output_audio.delta' && e.item_id === answer!.response.output[1].id), `the answer is spoken\n${why}`);
    assert.equal(ctx.mcp.calls, [{ name: 'get_weather', arguments: { city: 'Paris' } }], why);
    assert.ok(ctx.mcp.headers.every((h) => h['x-api-key'] === 'js-secret'), why);
    await until(async () => completed.length, (n) => n > 0, `mcp_tool_call_completed\n${why}`, 5000);
    assert.equal(completed[0], { name: 'get_weather', output: 'Sunny and 21 degrees in Paris.' }, why);
  } finally {
    session.close();
  }
});

JsMcp.run();

const JsTranscription = suite<{ t: RealtimeTestServer }>('@openai/agents-realtime (JS) schemas on a transcription session', {} as { t: RealtimeTestServer });

JsTranscription.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});

JsTranscription.after(async (ctx) => {
  await ctx.t?.close();
});

JsTranscription("every event of a transcription session that the SDK's schemas know parses in them", async (ctx) => {
  const known = new Set<string>(realtimeServerEventSchema.options.map((o) => (o.shape.type as unknown as { value: string }).value));
  const ws = new WebSocket(`${ctx.t.url.replace(/^http/, 'ws')}/v1/realtime?intent=transcription`, { headers: { Authorization: `Bearer ${ctx.t.key}` } });
  const raw: Array<Record<string, unknown> & { type: string }> = [];
  ws.on('message', (data) => raw.push(JSON.parse(String(data))));
  await new Promise((resolve) => ws.once('open', resolve));
  ws.send(JSON.stringify({ type: 'session.update', session: { type: 'transcription', audio: { input: { transcription: { model: 'whisper-1', language: 'en' }, turn_detection: { type: 'server_vad' } } } } }));
  const pcm = concatSamples([new Int16Array(24_000 * 0.5), speechPcm24k('What is the weather like today?'), new Int16Array(24_000 * 1.5)]);
  for (let i = 0; i < pcm.length; i += 4800) {
    const chunk = pcm.subarray(i, i + 4800);
    ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('base64') }));
  }
  await until(async () => raw.some((e) => e.type === 'conversation.item.input_audio_transcription.completed'), (done) => done, 'the transcript');
  ws.close();
  const checked = raw.filter((e) => known.has(e.type));
  const refused = checked.flatMap((e) => {
    const parsed = realtimeServerEventSchema.safeParse(e);
    return parsed.success ? [] : [`${e.type}: ${parsed.error.message.slice(0, 300)}`];
  });
  assert.equal(refused, []);
  for (const type of ['session.created', 'input_audio_buffer.speech_started', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.completed']) {
    assert.ok(checked.some((e) => e.type === type), `${type} checked (the SDK knows it)`);
  }
});

JsTranscription.run();
