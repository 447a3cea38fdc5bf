/**
 * The openai-agents Python SDK (agents.realtime: RealtimeAgent, RealtimeRunner, its OpenAI
 * WebSocket model) against this server, unchanged but for the URL and key: test/clients/py/
 * agents_tool.py asks "What's the weather in Paris?" of an agent with a get_weather function tool
 * and reports what it saw. The server is started in this process with a real chat-completions
 * server as its language model (client-harness.ts), so the SDK has to run the tool the model
 * calls, send its output, and hear the answer built from it; the requests the model got show how
 * the server carried the tool's definition, call and output. One more test runs the same script
 * against the server as `npm start` runs it, on the embedded local model (Qwen GGUF).
 *
 * Needs target/clients-venv (src/cli/setup.sh --fleet); without it, and without the local model
 * for its test, the tests are registered as skipped and say why.
 */
import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { modelPath } from '../../src/models/manifest.js';
import { DEFAULT_LLM_MODEL_NAME } from '../../src/providers/llm/index.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { REPO_ROOT, request, tempDir } from '../../harness/servers/server.js';
import { until } from '../../harness/servers/wait.js';
import { pythonClientsMissing, runPythonClient, startWeatherServer, toolRequests, WEATHER_MARK, type ClientLine, type ClientRun, type WeatherServer } from './client-harness.js';

const SCRIPT = 'agents_tool.py';
/** The script's own limit, and this test's (a little more, for Python's start). */
const CLIENT_TIMEOUT_S = 60;
const RUN_TIMEOUT_MS = (CLIENT_TIMEOUT_S + 30) * 1000;

const missing = pythonClientsMissing();
if (missing) process.stdout.write(`openai-agents (Python): skipping: ${missing}\n`);

interface Ctx {
  w: WeatherServer;
}

const Scripted = suite<Ctx>('openai-agents (Python) realtime, scripted language model over HTTP', {} as Ctx);
const scriptedTest = missing ? Scripted.skip : Scripted;

Scripted.before.each(async (ctx) => {
  if (missing) return;
  ctx.w = await startWeatherServer();
});

Scripted.after.each(async (ctx) => {
  await ctx.w?.close();
});

function agentsRun(ctx: Ctx, ...extra: string[]): Promise<ClientRun> {
  return runPythonClient(SCRIPT, ['--url', `${ctx.w.realtimeUrl}?model=gpt-realtime`, '--key', ctx.w.server.key, '--timeout', String(CLIENT_TIMEOUT_S), ...extra], RUN_TIMEOUT_MS);
}

/** What every run with the scripted model must show: the SDK ran the tool once and heard the answer. */
function assertToolRoundTrip(run: ClientRun): void {
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('error'), [], why);
  const called = run.of('tool_called');
  assert.is(called.length, 1, `the tool runs exactly once\n${why}`);
  assert.equal(called[0]!.arguments, { city: 'Paris' }, why);
  const started = run.of('tool_start');
  assert.is(started.length, 1, why);
  assert.equal(JSON.parse(started[0]!.arguments as string), { city: 'Paris' }, why);
  const ended = run.of('tool_end');
  assert.is(ended.length, 1, why);
  assert.match(String(ended[0]!.output), WEATHER_MARK, why);
  const done = run.of('done')[0];
  assert.ok(done, why);
  assert.match(done.transcript as string, WEATHER_MARK, `the answer after the tool quotes its output\n${why}`);
  assert.is(done.status, 'completed', why);
}

/**
 * The function-call response as OpenAI sends it and as the SDKs read it: the item announced in
 * progress (an SDK runs a function_call item it sees `completed`, in output_item.added or .done),
 * its arguments streamed, then completed, then response.done.
 */
