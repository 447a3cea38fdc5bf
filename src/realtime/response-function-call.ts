/**
 * A function call a response makes: one `function_call` output item per call the model writes,
 * in the order it writes them (a reply may hold text and calls, or several calls).
 *
 * Events, within the run's (response.ts), exactly as OpenAI sends them:
 *   response.output_item.added (status in_progress, arguments '') → conversation.item.added →
 *   response.function_call_arguments.delta* (as the model writes them) →
 *   response.function_call_arguments.done (name and the whole arguments) →
 *   response.output_item.done (status completed) → conversation.item.done.
 * A call cut off (the response cancelled or interrupted, or the output limit reached in the middle
 * of its arguments) ends `incomplete`: no arguments.done, output_item.done with status incomplete,
 * as OpenAI does. The client runs the function and answers with a function_call_output item.
 */
import type { FunctionCallItem } from './items.js';
import type { ServerEventDraft } from './protocol.js';

export class FunctionCallOutput {
  private done = false;

  constructor(
    readonly item: FunctionCallItem,
    private readonly outputIndex: number,
    private readonly responseId: string,
    private readonly emit: (event: ServerEventDraft) => void,
    /** Sends output_item.done (and conversation.item.done) for the item once its status is set. */
    private readonly closeItem: () => void,
  ) {}

  get finished(): boolean {
    return this.done;
  }

  /** More of the arguments' JSON text. */
  append(delta: string): void {
    if (this.done || delta === '') return;
    this.item.arguments += delta;
    this.emit({ type: 'response.function_call_arguments.delta', ...this.ref(), delta });
  }

  /** The model finished the call. */
  complete(): void {
    if (this.done) return;
    this.done = true;
    const { item } = this;
    this.emit({ type: 'response.function_call_arguments.done', ...this.ref(), name: item.name, arguments: item.arguments });
    item.status = 'completed';
    this.closeItem();
  }

  /** The response ended before the call was finished. */
  abandon(): void {
    if (this.done) return;
    this.done = true;
    this.item.status = 'incomplete';
    this.closeItem();
  }

  private ref() {
    return { response_id: this.responseId, item_id: this.item.id, output_index: this.outputIndex, call_id: this.item.call_id };
  }
}
