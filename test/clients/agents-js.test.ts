/**
 * The OpenAI Agents SDK for JavaScript (@openai/agents-realtime: RealtimeAgent, RealtimeSession,
 * its WebSocket transport, which in Node connects with `ws` and a Bearer header) against this
 * server, unchanged but for the URL and key: an agent with a get_weather function tool is asked
 * "What's the weather in Paris?". The server runs in this process with a real chat-completions
 * server as its language model (client-harness.ts); the SDK must run the tool the model calls,
 * send its output (function_call_output, then response.create once the call's response is done)
 * and hear the answer built from it. A second test sends a camera image first (addImage without a
 * response) in a text-only session.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { z } from 'zod';
import { OpenAIRealtimeWebSocket, RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
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
