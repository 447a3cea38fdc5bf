/**
 * The language-model seam: the realtime engine hands a model the conversation (system
 * instructions first, then the turns in order) and the tools it may call, and reads the reply back
 * as a stream of chunks that ends with exactly one `done` chunk (finish reason and token usage).
 * Aborting the request's signal ends the stream promptly with finishReason 'aborted' instead of
 * throwing, so an interrupted turn is not an error. Failures throw ProviderError.
 *
 * The conversation is the OpenAI chat model: user messages (text, and images a vision model may
 * see), assistant messages (text and/or the tool calls it made), and `tool` messages carrying a
 * call's output, each after the assistant message that made the call. A reply streams text
 * chunks and tool calls in the order the model produces them: a call is announced once
 * (`tool_call_start`, with its index in this reply, call id and function name) before any of its
 * argument deltas (`tool_call_arguments`, JSON text that concatenates to the arguments). A
 * provider that cannot see images gets user messages whose `images` it ignores: the engine has
 * already put a note in their text (IMAGE_NOTE).
 *
 * Implementations: openai.ts (any OpenAI-compatible chat-completions server), llama-cpp.ts (a
 * local GGUF file through node-llama-cpp), offline-responder.ts (rule-based stand-in when no model
 * is available), fake-llm.ts (scripted, for engine tests). index.ts picks one per session `model`
 * name from the routes in config.ts.
 */

import type { DependencyHealth } from '../../core/dependency-health.js';
import { ProviderError } from '../provider-error.js';
import { randomBase62 } from '../../core/ids.js';

export { ProviderError, type ProviderErrorOptions } from '../provider-error.js';

/** An image a user shared, as a data URL the engine has validated (bounded size, decodable). */
export interface ChatImage {
  /** `data:image/jpeg;base64,...` (or png, webp, gif). */
  url: string;
  detail: 'auto' | 'low' | 'high';
}

/** A function call the assistant made; `arguments` is the JSON text the model wrote. */
export interface ToolCall {
  /** The call id (OpenAI's `call_id`), echoed by the `tool` message that answers it. */
  id: string;
  name: string;
  arguments: string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  /** `images`: shared images in order; `content` already carries a note per image for models that cannot see them. */
  | { role: 'user'; content: string; images?: ChatImage[] }
  /** `content` may be '' when the turn was only tool calls. */
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[] }
  /** A function call's output, answering the assistant's call `toolCallId`. */
  | { role: 'tool'; toolCallId: string; content: string };

export type ChatRole = ChatMessage['role'];

/** A function the model may call: OpenAI's function tool (`parameters` is a JSON Schema object). */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** OpenAI's tool_choice: let the model decide, forbid calls, require one, or require this function. */
export type ToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; name: string };

/** Printed in a user message's text for each image, for models that cannot see images. */
export const IMAGE_NOTE = '[The user shared an image here; you cannot see images, so say so if they ask about it.]';

export interface GenerateRequest {
  /** System instructions first, then the conversation in order. */
  messages: ChatMessage[];
  /** Upper bound on output tokens; null = the provider's own limit. */
  maxOutputTokens: number | null;
  /** Aborting stops generation promptly; the stream then ends with finishReason 'aborted' (no throw). */
  signal: AbortSignal;
  /** Sampling temperature 0..2; undefined = the provider's default. */
  temperature?: number;
  /** Functions the model may call; none (undefined or empty): a plain reply. */
  tools?: ToolDefinition[];
  /** How it may call them; undefined = 'auto'. Ignored without tools. */
  toolChoice?: ToolChoice;
  /** Whether it may make several calls in one reply (OpenAI's parallel_tool_calls); undefined = true. */
  parallelToolCalls?: boolean;
  /** Set for a reply started before its turn is confirmed (the early reply); unset: confirmed. */
  speculation?: SpeculativeWork;
}

/**
 * Work started before it is known to be needed. A local model serves confirmed requests first and
 * may stop a speculative generation to free room for a confirmed one: it calls `preempted()` at
 * once, and the stream then ends with finishReason 'aborted' though the request's signal did not
 * fire.
 */
