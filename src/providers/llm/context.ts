/**
 * What of a conversation a model is given: the newest turns that fit its context, before anything
 * is formatted or tokenized. The engine hands providers the whole conversation (up to its own
 * bound, about a million characters); tokenizing all of it to find out what fits took seconds of
 * the event loop. Instead each provider first cuts the message list to a character budget derived
 * from the context size, so the text it formats and tokenizes is bounded by the context, not by the
 * conversation. A message's characters are its prompt text (base.ts `messageChars`: content, and
 * an assistant's tool call names and arguments; images are not counted).
 *
 * Rules (as OpenAI's context truncation: the oldest turns go first):
 *  - a leading system message (the instructions) is kept, cut to at most half the budget;
 *  - then turns are taken newest first while they fit whole; the first that does not fit ends the
 *    list, so what the model sees is a contiguous, most recent stretch of the conversation;
 *  - tool calls stay paired: the stretch never begins between an assistant message with tool calls
 *    and the `tool` messages answering them (chat-completions servers answer 400 for a `tool`
 *    message whose call is not before it). When the cut would fall there, it moves newer, past the
 *    answers, so the kept list never starts with an orphan `tool` message, and an assistant message
 *    with calls is kept only with its answers that follow it. A `tool` message whose call is not in
 *    the list at all (or comes after it) is passed on as it is: pairing the input is the engine's
 *    job, this only keeps the cut from breaking pairs;
 *  - the newest turn is always kept: when it alone is over the budget, its end is kept (the most
 *    recent words, where a question usually is). When the newest turn is a tool call's output, it
 *    is kept with the assistant message that made the call (and everything after that); if those
 *    are over the budget together, their text shares it (short messages whole, the long ones cut
 *    to their ends, equally), while tool call names and arguments are never cut (a cut would break
 *    their JSON), so only they may take the list over the budget.
 * The estimate is deliberately generous (CHARS_PER_TOKEN is the usual English average): the
 * provider's own exact fitting (llama.cpp's context shift, the upstream server's limit) trims what
 * is still over, on text that is now small.
 */
import { messageChars, type ChatMessage } from './base.js';

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

/** `messages` cut to `maxChars` of prompt characters by the rules above; a copy of the input when it fits. */
export function fitMessages(messages: readonly ChatMessage[], maxChars: number): ChatMessage[] {
  let total = 0;
  for (const m of messages) total += messageChars(m);
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
  const afterSystem = left;
  const callAt = callIndexes(messages, start);
  // Newest first. `need`: the oldest index the kept tool messages need (their calls' assistant
  // messages); the stretch from i on may be cut before i only when need >= i. `safe` counts the
  // turns kept at the last such point.
  const turns: ChatMessage[] = [];
  let need = Infinity;
  let safe = 0;
  for (let i = messages.length - 1; i >= start; i--) {
    const m = messages[i] as ChatMessage;
    const n = messageChars(m);
    if (n > left) break;
    turns.push(m);
    left -= n;
    need = Math.min(need, neededBy(m, i, callAt));
    if (need >= i) safe = turns.length;
  }
  turns.length = safe;
  if (turns.length === 0 && afterSystem > 0 && messages.length > start) return [...out, ...fitNewest(messages, start, callAt, afterSystem)];
  return [...out, ...turns.reverse()];
}

/** For each call id, the index of the (first) assistant message at or after `start` that made it. */
function callIndexes(messages: readonly ChatMessage[], start: number): Map<string, number> {
  const at = new Map<string, number>();
  for (let i = start; i < messages.length; i++) {
    const m = messages[i] as ChatMessage;
    if (m.role !== 'assistant' || !m.toolCalls) continue;
    for (const c of m.toolCalls) if (!at.has(c.id)) at.set(c.id, i);
  }
  return at;
}

/** The index of the message that must be kept with message `i` (its call), or Infinity. */
function neededBy(m: ChatMessage, i: number, callAt: ReadonlyMap<string, number>): number {
  if (m.role !== 'tool') return Infinity;
  const at = callAt.get(m.toolCallId);
  return at !== undefined && at < i ? at : Infinity;
}

/**
 * The newest turn when it does not fit whole: from the oldest message it needs (a tool output's
 * call) to the end, their text sharing `left` characters (water-filling: each message at most an
 * equal share of what the shorter ones leave, cut to its end).
 */
function fitNewest(messages: readonly ChatMessage[], start: number, callAt: ReadonlyMap<string, number>, left: number): ChatMessage[] {
  let from = messages.length - 1;
  let need = Infinity;
  for (let i = messages.length - 1; i >= start; i--) {
    need = Math.min(need, neededBy(messages[i] as ChatMessage, i, callAt));
    if (need >= i) {
      from = i;
      break;
    }
  }
  const unit = messages.slice(from);
  let room = left;
  for (const m of unit) room -= messageChars(m) - m.content.length;
  room = Math.max(0, room);
  const order = unit.map((_, k) => k).sort((a, b) => (unit[a] as ChatMessage).content.length - (unit[b] as ChatMessage).content.length);
  const kept = new Array<number>(unit.length);
  order.forEach((k, rank) => {
    const share = Math.floor(room / (unit.length - rank));
    kept[k] = Math.min((unit[k] as ChatMessage).content.length, share);
    room -= kept[k];
  });
  return unit.map((m, k) => {
    const content = tailOf(m.content, kept[k] as number);
    return content === m.content ? m : { ...m, content };
  });
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
