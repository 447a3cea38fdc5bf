/**
 * A local GGUF chat model through node-llama-cpp (llama.cpp, CPU). The model is loaded once, on the
 * first request, and shared by every session that routes here. One llama.cpp context holds
 * `parallel` sequences, each with its own `contextTokens` window: up to that many replies are
 * generated at the same time (llama.cpp evaluates them in one batch), and further requests wait in
 * arrival order for a free sequence (a waiting request that is aborted leaves the queue at once).
 * Each sequence keeps its evaluated tokens between requests, and a request takes the free sequence
 * that already holds the longest start of its prompt: a conversation's next turn lands where its
 * last turn was evaluated and evaluates only the new part (the prompt's evaluation costs about as
 * much per token as generating one, ~16 ms on one core of the 2-core machine, so landing on the
 * other sequence cost a 10-turn conversation 0.5-1 s per turn), and a new conversation lands where
 * its instructions already are (prefill() puts them on every sequence at start-up).
 *
 * The prompt is formatted by the chat template the GGUF carries (node-llama-cpp's chat wrapper
 * resolution), so a system message is honoured as the model was trained to. Only the newest turns
 * that fit the context are formatted at all (context.ts: a character budget from `contextTokens`
 * less the reply's room, applied before anything is tokenized), so formatting and tokenizing on
 * the event loop cost the same for a conversation of a megabyte as for one of a page; llama.cpp's
 * context shift does the exact fit of that bounded text. Usage is computed by tokenizing: input =
 * the formatted prompt, output = the reply text. A request's output limit (or
 * the configured default) becomes llama.cpp's maxTokens; abort stops generation between tokens.
 *
 * Only the CPU build is used (`gpu: false`): package.json's overrides replace the CUDA and Vulkan
 * prebuilt packages by the CPU one to keep the install small, and nothing is compiled or
 * downloaded at run time (`build: 'never'`, `skipDownload`).
 */
import path from 'node:path';
import type { Llama, LlamaChat, LlamaContext, LlamaModel, ChatHistoryItem, Token } from 'node-llama-cpp';
import type { Logger } from '../../core/log.js';
import type { ChatMessage, FinishReason, GenerateChunk, GenerateRequest, LanguageModel, TokenUsage } from './base.js';
import { ProviderError, llmUnavailable } from './base.js';
import { fitMessages, promptCharBudget } from './context.js';

export interface LlamaCppModelOptions {
  /** The GGUF file. */
  modelFile: string;
  threads: number;
  /** Context window of each sequence, in tokens. */
  contextTokens: number;
  /** Sequences (replies generated at the same time). */
  parallel: number;
  /** Output limit when a request gives none. */
  maxOutputTokens: number;
  log: Logger;
}

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  /** The chat template every sequence formats with (node-llama-cpp resolves it from the GGUF). */
  wrapper: LlamaChat['chatWrapper'];
  /** One chat per sequence; a chat is either free or serving exactly one request. */
  free: LlamaChat[];
}

interface Waiter {
  resolve: (chat: LlamaChat) => void;
  reject: (err: unknown) => void;
}

export class LlamaCppModel implements LanguageModel {
  readonly id: string;
  readonly local = true;
  /**
   * Prompt tokens of all requests so far, and how many of them a sequence already held (not
   * evaluated again): the affinity's effect, for tests and the log.
   */
  readonly promptStats = { requests: 0, promptTokens: 0, reusedTokens: 0 };
  private loading: Promise<Loaded> | null = null;
  private readonly waiters: Waiter[] = [];
  private readonly active = new Set<AbortController>();
  private closed = false;

  constructor(private readonly options: LlamaCppModelOptions) {
    this.id = `llama-cpp:${path.basename(options.modelFile).replace(/\.gguf$/i, '').toLowerCase()}`;
  }