function assertFunctionCallEvents(run: ClientRun): void {
  const why = run.describe();
  const isCall = (l: ClientLine) => l.item?.type === 'function_call';
  const added = run.indexOf((l) => l.type === 'response.output_item.added' && isCall(l));
  assert.ok(added >= 0, `response.output_item.added with a function_call item\n${why}`);
  const call = run.lines[added]!.item;
  assert.is(call.status, 'in_progress', `output_item.added announces the call in progress\n${why}`);
  assert.is(call.name, 'get_weather', why);
  assert.type(call.call_id, 'string', why);
  assert.type(call.arguments, 'string', `a function_call item always has arguments (openai-python's model requires them)\n${why}`);
  const responseId = run.lines[added]!.response_id as string;
  const created = run.indexOf((l) => l.type === 'response.created');
  assert.ok(created >= 0 && created < added, why);
  const itemAdded = run.indexOf((l) => l.type === 'conversation.item.added' && l.item?.id === call.id);
  assert.ok(itemAdded > added, `conversation.item.added for the call, after output_item.added\n${why}`);
  const delta = run.indexOf((l) => l.type === 'response.function_call_arguments.delta' && l.call_id === call.call_id);
  const argsDone = run.indexOf((l) => l.type === 'response.function_call_arguments.done' && l.call_id === call.call_id);
  assert.ok(delta > added && argsDone > delta, `arguments streamed then done, for the call's call_id\n${why}`);
  assert.equal(JSON.parse(run.lines[argsDone]!.arguments as string), { city: 'Paris' }, why);
  assert.is(run.lines[argsDone]!.item_id, call.id, why);
  const itemDone = run.indexOf((l) => l.type === 'response.output_item.done' && l.item?.id === call.id);
  assert.ok(itemDone > argsDone, why);
  assert.is(run.lines[itemDone]!.item.status, 'completed', why);
  assert.equal(JSON.parse(run.lines[itemDone]!.item.arguments as string), { city: 'Paris' }, why);
  const responseDone = run.indexOf((l) => l.type === 'response.done', itemDone);
  assert.ok(responseDone > itemDone, why);
  // The output the SDK sent comes back as an item of the conversation.
  const output = run.indexOf((l) => l.type === 'conversation.item.added' && l.item?.type === 'function_call_output' && l.item?.call_id === call.call_id);
  assert.ok(output > 0, `conversation.item.added for the function_call_output\n${why}`);
  assert.ok(responseId, why);
}

/** The chat-completions requests: the tool offered as the agent declared it, then its call and output sent back. */
function assertModelSawTheTool(ctx: Ctx, run: ClientRun): void {
  const why = run.describe();
  const { offered, afterOutput } = toolRequests(ctx.w.llm, 'get_weather');
  assert.ok(offered.length >= 1, `the first request offers get_weather\n${why}`);
  const tool = offered[0]!.tools!.find((t) => t.type === 'function' && t.function.name === 'get_weather')!;
  assert.ok(tool.type === 'function');
  assert.is(tool.function.description, 'Get the current weather in a city.');
  const params = tool.function.parameters as { properties: Record<string, unknown>; required: string[] };
  assert.ok(params.properties.city, JSON.stringify(params));
  assert.equal(params.required, ['city']);
  assert.is(afterOutput.length, 1, `one request carries the tool's output\n${JSON.stringify(ctx.w.llm.requests, null, 1).slice(0, 3000)}`);
  const messages = afterOutput[0]!.messages;
  const toolIndex = messages.findIndex((m) => m.role === 'tool');
  const callMessage = messages[toolIndex - 1];
  assert.ok(callMessage?.role === 'assistant' && callMessage.tool_calls?.length === 1, `the assistant's call comes just before its output: ${JSON.stringify(messages)}`);
  const toolCall = callMessage.tool_calls[0]!;
  assert.ok(toolCall.type === 'function');
  assert.is(toolCall.function.name, 'get_weather');
  assert.equal(JSON.parse(toolCall.function.arguments), { city: 'Paris' });
  const toolMessage = messages[toolIndex]!;
  assert.ok(toolMessage.role === 'tool');
  assert.is(toolMessage.tool_call_id, toolCall.id);
  assert.match(typeof toolMessage.content === 'string' ? toolMessage.content : JSON.stringify(toolMessage.content), WEATHER_MARK);
}

