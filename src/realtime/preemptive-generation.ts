/**
 * The reply side of a voice turn while the turn is still being decided (LiveKit Agents calls it
 * preemptive generation): the language model's reading of a pause's words for semantic_vad's
 * judge, and the early reply.
 *
 *  - reading the words (`hearPause`, under semantic_vad): the probability that the user's message ends after the
 *    last word of the pause's transcript (turn-judge.ts). When the session's own model runs here
 *    it reads them with the session's request (instructions, conversation, tools), on the sequence
 *    the early reply then continues, so the reply evaluates only the message's end. When the
 *    reply comes from elsewhere (a hosted model), the local model reads them alone
 *    (`LanguageModels.wordsReader`, loaded for that job where its weights are present) with the
 *    default instructions, which every session's reading shares, so each reading evaluates the
 *    user's words and nothing else. Bounded by WORDS_READING_DEADLINE_MS; a model that fails or
 *    is late leaves the words to the rules.
 *  - the early reply: once a pause's transcript is ready (create_response on, no response running,
 *    no other transcription pending, a model that allows it: `LanguageModel.speculative`), the
 *    model starts on the reply the turn would get, while the end of the turn is still being
 *    decided (early-reply.ts). A local model starts it after its reading of the words; any other
 *    at once. Its output is only buffered: the turn's response takes it if it asks for exactly
 *    the same request (`takeEarlyReply`), and it is discarded unseen (its request aborted) when
 *    the user speaks on, or on anything else that makes it stale. A turn that ends while the
 *    local model is still reading its words has its response wait for that reading
 *    (`settled()`): the reading holds the sequence with the conversation, and a response that took
 *    another one would evaluate the whole conversation again (2 s on one core for a few turns).
 */
import type { Logger } from '../core/log.js';
import type { ChatMessage, LanguageModel, LanguageModels } from '../providers/llm/base.js';
import { EarlyReply } from './early-reply.js';
import { type MessageItem, toMessages } from './items.js';
import { readingRequest, sessionReplyRequest } from './reply-request.js';
import type { ModelRequest } from './response.js';
import type { SessionSettings } from './session-update.js';
import { spokenWords } from './turn-judge.js';
import type { AudioRecognition, UserTurn } from './audio-recognition.js';

/** How long a reading of the words may take before the judge goes on without it. */
export const WORDS_READING_DEADLINE_MS = 400;

export interface PreemptiveHost {
  sessionId: string;
  settings(): SessionSettings;
  llm: LanguageModels;
  log: Logger;
  /** Whether the session is closed (nothing more is started). */
  closed(): boolean;
  /** Whether a response is running now. */
  responding(): boolean;
  /** Whether a user item's transcription is in progress (it would add words to the conversation first). */
  transcribing(): boolean;
  /** The conversation as the model sees it now. */
  messages(): ChatMessage[];
}

/** What one pause started: the reading of its words, and the reply begun on its transcript. */
interface PauseWork {
  itemId: string;
  pause: number;
  reading: Promise<number | null> | null;
  reply: EarlyReply | null;
  /** The reading once done (for the log): its probability and how long it took. */
  read: { endProbability: number | null; ms: number } | null;
}

export class PreemptiveGeneration {
  /** The work of the latest pause of the turn in progress. */
  private pending: PauseWork | null = null;
  /** The early reply of a turn that ended, until that turn's response takes or declines it. */
  private earlyReply: EarlyReply | null = null;
  /** The reading of the words of the turn that ended, by the session's own model, while it runs. */
  private reading: Promise<unknown> | null = null;

  /** What the model was last asked to prepare (prepareSession). */
  private prepared = '';

  constructor(private readonly host: PreemptiveHost) {}

  /** Lets the model evaluate the session's prompt ahead of the first reply (see the header). In the background: a failure costs only that head start. */
  prepareSession(): void {
    const { session } = this.host.settings();
    const model = this.host.llm.forModel(session.model);
    if (!model.prepare) return;
    const { messages, tools, toolChoice } = sessionReplyRequest(this.host.settings(), []);
    const prepared = JSON.stringify([session.model, messages, tools, toolChoice]);
    if (prepared === this.prepared) return;
    this.prepared = prepared;
    model.prepare({ messages, tools, toolChoice }).catch((err: unknown) => {
      this.host.log.debug('preparing the model for the session failed', { sessionId: this.host.sessionId, err });
    });
  }

  /** Hears the voice input's speech resuming: that pause's work is stale. */
  follow(input: AudioRecognition): void {
    input.on('speech_resumed', (e) => this.onResumed(e.pause));
  }

