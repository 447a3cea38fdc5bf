/**
 * A call the model makes to an MCP tool (mcp-toolbox.ts routes it), run by this server within
 * the response. Events, within the run's (response.ts), as OpenAI sends them:
 *
 *   needs no approval (require_approval says so, or an approved request):
 *     response.output_item.added (mcp_call, arguments '', output and error null) → conversation.item.added →
 *     response.mcp_call_arguments.delta* → response.mcp_call_arguments.done →
 *     response.mcp_call.in_progress → (the call) → response.mcp_call.completed | .failed →
 *     response.output_item.done (output, or error) → conversation.item.done
 *   needs approval: nothing while the model writes; then an mcp_approval_request item
 *     (output_item.added, conversation.item.added, output_item.done, conversation.item.done) and
 *     no call: the client answers with an mcp_approval_response item, and the session's next
 *     response runs the call (mcp_call with approval_request_id) before the model speaks again.
 *
 * A call cut off while the model writes it ends with output_item.done and no output; one cut off
 * while it runs is cancelled at the server (the SDK sends notifications/cancelled) and fails with
 * protocol_error -32800. Arguments that are not a JSON object fail the call (-32602) without
 * sending it. The outcome (output or error) is what the model reads in the next step.
 */
import type { ChatMessage } from '../providers/llm/base.js';
import { type McpApprovalRequestItem, type McpCallItem, mcpOutcome } from './items.js';
import type { McpRoute } from './mcp-toolbox.js';
import { type ServerEventDraft, newItemId } from './protocol.js';

/** Adds an output item to the response; returns its index and the closer (output_item.done, conversation.item.done). */
export type AddOutput = (item: McpCallItem | McpApprovalRequestItem) => { outputIndex: number; close: () => void };

/** An mcp_call item, new (arguments to come) or for an approved request. */
export function mcpCallItem(route: McpRoute, args = '', approvalRequestId: string | null = null): McpCallItem {
  return {
    id: newItemId(),
    object: 'realtime.item',
    type: 'mcp_call',
    server_label: route.server.label,
    name: route.tool.name,
    arguments: args,
    approval_request_id: approvalRequestId,
    output: null,
    error: null,
  };
}

export class McpCallOutput {
  private state: 'writing' | 'written' | 'running' | 'done' = 'writing';
  private readonly outputIndex: number;
  private readonly closeItem: () => void;

  constructor(
    readonly item: McpCallItem,
    private readonly route: McpRoute,
    private readonly responseId: string,
    private readonly emit: (event: ServerEventDraft) => void,
    addOutput: AddOutput,
  ) {
    ({ outputIndex: this.outputIndex, close: this.closeItem } = addOutput(item));
  }

  get finished(): boolean {
    return this.state === 'done';
  }

  /** Whether it ran to an outcome (output or error), which the model reads next. */
  get ran(): boolean {
    return this.state === 'done' && (this.item.output !== null || this.item.error !== null);
  }

  append(delta: string): void {
    if (this.state !== 'writing' || delta === '') return;
    this.item.arguments += delta;
    this.emit({ type: 'response.mcp_call_arguments.delta', ...this.ref(), delta, obfuscation: '' });
  }

  /** The model finished writing it. */
  complete(): void {
    if (this.state !== 'writing') return;
    this.state = 'written';
    this.emit({ type: 'response.mcp_call_arguments.done', ...this.ref(), arguments: this.item.arguments });
  }

  /** Runs the call (once written): in_progress, the server's answer, completed or failed, item done. */
  async execute(signal: AbortSignal): Promise<void> {
    if (this.state !== 'written') return;
    this.state = 'running';
    const ref = { item_id: this.item.id, output_index: this.outputIndex };
    this.emit({ type: 'response.mcp_call.in_progress', ...ref });
    const args = argumentsObject(this.item.arguments);
    const outcome = args
      ? await this.route.call(args, signal)
      : { output: null, error: { type: 'protocol_error' as const, code: -32602, message: 'The model wrote arguments that are not a JSON object; the call was not sent.' } };
    if (this.state !== 'running') return; // abandoned while it ran: already closed
    this.state = 'done';
    this.item.output = outcome.output;
    this.item.error = outcome.error;
    this.emit({ type: outcome.error ? 'response.mcp_call.failed' : 'response.mcp_call.completed', ...ref });
    this.closeItem();
  }

  /** The response ended first: a call being written is closed as it is; one running fails as cancelled. */
  abandon(): void {
    if (this.state === 'done') return;
    const running = this.state === 'running';
    this.state = 'done';
    if (running) {
      this.item.error = { type: 'protocol_error', code: -32800, message: 'The call was cancelled: the response ended before it finished.' };
      this.emit({ type: 'response.mcp_call.failed', item_id: this.item.id, output_index: this.outputIndex });
    }
    this.closeItem();
  }

  private ref() {
    return { response_id: this.responseId, item_id: this.item.id, output_index: this.outputIndex };
  }
}

/** A call that waits for the client's approval: shown whole, as an mcp_approval_request item, once written. */
export class McpApprovalOutput {
  private args = '';
  private state: 'writing' | 'done' = 'writing';
  readonly ran = false;

  constructor(
    private readonly route: McpRoute,
    private readonly addOutput: AddOutput,
  ) {}

  get finished(): boolean {
    return this.state === 'done';
  }

  append(delta: string): void {
    if (this.state === 'writing') this.args += delta;
  }

  complete(): void {
    if (this.state !== 'writing') return;
    this.state = 'done';
    const item: McpApprovalRequestItem = {
      id: newItemId(),
      object: 'realtime.item',
      type: 'mcp_approval_request',
      server_label: this.route.server.label,
      name: this.route.tool.name,
      arguments: this.args,
    };
    this.addOutput(item).close();
  }

  /** Cut off while written: nothing was shown, nothing is. */
  abandon(): void {
    this.state = 'done';
  }
}

/** What the model reads after a step's calls ran: its words and calls as the assistant's turn, then each outcome. */
export function afterCalls(text: string, calls: readonly McpCallItem[]): ChatMessage[] {
  return [
    { role: 'assistant', content: text, toolCalls: calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) },
    ...calls.map((c): ChatMessage => ({ role: 'tool', toolCallId: c.id, content: mcpOutcome(c) })),
  ];
}

function argumentsObject(text: string): Record<string, unknown> | null {
  if (text.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
