/**
 * A scripted OpenAI-compatible chat-completions server for tests: real HTTP on 127.0.0.1 (a free
 * port), `POST /v1/chat/completions` answered as the OpenAI API answers it, streamed as
 * server-sent events for `stream: true` (chat.completion.chunk events, a usage event when
 * `stream_options.include_usage`, then `data: [DONE]`) or as one chat.completion JSON otherwise.
 * Point OpenAiModel (or the whole server, with LLM_BASE_URL) at `baseUrl`.
 *
 * Nothing is decided here: every request is answered by the test's script, a function of the
 * request body (and its number, from 0) returning a ChatReply: text, tool calls, both (text first),
 * or raw deltas for the shapes only some servers send; an HTTP error; or a stream that hangs or
 * is cut. Tool calls stream as the OpenAI API streams them: the first delta of a call carries
 * `index`, `id`, `type` and `function.name` with empty arguments, later deltas pieces of
 * `function.arguments`; calls one after another, or interleaved by index when `interleave` is
 * set. Every request body is recorded in `requests`, in arrival order, before the script runs;
 * `whenIdle()` tells when every response has ended (a client that aborted has gone away), and
 * `aborts` which responses their client left before the end, with how far each had got.
 *
 * Faults: an error status (with `errorHeaders`, e.g. Retry-After), a stream that hangs or is cut
 * after its content, or a malformed event (`malformed`: a raw line that is not JSON).
 *
 * Pacing: `delayMs` before every streamed event, or `firstDelayMs` before the first and `delayMs`
 * before each later one (a hosted model's wait for its first token, then its stream rate).
 *
 * A script that throws (an assertion in it, say) is answered with HTTP 500 carrying its message and
 * `x-should-retry: false` (so the client does not run the script again), which the client sees
 * as a ProviderError. Scripted error statuses are retried as a real server's would be (OpenAiModel's
 * one retry for 408, 429 and 5xx when it fits its first-token bound: a script answering 503 sees
 * two requests). Unknown paths get 404.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatCompletionCreateParams } from 'openai/resources/chat/completions';

/** What a client sent: the chat-completions request body as parsed JSON. */
export type ChatRequestBody = ChatCompletionCreateParams;

export interface ScriptedToolCall {
  /** Default `call_<n>` (n counting the calls this server has made, from 1). */
  id?: string;
  name: string;
  /** JSON text; a string streams in ARGUMENT_PIECES pieces, an array in exactly those pieces. */
  arguments: string | string[];
}

export interface ChatReply {
  /** Streamed first: a string in word-sized pieces (each keeping its trailing space), an array in exactly those pieces. */
  text?: string | string[];
  toolCalls?: ScriptedToolCall[];
  /** Stream parallel calls round-robin by index (each call's start, then one argument piece of each in turn) instead of one after another. */
  interleave?: boolean;
  /**
   * Raw `choices[0].delta` objects streamed after text and tool calls, as they are (for shapes
   * only some servers send: no `index`, arguments before the name...). Non-stream answers ignore them.
   */
  deltas?: Record<string, unknown>[];
  /** Default 'tool_calls' when the reply has tool calls (or raw deltas with tool_calls), else 'stop'. */
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
  /** Token usage reported; default prompt = request characters / 4, completion = pieces streamed. null: none even when asked. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Answer with this HTTP status and an OpenAI error body instead (`errorMessage`, default 'scripted error'). */
  status?: number;
  errorMessage?: string;
  /** Headers of that error answer (e.g. `retry-after`). */
  errorHeaders?: Record<string, string>;
  /** Stream this raw line after the content in place of the rest (malformed SSE: not JSON), then end. */
  malformed?: string;
  /** Milliseconds between streamed events (default 0: all written at once). */
  delayMs?: number;
  /** Milliseconds before the first streamed event (the role delta), in place of delayMs there (default delayMs). */
  firstDelayMs?: number;
  /**
   * How a stream ends: 'done' (finish reason, usage, [DONE]; the default), 'hang' (after the
   * content, nothing more until the client goes away: for abort tests), 'cut' (the socket is
   * destroyed after the content: a connection lost mid-stream).
   */
  ending?: 'done' | 'hang' | 'cut';
}