scriptedTest('RealtimeRunner runs get_weather when the model calls it, sends its output and hears the answer built from it (audio)', async (ctx) => {
  const run = await agentsRun(ctx);
  assertToolRoundTrip(run);
  assertFunctionCallEvents(run);
  assertModelSawTheTool(ctx, run);
  // The SDK's opening session.update carries the tool; the one it sends after session.created
  // (tracing only) must not take it away: the call above proves it stayed.
  assert.ok(run.server('session.updated').length >= 1, run.describe());
});

scriptedTest('a user message with text and an input_image is accepted, and the tool round trip works in a text-only session', async (ctx) => {
  const run = await agentsRun(ctx, '--image', '--modality', 'text');
  assertToolRoundTrip(run);
  const why = run.describe();
  const image = run.indexOf((l) => l.type === 'conversation.item.added' && l.item?.role === 'user' && (l.item.content_types as string[]).includes('input_image'));
  assert.ok(image >= 0, `the user message with its image is in the conversation\n${why}`);
  assert.equal(run.lines[image]!.item.content_types, ['input_text', 'input_image'], why);
  assert.equal(run.server('response.output_audio.delta'), [], `a text-only session gets no audio\n${why}`);
  assert.ok(run.server('response.output_text.done').length >= 1, why);
});

Scripted.run();

// ── The server as `npm start` runs it: embedded local model, real voice ────────────────────────

const MODEL_FILE = modelPath(path.join(REPO_ROOT, 'models'), DEFAULT_LLM_MODEL_NAME);
const Local = suite<{ proc: ServerProcess; dataDir: string }>('openai-agents (Python) realtime, embedded local model', {} as { proc: ServerProcess; dataDir: string });
const localMissing = missing ?? (MODEL_FILE ? null : `'${DEFAULT_LLM_MODEL_NAME}' is not fetched (npm run setup:models)`);
if (!missing && localMissing) process.stdout.write(`openai-agents (Python) on the local model: skipping: ${localMissing}\n`);
const localTest = localMissing ? Local.skip : Local;
/** The local model on a loaded 2-core machine: loading, a tool call, an answer, spoken in real time. */
const LOCAL_CLIENT_TIMEOUT_S = 240;

Local.before(async (ctx) => {
  if (localMissing) return;
  ctx.dataDir = tempDir();
  // npm start's configuration: the default providers, models loaded at start; nothing from this
  // environment may send the model elsewhere.
  ctx.proc = await spawnServer({ DATA_DIR: ctx.dataDir, PRELOAD_MODELS: 'true', LLM_PROVIDER: 'llama-cpp', LLM_BASE_URL: '', LLM_API_KEY: '', LLM_MODEL_ROUTES: '' });
  await until(() => request(ctx.proc.url, 'GET', '/readyz'), (r) => r.status === 200, 'the models to load (/readyz 200)', 180_000);
});

Local.after(async (ctx) => {
  if (ctx.proc) {
    ctx.proc.child.kill('SIGTERM');
    await ctx.proc.exited;
  }
  if (ctx.dataDir) fs.rmSync(ctx.dataDir, { recursive: true, force: true });
});

localTest('RealtimeRunner with get_weather against the embedded Qwen model: the model calls the tool and answers after its output', async (ctx) => {
  const url = `${ctx.proc.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`;
  const run = await runPythonClient(SCRIPT, ['--url', url, '--key', ctx.proc.bootstrapKey!, '--timeout', String(LOCAL_CLIENT_TIMEOUT_S)], (LOCAL_CLIENT_TIMEOUT_S + 30) * 1000);
  const serverTail = ctx.proc
    .stdout()
    .split('\n')
    .filter((l) => !l.includes('"path":"/readyz"'))
    .slice(-30);
  const why = `${run.describe()}\nserver output (tail):\n${serverTail.join('\n')}`;
  assert.is(run.code, 0, why);
  assert.equal(run.of('error'), [], why);
  const called = run.of('tool_called');
  assert.ok(called.length >= 1, `the model called get_weather\n${why}`);
  assert.match(String(called[0]!.arguments.city), /paris/i, why);
  const done = run.of('done')[0];
  assert.ok(done && (done.transcript as string).trim().length > 0, `an answer after the tool's output\n${why}`);
  process.stdout.write(`openai-agents (Python) on the local model: answered ${JSON.stringify(done.transcript)}\n`);
});

Local.run();
