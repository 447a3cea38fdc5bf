/**
 * The stand-in used only when no language model is available (no local GGUF fetched, no
 * OpenAI-compatible server configured). It is not a language model and says so: every reply is
 * chosen by a few fixed rules from the last user message (a greeting, a question, thanks, a
 * goodbye, anything else), mentions what was heard, and tells the operator how to configure a real
 * model. Replies are deterministic for a given message and stream word by word, so the rest of the
 * pipeline (speech, lip sync, interruption) works and can be demonstrated without a model.
 *
 * Usage counts words as tokens (whitespace-separated words of all input messages and of the
 * reply): there is no tokenizer, and a word is the unit the replies are streamed in.
 */
import type { ChatMessage, GenerateChunk, GenerateRequest, LanguageModel } from './base.js';
import { streamChunks, wordChunks } from './word-stream.js';
import { llmUnavailable } from './base.js';

/** Longest stretch of the user's words quoted back, so a long utterance does not become a long reply. */
const ECHO_MAX_WORDS = 12;

const SETUP_HINT =
  'To use a real model, run npm run setup:models, or set LLM_BASE_URL and LLM_API_KEY to an OpenAI-compatible server.';

export class OfflineResponder implements LanguageModel {
  readonly id = 'offline-responder';
  readonly local = true;
  readonly speculative = true;
  private closed = false;

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable('offline-responder: generate() after close()');
    // Yield to the event loop between words so an abort from another task is seen promptly.
    const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    yield* streamChunks(wordChunks(offlineReply(request.messages)), request, { beforeChunk: (sent) => (sent > 0 ? tick() : undefined), beforeDone: tick });
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** The reply for a conversation: a fixed rule applied to its last user message. */
export function offlineReply(messages: readonly ChatMessage[]): string {
  const last = [...messages].reverse().find((m) => m.role === 'user');
  const said = normalize(last?.content ?? '');
  const intro = 'I am the built-in rule-based responder, not a language model.';
  if (said === '') return `Hello. ${intro} ${SETUP_HINT}`;
  const lower = said.toLowerCase();
  const quote = quoteOf(said);
  if (/^(hi|hello|hey|good (morning|afternoon|evening)|greetings)\b/.test(lower)) {
    return `Hello! ${intro} I can hear you and speak, but I cannot hold a real conversation yet. ${SETUP_HINT}`;
  }
  if (/\b(thanks|thank you)\b/.test(lower)) return `You are welcome. ${intro} ${SETUP_HINT}`;
  if (/^(bye|goodbye|see you)\b|\b(bye|goodbye)[.!]?$/.test(lower)) return 'Goodbye! Thanks for trying the avatar.';
  if (said.endsWith('?') || /^(what|who|where|when|why|how|which|can|could|do|does|is|are|will|would|should)\b/.test(lower)) {
    return `You asked: ${quote} That is a good question, but I cannot answer it: ${intro} ${SETUP_HINT}`;
  }
  return `I heard: ${quote} ${intro} ${SETUP_HINT}`;
}

function normalize(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function quoteOf(said: string): string {
  const words = said.split(' ');
  const head = words.slice(0, ECHO_MAX_WORDS).join(' ');
  const text = words.length > ECHO_MAX_WORDS ? `${head}...` : head;
  return /[.!?]$/.test(text) ? text : `${text}.`;
}
