/**
 * The session's responses: one at a time (the run in progress, `active`), and the latest few
 * finished ones whose audio can still be truncated.
 *
 * conversation.item.truncate of an assistant message: where the user stopped listening.
 *  - A message of the response still playing (how the openai-agents SDK interrupts): its audio
 *    stops now, the transcript heard up to `audio_end_ms` is kept (clamped to what was played: a
 *    client's playback clock can run a little ahead of the server's count), and the response ends
 *    cancelled before conversation.item.truncated (ResponseRun.truncate). A response may hold
 *    several messages (a preamble, then the answer after its MCP calls): each is cut on its own clock.
 *  - A response that has finished: its transcript is cut at `audio_end_ms`, which may not be past
 *    what was played; the latest few finished responses are kept for this.
 */
import type { Item } from './items.js';
import { RealtimeError } from './protocol.js';
import type { CancelReason, ResponseOutcome, ResponseRun } from './response.js';

/** Finished responses whose audio can still be truncated. */
const KEPT_RESPONSES = 8;

export class ResponseSlot {
  /** The latest run; it is the active one until it has finished (see `active`). */
  private current: ResponseRun | null = null;
  /** Finished runs by their message item. */
  private readonly played = new Map<string, ResponseRun>();

  /** The response in progress: the latest run, until it has finished (however it finished). */
  get active(): ResponseRun | null {
    return this.current && !this.current.finished ? this.current : null;
  }

  /** Refuses a second response while one is in progress. */
  refuseWhileActive(): void {
    if (!this.active) return;
    throw new RealtimeError(
      'conversation_already_has_active_response',
      `Conversation already has an active response in progress: ${this.active.id}. Wait until the response is finished before creating a new one.`,
    );
  }

  /**
   * Makes `run` the response in progress and starts it; `done` hears its outcome once it has
   * finished and left the slot. start() never throws: a failure on the way finishes the run as
   * failed (response.done), and `active` follows the run's own state, so the session cannot be
   * left with a dead response.
   */
  start(run: ResponseRun, done: (outcome: ResponseOutcome) => void): void {
    this.current = run;
    run.once('done', (outcome) => {
      if (this.current === run) this.current = null;
      done(outcome);
    });
    run.start();
  }

  /** Ends the response in progress, if there is one. */
  cancel(reason: CancelReason): void {
    this.active?.cancel(reason);
  }

  /** response.cancel: ends the response in progress, which must be the one named (null: whichever). */
  cancelRequested(responseId: string | null): void {
    const active = this.active;
    if (!active || (responseId !== null && responseId !== active.id)) {
      throw new RealtimeError(
        'response_cancel_not_active',
        responseId !== null && active ? `Response '${responseId}' is not the active response.` : 'Cancellation failed: no active response found.',
        responseId !== null ? 'response_id' : null,
      );
    }
    active.cancel('client_cancelled');
  }

  /** Whether `itemId` belongs to the response in progress (it may not leave the conversation). */
  holds(itemId: string): boolean {
    return this.active?.hasItem(itemId) ?? false;
  }

  /** A finished run whose messages are in the conversation (`inConversation` says which still are). */
  remember(run: ResponseRun, inConversation: (itemId: string) => boolean): void {
    for (const itemId of run.messageItemIds) if (inConversation(itemId)) this.played.set(itemId, run);
    while (this.played.size > KEPT_RESPONSES) this.played.delete(this.played.keys().next().value as string);
  }

  /** The item left the conversation. */
  forget(itemId: string): void {
    this.played.delete(itemId);
  }

  /**
   * Cuts `item`'s audio at `audioEndMs` (see the header). Returns where it was cut; refuses an item
   * with no such audio, or a finished one's cut past what was played.
   */
  truncate(item: Item, contentIndex: number, audioEndMs: number): number {
    const running = this.active;
    if (running?.messageItemIds.includes(item.id)) {
      if (contentIndex !== 0) throw new RealtimeError('invalid_value', `Item '${item.id}' has its audio at content_index 0.`, 'content_index');
      return running.truncate(item.id, audioEndMs);
    }
    const part = item.type === 'message' ? item.content[contentIndex] : undefined;
    if (item.type !== 'message' || item.role !== 'assistant' || !part || part.type !== 'output_audio') {
      throw new RealtimeError('invalid_value', `Item '${item.id}' has no assistant audio at content_index ${contentIndex}.`, 'content_index');
    }
    const run = this.played.get(item.id);
    if (!run) throw new RealtimeError('invalid_value', `Item '${item.id}' has no audio that can be truncated.`, 'item_id');
    const playedMs = run.playedMsOf(item.id);
    if (audioEndMs > playedMs) {
      throw new RealtimeError('invalid_value', `audio_end_ms ${audioEndMs} is past the end of the item's audio (${playedMs} ms).`, 'audio_end_ms');
    }
    run.cutTranscript(item.id, audioEndMs);
    return audioEndMs;
  }
}