  /** Loads the model now instead of on the first request (start-up warm-up); idempotent. */
  async load(): Promise<void> {
    await this.loaded();
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable(`${this.id}: generate() after close()`);
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    const loaded = await this.loaded();
    const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
    const history = toHistory(fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)));
    const prompt = promptTokens(loaded, history);
    const chat = await this.acquire(loaded, request.signal, prompt);
    if (chat === null) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    const reused = sharedPrefix(chat.sequence.contextTokens, prompt);
    this.promptStats.requests++;
    this.promptStats.promptTokens += prompt.length;
    this.promptStats.reusedTokens += reused;
    this.options.log.debug('local model prompt', { model: this.id, promptTokens: prompt.length, reusedTokens: reused });
    // Stops generation on the request's abort and on close().
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    request.signal.addEventListener('abort', onAbort, { once: true });
    this.active.add(stop);
    const queue = new ChunkQueue();
    try {
      const inputTokens = prompt.length;
      const run = chat
        .generateResponse(history, {
          maxTokens: limit,
          signal: stop.signal,
          stopOnAbortSignal: true,
          ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
          onTextChunk: (text) => {
            if (text) queue.push(text);
          },
        })
        .then(
          (res) => {
            const usage: TokenUsage = { inputTokens, outputTokens: loaded.model.tokenize(res.response).length };
            const reason: FinishReason =
              res.metadata.stopReason === 'abort' || stop.signal.aborted ? 'aborted' : res.metadata.stopReason === 'maxTokens' ? 'length' : 'stop';
            queue.end({ finishReason: reason, usage });
          },
          (err: unknown) => queue.fail(err),
        );
      try {
        for await (const item of queue) {
          if (item.type === 'text' && stop.signal.aborted) continue; // decoded before the abort was seen
          yield item;
        }
      } finally {
        // The consumer may stop reading early (break, return): stop generating and wait for
        // llama.cpp to let go of the sequence before it is handed to the next request.
        stop.abort();
        await run;
      }
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError('llm_request_failed', `${this.id}: generation failed: ${(err as Error).message}`, { retryable: false, cause: err });
    } finally {
      request.signal.removeEventListener('abort', onAbort);
      this.active.delete(stop);
      this.release(loaded, chat);
    }
  }

  /**
   * Evaluates the prompt of `messages` on every idle sequence that does not already start with it
   * (replacing what it holds: meant for start-up, with the default instructions), one sequence at
   * a time; the requests that start with them then evaluate only their own turns.
   */
  async prefill(messages: ChatMessage[]): Promise<void> {
    if (this.closed) throw llmUnavailable(`${this.id}: prefill() after close()`);
    const loaded = await this.loaded();
    const tokens = promptTokens(loaded, toHistory(messages));
    for (const chat of [...loaded.free]) {
      if (this.closed || !loaded.free.includes(chat)) continue;
      if (sharedPrefix(chat.sequence.contextTokens, tokens) === tokens.length) continue;
      loaded.free.splice(loaded.free.indexOf(chat), 1); // held: a request must not evaluate on it meanwhile
      try {
        await chat.sequence.clearHistory();
        await chat.sequence.evaluateWithoutGeneratingNewTokens(tokens);
      } finally {
        this.release(loaded, chat);
      }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.active) stop.abort();
    for (const waiter of this.waiters.splice(0)) waiter.reject(llmUnavailable(`${this.id}: closed`));
    if (!this.loading) return;
    const loaded = await this.loading.catch(() => null); // a failed load holds nothing to release
    if (!loaded) return;
    await loaded.context.dispose();
    await loaded.model.dispose();
  }

  private loaded(): Promise<Loaded> {
    if (!this.loading) {
      this.loading = this.loadNow().catch((err: unknown) => {
        this.loading = null; // let a later request try again (the file may be fetched meanwhile)
        throw err;
      });
    }
    return this.loading;
  }

  private async loadNow(): Promise<Loaded> {
    const started = performance.now();
    const o = this.options;
    try {
      const { getLlama, LlamaChat: Chat, LlamaLogLevel } = await import('node-llama-cpp');
      const llama = await getLlama({
        gpu: false,
        build: 'never',
        skipDownload: true,
        maxThreads: o.threads,
        logLevel: LlamaLogLevel.error,
        logger: (level, message) => o.log.warn('llama.cpp', { level, message: message.trim() }),
      });
      const model = await llama.loadModel({ modelPath: o.modelFile });
      const context = await model.createContext({ contextSize: o.contextTokens, sequences: o.parallel, threads: o.threads });
      const free: LlamaChat[] = [];
      for (let i = 0; i < o.parallel; i++) free.push(new Chat({ contextSequence: context.getSequence() }));
      const wrapper = (free[0] as LlamaChat).chatWrapper;
      o.log.info('local language model loaded', {
        model: this.id,
        file: o.modelFile,
        loadMs: Math.round(performance.now() - started),
        contextTokens: context.contextSize,
        sequences: o.parallel,
        threads: o.threads,
      });
      if (this.closed) {
        await context.dispose();
        await model.dispose();
        throw llmUnavailable(`${this.id}: closed`);
      }
      return { llama, model, context, wrapper, free };
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError('llm_unavailable', `${this.id}: cannot load ${o.modelFile}: ${(err as Error).message}`, {
        status: 503,
        retryable: false,
        cause: err,
      });
    }
  }

  /**
   * A free chat (sequence): the one already holding the longest start of `prompt` (see the
   * header); when none is free, waiting in arrival order. Null when the signal aborts first.
   */
  private acquire(loaded: Loaded, signal: AbortSignal, prompt: readonly Token[]): Promise<LlamaChat | null> {
    let best = -1;
    let bestShared = -1;
    for (const [i, candidate] of loaded.free.entries()) {
      const shared = sharedPrefix(candidate.sequence.contextTokens, prompt);
      if (shared > bestShared) [best, bestShared] = [i, shared];
    }
    if (best >= 0) return Promise.resolve(loaded.free.splice(best, 1)[0] as LlamaChat);
    return new Promise<LlamaChat | null>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (c) => {
          signal.removeEventListener('abort', onAbort);
          resolve(c);
        },
        reject: (err) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(null);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private release(loaded: Loaded, chat: LlamaChat): void {
    const next = this.waiters.shift();
    if (next) next.resolve(chat);
    else loaded.free.push(chat);
  }
}