/** Answers request `n` (from 0) with the reply for `body`; may be async. */
export type ChatScript = (body: ChatRequestBody, n: number) => ChatReply | Promise<ChatReply>;

/** A response whose client went away before its end. */
export interface ChatAbort {
  /** The request's number (from 0, its index in `requests`). */
  request: number;
  /** Stream events written to it before the client went (0: none, e.g. it left while the script ran). */
  eventsSent: number;
}

export interface ChatCompletionsServer {
  /** `http://127.0.0.1:<port>/v1` */
  baseUrl: string;
  /** Every request body received, in order. */
  requests: ChatRequestBody[];
  /**
   * Every response whose client went away before its end, in the order they went (a 'hang'
   * stream ended by its client included; a scripted 'cut' and close() are not the client's doing).
   */
  aborts: ChatAbort[];
  /**
   * Resolves once no response is being written (a hanging stream ends when its client goes away);
   * rejects after `timeoutMs` (default 5000).
   */
  whenIdle(timeoutMs?: number): Promise<void>;
  /** Stops listening and ends open connections (a hanging stream included). Idempotent. */
  close(): Promise<void>;
}

/** Pieces a string of arguments is streamed in (more than one, so clients must concatenate). */
export const ARGUMENT_PIECES = 3;
const MODEL = 'scripted-model';
/** How long whenIdle() waits by default: a client that aborted closes its connection in milliseconds. */
const IDLE_TIMEOUT_MS = 5_000;

export async function startChatCompletionsServer(script: ChatScript): Promise<ChatCompletionsServer> {
  const requests: ChatRequestBody[] = [];
  const aborts: ChatAbort[] = [];
  let closing: Promise<void> | null = null;
  let callCount = 0;
  const newCallId = () => `call_${++callCount}`;
  const open = new Set<http.ServerResponse>();
  let idleWaiters: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    open.add(res);
    res.on('close', () => {
      open.delete(res);
      if (open.size > 0) return;
      for (const resolve of idleWaiters) resolve();
      idleWaiters = [];
    });
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      void answer(req, Buffer.concat(chunks).toString('utf8'), res);
    });
  });

  async function answer(req: http.IncomingMessage, raw: string, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return sendError(res, 404, `No route ${req.method} ${req.url}`);
    let body: ChatRequestBody;
    try {
      body = JSON.parse(raw) as ChatRequestBody;
    } catch {
      return sendError(res, 400, 'The body is not JSON.');
    }
    const n = requests.push(body) - 1;
    let reply: ChatReply | undefined;
    let eventsSent = 0;
    res.on('close', () => {
      if (!res.writableFinished && reply?.ending !== 'cut' && closing === null) aborts.push({ request: n, eventsSent });
    });
    try {
      reply = await script(body, n);
    } catch (err) {
      return sendError(res, 500, `The test script failed: ${(err as Error).message}`, { 'x-should-retry': 'false' });
    }
    if (reply.status !== undefined) return sendError(res, reply.status, reply.errorMessage ?? 'scripted error', reply.errorHeaders);
    const calls = (reply.toolCalls ?? []).map((c) => ({ id: c.id ?? newCallId(), name: c.name, pieces: argumentPieces(c.arguments) }));
    const hasCalls = calls.length > 0 || (reply.deltas ?? []).some((d) => d.tool_calls);
    const finishReason = reply.finishReason ?? (hasCalls ? 'tool_calls' : 'stop');
    const textPieces = textPiecesOf(reply.text);
    if (!body.stream) return sendJson(res, 200, completion(body, textPieces, calls, finishReason, reply.usage));
    await stream(res, body, reply, textPieces, calls, finishReason, () => eventsSent++);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    aborts,
    whenIdle(timeoutMs = IDLE_TIMEOUT_MS) {
      if (open.size === 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${open.size} chat-completions response(s) still open after ${timeoutMs} ms`)), timeoutMs);
        idleWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

interface Call {
  id: string;
  name: string;
  pieces: string[];
}

type Delta = Record<string, unknown>;

/** Streams the reply; `sent()` is called after each event is written through. */
async function stream(res: http.ServerResponse, body: ChatRequestBody, reply: ChatReply, text: string[], calls: Call[], finishReason: string, sent: () => void): Promise<void> {
  const includeUsage = body.stream_options?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);
  const envelope = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: 'chatcmpl-scripted',
    object: 'chat.completion.chunk',
    created,
    model: MODEL,
    system_fingerprint: null,
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const choice = (delta: Delta, finish: string | null = null) => envelope([{ index: 0, delta, logprobs: null, finish_reason: finish }]);

  const deltas: Delta[] = [{ role: 'assistant', content: text.length > 0 ? '' : null }];
  for (const piece of text) deltas.push({ content: piece });
  deltas.push(...toolCallDeltas(calls, reply.interleave === true));
  deltas.push(...(reply.deltas ?? []));

  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  let open = true;
  res.on('close', () => (open = false));
  let first = true;
  const send = async (data: unknown) => {
    if (!open) return;
    const delayMs = first ? (reply.firstDelayMs ?? reply.delayMs) : reply.delayMs;
    first = false;
    if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
    // Written through to the socket before the next (so a 'cut' comes after everything sent).
    if (!open) return;
    await new Promise<void>((resolve) => res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`, () => resolve()));
    sent();
  };
  for (const delta of deltas) await send(choice(delta));
  if (reply.malformed !== undefined) {
    await send(reply.malformed);
    res.end();
    return;
  }
  const ending = reply.ending ?? 'done';
  if (ending === 'hang') return; // closed by the client, or by close()
  if (ending === 'cut') {
    res.socket?.destroy();
    return;
  }
  await send(choice({}, finishReason));
  if (includeUsage && reply.usage !== null) await send(envelope([], { usage: usageOf(body, reply, text.length + calls.reduce((n, c) => n + c.pieces.length, 0)) }));
  await send('[DONE]');
  res.end();
}

