/**
 * Any OpenAI-compatible chat-completions server as a LanguageModel: the OpenAI API, vLLM, Ollama,
 * llama.cpp's server. One streaming request per reply (`stream: true`, with
 * `stream_options.include_usage` so the last event carries token usage; servers that do not send
 * it give usage null).
 *
 * What is sent: the messages in chat-completions form (text-only user messages as plain strings; a
 * user message with images as `text` and `image_url` parts, each image in place of its IMAGE_NOTE
 * in the text, the note being for models that cannot see; an assistant's tool calls as
 * `tool_calls`, its content null when it said nothing; `tool` messages with their
 * `tool_call_id`). With tools: `tools` as function tools, `tool_choice` (always, 'auto' when the
 * request gives none, so servers whose default is 'none' still call) and `parallel_tool_calls`
 * when the request sets it; without tools none of the three.
 *
 * What is streamed back: text deltas as text chunks as they arrive, and tool calls from
 * `delta.tool_calls`. The first delta of a call carries its id and name, later ones pieces of its
 * arguments, several calls possibly interleaved by `index`; each call is announced once
 * (`tool_call_start`, numbered from 0 in the order they start) before any of its argument pieces.
 * Servers that stray from that are tolerated: argument pieces before the name are held until it
 * comes; a call without `index` is told apart by its id; a call without an id gets one. A call
 * that never gets a name is a broken stream ('llm_request_failed'). The finish reason is
 * 'length' when the server says so, else 'tool_calls' when the reply made calls (the OpenAI API
 * itself says 'stop' for a call forced by a named tool_choice), else 'stop'.
 *
 * The output limit is sent as `max_completion_tokens` to the OpenAI API (its newer models refuse
 * `max_tokens`) and as `max_tokens` to other servers (the field they all accept). Failures become
 * ProviderError: 'llm_request_failed' with the upstream status and request id for HTTP errors,
 * the same code (without a status) for connection loss before or during the stream.
 * Bounds (StreamWatch): the first token (text or a tool call) within firstTokenTimeoutMs of the
 * request, its one retry (a failed connection, 408, 429, 5xx, before any byte; made here, and only
 * when it can start within the bound, a Retry-After included) counted in, so a retry never doubles
 * the wait; then no gap between tokens over tokenGapTimeoutMs. Past either the
 * reply fails ('llm_request_failed', the message naming the bound). Aborting ends the stream with
 * finishReason 'aborted'.
 *
 * The messages sent are the newest turns that fit `contextTokens` (context.ts), the same list the
 * local model gets, so a long conversation is not sent whole on every reply.
 */
