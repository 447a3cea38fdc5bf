/**
 * The language-model seam: the realtime engine hands a model the conversation (system
 * instructions first, then the turns in order) and reads the reply back as a stream of text
 * chunks that ends with exactly one `done` chunk (finish reason and token usage). Aborting the
 * request's signal ends the stream promptly with finishReason 'aborted' instead of throwing, so
 * an interrupted turn is not an error. Failures throw ProviderError.
 *
 * Implementations: openai.ts (any OpenAI-compatible chat-completions server), llama-cpp.ts (a
 * local GGUF file through node-llama-cpp), offline-responder.ts (rule-based stand-in when no model
 * is available), fake-llm.ts (scripted, for engine tests). index.ts picks one per session `model`
 * name from the routes in config.ts.
 */

import { ProviderError } from '../provider-error.js';

export { ProviderError, type ProviderErrorOptions } from '../provider-error.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface GenerateRequest {
  /** System instructions first, then the conversation in order. */
  messages: ChatMessage[];
  /** Upper bound on output tokens; null = the provider's own limit. */
  maxOutputTokens: number | null;
  /** Aborting stops generation promptly; the stream then ends with finishReason 'aborted' (no throw). */
  signal: AbortSignal;
  /** Sampling temperature 0..2; undefined = the provider's default. */
  temperature?: number;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export type FinishReason = 'stop' | 'length' | 'aborted';

export type GenerateChunk =
  | { type: 'text'; text: string }
  | { type: 'done'; finishReason: FinishReason; usage: TokenUsage | null };

export interface LanguageModel {
  /** Provider and model, e.g. 'llama-cpp:qwen2.5-coder-0.5b-instruct-q4_k_m', 'openai:gpt-4o-mini', 'offline-responder'. */
  readonly id: string;
  /**
   * Whether it runs in this process (the local GGUF, the offline responder, fakes): work thrown
   * away costs only CPU, so the engine may start a reply speculatively (early-reply.ts). False for
   * a remote API, which bills for every request.
   */
  readonly local: boolean;
  /** Streams the reply: text chunks in order, then exactly one 'done'. Throws ProviderError (code e.g. 'llm_unavailable', 'llm_request_failed') for failures before or during generation. */
  generate(request: GenerateRequest): AsyncIterable<GenerateChunk>;
  /**
   * Evaluates the prompt of `messages` ahead of the requests that will start with them (the
   * session's instructions), so those evaluate only what follows. Optional: only a model that
   * evaluates prompts itself (the local one) has anything to prepare.
   */
  prefill?(messages: ChatMessage[]): Promise<void>;
  close(): Promise<void>;
}

export interface LanguageModels {
  /** The model that serves a session's `model` name (see the routing rules in config); never throws for unknown names: falls back to the default route. */
  forModel(model: string): LanguageModel;
  close(): Promise<void>;
}

/** A provider that was closed or never configured; thrown by generate(). */
export function llmUnavailable(message: string, cause?: unknown): ProviderError {
  return new ProviderError('llm_unavailable', message, { status: 503, retryable: false, cause });
}

