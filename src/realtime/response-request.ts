/**
 * response.create's `response`, validated against the session's settings into what the engine
 * starts a ResponseRun with. Every field falls back to the session's (GA names first, then the
 * older dialect's: `modalities`, `voice`, `max_response_output_tokens`); an invalid one is a
 * RealtimeError naming it (`response.tools[0].name`), and nothing starts.
 *
 * Fields: output_modalities, instructions, audio.output.voice, max_output_tokens, metadata,
 * conversation ("auto" | "none"), input (items for an out-of-band context: references to
 * conversation items, or items given whole, their images checked), tools, tool_choice,
 * parallel_tool_calls. `prompt` and `reasoning` (OpenAI-hosted features; `reasoning.effort` checked) are accepted and not
 * used (docs/realtime.md#accepted-and-not-used).
 *
 * Two steps, so the engine starts a finished run: checkResponse() (the fields, a voice of its own,
 * the input items) before it waits for transcriptions in progress, and responseSpec() after, with
 * the conversation as it then is: the run's whole spec and the model's request (reply-request.ts).
 */
import type { ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import { MAX_INSTRUCTIONS_CHARS } from '../sessions/session-config.js';
import { type Conversation, MAX_CONVERSATION_ITEMS } from './conversation.js';
import type { AssetChecker } from './engine-ports.js';
import type { InputImages } from './input-images.js';
import { type Item, checkItemImages, parseItem, toMessages } from './items.js';
import { type Json, RealtimeError, checkMaxLength, isObject, newResponseId, optionalMetadata, optionalString, requireString } from './protocol.js';
import { replyRequest } from './reply-request.js';
import { reasoningAt, voiceAt } from './session-object.js';
import type { ApprovedCall, ResponseSpec } from './response.js';
import { type McpOffer, NO_MCP } from './mcp-toolbox.js';
import type { SessionSettings } from './session-update.js';
import { type McpServerDeclaration, parseToolChoice, parseTools } from './tools.js';

/** Voice names in a response.create: at most this long (as in session.update). */
const MAX_VOICE_NAME_CHARS = 200;

export interface ResponseRequest {
  outputModalities: string[];
  /** Whether the request named its modalities (images then follow them, not the session's). */
  modalitiesGiven: boolean;
  inConversation: boolean;
  instructions: string;
  /** A voice for this response only, and where it was given (for the error naming an unknown one); null for the session's. */
  voice: { id: string; param: string } | null;
  metadata: Record<string, string> | null;
  maxOutputTokens: number | 'inf';
  /** Out-of-band context items as sent (null: the conversation). */
  input: unknown[] | null;
  tools: ToolDefinition[];
  /** The MCP servers whose tools are offered (the response's own `tools`, else the session's). */
  mcp: McpServerDeclaration[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
}

export function parseResponseRequest(body: unknown, settings: SessionSettings): ResponseRequest {
  if (body !== undefined && body !== null && !isObject(body)) {
    throw new RealtimeError('invalid_type', "Invalid type for 'response': expected an object.", 'response');
  }
  const r: Json = body ?? {};
  const s = settings.session;
  const modalitiesRaw = r.output_modalities ?? r.modalities;
  let outputModalities = s.output_modalities;
  if (modalitiesRaw !== undefined) {
    if (!Array.isArray(modalitiesRaw) || modalitiesRaw.some((m) => m !== 'text' && m !== 'audio' && m !== 'image')) {
      throw new RealtimeError('invalid_value', "'response.output_modalities' must be a list of 'text', 'audio', 'image'.", 'response.output_modalities');
    }
    outputModalities = modalitiesRaw as string[];
  }
  reasoningAt(r, 'response.reasoning'); // checked like the session's; no model here reasons
  const conversation = r.conversation ?? 'auto';
  if (conversation !== 'auto' && conversation !== 'none') {
    throw new RealtimeError('invalid_value', "'response.conversation' must be 'auto' or 'none'.", 'response.conversation');
  }
  const instructions =
    r.instructions === undefined ? s.instructions : checkMaxLength(requireString(r, 'instructions', 'response.instructions'), MAX_INSTRUCTIONS_CHARS, 'response.instructions');
  const audioOut = isObject(r.audio) && isObject(r.audio.output) ? r.audio.output : {};
  const voiceIn = (obj: Json, param: string, custom: boolean) => {
    if (!custom) {
      const v = optionalString(obj, 'voice', param);
      return v === null ? null : { id: checkMaxLength(v, MAX_VOICE_NAME_CHARS, param), param };
    }
    const v = voiceAt(obj, 'voice', param); // a name, or OpenAI's custom voice {id}
    return v === null ? null : { id: v.id, param: typeof v.ref === 'string' ? param : `${param}.id` };
  };
  const voice = voiceIn(audioOut, 'response.audio.output.voice', true) ?? voiceIn(r, 'response.voice', false);
  const metadata = optionalMetadata(r, 'metadata', 'response.metadata');
  const maxTokens = r.max_output_tokens ?? r.max_response_output_tokens ?? s.max_output_tokens;
  if (maxTokens !== 'inf' && !(typeof maxTokens === 'number' && Number.isInteger(maxTokens) && maxTokens >= 1 && maxTokens <= 4096)) {
    throw new RealtimeError('invalid_value', "'response.max_output_tokens' must be an integer from 1 to 4096 or 'inf'.", 'response.max_output_tokens');
  }
  let input: unknown[] | null = null;
  if (Array.isArray(r.input)) {
    if (r.input.length > MAX_CONVERSATION_ITEMS) {
      throw new RealtimeError(
        'array_above_max_length',
        `Invalid 'response.input': array too long. Expected an array with maximum length ${MAX_CONVERSATION_ITEMS}, but got an array with length ${r.input.length} instead.`,
        'response.input',
      );
    }
    input = r.input;
  } else if (r.input !== undefined && r.input !== null) {
    throw new RealtimeError('invalid_type', "'response.input' must be an array of items.", 'response.input');
  }
  const own = r.tools === undefined ? null : parseTools(r.tools, 'response.tools');
  const tools = own?.functions ?? settings.tools;
  const toolChoice = r.tool_choice === undefined ? (r.tools === undefined ? settings.toolChoice : 'auto') : parseToolChoice(r.tool_choice, tools, 'response.tool_choice');
  const parallel = r.parallel_tool_calls ?? settings.parallelToolCalls;
  if (typeof parallel !== 'boolean') throw new RealtimeError('invalid_type', "Invalid type for 'response.parallel_tool_calls': expected a boolean.", 'response.parallel_tool_calls');
  return {
    outputModalities,
    modalitiesGiven: modalitiesRaw !== undefined,
    inConversation: conversation === 'auto',
    instructions,
    voice,
    metadata,
    maxOutputTokens: maxTokens as number | 'inf',
    input,
    tools,
    mcp: own?.mcp ?? settings.mcp,
    toolChoice,
    parallelToolCalls: parallel,
  };
}

/** What checking and finishing a response request reads of the session. */
export interface ResponseContext {
  settings: SessionSettings;
  conversation: Conversation;
  userId: string;
  assets: AssetChecker;
  images: InputImages;
}

/** A response request whose fields, voice and input items have been checked. */
export interface CheckedResponse {
  request: ResponseRequest;
  /** The out-of-band context (null: the conversation). */
  input: Item[] | null;
}

/**
 * Checks response.create's `response` (null: an automatic response): its fields, a voice for
 * this response only (checked as session.update checks one: refused now, naming the event, not a
 * response that fails later with no event to name), and its input items.
 */
export async function checkResponse(body: unknown, ctx: ResponseContext): Promise<CheckedResponse> {
  const request = parseResponseRequest(body, ctx.settings);
  const { voice } = request;
  if (voice !== null && voice.id !== ctx.settings.session.voice) await ctx.assets.require('voice', voice.id, ctx.userId, voice.param);
  return { request, input: request.input === null ? null : await inputItems(request.input, ctx) };
}

/** response.input: items by reference or given whole (images checked). */
async function inputItems(input: unknown[], ctx: ResponseContext): Promise<Item[]> {
  const items: Item[] = [];
  for (const [i, raw] of input.entries()) {
    if (isObject(raw) && raw.type === 'item_reference') {
      items.push(ctx.conversation.require(requireString(raw, 'id', `response.input[${i}].id`), `response.input[${i}].id`, 'retrieve'));
      continue;
    }
    const parsed = parseItem(raw, `response.input[${i}]`);
    await checkItemImages(parsed, ctx.images);
    items.push(parsed.item);
  }
  return items;
}

/** How the session delivers a response (fixed by its transport and settings). */
export interface ResponseDelivery {
  /** Whether the session sends image events at all (its transport and modalities). */
  imagesWanted: boolean;
  /** Older-form `video=true`: frames whatever the response's modalities. */
  legacyVideo: boolean;
  audioDelivery: ResponseSpec['audioDelivery'];
  /** Audio deltas carry their pts (a face the client draws, which it times by them). */
  audioPts: boolean;
}

/** The MCP side of a response: the tools offered from its servers, and the calls the client approved. */
export interface ResponseMcp {
  offer: McpOffer;
  approvedCalls: ApprovedCall[];
}

/** The run's whole spec for a checked request, over the conversation as it is now; `clientEventId` names the response.create (null: automatic). */
export function responseSpec(
  checked: CheckedResponse,
  ctx: ResponseContext,
  delivery: ResponseDelivery,
  clientEventId: string | null,
  mcp: ResponseMcp = { offer: NO_MCP, approvedCalls: [] },
): ResponseSpec {
  const { request: r, input } = checked;
  const { settings, conversation } = ctx;
  const s = settings.session;
  const context = input === null ? conversation.messages() : toMessages(input);
  const tools = { tools: [...r.tools, ...mcp.offer.tools], toolChoice: r.toolChoice, parallelToolCalls: r.parallelToolCalls };
  return {
    id: newResponseId(),
    conversation: r.inConversation ? { id: conversation.id, insert: (item) => conversation.insert(item, null) } : null,
    outputModalities: r.outputModalities,
    request: replyRequest(r.instructions, r.outputModalities, context, r.maxOutputTokens, tools),
    maxOutputTokens: r.maxOutputTokens,
    metadata: r.metadata,
    clientEventId,
    // audio.output.voice holds an OpenAI voice name (the speech service maps it) or our voice id.
    voiceName: r.voice?.id ?? s.voice,
    speed: s.audio.output.speed,
    images: delivery.imagesWanted && (!r.modalitiesGiven || r.outputModalities.includes('image') || delivery.legacyVideo),
    audioDelivery: delivery.audioDelivery,
    audioPts: delivery.audioPts,
    outputFormat: settings.outputFormat,
    mcp: mcp.offer,
    approvedCalls: mcp.approvedCalls,
  };
}
