/**
 * The conversation of one realtime session: an ordered list of items (items.ts: messages,
 * function calls and their outputs), with insertion after a given item (`previous_item_id`,
 * "root" = first), delete, retrieve, and the view a language model gets (items.ts toMessages).
 *
 * A missing item is answered with OpenAI's own error codes, which clients match on (pipecat
 * treats any other error as fatal): item_retrieve_invalid_item_id, item_delete_invalid_item_id,
 * item_truncate_invalid_item_id, and item_create_invalid_previous_item_id for an unknown
 * `previous_item_id`.
 *
 * Memory bound: an item holds at most MAX_ITEM_CONTENT_PARTS parts and MAX_ITEM_TEXT_CHARS
 * characters of text (items.ts), and the conversation at most MAX_CONVERSATION_ITEMS items,
 * MAX_CONVERSATION_TEXT_CHARS characters of text and MAX_CONVERSATION_IMAGE_CHARS of image data
 * URLs (a camera sending a frame a second reaches it in minutes): `overflow()` names the oldest
 * items to drop to get back within all three, as OpenAI's context truncation drops the oldest
 * turns (the engine announces each with conversation.item.deleted).
 */
import type { ChatMessage } from '../providers/llm/base.js';
import { RealtimeError } from './protocol.js';
import { type Item, itemImageChars, itemTextChars, toMessages } from './items.js';

export { MAX_ITEM_TEXT_CHARS, MAX_ITEM_CONTENT_PARTS } from './items.js';

/** Items a conversation keeps; older ones are dropped. An hour of brisk turns is about 500. */
export const MAX_CONVERSATION_ITEMS = 1000;
/**
 * Characters of text a conversation keeps (about 2 MB of memory at most); older items are dropped.
 * Ten full items, or some 250k tokens: more than any model's context, so nothing a model could see
 * is lost to it.
 */
export const MAX_CONVERSATION_TEXT_CHARS = 1_000_000;
/**
 * Characters of image data URLs a conversation keeps (32 MiB): the model is shown only the newest
 * few images (items.ts MAX_IMAGES_IN_PROMPT), so older frames only cost memory.
 */
export const MAX_CONVERSATION_IMAGE_CHARS = 32 * 1024 * 1024;

/** What a missing item is called in the error, by the client event that named it. */
export type ItemLookup = 'retrieve' | 'delete' | 'truncate' | 'create';

export class Conversation {
  readonly id: string;
  private readonly items: Item[] = [];

  constructor(id: string) {
    this.id = id;
  }

  get length(): number {
    return this.items.length;
  }

  get(id: string): Item | undefined {
    return this.items.find((item) => item.id === id);
  }

  /** The item with `id`, or OpenAI's error for the client event that looked it up. */
  require(id: string, param: string, lookup: ItemLookup): Item {
    const item = this.get(id);
    if (!item) throw missingItem(id, param, lookup);
    return item;
  }

  /** Whether a function_call item with this call id is in the conversation. */
  hasCall(callId: string): boolean {
    return this.items.some((item) => item.type === 'function_call' && item.call_id === callId);
  }

  lastId(): string | null {
    return this.items.at(-1)?.id ?? null;
  }

  /**
   * Refuses what insert() would refuse of `item` after `previousItemId` but for its id: a
   * `previous_item_id` not in the conversation, a function_call_output whose call is not, an
   * mcp_approval_response whose request is not or was answered already. The
   * engine asks before decoding an item's audio or images.
   */
  checkPlace(item: Item, previousItemId: string | null): void {
    if (previousItemId !== null && previousItemId !== 'root') this.require(previousItemId, 'previous_item_id', 'create');
    if (item.type === 'function_call_output' && !this.hasCall(item.call_id)) {
      throw new RealtimeError(
        'invalid_call_id',
        `No function_call item with call_id '${item.call_id}' is in the conversation; a function_call_output answers a call the model made (or one you added first).`,
        'item.call_id',
      );
    }
    if (item.type === 'mcp_approval_response') {
      const requestId = item.approval_request_id;
      if (!this.items.some((i) => i.type === 'mcp_approval_request' && i.id === requestId)) {
        throw new RealtimeError('invalid_approval_request_id', `No mcp_approval_request item '${requestId}' is in the conversation.`, 'item.approval_request_id');
      }
      if (this.items.some((i) => i.type === 'mcp_approval_response' && i.approval_request_id === requestId)) {
        throw new RealtimeError('approval_already_answered', `The approval request '${requestId}' has already been answered.`, 'item.approval_request_id');
      }
    }
  }

  /**
   * Inserts `item` after `previousItemId` (null = at the end, "root" = at the start) and returns
   * the id of the item before it (null when first). Refuses an id already there and what
   * checkPlace() refuses.
   */
  insert(item: Item, previousItemId: string | null = null): string | null {
    if (this.get(item.id)) throw new RealtimeError('item_already_exists', `An item with id '${item.id}' already exists.`, 'item.id');
    this.checkPlace(item, previousItemId);
    let index = this.items.length;
    if (previousItemId === 'root') index = 0;
    else if (previousItemId !== null) index = this.items.findIndex((i) => i.id === previousItemId) + 1;
    this.items.splice(index, 0, item);
    return index === 0 ? null : (this.items[index - 1]?.id ?? null);
  }

  delete(id: string): void {
    const at = this.items.findIndex((i) => i.id === id);
    if (at < 0) throw missingItem(id, 'item_id', 'delete');
    this.items.splice(at, 1);
  }

  /** Characters of text and transcripts in all items. */
  textChars(): number {
    let total = 0;
    for (const item of this.items) total += itemTextChars(item);
    return total;
  }

  /**
   * The ids of the oldest items to drop so the conversation is back within MAX_CONVERSATION_ITEMS,
   * MAX_CONVERSATION_TEXT_CHARS and MAX_CONVERSATION_IMAGE_CHARS, oldest first; `keep(id)` spares an item (the response in
   * progress). Does not drop them: the caller deletes and announces each.
   */
  overflow(keep: (id: string) => boolean): string[] {
    let count = this.items.length;
    let chars = this.textChars();
    let imageChars = 0;
    for (const item of this.items) imageChars += itemImageChars(item);
    const out: string[] = [];
    for (const item of this.items) {
      if (count <= MAX_CONVERSATION_ITEMS && chars <= MAX_CONVERSATION_TEXT_CHARS && imageChars <= MAX_CONVERSATION_IMAGE_CHARS) break;
      if (keep(item.id)) continue;
      out.push(item.id);
      count--;
      chars -= itemTextChars(item);
      imageChars -= itemImageChars(item);
    }
    return out;
  }

  /** The conversation as chat messages, oldest first (items.ts toMessages). */
  messages(): ChatMessage[] {
    return toMessages(this.items);
  }
}

function missingItem(id: string, param: string, lookup: ItemLookup): RealtimeError {
  return new RealtimeError(`item_${lookup}_invalid_${lookup === 'create' ? 'previous_item_id' : 'item_id'}`, `Item with item_id '${id}' not found.`, param);
}
