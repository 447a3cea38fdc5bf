/**
 * Pipecat's OpenAI Realtime service (pipecat.services.openai.realtime.llm.OpenAIRealtimeLLMService)
 * against this server, unchanged but for its base_url and key: test/clients/py/pipecat_tool.py
 * drives a pipeline without a transport (the service between LLMContextAggregatorPair's
 * aggregators) with a camera frame, which the service sends as a user message with one
 * input_image part (a JPEG data URI), and a context asking "What's the weather in Paris?" with a
 * registered get_weather function. The server runs in this process with a real chat-completions
 * server as its language model (client-harness.ts).
 *
 * Pipecat is the strictest of the clients: every server event it knows is validated by its
 * pydantic models (a refusal kills its receive loop), and any `error` event other than
 * item_retrieve_invalid_item_id, response_cancel_not_active and
 * conversation_already_has_active_response is fatal to it. It runs a function when
 * response.function_call_arguments.done names a call it saw in conversation.item.added.
 *
 * Needs target/clients-venv (src/cli/setup.sh --fleet); without it the test is registered as
 * skipped and says why.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pythonClientsMissing, runPythonClient, startWeatherServer, toolRequests, weatherScript, WEATHER_MARK, type ClientRun, type WeatherServer } from './client-harness.js';

const SCRIPT = 'pipecat_tool.py';
const CLIENT_TIMEOUT_S = 60;
const RUN_TIMEOUT_MS = (CLIENT_TIMEOUT_S + 30) * 1000;

const missing = pythonClientsMissing();
if (missing) process.stdout.write(`pipecat: skipping: ${missing}\n`);

interface Ctx {
  w: WeatherServer;
}

const Pipecat = suite<Ctx>('pipecat OpenAIRealtimeLLMService, scripted language model over HTTP', {} as Ctx);
const pipecatTest = missing ? Pipecat.skip : Pipecat;

Pipecat.before.each(async (ctx) => {
  if (missing) return;
  ctx.w = await startWeatherServer();
});

Pipecat.after.each(async (ctx) => {
  await ctx.w?.close();
});

pipecatTest('a camera frame is accepted as an input_image item, and the registered function is called and answered', async (ctx) => {
  await assertWeatherRoundTrip(ctx);
});

pipecatTest('a spoken preamble before the call (one response: a message, then the function_call): every event fits, the function runs once, the answer follows', async (ctx) => {
  await ctx.w.close();
  // The model says a few words before it calls, as gpt-realtime-2 does.
  ctx.w = await startWeatherServer(async (body, n) => {
    const reply = await weatherScript(body, n);
    return reply.toolCalls ? { text: 'Let me check the weather for you. ', ...reply } : reply;
  });
  const run = await assertWeatherRoundTrip(ctx);
  const why = run.describe();
  const call = run.server('response.output_item.added').find((l) => l.item.type === 'function_call')!;
  const response = run.server('response.output_item.added').filter((l) => l.response_id === call.response_id);
  assert.equal(response.map((l) => l.item.type), ['message', 'function_call'], `one response held the preamble and the call\n${why}`);
  assert.ok(run.of('text').some((l) => String(l.text).includes('Let me check')), `pipecat heard the preamble\n${why}`);
});

/** The camera frame and the weather question, run by pipecat; asserts the round trip and returns the run. */
async function assertWeatherRoundTrip(ctx: Ctx): Promise<ClientRun> {
  // pipecat appends ?model= itself.
  const run = await runPythonClient(SCRIPT, ['--url', ctx.w.realtimeUrl, '--key', ctx.w.server.key, '--timeout', String(CLIENT_TIMEOUT_S)], RUN_TIMEOUT_MS);
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('parse_error'), [], `every server event fits pipecat's models\n${why}`);
  assert.equal(run.of('error'), [], `no ErrorFrame (pipecat treats an error event as fatal)\n${why}`);
  assert.equal(run.server('error'), [], why);

  // The camera frame: one user message holding one input_image part, added to the conversation
  // under the id pipecat gave it.
  const sent = run.of('client').find((l) => l.type === 'conversation.item.create' && (l.content_types as string[]).includes('input_image'));
  assert.ok(sent, `pipecat sent the camera frame\n${why}`);
  assert.equal(sent.content_types, ['input_image'], why);
  const added = run.server('conversation.item.added').find((l) => l.item?.id === sent.item_id);
  assert.ok(added, `conversation.item.added for the image item ${sent.item_id}\n${why}`);
  assert.is(added.item.role, 'user', why);
  assert.equal(added.item.content_types, ['input_image'], why);

  // The function: declared in session.update, called once with the model's arguments, its
  // result sent back as function_call_output, and the answer that follows quotes it.
  assert.ok(
    run.of('client').some((l) => l.type === 'session.update' && (l.tools as string[] | undefined)?.includes('get_weather')),
    why,
  );
  const called = run.of('tool_called');
  assert.is(called.length, 1, `the function runs exactly once\n${why}`);
  assert.equal(called[0]!.arguments, { city: 'Paris' }, why);
  const callAdded = run.server('conversation.item.added').find((l) => l.item?.type === 'function_call');
  assert.ok(callAdded, `pipecat needs the call in conversation.item.added before its arguments are done\n${why}`);
  assert.is(callAdded.item.name, 'get_weather', why);
  const argsDone = run.server('response.function_call_arguments.done')[0];
  assert.ok(argsDone, why);
  assert.is(argsDone.call_id, callAdded.item.call_id, why);
  assert.ok(run.lines.indexOf(callAdded) < run.lines.indexOf(argsDone), why);
  assert.ok(
    run.of('client').some((l) => l.type === 'conversation.item.create' && l.item_type === 'function_call_output'),
    why,
  );
  const done = run.of('done')[0];
  assert.ok(done, why);
  assert.match(done.transcript as string, WEATHER_MARK, `the answer quotes the function's result\n${why}`);

  const { offered, afterOutput } = toolRequests(ctx.w.llm, 'get_weather');
  assert.ok(offered.length >= 1, why);
  assert.is(afterOutput.length, 1, why);
  return run;
}

Pipecat.run();
