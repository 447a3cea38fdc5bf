/**
 * What the model is asked for a reply, built the same way by the engine, the server's start-up
 * warm-up and the benchmarks: the session's instructions (with the spoken-reply guidance when the
 * reply will be spoken), the conversation, the output limit and the tools offered; and the nudge
 * told to the model when the user has been silent.
 */
import type { ChatMessage, ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import { DEFAULT_INSTRUCTIONS } from '../sessions/session-config.js';
import type { ModelRequest } from './response.js';
import type { SessionSettings } from './session-update.js';

/** Told to the model when the reply will be spoken: the avatar should talk, not write. */
export const SPOKEN_REPLY_GUIDANCE =
  'Your replies are spoken aloud by an animated avatar in a live conversation: answer in one to three short sentences of plain speech, without lists, markdown, code or emoji.';

/**
 * What the model is asked for a reply: the instructions, with the spoken-reply guidance when the
 * reply will be spoken, then the context; the output limit ('inf': the provider's own); the tools
 * it may call ('none' or no tools: none are offered).
 */
export function replyRequest(
  instructions: string,
  modalities: readonly string[],
  context: ChatMessage[],
  maxTokens: number | 'inf',
  tools: { tools: ToolDefinition[]; toolChoice: ToolChoice; parallelToolCalls: boolean } = { tools: [], toolChoice: 'auto', parallelToolCalls: true },
): ModelRequest {
  const system = modalities.includes('audio') ? `${instructions}\n\n${SPOKEN_REPLY_GUIDANCE}` : instructions;
  const offered = tools.toolChoice === 'none' ? [] : tools.tools;
  return {
    messages: [{ role: 'system', content: system }, ...context],
    maxOutputTokens: maxTokens === 'inf' ? null : maxTokens,
    tools: offered,
    toolChoice: offered.length === 0 ? 'auto' : tools.toolChoice,
    parallelToolCalls: tools.parallelToolCalls,
  };
}

/** A reply to `context` as the session asks for one: its instructions, modalities, output limit and tools. */
export function sessionReplyRequest(settings: SessionSettings, context: ChatMessage[]): ModelRequest {
  const { session } = settings;
  return replyRequest(session.instructions, session.output_modalities, context, session.max_output_tokens, settings);
}

/** The words' reading by a model that is not the session's: the default instructions and the words, which every session's reading shares. */
export function readingRequest(words: string): ModelRequest {
  return replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [{ role: 'user', content: words }], 'inf');
}

/** Told to the model when the user has been silent for idle_timeout_ms. */
export function idleNudge(seconds: number): string {
  return `The user has said nothing for ${seconds} seconds since your last reply. Check in with them in one short, friendly sentence (for example, ask whether they are still there).`;
}
