/**
 * What of a conversation a model is given: the newest turns that fit its context, before anything
 * is formatted or tokenized. The engine hands providers the whole conversation (up to its own
 * bound, about a million characters); tokenizing all of it to find out what fits took seconds of
 * the event loop. Instead each provider first cuts the message list to a character budget derived
 * from the context size, so the text it formats and tokenizes is bounded by the context, not by the
 * conversation.
 *
 * Rules (as OpenAI's context truncation: the oldest turns go first):
 *  - a leading system message (the instructions) is kept, cut to at most half the budget;
 *  - then turns are taken newest first while they fit whole; the first that does not fit ends the
 *    list, so what the model sees is a contiguous, most recent stretch of the conversation;
 *  - the newest turn is always kept: when it alone is over the budget, its end is kept (the most
 *    recent words, where a question usually is).
 * The estimate is deliberately generous (CHARS_PER_TOKEN is the usual English average): the
 * provider's own exact fitting (llama.cpp's context shift, the upstream server's limit) trims what
 * is still over, on text that is now small.
 */
import type { ChatMessage } from './base.js';

/** Characters per token of English text in the usual BPE vocabularies (Qwen, GPT); used to turn a context size into characters. */
export const CHARS_PER_TOKEN = 4;

/**
 * Characters of prompt for a context of `contextTokens` when up to `maxOutputTokens` are to be
 * generated: the reply's room is reserved (at most a quarter of the context, so a large output
 * limit cannot squeeze the prompt to nothing), the rest at CHARS_PER_TOKEN.
 */
export function promptCharBudget(contextTokens: number, maxOutputTokens: number): number {
  const reserved = Math.min(Math.max(0, maxOutputTokens), Math.floor(contextTokens / 4));
  return (contextTokens - reserved) * CHARS_PER_TOKEN;
}

/** `messages` cut to `maxChars` of content by the rules above; returns the input itself when it fits. */
export function fitMessages(messages: readonly ChatMessage[], maxChars: number): ChatMessage[] {
  let total = 0;
  for (const m of messages) total += m.content.length;
  if (total <= maxChars) return [...messages];

  const out: ChatMessage[] = [];
  let start = 0;
  let left = maxChars;
  const first = messages[0];
  if (first?.role === 'system') {
    const content = headOf(first.content, Math.floor(maxChars / 2));
    out.push(content === first.content ? first : { role: 'system', content });
    left -= content.length;
    start = 1;
  }
  const turns: ChatMessage[] = [];
  for (let i = messages.length - 1; i >= start; i--) {
    const m = messages[i] as ChatMessage;
    if (m.content.length <= left) {
      turns.push(m);
      left -= m.content.length;
    } else {
      if (turns.length === 0 && left > 0) turns.push({ role: m.role, content: tailOf(m.content, left) });
      break;
    }
  }
  return [...out, ...turns.reverse()];
}

/** The first `max` characters of `text`, not ending inside a surrogate pair. */
function headOf(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = isHighSurrogate(text.charCodeAt(max - 1)) ? max - 1 : max;
  return text.slice(0, end);
}

/** The last `max` characters of `text`, not starting inside a surrogate pair. */
function tailOf(text: string, max: number): string {
  if (text.length <= max) return text;
  let from = text.length - max;
  if (isLowSurrogate(text.charCodeAt(from))) from++;
  return text.slice(from);
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;
