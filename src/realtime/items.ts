/**
 * Conversation items, every kind OpenAI's GA protocol has, in one place: their types (kept in wire
 * shape, so conversation.item.added/.done/.retrieved and response.output_item.* send them as they
 * are), the parser for items a client creates (conversation.item.create, response.create's
 * `input`), and the view a language model gets of them (`toMessages`).
 *
 *   message               role user | assistant | system; parts input_text, input_audio,
 *                         input_image (user), output_text, output_audio (assistant), input_text (system)
 *   function_call         a call the model made (or a client replays): call_id, name, arguments (JSON text)
 *   function_call_output  the client's answer to a call: call_id, output
 *   mcp_list_tools        an MCP server's tools, as this server listed them (mcp-toolbox.ts)
 *   mcp_call              a call this server made to an MCP tool: arguments, output or error
 *   mcp_approval_request  a call waiting for the client's approval (require_approval)
 *   mcp_approval_response the client's answer to one: approve, reason (the only MCP item a client creates)
 *
 * What is kept: text, transcripts, the function call fields, and images as the checked data URL
 * (input-images.ts; the engine substitutes it after checking). Input audio bytes are not kept
 * (clients do not need them back, and they would grow memory for the whole session): an
 * input_audio part keeps its transcript only.
 *
 * The model's view (`toMessages`): a message becomes a chat message with its text (images as
 * ChatImage, the newest MAX_IMAGES_IN_PROMPT only, each also noted in the text for models that
 * cannot see); function_call items become the assistant's tool calls (merged into the assistant
 * message just before them, so text + calls, or parallel calls, are one turn, as the model made
 * them); function_call_output items become `tool` messages. A call that has no output, and an
 * output whose call is not in the conversation, are left out: chat-completions servers refuse
 * either (400), and the model can do nothing with half a pair. An mcp_call that has finished is
 * both: the call and its output (or error); a call the client declined is the call and the
 * refusal; tool listings and approvals themselves are not shown.
 */
import type { ChatImage, ChatMessage, ToolCall } from '../providers/llm/base.js';
import type { McpCallError } from '../providers/mcp/base.js';
import { IMAGE_NOTE } from '../providers/llm/base.js';
import type { InputImages } from './input-images.js';
import { type Json, RealtimeError, checkMaxLength, describeValue, isObject, newItemId } from './protocol.js';

/**
 * Text and transcripts one item may hold, in characters (function arguments and outputs count as
 * text). The same as the longest session instructions: about 25k tokens, more than a local model's
 * whole context, and an item longer than that could never be shown to one whole.
 */
export const MAX_ITEM_TEXT_CHARS = 100_000;
/** Content parts in one item (real items have one or two; a user turn with a few images). */
export const MAX_ITEM_CONTENT_PARTS = 32;
/** Images the model is shown, newest first; older ones are only noted in the text. */
export const MAX_IMAGES_IN_PROMPT = 4;
const MAX_ITEM_ID_CHARS = 64;
/** Call ids and function names (OpenAI's function names are at most 64 characters). */
const MAX_CALL_ID_CHARS = 64;
const MAX_FUNCTION_NAME_CHARS = 64;

export type ItemStatus = 'completed' | 'incomplete' | 'in_progress';
export type Role = 'user' | 'assistant' | 'system';
export type ImageDetail = 'auto' | 'low' | 'high';

export type ContentPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_audio'; transcript: string | null }
  | { type: 'input_image'; image_url: string; detail: ImageDetail }
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

export interface FunctionCallItem {
  id: string;
  object: 'realtime.item';
  type: 'function_call';
  status: ItemStatus;
  call_id: string;
  name: string;
  arguments: string;
}

export interface FunctionCallOutputItem {
  id: string;
  object: 'realtime.item';
  type: 'function_call_output';
  status: ItemStatus;
  call_id: string;
  output: string;
}

/** A listed tool, as the mcp_list_tools item shows it. */
export interface McpListedTool {
  name: string;
  description: string | null;
  input_schema: Record<string, unknown>;
  annotations: Record<string, unknown> | null;
}

export interface McpListToolsItem {
  id: string;
  object: 'realtime.item';
  type: 'mcp_list_tools';
  server_label: string;
  tools: McpListedTool[];
}

export interface McpCallItem {
  id: string;
  object: 'realtime.item';
  type: 'mcp_call';
  server_label: string;
  name: string;
  arguments: string;
  /** The approval request it answers (null: it needed none). */
  approval_request_id: string | null;
  output: string | null;
  error: McpCallError | null;
}

export interface McpApprovalRequestItem {
  id: string;
  object: 'realtime.item';
  type: 'mcp_approval_request';
  server_label: string;
  name: string;
  arguments: string;
}

