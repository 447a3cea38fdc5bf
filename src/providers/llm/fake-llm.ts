/**
 * A scripted language model for engine tests: replies with configured chunks (or the words of a
 * configured text), waits between chunks through an injectable scheduler (real timers by default,
 * or a test's own clock), fails on request (before the first chunk or after a given number), and
 * honours abort like a real provider: the stream ends with finishReason 'aborted', no throw.
 * It records every request it was given, so tests can assert what the engine sent. It can also
 * call functions: `toolCalls` (fixed, or chosen from the request: its tools and messages) are
 * streamed after the text, each announced and then its arguments in two pieces, and the reply
 * then ends with finishReason 'tool_calls'.
 * FakeLanguageModels routes every session `model` name to such a model, with options a test may
 * change between turns.
 */
import { abortableDelay } from '../../core/clock.js';
import type { GenerateChunk, GenerateRequest, LanguageModel, LanguageModels, TokenUsage } from './base.js';
import { streamChunks, wordChunks } from './word-stream.js';
import { ProviderError, llmUnavailable } from './base.js';

/** Waits `ms` or until the signal aborts (then resolves early; the caller checks the signal). */
export type Scheduler = (ms: number, signal: AbortSignal) => Promise<void>;

export const realTimeScheduler: Scheduler = abortableDelay;

export interface FakeLlmOptions {
  id?: string;
  /** The reply (or a function of the request giving it), streamed as its words (a space before
   * each word after the first). */
  reply?: string | ((request: GenerateRequest) => string);
  /** The reply as exact chunks; takes precedence over `reply`. */
  chunks?: string[];
  /** Pause before each chunk. */
  chunkDelayMs?: number;
  scheduler?: Scheduler;
  /** Throw this ProviderError instead of replying: before any chunk, or after `failAfterChunks`. */
  error?: ProviderError;
  failAfterChunks?: number;
  /** Reported usage; default: input = words of all messages, output = chunks sent. */
  usage?: TokenUsage | null;
  /** Whether it poses as a model in this process (default true) or a remote API. */
  local?: boolean;
  /** Whether its replies may start before their turn is confirmed (LanguageModel.speculative; default true). */
  speculative?: boolean;
  /** Function calls to make after the text (none: a plain reply). */
  toolCalls?: FakeToolCall[] | ((request: GenerateRequest) => FakeToolCall[]);
  /**
   * endOfTurnProbability(): the probability given the user's last words (unset: the model cannot
   * say, null is returned). Every text asked about is recorded in `endOfTurnAsked`.
   */
  endOfTurn?: (words: string) => number;
  /** How long endOfTurnProbability() takes (default 0: it answers at once); the request's abort does not cut it short, as llama.cpp's evaluation is not. */
  endOfTurnDelayMs?: number;
}

/** A call the fake makes; `callId` defaults to call_fake_<n>. */
export interface FakeToolCall {
  name: string;
  arguments: string;
  callId?: string;
}

let fakeCallCount = 0;

export class FakeLlm implements LanguageModel {
  readonly id: string;
  readonly local: boolean;
  readonly speculative: boolean;
  /** Every request generate() received, in order. */
  readonly requests: GenerateRequest[] = [];
  private closed = false;

  constructor(private readonly options: FakeLlmOptions = {}) {
    this.id = options.id ?? 'fake-llm';
    this.local = options.local ?? true;
    this.speculative = options.speculative ?? true;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable(`${this.id}: generate() after close()`);
    this.requests.push(request);
    const o = this.options;
    const reply = typeof o.reply === 'function' ? o.reply(request) : (o.reply ?? 'Hello from the fake model.');
    const schedule = o.scheduler ?? realTimeScheduler;
    const failAt = (sent: number): void => {
      if (o.error && sent === (o.failAfterChunks ?? 0)) throw o.error;
    };
    const calls = typeof o.toolCalls === 'function' ? o.toolCalls(request) : (o.toolCalls ?? []);
    const text = calls.length > 0 && o.chunks === undefined && o.reply === undefined ? [] : (o.chunks ?? wordChunks(reply));
    for await (const chunk of streamChunks(text, request, {
      beforeChunk: async (sent) => {
        failAt(sent);
        if (o.chunkDelayMs) await schedule(o.chunkDelayMs, request.signal);
      },
      beforeDone: failAt,
      usage: o.usage === undefined ? undefined : () => o.usage ?? null,
    })) {
      if (chunk.type !== 'done' || chunk.finishReason !== 'stop' || calls.length === 0) {
        yield chunk;
        continue;
      }
      for (const [index, call] of calls.entries()) {
        yield { type: 'tool_call_start', index, callId: call.callId ?? `call_fake_${++fakeCallCount}`, name: call.name };
        const half = Math.floor(call.arguments.length / 2);
        for (const delta of [call.arguments.slice(0, half), call.arguments.slice(half)]) {
          if (o.chunkDelayMs) await schedule(o.chunkDelayMs, request.signal);
          if (request.signal.aborted) {
            yield { type: 'done', finishReason: 'aborted', usage: chunk.usage };
            return;
          }
          if (delta !== '') yield { type: 'tool_call_arguments', index, delta };
        }
      }
      yield { ...chunk, finishReason: 'tool_calls' };
    }
  }

  async endOfTurnProbability(request: GenerateRequest): Promise<number | null> {
    return fakeEndOfTurn(this.options, request);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** The words every fake model was asked to judge (endOfTurnProbability), in order. */
export const endOfTurnAsked: string[] = [];

async function fakeEndOfTurn(options: FakeLlmOptions, request: GenerateRequest): Promise<number | null> {
  const last = request.messages.at(-1);
  if (!options.endOfTurn || last?.role !== 'user' || request.signal.aborted) return null;
  endOfTurnAsked.push(last.content);
  if (options.endOfTurnDelayMs) await new Promise((r) => setTimeout(r, options.endOfTurnDelayMs));
  return options.endOfTurn(last.content);
}

/** The LanguageModels router over FakeLlm: every model name gets a FakeLlm with the current
 * `options` (read at each request, so a test may change them between turns). */
export class FakeLanguageModels implements LanguageModels {
  /** Every request any of its models received, in order. */
  readonly requests: GenerateRequest[] = [];
  /** What sessions asked its models to prepare (LanguageModel.prepare), in order. */
  readonly prepared: Array<Pick<GenerateRequest, 'messages' | 'tools' | 'toolChoice'>> = [];
  /** LLM_FALLBACK_LINE; null (nothing said) unless a test sets it. */
  fallbackLine: string | null = null;

  upstream(): null {
    return null;
  }

  constructor(public options: FakeLlmOptions = {}) {}

  forModel(model: string): LanguageModel {
    const requests = this.requests;
    const current = (): FakeLlmOptions => ({ id: `fake:${model}`, ...this.options });
    return {
      id: `fake:${model}`,
      local: this.options.local ?? true,
      speculative: this.options.speculative ?? true,
      generate(request: GenerateRequest): AsyncIterable<GenerateChunk> {
        requests.push(request);
        return new FakeLlm(current()).generate(request);
      },
      endOfTurnProbability: async (request: GenerateRequest) => fakeEndOfTurn(current(), request),
      prepare: async (request) => {
        this.prepared.push(request);
      },
      async close() {},
    };
  }

  /** A model that reads words for the judge (the options' endOfTurn) when the test's models are remote; null when they read none. */
  wordsReader(): LanguageModel | null {
    return this.options.endOfTurn ? this.forModel('words-reader') : null;
  }

  async close(): Promise<void> {}
}