export interface SpeculativeWork {
  /** Whether it is still speculative (read whenever it matters: false once its turn is confirmed). */
  isSpeculative(): boolean;
  preempted(): void;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/** 'tool_calls': the reply ended with the calls it made (the model waits for their outputs). */
export type FinishReason = 'stop' | 'length' | 'aborted' | 'tool_calls';

export type GenerateChunk =
  | { type: 'text'; text: string }
  /** A new function call, `index` counting the calls of this reply from 0; its arguments follow. */
  | { type: 'tool_call_start'; index: number; callId: string; name: string }
  /** More of call `index`'s JSON arguments. */
  | { type: 'tool_call_arguments'; index: number; delta: string }
  | { type: 'done'; finishReason: FinishReason; usage: TokenUsage | null };

/** A call id for a call whose provider gave none (the local model; a server that leaves it out). */
export const newCallId = (): string => `call_${randomBase62(24)}`;

/** Characters a message puts in a prompt: its text, and its tool calls' names and arguments. */
export function messageChars(m: ChatMessage): number {
  let n = m.content.length;
  if (m.role === 'assistant') for (const c of m.toolCalls ?? []) n += c.name.length + c.arguments.length;
  return n;
}

export interface LanguageModel {
  /** Provider and model, e.g. 'llama-cpp:qwen2.5-coder-0.5b-instruct-q4_k_m', 'openai:gpt-4o-mini', 'offline-responder'. */
  readonly id: string;
  /**
   * Whether it runs in this process (the local GGUF, the offline responder, fakes): work thrown
   * away costs only CPU, so the engine may start a reply speculatively (early-reply.ts). False for
   * a remote API, which bills for every request.
   */
  readonly local: boolean;
  /**
   * Whether the engine may start a reply before its turn is confirmed (the early reply,
   * realtime/preemptive-generation.ts). A reply thrown away costs CPU here, or the tokens a remote
   * API bills for it: LLM_EARLY_REPLY says whether a remote model may.
   */
  readonly speculative: boolean;
  /** Streams the reply: text chunks in order, then exactly one 'done'. Throws ProviderError (code e.g. 'llm_unavailable', 'llm_request_failed') for failures before or during generation. */
  generate(request: GenerateRequest): AsyncIterable<GenerateChunk>;
  /**
   * Evaluates the prompt of `messages` ahead of the requests that will start with them (the
   * session's instructions), so those evaluate only what follows. Optional: only a model that
   * evaluates prompts itself (the local one) has anything to prepare.
   */
  prefill?(messages: ChatMessage[]): Promise<void>;
  /**
   * One session's instructions and tools, evaluated ahead of its first reply where that costs no
   * other conversation anything (the local model: on a sequence that holds none). Optional, like
   * prefill; failures are the caller's to ignore (the reply evaluates them anyway).
   */
  prepare?(request: Pick<GenerateRequest, 'messages' | 'tools' | 'toolChoice'>): Promise<void>;
  /**
   * The probability that the last message of the request (the user's words so far) ends where
   * its text does: the model's own prediction that the next token closes the sentence or the turn
   * (`.`, `?`, `!`, the end of the message), read from evaluating the prompt up to the last word,
   * formatted as `generate` would format this request (with its tools), so the reply to it then
   * reuses that evaluation. Null when the signal aborted first. Optional: a model in this process
   * that evaluates prompts itself (semantic_vad's judge uses it, realtime/turn-judge.ts).
   */
  endOfTurnProbability?(request: GenerateRequest): Promise<number | null>;
  close(): Promise<void>;
}

export interface LanguageModels {
  /** The model that serves a session's `model` name (see the routing rules in config); never throws for unknown names: falls back to the default route. */
  forModel(model: string): LanguageModel;
  /**
   * The local model that reads a pause's words for semantic_vad's judge whatever provider answers
   * (it has endOfTurnProbability): the local GGUF when its weights are present, else null (the
   * words are then judged by rule).
   */
  wordsReader(): LanguageModel | null;
  /** What the avatar says when its model fails before saying anything (LLM_FALLBACK_LINE); null: nothing. */
  readonly fallbackLine: string | null;
  /** The hosted model's health as its requests last found it (null: no hosted model is configured). */
  upstream(): DependencyHealth | null;
  close(): Promise<void>;
}

/** A provider that was closed or never configured; thrown by generate(). */
export function llmUnavailable(message: string, cause?: unknown): ProviderError {
  return new ProviderError('llm_unavailable', message, { status: 503, cause });
}

