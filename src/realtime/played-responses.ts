/**
 * conversation.item.truncate of an assistant message: where the user stopped listening.
 *  - The response still playing (how the openai-agents SDK interrupts): its audio stops now, the
 *    transcript heard up to `audio_end_ms` is kept (clamped to what was played: a client's playback
 *    clock can run a little ahead of the server's count), and the response ends cancelled before
 *    conversation.item.truncated (ResponseRun.truncate).
 *  - A response that has finished: its transcript is cut at `audio_end_ms`, which may not be past
 *    what was played; the latest few finished responses are kept for this.
 */
import type { Item } from './items.js';
import { RealtimeError } from './protocol.js';
import type { ResponseRun } from './response.js';

/** Finished responses whose audio can still be truncated. */
const KEPT_RESPONSES = 8;

export class PlayedResponses {
  private readonly runs = new Map<string, ResponseRun>();

  /** A finished run whose message is in the conversation. */
  remember(run: ResponseRun): void {
    const itemId = run.messageItemId;
    if (itemId === null) return;
    this.runs.set(itemId, run);
    while (this.runs.size > KEPT_RESPONSES) this.runs.delete(this.runs.keys().next().value as string);
  }

  /** The item left the conversation. */
  forget(itemId: string): void {
    this.runs.delete(itemId);
  }

  /**
   * Cuts `item`'s audio at `audioEndMs` (see the header); `running` is the response in progress.
   * Returns where it was cut; refuses an item with no such audio, or a finished one's cut past what was played.
   */
  truncate(item: Item, contentIndex: number, audioEndMs: number, running: ResponseRun | null): number {
    if (running?.messageItemId === item.id) {
      if (contentIndex !== 0) throw new RealtimeError('invalid_value', `Item '${item.id}' has its audio at content_index 0.`, 'content_index');
      return running.truncate(audioEndMs);
    }
    const part = item.type === 'message' ? item.content[contentIndex] : undefined;
    if (item.type !== 'message' || item.role !== 'assistant' || !part || part.type !== 'output_audio') {
      throw new RealtimeError('invalid_value', `Item '${item.id}' has no assistant audio at content_index ${contentIndex}.`, 'content_index');
    }
    const run = this.runs.get(item.id);
    if (!run) throw new RealtimeError('invalid_value', `Item '${item.id}' has no audio that can be truncated.`, 'item_id');
    if (audioEndMs > run.playedMs) {
      throw new RealtimeError('invalid_value', `audio_end_ms ${audioEndMs} is past the end of the item's audio (${run.playedMs} ms).`, 'audio_end_ms');
    }
    item.content[contentIndex] = { type: 'output_audio', transcript: run.transcriptAt(audioEndMs) };
    item.status = 'incomplete';
    return audioEndMs;
  }
}