export interface McpApprovalResponseItem {
  id: string;
  object: 'realtime.item';
  type: 'mcp_approval_response';
  approval_request_id: string;
  approve: boolean;
  reason: string | null;
}

export type Item =
  | MessageItem
  | FunctionCallItem
  | FunctionCallOutputItem
  | McpListToolsItem
  | McpCallItem
  | McpApprovalRequestItem
  | McpApprovalResponseItem;

/** An item a client sent, parsed; what still needs work before it is stored. */
export interface ParsedItem {
  item: Item;
  /** Base64 PCM of an input_audio part without a transcript (the caller transcribes it). */
  audio: string | null;
  /** input_image parts whose image_url the caller must check (and may replace) before storing. */
  images: { part: Extract<ContentPart, { type: 'input_image' }>; param: string }[];
}

/** A new assistant message (a response's), in progress and empty. */
export function assistantMessage(): MessageItem {
  return { id: newItemId(), object: 'realtime.item', type: 'message', status: 'in_progress', role: 'assistant', content: [] };
}

/** A new function call item (a response's), in progress, arguments still to come. */
export function functionCallItem(callId: string, name: string): FunctionCallItem {
  return { id: newItemId(), object: 'realtime.item', type: 'function_call', status: 'in_progress', call_id: callId, name, arguments: '' };
}

/** The item as the wire shows it while it is being built: a copy without its content so far. */
export function openedItem(item: Item): Item {
  if (item.type === 'message') return { ...item, content: [] };
  if (item.type === 'function_call' || item.type === 'mcp_call') return { ...item, arguments: '' };
  if (item.type === 'mcp_list_tools') return { ...item, tools: [] };
  return { ...item };
}

/** Characters of text an item holds (what counts against the conversation's bounds). */
export function itemTextChars(item: Item): number {
  switch (item.type) {
    case 'function_call':
    case 'mcp_approval_request':
      return item.name.length + item.arguments.length;
    case 'function_call_output':
      return item.output.length;
    case 'mcp_call':
      return item.name.length + item.arguments.length + (item.output?.length ?? 0) + (item.error?.message.length ?? 0);
    case 'mcp_list_tools':
      return JSON.stringify(item.tools).length;
    case 'mcp_approval_response':
      return item.reason?.length ?? 0;
    case 'message':
      break;
  }
  let total = 0;
  for (const part of item.content) {
    if (part.type === 'input_text' || part.type === 'output_text') total += part.text.length;
    else if (part.type === 'input_image') continue;
    else total += part.transcript?.length ?? 0;
  }
  return total;
}

/** Bytes of image data URLs an item holds. */
export function itemImageChars(item: Item): number {
  if (item.type !== 'message') return 0;
  let total = 0;
  for (const part of item.content) if (part.type === 'input_image') total += part.image_url.length;
  return total;
}

/** The text of a message: typed text, transcripts of audio (other items: ''). */
export function itemText(item: Item): string {
  if (item.type !== 'message') return '';
  const texts: string[] = [];
  for (const part of item.content) {
    if (part.type === 'input_text' || part.type === 'output_text') texts.push(part.text);
    else if (part.type === 'input_audio' || part.type === 'output_audio') texts.push(part.transcript ?? '');
  }
  return texts.filter((t) => t !== '').join(' ');
}

/** What the model reads of a finished mcp_call: its output, or what went wrong. */
export function mcpOutcome(item: McpCallItem): string {
  return item.output ?? `The tool failed: ${item.error?.message ?? 'unknown error'}`;
}

/** The call ids of function_call items among `items`. */
function callIds(items: readonly Item[]): Set<string> {
  return new Set(items.flatMap((i) => (i.type === 'function_call' ? [i.call_id] : [])));
}