/** The tokens a request's prompt evaluates to (what the usage reports as input). */
function promptTokens(loaded: Loaded, history: ChatHistoryItem[]): Token[] {
  return loaded.wrapper.generateContextState({ chatHistory: history }).contextText.tokenize(loaded.model.tokenizer);
}

/** How many leading tokens `a` and `b` share. */
export function sharedPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** The engine's messages as node-llama-cpp chat history (consecutive same-role turns merged). */
export function toHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  for (const m of messages) {
    const last = history[history.length - 1];
    if (m.role === 'system') {
      if (last?.type === 'system') last.text += '\n\n' + m.content;
      else history.push({ type: 'system', text: m.content });
    } else if (m.role === 'user') {
      if (last?.type === 'user') last.text += '\n' + m.content;
      else history.push({ type: 'user', text: m.content });
    } else if (last?.type === 'model') {
      last.response.push('\n' + m.content);
    } else {
      history.push({ type: 'model', response: [m.content] });
    }
  }
  return history;
}

type QueueItem = GenerateChunk;

/** Bridges llama.cpp's text callback to an async iterator: text chunks, then one 'done' or an error. */
class ChunkQueue implements AsyncIterable<QueueItem> {
  private readonly items: QueueItem[] = [];
  private error: unknown = null;
  private finished = false;
  private wake: (() => void) | null = null;

  push(text: string): void {
    this.items.push({ type: 'text', text });
    this.notify();
  }

  end(done: { finishReason: FinishReason; usage: TokenUsage | null }): void {
    this.items.push({ type: 'done', ...done });
    this.finished = true;
    this.notify();
  }

  fail(err: unknown): void {
    this.error = err ?? new Error('generation failed');
    this.finished = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<QueueItem> {
    for (;;) {
      const item = this.items.shift();
      if (item) {
        yield item;
        if (item.type === 'done') return;
        continue;
      }
      if (this.finished) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
