/**
 * A local GGUF chat model through node-llama-cpp (llama.cpp, CPU). The model is loaded once, on the
 * first request, and shared by every session that routes here. One llama.cpp context holds
 * `parallel` sequences, each with its own `contextTokens` window: up to that many replies are
 * generated at the same time (llama.cpp evaluates them in one batch), and further requests wait in
 * arrival order for a free sequence (a waiting request that is aborted leaves the queue at once).
 * Each sequence keeps its evaluated tokens between requests, so a conversation that grows by a
 * turn re-evaluates only the new part when it lands on the same sequence again.
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
import type { Llama, LlamaChat, LlamaContext, LlamaModel, ChatHistoryItem } from 'node-llama-cpp';
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
  /** One chat per sequence; a chat is either free or serving exactly one request. */
  free: LlamaChat[];
}

interface Waiter {
  resolve: (chat: LlamaChat) => void;
  reject: (err: unknown) => void;
}

export class LlamaCppModel implements LanguageModel {
  readonly id: string;
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
    const chat = await this.acquire(loaded, request.signal);
    if (chat === null) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    // Stops generation on the request's abort and on close().
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    request.signal.addEventListener('abort', onAbort, { once: true });
    this.active.add(stop);
    const queue = new ChunkQueue();
    try {
      const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
      const history = toHistory(fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)));
      const inputTokens = chat.chatWrapper
        .generateContextState({ chatHistory: history })
        .contextText.tokenize(loaded.model.tokenizer).length;
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
      return { llama, model, context, free };
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError('llm_unavailable', `${this.id}: cannot load ${o.modelFile}: ${(err as Error).message}`, {
        status: 503,
        retryable: false,
        cause: err,
      });
    }
  }

  /** A free chat (sequence), waiting in arrival order; null when the signal aborts first. */
  private acquire(loaded: Loaded, signal: AbortSignal): Promise<LlamaChat | null> {
    const chat = loaded.free.shift();
    if (chat) return Promise.resolve(chat);
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
