/**
 * The stream contract of base.ts for models without a tokenizer (the offline responder and the
 * fake): text chunks in order, then exactly one `done`: 'aborted' as soon as the request's signal
 * is seen aborted, 'length' when the output limit (in chunks) is reached, 'stop' at the end.
 * Usage counts chunks as output tokens and whitespace-separated words as input tokens.
 */
import type { ChatMessage, GenerateChunk, GenerateRequest, TokenUsage } from './base.js';

export interface ChunkPacing {
  /** Awaited before each chunk (`sent` chunks so far); may throw, as a failing provider would. */
  beforeChunk?(sent: number): Promise<void> | void;
  /** Awaited after the last chunk, before a 'stop'; may throw. */
  beforeDone?(sent: number): Promise<void> | void;
  /** Usage reported in `done` (default: input words and chunks sent). */
  usage?(sent: number): TokenUsage | null;
}

export async function* streamChunks(chunks: readonly string[], request: GenerateRequest, pacing: ChunkPacing = {}): AsyncGenerator<GenerateChunk> {
  const limit = request.maxOutputTokens ?? Infinity;
  const usage = pacing.usage ?? ((sent: number): TokenUsage => ({ inputTokens: countWords(request.messages), outputTokens: sent }));
  let sent = 0;
  for (const text of chunks) {
    await pacing.beforeChunk?.(sent);
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage: usage(sent) };
      return;
    }
    if (sent >= limit) {
      yield { type: 'done', finishReason: 'length', usage: usage(sent) };
      return;
    }
    yield { type: 'text', text };
    sent++;
  }
  await pacing.beforeDone?.(sent);
  yield { type: 'done', finishReason: request.signal.aborted ? 'aborted' : 'stop', usage: usage(sent) };
}

/** `text` as chunks of one word each, a space before every word after the first. */
export function wordChunks(text: string): string[] {
  return text.split(' ').map((w, i) => (i === 0 ? w : ' ' + w));
}

/** Whitespace-separated words of all messages. */
export function countWords(messages: readonly ChatMessage[]): number {
  return messages.reduce((n, m) => n + m.content.split(/\s+/).filter(Boolean).length, 0);
}