  /**
   * A pause's transcript is ready (RecognitionDeps.pauseWords): with `read`, the words are read for
   * the judge (the model's probability, or null), and the reply the turn would get starts (see the
   * header).
   */
  hearPause(p: { itemId: string; pause: number; text: string; read: boolean; signal: AbortSignal }): Promise<number | null> {
    const work = this.workOf(p.itemId, p.pause);
    if (p.read) work.reading ??= this.read(work, p.text, p.signal);
    if (!work.reply) {
      const model = this.replyModel();
      const start = () => this.startReply(work, model, p.text);
      // A local model reads the words first and continues the reading's sequence.
      if (model.local && work.reading) void work.reading.then(start);
      else start();
    }
    return work.reading ?? Promise.resolve(null);
  }

  /** The user spoke on: pause `pause`'s work is stale. */
  onResumed(pause: number): void {
    if (this.pending?.pause === pause) this.dropPending();
  }

  /**
   * A turn ended, in the pause its transcription is of (or in none): that pause's reply waits for
   * the turn's response; anything else is dropped. Logs the turn with the reading of its words.
   */
  onTurnEnded(turn: UserTurn): void {
    const { itemId } = turn;
    const pause = turn.transcription?.pause ?? null;
    const work = this.pending;
    this.pending = null;
    this.dropEarlyReply();
    const matches = work !== null && pause !== null && work.pause === pause && work.itemId === itemId;
    if (!matches) work?.reply?.discard();
    else {
      this.earlyReply = work.reply;
      if (work.reading && !work.read && this.replyModel().local) {
        const reading = work.reading.catch(() => null);
        this.reading = reading;
        void reading.then(() => {
          if (this.reading === reading) this.reading = null;
        });
      }
    }
    const read = matches ? work.read : null;
    this.host.log.info('turn ended', {
      sessionId: this.host.sessionId,
      itemId,
      endedBy: turn.endedBy,
      endOfTurnProbability: turn.endOfTurnProbability,
      speculativeTranscript: turn.transcription !== null,
      wordsEndProbability: read?.endProbability ?? null,
      wordsReadMs: read?.ms ?? null,
      earlyReply: this.earlyReply !== null,
    });
  }

  /** Resolves once the session's model has finished reading the words of the turn that ended (see the header). */
  async settled(): Promise<void> {
    await this.reading;
  }

  /** Drops the work of the pause in progress (a clear, a commit, a timeout). */
  dropPending(): void {
    this.pending?.reply?.discard();
    this.pending = null;
  }

  dropEarlyReply(): void {
    this.earlyReply?.discard();
    this.earlyReply = null;
  }

  /** The pending early reply as the model's stream, if it is exactly this request's reply; otherwise it is discarded. */
  takeEarlyReply(model: LanguageModel, request: ModelRequest, responseId: string): LanguageModel | null {
    const early = this.earlyReply;
    this.earlyReply = null;
    if (!early) return null;
    const { log, sessionId } = this.host;
    if (!early.matches(model, request)) {
      early.discard();
      log.debug('early reply discarded: the response asked for another', { sessionId, responseId });
      return null;
    }
    log.info('early reply taken', { sessionId, responseId, readyChars: early.readyChars, ageMs: early.ageMs });
    return early.take();
  }

  close(): void {
    this.dropPending();
    this.dropEarlyReply();
  }

  private workOf(itemId: string, pause: number): PauseWork {
    if (this.pending?.itemId !== itemId || this.pending.pause !== pause) {
      this.dropPending();
      this.pending = { itemId, pause, reading: null, reply: null, read: null };
    }
    return this.pending;
  }

  private replyModel(): LanguageModel {
    return this.host.llm.forModel(this.host.settings().session.model);
  }

  /** The turn so far as the user message the model would see. */
  private turn(work: PauseWork, text: string): ChatMessage[] {
    const item: MessageItem = { id: work.itemId, object: 'realtime.item', type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_audio', transcript: text }] };
    return [...this.host.messages(), ...toMessages([item])];
  }

  private async read(work: PauseWork, text: string, signal: AbortSignal): Promise<number | null> {
    const words = spokenWords(text);
    if (words === null) return null;
    const own = this.replyModel();
    const reader = own.local && own.endOfTurnProbability ? own : this.host.llm.wordsReader();
    if (!reader?.endOfTurnProbability) return null;
    const request = reader === own ? sessionReplyRequest(this.host.settings(), this.turn(work, words)) : readingRequest(words);
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(WORDS_READING_DEADLINE_MS)]);
    const started = performance.now();
    try {
      const endProbability = await reader.endOfTurnProbability({ ...request, signal: deadline });
      work.read = { endProbability, ms: Math.round(performance.now() - started) };
      return endProbability;
    } catch (err) {
      this.host.log.warn('reading the words for the end of the turn failed', { sessionId: this.host.sessionId, err });
      return null;
    }
  }

  private startReply(work: PauseWork, model: LanguageModel, text: string): void {
    const host = this.host;
    if (this.pending !== work || work.reply || host.closed() || host.responding() || host.transcribing()) return;
    if (!host.settings().turnDetection?.createResponse || !model.speculative) return;
    work.reply = new EarlyReply(model, sessionReplyRequest(host.settings(), this.turn(work, text)));
  }
}
