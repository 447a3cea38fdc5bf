/**
 * Any OpenAI-compatible chat-completions server as a LanguageModel: the OpenAI API, vLLM, Ollama,
 * llama.cpp's server. One streaming request per reply (`stream: true`, with
 * `stream_options.include_usage` so the last event carries token usage; servers that do not send
 * it give usage null). Deltas are passed on as text chunks as they arrive.
 *
 * The output limit is sent as `max_completion_tokens` to the OpenAI API (its newer models refuse
 * `max_tokens`) and as `max_tokens` to other servers (the field they all accept). Failures become
 * ProviderError: 'llm_request_failed' with the upstream status and request id for HTTP errors
 * (retryable for 408, 429 and 5xx), the same code for connection loss before or during the stream.
 * The SDK's own retries (before any byte is streamed) are limited to one, so a dead server costs
 * little time. Aborting ends the stream with finishReason 'aborted'.
 *
 * The messages sent are the newest turns that fit `contextTokens` (context.ts), the same list the
 * local model gets, so a long conversation is not sent whole on every reply.
 */
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import type { FinishReason, GenerateChunk, GenerateRequest, LanguageModel, TokenUsage } from './base.js';
import { ProviderError, llmUnavailable } from './base.js';
import { fitMessages, promptCharBudget } from './context.js';

/** Retries the SDK makes for connection errors, 408, 429 and 5xx before the first byte. */
const OPENAI_MAX_RETRIES = 1;
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
  /** How long the server may take to start answering. */
  timeoutMs: number;
}

export class OpenAiModel implements LanguageModel {
  readonly id: string;
  /** Remote (also when its base URL is a server on this machine: it may bill, and holds its own queue). */
  readonly local = false;
  private readonly client: OpenAI;
  private readonly officialApi: boolean;
  private closed = false;

  constructor(private readonly options: OpenAiModelOptions) {
    this.id = `openai:${options.model}`;
    this.officialApi = options.baseUrl === null || new URL(options.baseUrl).hostname === 'api.openai.com';
    this.client = new OpenAI({
      apiKey: options.apiKey ?? NO_KEY,
      baseURL: options.baseUrl ?? undefined,
      timeout: options.timeoutMs,
      maxRetries: OPENAI_MAX_RETRIES,
      logLevel: 'off',
    });
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable(`${this.id}: generate() after close()`);
    const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
    const params: ChatCompletionCreateParamsStreaming = {
      model: this.options.model,
      messages: fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)).map((m) => ({ role: m.role, content: m.content })),
      stream: true,
      stream_options: { include_usage: true },
      ...(this.officialApi ? { max_completion_tokens: limit } : { max_tokens: limit }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    };
    let finishReason: FinishReason = 'stop';
    let usage: TokenUsage | null = null;
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    try {
      const stream = await this.client.chat.completions.create(params, { signal: request.signal });
      for await (const event of stream) {
        if (event.usage) usage = { inputTokens: event.usage.prompt_tokens, outputTokens: event.usage.completion_tokens };
        const choice = event.choices[0];
        if (!choice) continue;
        const text = choice.delta?.content;
        if (text) yield { type: 'text', text };
        if (choice.finish_reason) finishReason = choice.finish_reason === 'length' ? 'length' : 'stop';
      }
    } catch (err) {
      if (request.signal.aborted || err instanceof OpenAI.APIUserAbortError) {
        yield { type: 'done', finishReason: 'aborted', usage };
        return;
      }
      throw this.toProviderError(err);
    }
    yield { type: 'done', finishReason: request.signal.aborted ? 'aborted' : finishReason, usage };
  }

  async close(): Promise<void> {
    this.closed = true;
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
      retryable: true,
      cause: err,
    });
  }
}