import OpenAI from 'openai';
import { abortableDelay } from '../../core/clock.js';
import type {
  ChatCompletionChunk,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
import type { ChatImage, ChatMessage, FinishReason, GenerateChunk, GenerateRequest, LanguageModel, TokenUsage, ToolChoice } from './base.js';
import { IMAGE_NOTE, ProviderError, llmUnavailable, newCallId } from './base.js';
import { fitMessages, promptCharBudget } from './context.js';

/**
 * Retries of a request that failed before its first byte (a failed connection, 408, 429, 5xx):
 * made here, not by the SDK, whose wait before a retry (a Retry-After of 30 s, say) does not end
 * when the request is aborted; a retry is made only when it can still start within the first-token
 * bound.
 */
const MAX_RETRIES = 1;
/** The wait before a retry when the upstream names none (ms); a Retry-After is honoured when it fits the bound. */
const RETRY_DELAY_MS = 200;
/**
 * The SDK refuses to start without a key; servers that need none (local vLLM, Ollama, llama.cpp)
 * ignore the Authorization header this fills.
 */
const NO_KEY = 'no-key';

export interface OpenAiModelOptions {
  /** Base URL ending in /v1; null = https://api.openai.com/v1. */
  baseUrl: string | null;
  apiKey: string | null;
  /** Model name sent upstream. */
  model: string;
  /** Output limit when a request gives none. */
  maxOutputTokens: number;
  /** Context window the conversation is cut to (LLM_CONTEXT_TOKENS), in tokens. */
  contextTokens: number;
  /** How long the server may take from the request to the first token (text or a tool call), its retry included. */
  firstTokenTimeoutMs: number;
  /** How long a started stream may go without a token. */
  tokenGapTimeoutMs: number;
  /** Whether replies may start before their turn is confirmed (LLM_EARLY_REPLY): the upstream bills for those thrown away. */
  speculative: boolean;
  /** Told of each request's outcome: a first token came (succeeded), or it failed (not an abort). */
  health?: { succeeded(): void; failed(err: unknown): void };
}

export class OpenAiModel implements LanguageModel {
  readonly id: string;
  /** Remote (also when its base URL is a server on this machine: it may bill, and holds its own queue). */
  readonly local = false;
  readonly speculative: boolean;
  private readonly client: OpenAI;
  private readonly officialApi: boolean;
  private closed = false;

  constructor(private readonly options: OpenAiModelOptions) {
    this.id = `openai:${options.model}`;
    this.speculative = options.speculative;
    this.officialApi = options.baseUrl === null || new URL(options.baseUrl).hostname === 'api.openai.com';
    this.client = new OpenAI({
      apiKey: options.apiKey ?? NO_KEY,
      baseURL: options.baseUrl ?? undefined,
      // Each attempt is bounded by the first-token time; generate() bounds all of them together.
      timeout: options.firstTokenTimeoutMs,
      maxRetries: 0, // retries are generate()'s (see MAX_RETRIES)
      logLevel: 'off',
    });
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable(`${this.id}: generate() after close()`);
    const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
    const tools = request.tools ?? [];
    const params: ChatCompletionCreateParamsStreaming = {
      model: this.options.model,
      messages: fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)).map(toWire),
      stream: true,
      stream_options: { include_usage: true },
      ...(this.officialApi ? { max_completion_tokens: limit } : { max_tokens: limit }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(tools.length === 0
        ? {}
        : {
            tools: tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } })),
            tool_choice: toolChoiceToWire(request.toolChoice ?? 'auto'),
            ...(request.parallelToolCalls === undefined ? {} : { parallel_tool_calls: request.parallelToolCalls }),
          }),
    };
    let serverFinish: ChatCompletionChunk.Choice['finish_reason'] = null;
    let usage: TokenUsage | null = null;
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    const calls = new ToolCallAssembler(this.id);
    const watch = new StreamWatch(request.signal, this.options);
    try {
      const stream = await this.open(params, watch);
      for await (const event of stream) {
        // Events the SDK had already read when the abort came are not passed on.
        if (watch.signal.aborted) break;
        if (event.usage) usage = { inputTokens: event.usage.prompt_tokens, outputTokens: event.usage.completion_tokens };
        const choice = event.choices[0];
        if (!choice) continue;
        const text = choice.delta?.content;
        const toolCalls = choice.delta?.tool_calls ?? [];
        if (text || toolCalls.length > 0) {
          if (!watch.started) this.options.health?.succeeded();
          watch.token();
        }
        if (text) yield { type: 'text', text };
        for (const delta of toolCalls) yield* calls.push(delta);
        if (choice.finish_reason) serverFinish = choice.finish_reason;
      }
    } catch (err) {
      if (watch.stalled) throw this.failed(this.stalled(watch));
      if (request.signal.aborted || err instanceof OpenAI.APIUserAbortError) {
        yield { type: 'done', finishReason: 'aborted', usage };
        return;
      }
      throw this.failed(this.toProviderError(err));
    } finally {
      watch.close();
    }
    if (watch.stalled) throw this.failed(this.stalled(watch));
    // The SDK ends the iteration quietly (no throw) when the request is aborted mid-stream.
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage };
      return;
    }
    calls.finish();
    const finishReason: FinishReason = serverFinish === 'length' ? 'length' : calls.count > 0 ? 'tool_calls' : 'stop';
    yield { type: 'done', finishReason, usage };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /**
   * Starts the stream, retrying once a failure worth it (a failed connection, 408, 429, 5xx) when
   * the retry, after the upstream's Retry-After or RETRY_DELAY_MS, still starts within the
   * first-token bound; the wait ends with the request's abort.
   */
  private async open(params: ChatCompletionCreateParamsStreaming, watch: StreamWatch) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.client.chat.completions.create(params, { signal: watch.signal });
      } catch (err) {
        const delayMs = attempt < MAX_RETRIES ? retryDelayMs(err) : null;
        if (delayMs === null || watch.signal.aborted || delayMs >= watch.firstTokenMsLeft()) throw err;
        await abortableDelay(delayMs, watch.signal);
        if (watch.signal.aborted) throw err;
      }
    }
  }

  /** A failure, told to the health hook on its way out. */
  private failed(err: ProviderError): ProviderError {
    this.options.health?.failed(err);
    return err;
  }

  /**
   * The reply given up by its StreamWatch: no first token in time (LLM_FIRST_TOKEN_TIMEOUT_MS), or
   * a stream that stalled (LLM_TOKEN_GAP_TIMEOUT_MS). A 503, so the client reads why: the message
   * is this server's own, with nothing of the upstream in it.
   */
  private stalled(watch: StreamWatch): ProviderError {
    const message =
      watch.stalled === 'first_token'
        ? `The language model sent no first token within ${this.options.firstTokenTimeoutMs} ms.`
        : `The language model's reply stalled: no token for ${this.options.tokenGapTimeoutMs} ms.`;
    return new ProviderError('llm_request_failed', message, { status: 503 });
  }

  private toProviderError(err: unknown): ProviderError {
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      return new ProviderError('llm_request_failed', `${this.id}: the server answered HTTP ${err.status}: ${err.message}`, {
        statusCode: err.status,
        requestId: err.requestID ?? null,
        cause: err,
      });
    }
    const what = err instanceof OpenAI.APIConnectionTimeoutError ? 'timed out' : 'failed';
    return new ProviderError('llm_request_failed', `${this.id}: the request ${what}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** One message in chat-completions form (see the header). */
function toWire(m: ChatMessage): ChatCompletionMessageParam {
  switch (m.role) {
    case 'system':
      return { role: 'system', content: m.content };
    case 'user':
      return m.images && m.images.length > 0 ? { role: 'user', content: userParts(m.content, m.images) } : { role: 'user', content: m.content };
    case 'assistant':
      if (!m.toolCalls || m.toolCalls.length === 0) return { role: 'assistant', content: m.content };
      return {
        role: 'assistant',
        content: m.content === '' ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
  }
}

/**
 * A user message's text and images as content parts. The engine notes every image in the text
 * (IMAGE_NOTE) but attaches only the newest few, the last ones of the message: the last
 * `images.length` notes become the images, in place; earlier notes stay as text. Without enough
 * notes (a caller that wrote none) the text comes first, then the images.
 */
function userParts(content: string, images: ChatImage[]): ChatCompletionContentPart[] {
  const imagePart = (i: number): ChatCompletionContentPart => {
    const image = images[i] as ChatImage;
    return { type: 'image_url', image_url: { url: image.url, detail: image.detail } };
  };
  const pieces = content.split(IMAGE_NOTE);
  const notes = pieces.length - 1;
  const parts: ChatCompletionContentPart[] = [];
  if (notes < images.length) {
    if (content.trim() !== '') parts.push({ type: 'text', text: content });
    images.forEach((_, i) => parts.push(imagePart(i)));
    return parts;
  }
  const firstShown = notes - images.length;
  let text = pieces[0] as string;
  for (let n = 0; n < notes; n++) {
    if (n < firstShown) {
      text += IMAGE_NOTE + (pieces[n + 1] as string);
      continue;
    }
    if (text.trim() !== '') parts.push({ type: 'text', text: text.trim() });
    parts.push(imagePart(n - firstShown));
    text = pieces[n + 1] as string;
  }
  if (text.trim() !== '') parts.push({ type: 'text', text: text.trim() });
  return parts;
}

function toolChoiceToWire(choice: ToolChoice): ChatCompletionToolChoiceOption {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

/**
 * How long to wait before retrying a request that failed this way; null when it is not worth a
 * retry. A failed connection and 408, 429, 5xx are (as the SDK would retry them); an upstream's
 * `retry-after-ms` or `retry-after` (seconds) sets the wait, and `x-should-retry: false` forbids it.
 */
function retryDelayMs(err: unknown): number | null {
  if (err instanceof OpenAI.APIConnectionError && !(err instanceof OpenAI.APIUserAbortError)) return RETRY_DELAY_MS;
  if (!(err instanceof OpenAI.APIError) || err.status === undefined) return null;
  const headers = err.headers as Headers | undefined;
  if (headers?.get('x-should-retry') === 'false') return null;
  if (!(err.status === 408 || err.status === 429 || err.status >= 500)) return null;
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms >= 0 && headers?.get('retry-after-ms') !== null) return ms;
  const seconds = Number(headers?.get('retry-after'));
  if (Number.isFinite(seconds) && seconds >= 0 && headers?.get('retry-after') !== null) return seconds * 1000;
  return RETRY_DELAY_MS;
}

/**
 * The bounds of one reply's stream: the first token within `firstTokenTimeoutMs` of the request
 * (its retry included: one deadline for every attempt), then no gap between tokens longer
 * than `tokenGapTimeoutMs`. Past either, the request is aborted and `stalled` says which; the
 * caller's own abort passes through.
 */
class StreamWatch {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;
  private readonly onAbort = () => this.controller.abort();
  private readonly startedAt = Date.now();
  stalled: 'first_token' | 'token_gap' | null = null;
  /** Whether a token has come. */
  started = false;

  constructor(
    private readonly caller: AbortSignal,
    private readonly bounds: { firstTokenTimeoutMs: number; tokenGapTimeoutMs: number },
  ) {
    caller.addEventListener('abort', this.onAbort, { once: true });
    this.timer = this.arm('first_token', bounds.firstTokenTimeoutMs);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Milliseconds left before the first-token bound (0 once a token came or it passed). */
  firstTokenMsLeft(): number {
    return this.started ? 0 : Math.max(0, this.bounds.firstTokenTimeoutMs - (Date.now() - this.startedAt));
  }

  /** A token came: the gap bound starts again. */
  token(): void {
    this.started = true;
    clearTimeout(this.timer);
    this.timer = this.arm('token_gap', this.bounds.tokenGapTimeoutMs);
  }

  close(): void {
    clearTimeout(this.timer);
    this.caller.removeEventListener('abort', this.onAbort);
  }

  private arm(kind: 'first_token' | 'token_gap', ms: number): NodeJS.Timeout {
    return setTimeout(() => {
      if (this.caller.aborted) return;
      this.stalled = kind;
      this.controller.abort();
    }, ms);
  }
}

/** One call of the reply being streamed, as its deltas have told it so far. */
interface CallSlot {
  /** Our number for it once announced (tool_call_start), else null. */
  index: number | null;
  id: string | null;
  name: string | null;
  /** Argument pieces that came before the name, sent after the announcement. */
  pending: string;
}

/**
 * Turns `delta.tool_calls` entries into tool_call_start / tool_call_arguments chunks (see the
 * header for the stray server shapes it accepts).
 */
class ToolCallAssembler {
  /** Calls by the server's `index` (or `id:<id>` for entries without one). */
  private readonly slots = new Map<number | string, CallSlot>();
  /** Calls whose index a later call took over. */
  private readonly retired: CallSlot[] = [];
  private last: CallSlot | null = null;
  /** Calls announced so far. */
  count = 0;

  constructor(private readonly modelId: string) {}

  *push(delta: ChatCompletionChunk.Choice.Delta.ToolCall): Generator<GenerateChunk> {
    const slot = this.slotFor(delta);
    this.last = slot;
    const name = delta.function?.name;
    if (slot.name === null && name) slot.name = name;
    const args = delta.function?.arguments ?? '';
    if (slot.index === null) {
      slot.pending += args;
      if (slot.name === null) return;
      slot.index = this.count++;
      yield { type: 'tool_call_start', index: slot.index, callId: slot.id ?? newCallId(), name: slot.name };
      if (slot.pending !== '') yield { type: 'tool_call_arguments', index: slot.index, delta: slot.pending };
      slot.pending = '';
    } else if (args !== '') {
      yield { type: 'tool_call_arguments', index: slot.index, delta: args };
    }
  }

  /** Throws for a call that never got a name (its arguments could not be announced). */
  finish(): void {
    for (const slot of [...this.retired, ...this.slots.values()]) {
      if (slot.index === null) {
        throw new ProviderError('llm_request_failed', `${this.modelId}: the server streamed a tool call without a function name (id ${slot.id ?? 'none'}).`, {
        });
      }
    }
  }

  private slotFor(delta: ChatCompletionChunk.Choice.Delta.ToolCall): CallSlot {
    const id = delta.id || null;
    // Entries without an index (some servers): a new id is a new call; no id continues the last.
    if (typeof delta.index !== 'number') {
      if (id === null && this.last) return this.last;
      return this.slot(`id:${id ?? ''}`, id);
    }
    const known = this.slots.get(delta.index);
    // A different id at a known index is a new call (servers that number every call 0).
    if (known && id !== null && known.id !== null && known.id !== id) {
      this.retired.push(known);
      this.slots.delete(delta.index);
    }
    return this.slot(delta.index, id);
  }

  private slot(key: number | string, id: string | null): CallSlot {
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { index: null, id, name: null, pending: '' };
      this.slots.set(key, slot);
    }
    if (slot.id === null && id !== null) slot.id = id;
    return slot;
  }
}