/** Chat messages for items in order (see the header); items without anything to say are left out. */
export function toMessages(items: readonly Item[]): ChatMessage[] {
  const answered = new Set(items.flatMap((i) => (i.type === 'function_call_output' ? [i.call_id] : [])));
  const calls = callIds(items);
  const declined = new Map(items.flatMap((i) => (i.type === 'mcp_approval_response' && !i.approve ? [[i.approval_request_id, i] as const] : [])));
  // The newest images are shown; older ones only noted.
  let imagesLeft = MAX_IMAGES_IN_PROMPT;
  const shown = new Set<object>();
  for (let i = items.length - 1; i >= 0 && imagesLeft > 0; i--) {
    const item = items[i] as Item;
    if (item.type !== 'message') continue;
    for (let p = item.content.length - 1; p >= 0 && imagesLeft > 0; p--) {
      const part = item.content[p] as ContentPart;
      if (part.type === 'input_image') {
        shown.add(part);
        imagesLeft--;
      }
    }
  }
  const out: ChatMessage[] = [];
  const addCall = (call: ToolCall): void => {
    const last = out.at(-1);
    if (last?.role === 'assistant') last.toolCalls = [...(last.toolCalls ?? []), call];
    else out.push({ role: 'assistant', content: '', toolCalls: [call] });
  };
  for (const item of items) {
    if (item.type === 'function_call') {
      if (answered.has(item.call_id)) addCall({ id: item.call_id, name: item.name, arguments: item.arguments });
      continue;
    }
    if (item.type === 'mcp_call') {
      if (item.output === null && item.error === null) continue; // still running, or cut off
      addCall({ id: item.id, name: item.name, arguments: item.arguments });
      out.push({ role: 'tool', toolCallId: item.id, content: mcpOutcome(item) });
      continue;
    }
    if (item.type === 'mcp_approval_request') {
      const refusal = declined.get(item.id);
      if (!refusal) continue; // approved: its mcp_call carries it; unanswered: nothing happened yet
      addCall({ id: item.id, name: item.name, arguments: item.arguments });
      out.push({ role: 'tool', toolCallId: item.id, content: `The user did not approve this call${refusal.reason ? `: ${refusal.reason}` : '.'}` });
      continue;
    }
    if (item.type === 'mcp_list_tools' || item.type === 'mcp_approval_response') continue;
    if (item.type === 'function_call_output') {
      if (calls.has(item.call_id)) out.push({ role: 'tool', toolCallId: item.call_id, content: item.output });
      continue;
    }
    const images: ChatImage[] = [];
    const texts: string[] = [];
    for (const part of item.content) {
      if (part.type === 'input_image') {
        texts.push(IMAGE_NOTE);
        if (shown.has(part)) images.push({ url: part.image_url, detail: part.detail });
      } else if (part.type === 'input_text' || part.type === 'output_text') {
        if (part.text !== '') texts.push(part.text);
      } else if (part.transcript) texts.push(part.transcript);
    }
    const content = texts.join(' ');
    if (content.trim() === '') continue;
    if (item.role === 'user') out.push(images.length > 0 ? { role: 'user', content, images } : { role: 'user', content });
    else out.push({ role: item.role, content });
  }
  return out;
}

/**
 * Validates an item a client sent (conversation.item.create's `item`, or an element of
 * response.create's `input`) and builds the item to store. `param` prefixes parameter names in
 * errors ("item" or "response.input[2]"). Images are returned for checking, not checked here.
 */
/** Checks a parsed item's images (off the event loop) and keeps each as the model will get it. */
export async function checkItemImages(parsed: ParsedItem, images: InputImages): Promise<void> {
  const checked = await Promise.all(parsed.images.map(({ part, param }) => images.check(part.image_url, param, part.detail)));
  parsed.images.forEach(({ part }, i) => (part.image_url = checked[i]!.url));
}

