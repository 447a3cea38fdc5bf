/**
 * What the agent-framework tests (test/clients/*.test.ts) share: the Python of the virtual
 * environment src/cli/setup.sh --fleet makes for them (target/clients-venv, packages pinned in
 * test/clients/requirements.txt), running a client script of test/clients/py/ and reading the JSON
 * lines it prints, the scripted language model those tests give the server (a real
 * chat-completions server over HTTP, harness/servers/chat-completions-server.ts: it calls
 * get_weather for a question it is offered that tool with, then answers from the tool's output),
 * and the server itself, started in this process with that model as its LLM_BASE_URL.
 *
 * The server's voice and recogniser are the scripted ones of harness/servers/realtime-server.ts (a
 * fixed speech rate, no model to load); its language model, media plane and protocol are the
 * real ones. Nothing here passes when something is missing: the tests that need the environment
 * are registered as skipped, with the reason printed.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FakeSpeechRecognizers } from '../../src/providers/asr/fake-asr.js';
import { FakeSpeechService } from '../../src/providers/tts/fake-tts.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ChatRequestBody, type ChatScript } from '../../harness/servers/chat-completions-server.js';
import { SPEECH_MS_PER_CHAR } from '../../harness/servers/realtime-server.js';
import { REPO_ROOT, startTestServer, type TestServer } from '../../harness/servers/server.js';

export const CLIENTS_VENV = path.join(REPO_ROOT, 'target/clients-venv');
export const CLIENTS_PYTHON = path.join(CLIENTS_VENV, 'bin/python');
/** Written by setup.sh once every package of requirements.txt is installed. */
const VENV_STAMP = path.join(CLIENTS_VENV, '.requirements-sha256');
const SCRIPTS_DIR = path.join(REPO_ROOT, 'test/clients/py');

/** Why the Python clients cannot run here, or null when they can. */
export function pythonClientsMissing(): string | null {
  if (!fs.existsSync(CLIENTS_PYTHON) || !fs.existsSync(VENV_STAMP)) {
    return `${path.relative(REPO_ROOT, CLIENTS_VENV)} is not installed (bash src/cli/setup.sh --fleet installs test/clients/requirements.txt)`;
  }
  return null;
}

/** One JSON line of a client script: `event` says what it is (see the script's docstring). */
export interface ClientLine {
  event: string;
  [field: string]: any;
}

export interface ClientRun {
  code: number | null;
  lines: ClientLine[];
  stderr: string;
  /** The lines of one kind of event. */
  of(event: string): ClientLine[];
  /** The server events the client saw, by type. */
  server(type: string): ClientLine[];
  /** Index of the first line matching, or -1. */
  indexOf(match: (line: ClientLine) => boolean, from?: number): number;
  /** The run, for an assertion message: its exit status, last lines (deltas left out) and stderr's tail. */
  describe(): string;
}

/**
 * Runs `test/clients/py/<script>` with the environment's Python and `args`; resolves when it
 * exits (killed after `timeoutMs`, which then shows as a null exit status).
 */
export async function runPythonClient(script: string, args: string[], timeoutMs: number): Promise<ClientRun> {
  const child = spawn(CLIENTS_PYTHON, [path.join(SCRIPTS_DIR, script), ...args], {
    cwd: REPO_ROOT,
    // No key or endpoint of the real OpenAI API may leak in from the environment.
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c) => resolve(c));
  }).finally(() => clearTimeout(timer));
  const lines: ClientLine[] = [];
  for (const text of stdout.split('\n')) {
    if (!text.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(text) as ClientLine);
    } catch {
      lines.push({ event: 'unparsed', text });
    }
  }
  return {
    code,
    lines,
    stderr,
    of: (event) => lines.filter((l) => l.event === event),
    server: (type) => lines.filter((l) => l.event === 'server' && l.type === type),
    indexOf: (match, from = 0) => {
      const i = lines.slice(from).findIndex(match);
      return i < 0 ? -1 : i + from;
    },
    describe: () =>
      [
        `${script} exited with ${code === null ? 'nothing (killed after the timeout)' : code}; its last lines:`,
        ...lines
          .filter((l) => !(l.event === 'server' && /\.delta$/.test(String(l.type))))
          .slice(-40)
          .map((l) => '  ' + JSON.stringify(l).slice(0, 400)),
        'stderr (tail):',
        stderr.split('\n').filter((l) => !/\| DEBUG +\|/.test(l)).slice(-25).join('\n'),
      ].join('\n'),
  };
}

/** What the scripted get_weather tool of every client returns contains this. */
export const WEATHER_MARK = '22';

/**
 * The language model of these tests, as a chat-completions script: a request that offers
 * get_weather and ends with the user's turn is answered with a call of it for Paris; a request
 * that ends with a tool's output is answered in words quoting that output; anything else with a
 * plain sentence.
 */
export const weatherScript: ChatScript = (body) => {
  const last = body.messages[body.messages.length - 1];
  if (last?.role === 'tool') {
    const output = typeof last.content === 'string' ? last.content : last.content.map((p) => ('text' in p ? p.text : '')).join('');
    return { text: `Here is the weather in Paris: ${output}` };
  }
  if (offersTool(body, 'get_weather') && last?.role === 'user') return { toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] };
  return { text: 'I can only talk about the weather.' };
};

export function offersTool(body: ChatRequestBody, name: string): boolean {
  return (body.tools ?? []).some((t) => t.type === 'function' && t.function.name === name);
}

export interface WeatherServer {
  llm: ChatCompletionsServer;
  server: TestServer;
  /** ws://127.0.0.1:PORT/v1/realtime */
  realtimeUrl: string;
  close(): Promise<void>;
}

/** The scripted language model over HTTP, and the server in this process pointed at it. */
export async function startWeatherServer(script: ChatScript = weatherScript): Promise<WeatherServer> {
  const llm = await startChatCompletionsServer(script);
  const tts = new FakeSpeechService('any', { phonemeMs: SPEECH_MS_PER_CHAR, wordsPerChunk: 1000 });
  const asr = new FakeSpeechRecognizers();
  asr.options = { transcript: "What's the weather in Paris?", language: 'en' };
  let server: TestServer;
  try {
    server = await startTestServer({
      // Every session model goes to the OpenAI-compatible provider, i.e. to the scripted server.
      env: { LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.baseUrl, LLM_API_KEY: 'sk-test', PRELOAD_MODELS: 'false' },
      runtime: { tts, asr },
    });
  } catch (err) {
    await llm.close();
    throw err;
  }
  return {
    llm,
    server,
    realtimeUrl: `${server.url.replace(/^http/, 'ws')}/v1/realtime`,
    close: async () => {
      await server.close();
      await llm.close();
    },
  };
}

/** The chat-completions requests that offered `name` as a tool, and the ones after its output came back. */
export function toolRequests(llm: ChatCompletionsServer, name: string): { offered: ChatRequestBody[]; afterOutput: ChatRequestBody[] } {
  const offered = llm.requests.filter((r) => offersTool(r, name));
  const afterOutput = llm.requests.filter((r) => r.messages.some((m) => m.role === 'tool'));
  return { offered, afterOutput };
}
