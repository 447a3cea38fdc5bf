/**
 * What a session writes to the store beside its events: the chat history (user and assistant
 * turns, bounded per session) and the transcript of the reply in progress. Store writes never
 * break the conversation: a failure is logged once per run of failures (a store outage would
 * otherwise log every turn; the store logs the outage itself).
 */
import type { Logger } from '../core/log.js';
import type { SessionRecorder } from './engine-ports.js';

/**
 * Chat history (user and assistant turns) one session writes to the store, in characters. Turns
 * beyond it are not recorded (a warning says so, once): 4M characters is hours of conversation, and
 * at most a few MB of database per session.
 */
export const MAX_RECORDED_CHAT_CHARS = 4_000_000;

export class ChatRecord {
  private recordedChars = 0;
  /** The last store write failed: further failures are not logged until one succeeds. */
  private failing = false;
  private limitWarned = false;

  constructor(
    private readonly recorder: SessionRecorder,
    private readonly log: Logger,
  ) {}

  /** Records a chat turn, within MAX_RECORDED_CHAT_CHARS. */
  turn(role: 'user' | 'assistant', text: string): void {
    if (text.trim() === '') return;
    if (this.recordedChars + text.length > MAX_RECORDED_CHAT_CHARS) {
      if (!this.limitWarned) {
        this.limitWarned = true;
        this.log.warn('chat history limit reached: later turns of this session are not recorded', { limitChars: MAX_RECORDED_CHAT_CHARS });
      }
      return;
    }
    this.recordedChars += text.length;
    void this.write(() => this.recorder.appendTurn(role, text));
  }

  /** The reply in progress, as it is spoken ('' once it is over). */
  progress(text: string): void {
    void this.write(() => this.recorder.setCurrentTranscript(text));
  }

  private async write(write: () => Promise<void>): Promise<void> {
    try {
      await write();
      this.failing = false;
    } catch (err) {
      if (this.failing) return;
      this.failing = true;
      this.log.error('recording chat or usage failed (later failures in a row are not logged)', { err });
    }
  }
}
