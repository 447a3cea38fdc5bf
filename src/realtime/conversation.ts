/**
 * The conversation of one realtime session: an ordered list of items in the GA `realtime.item`
 * shape, with insertion after a given item (`previous_item_id`, "root" = first), delete, retrieve,
 * and the view a language model gets (role + text per message).
 *
 * Items are kept in wire shape so that conversation.item.added/.done/.retrieved send them as they
 * are. Input audio bytes are not kept (clients do not need them back, and they would grow memory
 * for the whole session): an input_audio part keeps its transcript only.
 *
 * Memory bound: an item holds at most MAX_ITEM_CONTENT_PARTS parts and MAX_ITEM_TEXT_CHARS
 * characters of text and transcripts (a client item beyond them is refused with
 * array_above_max_length / string_above_max_length naming the part), and the conversation at most
 * MAX_CONVERSATION_ITEMS items and MAX_CONVERSATION_TEXT_CHARS characters: `overflow()` names the
 * oldest items to drop to get back within both, as OpenAI's context truncation drops the oldest
 * turns (the engine announces each with conversation.item.deleted).
 */
import type { ChatMessage } from '../providers/llm/base.js';
import { type Json, RealtimeError, checkMaxLength, describeValue, isObject, newItemId } from './protocol.js';

/**
 * Text and transcripts one item may hold, in characters. The same as the longest session
 * instructions: about 25k tokens, more than a local model's whole context, and an item longer than
 * that could never be shown to one whole.
 */
export const MAX_ITEM_TEXT_CHARS = 100_000;
/** Content parts in one item (real items have one or two). */
export const MAX_ITEM_CONTENT_PARTS = 32;
/** Items a conversation keeps; older ones are dropped. An hour of brisk turns is about 500. */
export const MAX_CONVERSATION_ITEMS = 1000;
/**
 * Characters of text a conversation keeps (about 2 MB of memory at most); older items are dropped.
 * Ten full items, or some 250k tokens: more than any model's context, so nothing a model could see
 * is lost to it.
 */
export const MAX_CONVERSATION_TEXT_CHARS = 1_000_000;

export type ItemStatus = 'completed' | 'incomplete' | 'in_progress';
export type Role = 'user' | 'assistant' | 'system';

export type ContentPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_audio'; transcript: string | null }
  | { type: 'output_text'; text: string }
  | { type: 'output_audio'; transcript: string };

export interface MessageItem {
  id: string;
  object: 'realtime.item';
  type: 'message';
  status: ItemStatus;
  role: Role;
  content: ContentPart[];
}

const MAX_ITEM_ID_CHARS = 64;

export class Conversation {
  readonly id: string;
  private readonly items: MessageItem[] = [];

  constructor(id: string) {
    this.id = id;
  }

  get length(): number {
    return this.items.length;
  }

  get(id: string): MessageItem | undefined {
    return this.items.find((item) => item.id === id);
  }

  /** The item with `id` or an item_not_found error naming `param`. */
  require(id: string, param: string): MessageItem {
    const item = this.get(id);
    if (!item) throw new RealtimeError('item_not_found', `Item with item_id '${id}' not found.`, param);
    return item;
  }

  lastId(): string | null {
    return this.items.at(-1)?.id ?? null;
  }

  /**
   * Inserts `item` after `previousItemId` (null = at the end, "root" = at the start) and returns
   * the id of the item before it (null when first).
   */
  insert(item: MessageItem, previousItemId: string | null = null): string | null {
    if (this.get(item.id)) throw new RealtimeError('item_already_exists', `An item with id '${item.id}' already exists.`, 'item.id');
    let index = this.items.length;
    if (previousItemId === 'root') index = 0;
    else if (previousItemId !== null) {
      const at = this.items.findIndex((i) => i.id === previousItemId);
      if (at < 0) throw new RealtimeError('item_not_found', `Item with item_id '${previousItemId}' not found.`, 'previous_item_id');
      index = at + 1;
    }
    this.items.splice(index, 0, item);
    return index === 0 ? null : (this.items[index - 1]?.id ?? null);
  }

  delete(id: string): void {
    const at = this.items.findIndex((i) => i.id === id);
    if (at < 0) throw new RealtimeError('item_not_found', `Item with item_id '${id}' not found.`, 'item_id');
    this.items.splice(at, 1);
  }

  /** Characters of text and transcripts in all items. */
  textChars(): number {
    let total = 0;
    for (const item of this.items) total += itemTextChars(item);
    return total;
  }

  /**
   * The ids of the oldest items to drop so the conversation is back within MAX_CONVERSATION_ITEMS
   * and MAX_CONVERSATION_TEXT_CHARS, oldest first; `keep(id)` spares an item (the response in
   * progress). Does not drop them: the caller deletes and announces each.
   */
  overflow(keep: (id: string) => boolean): string[] {
    let count = this.items.length;
    let chars = this.textChars();
    const out: string[] = [];
    for (const item of this.items) {
      if (count <= MAX_CONVERSATION_ITEMS && chars <= MAX_CONVERSATION_TEXT_CHARS) break;
      if (keep(item.id)) continue;
      out.push(item.id);
      count--;
      chars -= itemTextChars(item);
    }
    return out;
  }

  /** The conversation as chat messages, oldest first; items without text are left out. */
  messages(): ChatMessage[] {
    return toMessages(this.items);
  }
}

/** Chat messages for items in order; parts without text (audio not yet transcribed) are skipped. */
export function toMessages(items: readonly MessageItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const item of items) {
    const text = itemText(item);
    if (text.trim() !== '') out.push({ role: item.role, content: text });
  }
  return out;
}