/** The deltas of `calls`: each call's start (id, name, empty arguments), then its argument pieces. */
function toolCallDeltas(calls: Call[], interleave: boolean): Delta[] {
  const start = (c: Call, index: number): Delta => ({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
  const piece = (index: number, text: string): Delta => ({ tool_calls: [{ index, function: { arguments: text } }] });
  const out: Delta[] = [];
  if (!interleave) {
    calls.forEach((c, i) => {
      out.push(start(c, i));
      for (const p of c.pieces) out.push(piece(i, p));
    });
    return out;
  }
  calls.forEach((c, i) => out.push(start(c, i)));
  const rounds = Math.max(0, ...calls.map((c) => c.pieces.length));
  for (let r = 0; r < rounds; r++) calls.forEach((c, i) => r < c.pieces.length && out.push(piece(i, c.pieces[r] as string)));
  return out;
}

function completion(body: ChatRequestBody, text: string[], calls: Call[], finishReason: string, usage: ChatReply['usage']): unknown {
  const content = text.join('');
  return {
    id: 'chatcmpl-scripted',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: MODEL,
    system_fingerprint: null,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content === '' && calls.length > 0 ? null : content,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.pieces.join('') } })) } : {}),
        },
        logprobs: null,
        finish_reason: finishReason,
      },
    ],
    ...(usage === null ? {} : { usage: usageOf(body, { usage }, text.length + calls.length) }),
  };
}

function usageOf(body: ChatRequestBody, reply: Pick<ChatReply, 'usage'>, pieces: number) {
  const usage = reply.usage ?? { prompt_tokens: Math.ceil(JSON.stringify(body.messages).length / 4), completion_tokens: pieces };
  return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
}

function textPiecesOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return [];
  if (Array.isArray(text)) return text;
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function argumentPieces(args: string | string[]): string[] {
  if (Array.isArray(args)) return args;
  if (args === '') return [];
  const size = Math.ceil(args.length / ARGUMENT_PIECES);
  const out: string[] = [];
  for (let i = 0; i < args.length; i += size) out.push(args.slice(i, i + size));
  return out;
}

function sendError(res: http.ServerResponse, status: number, message: string, headers: http.OutgoingHttpHeaders = {}): void {
  sendJson(res, status, { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } }, headers);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}