/** A user's audio message as a turn commits it (transcript null while it is transcribed). */
export function userAudioItem(id: string, transcript: string | null): MessageItem {
  return { id, object: 'realtime.item', type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_audio', transcript }] };
}

export function parseItem(raw: unknown, param: string): ParsedItem {
  if (!isObject(raw)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  const type = raw.type ?? 'message';
  const id = itemId(raw, param);
  const status: ItemStatus = raw.status === 'incomplete' || raw.status === 'in_progress' ? raw.status : 'completed';
  switch (type) {
    case 'message':
      return parseMessage(raw, param, id, status);
    case 'function_call': {
      const callId = boundedString(raw, 'call_id', MAX_CALL_ID_CHARS, param);
      const name = boundedString(raw, 'name', MAX_FUNCTION_NAME_CHARS, param);
      const args = raw.arguments ?? '';
      if (typeof args !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${param}.arguments': expected a string (JSON text).`, `${param}.arguments`);
      checkMaxLength(args, MAX_ITEM_TEXT_CHARS, `${param}.arguments`);
      return { item: { id, object: 'realtime.item', type: 'function_call', status, call_id: callId, name, arguments: args }, audio: null, images: [] };
    }
    case 'function_call_output': {
      const callId = boundedString(raw, 'call_id', MAX_CALL_ID_CHARS, param);
      const output = raw.output;
      if (typeof output !== 'string') {
        throw new RealtimeError(output === undefined ? 'missing_required_parameter' : 'invalid_type', `'${param}.output' must be a string.`, `${param}.output`);
      }
      checkMaxLength(output, MAX_ITEM_TEXT_CHARS, `${param}.output`);
      return { item: { id, object: 'realtime.item', type: 'function_call_output', status: 'completed', call_id: callId, output }, audio: null, images: [] };
    }
    case 'mcp_approval_response': {
      const requestId = boundedString(raw, 'approval_request_id', MAX_ITEM_ID_CHARS, param);
      if (typeof raw.approve !== 'boolean') {
        throw new RealtimeError(raw.approve === undefined ? 'missing_required_parameter' : 'invalid_type', `'${param}.approve' must be true or false.`, `${param}.approve`);
      }
      const reason = raw.reason ?? null;
      if (reason !== null && typeof reason !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${param}.reason': expected a string.`, `${param}.reason`);
      if (reason !== null) checkMaxLength(reason, MAX_ITEM_TEXT_CHARS, `${param}.reason`);
      return { item: { id, object: 'realtime.item', type: 'mcp_approval_response', approval_request_id: requestId, approve: raw.approve, reason }, audio: null, images: [] };
    }
    case 'mcp_list_tools':
    case 'mcp_call':
    case 'mcp_approval_request':
      throw new RealtimeError(
        'unsupported_item_type',
        `Items of type '${type}' are made by the server (it lists and calls MCP tools itself); a client answers an approval request with an 'mcp_approval_response' item.`,
        `${param}.type`,
      );
    default:
      throw new RealtimeError(
        'unsupported_item_type',
        `Item type ${describeValue(type)} is not supported: items are 'message', 'function_call', 'function_call_output' or 'mcp_approval_response'.`,
        `${param}.type`,
      );
  }
}

function itemId(raw: Json, param: string): string {
  if (raw.id === undefined || raw.id === null) return newItemId();
  if (typeof raw.id !== 'string' || raw.id === '' || raw.id.length > MAX_ITEM_ID_CHARS) {
    throw new RealtimeError('invalid_value', `'${param}.id' must be a string of 1..${MAX_ITEM_ID_CHARS} characters.`, `${param}.id`);
  }
  return raw.id;
}

function boundedString(raw: Json, key: string, max: number, param: string): string {
  const v = raw[key];
  if (typeof v !== 'string' || v === '') {
    throw new RealtimeError(v === undefined ? 'missing_required_parameter' : 'invalid_value', `'${param}.${key}' must be a non-empty string.`, `${param}.${key}`);
  }
  return checkMaxLength(v, max, `${param}.${key}`);
}

const ALLOWED_PARTS: Record<Role, string[]> = {
  user: ['input_text', 'input_audio', 'input_image', 'text'],
  assistant: ['output_text', 'output_audio', 'text', 'audio'],
  system: ['input_text', 'text'],
};

function parseMessage(raw: Json, param: string, id: string, status: ItemStatus): ParsedItem {
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
  const images: ParsedItem['images'] = [];
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
      case 'input_image': {
        const url = part.image_url;
        if (typeof url !== 'string' || url === '') {
          throw new RealtimeError(url === undefined ? 'missing_required_parameter' : 'invalid_type', `'${p}.image_url' must be a data URL (data:image/...;base64,...).`, `${p}.image_url`);
        }
        const detail = part.detail ?? 'auto';
        if (detail !== 'auto' && detail !== 'low' && detail !== 'high') {
          throw new RealtimeError('invalid_value', `'${p}.detail' must be 'auto', 'low' or 'high'.`, `${p}.detail`);
        }
        const image = { type: 'input_image' as const, image_url: url, detail: detail as ImageDetail };
        images.push({ part: image, param: `${p}.image_url` });
        return image;
      }
      case 'input_audio': {
        if (part.audio !== undefined && part.audio !== null && typeof part.audio !== 'string') {
          throw new RealtimeError('invalid_type', `Invalid type for '${p}.audio': expected a base64 string.`, `${p}.audio`);
        }
        const transcript = typeof part.transcript === 'string' ? counted(part.transcript, `${p}.transcript`) : null;
        if (transcript === null && typeof part.audio !== 'string') {
          throw new RealtimeError('missing_required_parameter', `'${p}' needs 'audio' (base64 PCM16) or 'transcript'.`, `${p}.audio`);
        }
        if (transcript === null) {
          if (audio !== null) throw new RealtimeError('invalid_value', `'${param}.content' may hold one input_audio part without a transcript.`, `${p}.audio`);
          audio = part.audio as string;
        }
        return { type: 'input_audio', transcript };
      }
      default: // output_audio / audio (assistant)
        return { type: 'output_audio', transcript: typeof part.transcript === 'string' ? counted(part.transcript, `${p}.transcript`) : '' };
    }
  });
  return { item: { id, object: 'realtime.item', type: 'message', status, role, content }, audio, images };
}

function textField(part: Json, key: string, param: string): string {
  const v = part[key];
  if (typeof v !== 'string') throw new RealtimeError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  return v;
}