/** Characters of text and transcripts in one item (without joining them). */
export function itemTextChars(item: MessageItem): number {
  let total = 0;
  for (const part of item.content) {
    if (part.type === 'input_text' || part.type === 'output_text') total += part.text.length;
    else total += part.transcript?.length ?? 0;
  }
  return total;
}

/** The text of a message: typed text, transcripts of audio. */
export function itemText(item: MessageItem): string {
  return item.content
    .map((part) => {
      switch (part.type) {
        case 'input_text':
        case 'output_text':
          return part.text;
        case 'input_audio':
          return part.transcript ?? '';
        case 'output_audio':
          return part.transcript;
      }
    })
    .filter((t) => t !== '')
    .join(' ');
}

/**
 * Validates the `item` of conversation.item.create (or of response.create's `input`) and builds
 * the stored item. Supports message items: user input_text / input_audio (with an optional
 * transcript; audio is accepted and, without a transcript, transcribed by the caller), assistant
 * output_text / output_audio (text / transcript), system input_text. `param` prefixes parameter
 * names in errors ("item" or "response.input[2]").
 */
export function parseMessageItem(raw: unknown, param: string): { item: MessageItem; audio: string | null } {
  if (!isObject(raw)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  const type = raw.type ?? 'message';
  if (type !== 'message') {
    throw new RealtimeError(
      'unsupported_item_type',
      `Item type ${describeValue(type)} is not supported: this server takes message items (function calls are not supported).`,
      `${param}.type`,
    );
  }
  let id = newItemId();
  if (raw.id !== undefined && raw.id !== null) {
    if (typeof raw.id !== 'string' || raw.id === '' || raw.id.length > MAX_ITEM_ID_CHARS) {
      throw new RealtimeError('invalid_value', `'${param}.id' must be a string of 1..${MAX_ITEM_ID_CHARS} characters.`, `${param}.id`);
    }
    id = raw.id;
  }
  const role = raw.role;
  if (role !== 'user' && role !== 'assistant' && role !== 'system') {
    throw new RealtimeError(
      role === undefined ? 'missing_required_parameter' : 'invalid_value',
      `'${param}.role' must be one of 'user', 'assistant', 'system'.`,
      `${param}.role`,
    );
  }
  if (!Array.isArray(raw.content) || raw.content.length === 0) {
    throw new RealtimeError('missing_required_parameter', `'${param}.content' must be a non-empty array of content parts.`, `${param}.content`);
  }
  if (raw.content.length > MAX_ITEM_CONTENT_PARTS) {
    throw new RealtimeError(
      'array_above_max_length',
      `Invalid '${param}.content': array too long. Expected an array with maximum length ${MAX_ITEM_CONTENT_PARTS}, but got an array with length ${raw.content.length} instead.`,
      `${param}.content`,
    );
  }
  let audio: string | null = null;
  let textChars = 0;
  /** Counts a part's text against the item's limit, naming the part that crosses it. */
  const counted = (text: string, p: string): string => {
    textChars += text.length;
    if (textChars > MAX_ITEM_TEXT_CHARS) {
      checkMaxLength(text, MAX_ITEM_TEXT_CHARS, p);
      throw new RealtimeError('string_above_max_length', `Invalid '${p}': the item's text and transcripts are longer than ${MAX_ITEM_TEXT_CHARS} characters in all.`, p);
    }
    return text;
  };
  const content: ContentPart[] = raw.content.map((part: unknown, i: number): ContentPart => {
    const p = `${param}.content[${i}]`;
    if (!isObject(part)) throw new RealtimeError('invalid_type', `Invalid type for '${p}': expected an object.`, p);
    const allowed = ALLOWED_PARTS[role];
    if (typeof part.type !== 'string' || !allowed.includes(part.type)) {
      throw new RealtimeError('invalid_value', `'${p}.type' must be one of ${allowed.map((a) => `'${a}'`).join(', ')} for a ${role} message.`, `${p}.type`);
    }
    switch (part.type) {
      case 'input_text':
      case 'text':
        return { type: role === 'assistant' ? 'output_text' : 'input_text', text: counted(textField(part, 'text', p), `${p}.text`) } as ContentPart;
      case 'output_text':
        return { type: 'output_text', text: counted(textField(part, 'text', p), `${p}.text`) };
      case 'input_audio': {
        if (part.audio !== undefined && part.audio !== null && typeof part.audio !== 'string') {
          throw new RealtimeError('invalid_type', `Invalid type for '${p}.audio': expected a base64 string.`, `${p}.audio`);
        }
        const transcript = typeof part.transcript === 'string' ? counted(part.transcript, `${p}.transcript`) : null;
        if (transcript === null && typeof part.audio !== 'string') {
          throw new RealtimeError('missing_required_parameter', `'${p}' needs 'audio' (base64 PCM16) or 'transcript'.`, `${p}.audio`);
        }
        if (transcript === null) audio = part.audio as string;
        return { type: 'input_audio', transcript };
      }
      default: // output_audio / audio (assistant)
        return { type: 'output_audio', transcript: typeof part.transcript === 'string' ? counted(part.transcript, `${p}.transcript`) : '' };
    }
  });
  const status = raw.status === 'incomplete' || raw.status === 'in_progress' ? raw.status : 'completed';
  return { item: { id, object: 'realtime.item', type: 'message', status, role, content }, audio };
}

const ALLOWED_PARTS: Record<Role, string[]> = {
  user: ['input_text', 'input_audio', 'text'],
  assistant: ['output_text', 'output_audio', 'text', 'audio'],
  system: ['input_text', 'text'],
};

function textField(part: Json, key: string, param: string): string {
  const v = part[key];
  if (typeof v !== 'string') throw new RealtimeError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  return v;
}
