/**
 * The machinery behind a voice turn, kept out of the engine's dispatch: transcription of user
 * audio items, speculative transcription in a turn's pauses, and the early reply.
 *
 *  - transcription: a user audio item (a VAD turn, a commit, an input_audio item) is transcribed
 *    and its events sent (.delta*, .completed | .failed); responses wait for transcriptions in
 *    progress (`settled()`), so the model hears what was said;
 *  - speculative transcription: when the turn pauses (speech_paused, about 120 ms of silence) a
 *    local recogniser starts on the turn so far; if the turn ends in that same pause its result is
 *    the transcript (the rest is silence), its deltas sent only then; if the user speaks on
 *    (speech_resumed) it is aborted, and nothing of it ever reaches the client. Never with a
 *    remote recogniser (it would be billed for work thrown away). semantic_vad's judge also reads
 *    it (`wordsOfLatestPause`; turn-judge.ts: a pause after "a table for" is not the end of the
 *    turn); under semantic_vad the local language model first reads the words (its probability
 *    that the message ends there, `readWords`), on the sequence the early reply then continues;
 *  - early reply: once that transcript is ready (create_response on, no response running, a
 *    model in this process), the model starts on the reply the turn would get, while the end of
 *    the turn is still being decided (early-reply.ts). Its output is only buffered: the turn's
 *    response takes it if it asks for exactly the same request (`takeEarlyReply`), and it is
 *    discarded unseen when the user speaks on, or on anything else that makes it stale. A reply
 *    that turns out to be a function call is buffered the same way.
 */
import type { Logger } from '../core/log.js';
import { AppError } from '../core/errors.js';
import type { ChatMessage, LanguageModel, LanguageModels } from '../providers/llm/base.js';
import { audioSeconds, type SpeechRecognizers, type Transcriber, type TranscriptionResult } from '../providers/asr/base.js';
import { EarlyReply } from './early-reply.js';
import { type MessageItem, toMessages } from './items.js';
import { type ServerEventDraft, RealtimeError } from './protocol.js';
import type { ModelRequest } from './response.js';
import type { SessionSettings } from './session-update.js';
import { type TurnWords, spokenWords } from './turn-judge.js';

/**
 * How long semantic_vad's judge waits for the language model's reading of the words after the
 * transcript is ready (it waits for a free sequence when every one is generating); past that the
 * words are judged by rule.
 */
export const WORDS_READING_DEADLINE_MS = 400;

/** What the voice-turn machinery needs of the engine. */
export interface VoiceTurnHost {
  sessionId: string;
  emit(event: ServerEventDraft): void;
  settings(): SessionSettings;
  asr: SpeechRecognizers;
  llm: LanguageModels;
  log: Logger;
  /** Whether the session is closed (nothing more is sent). */
  closed(): boolean;
  /** Whether a response is running now. */
  responding(): boolean;
  /** The conversation as the model sees it now. */
  messages(): ChatMessage[];
  /** The request a reply to `context` would make (instructions, tools, limits of the session). */
  replyRequest(context: ChatMessage[]): ModelRequest;
}

/** A transcription of the turn so far, started in one of its pauses. */
export interface Speculation {
  itemId: string;
  /** The speech_paused it started in. */
  pause: number;
  transcriber: Transcriber;
  language: string | null;
  prompt: string | null;
  /** Deltas held back until the turn is known to end in this pause. */
  deltas: string[];
  abort: AbortController;
  result: Promise<TranscriptionResult>;
  /** The reply started on its transcript, or null. */
  reply: EarlyReply | null;
  /** What the words say about the end of the turn (semantic_vad's judge; turn-judge.ts), once the transcript is read. */
  words: Promise<TurnWords | null>;
  /** The language model's reading of the words once done (for the log): its probability and how long it took. */
  wordsRead: { endProbability: number | null; ms: number } | null;
}

export class VoiceTurns {
  private readonly transcriptions = new Set<Promise<void>>();
  /** A transcription started in a pause of the current turn. */
  private speculation: Speculation | null = null;
  /** The early reply of a turn that ended, until that turn's response takes or declines it. */
  private earlyReply: EarlyReply | null = null;

  constructor(private readonly host: VoiceTurnHost) {}

  /** Whether a transcription is in progress. */
  get transcribing(): boolean {
    return this.transcriptions.size > 0;
  }

  /** Resolves once every transcription in progress has ended. */
  async settled(): Promise<void> {
    if (this.transcriptions.size > 0) await Promise.allSettled([...this.transcriptions]);
  }

  /** A pause in the turn: starts transcribing the turn so far, in case the turn ends in it. */
  paused(e: { itemId: string; pause: number; audio: Int16Array; audio16k: Float32Array | null }): void {
    this.dropSpeculation();
    if (this.host.closed()) return;
    const { model, language, prompt } = this.host.settings().transcription;
    const transcriber = this.host.asr.forModel(model);
    if (!transcriber.local) return;
    const deltas: string[] = [];
    const abort = new AbortController();
    // Speculative until the turn ends in this pause (stopped() takes it): confirmed turns of other sessions go first.
    const speculative = (): boolean => this.speculation === speculation;
    const result = transcriber.transcribe(
      { pcm: e.audio, ...(e.audio16k ? { pcm16k: e.audio16k } : {}), language: language ?? 'en', prompt, signal: abort.signal, speculative },
      (delta) => deltas.push(delta),
    );
    const speculation: Speculation = { itemId: e.itemId, pause: e.pause, transcriber, language, prompt, deltas, abort, result, reply: null, words: Promise.resolve(null), wordsRead: null };
    this.speculation = speculation;
    // The language model reads the words first (semantic_vad), then starts the reply on the
    // sequence that now holds them: the reply evaluates only the message's end.
    speculation.words = result.then(
      (r) => this.readWords(speculation, r.text),
      () => null, // a failure (or the abort) is handled by whoever takes the result
    );
    void speculation.words.then(() => result.then((r) => this.startEarlyReply(speculation, r.text), () => undefined));
  }

  /** The user spoke on: the speculation of that pause is stale. */
  resumed(e: { pause: number }): void {
    if (this.speculation?.pause === e.pause) this.dropSpeculation();
  }

  /**
   * The turn ended (in pause `pause`, or null): the speculation if it is this turn's (it started in
   * the pause the turn ended in, with the same recogniser settings), its early reply kept for the
   * turn's response; otherwise null, and it is dropped.
   */
  stopped(e: { itemId: string; pause: number | null }): Speculation | null {
    const s = this.speculation;
    const t = this.host.settings().transcription;
    const usable =
      s !== null && e.pause !== null && s.pause === e.pause && s.itemId === e.itemId &&
      s.transcriber.id === this.host.asr.forModel(t.model).id && s.language === t.language && s.prompt === t.prompt;
    if (!usable) {
      this.dropSpeculation();
      return null;
    }
    // Its reply (if it started one) waits for this turn's response.
    this.dropEarlyReply();
    this.earlyReply = s.reply;
    this.speculation = null;
    return s;
  }

  /** What the words of the current pause's speculation say, for the end-of-turn judge (null: none, or it failed). */
  async wordsOfLatestPause(): Promise<TurnWords | null> {
    return this.speculation ? this.speculation.words : null;
  }

  dropSpeculation(): void {
    this.speculation?.abort.abort();
    this.speculation?.reply?.discard();
    this.speculation = null;
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

  /**
   * Transcribes a user audio item (or takes the speculation's result for it, falling back to a
   * fresh transcription if that failed), then calls `done` with the transcript (null: it failed).
   * `pcm16k`: the same audio at 16 kHz when the segmenter made it (a VAD turn), else null.
   */
  transcribe(item: MessageItem, pcm: Int16Array, pcm16k: Float32Array | null, speculation: Speculation | null, done: (transcript: string | null) => void): void {
    const host = this.host;
    const { transcription } = host.settings();
    const recognizer = host.asr.forModel(transcription.model);
    const sendDelta = (delta: string): void => host.emit({ type: 'conversation.item.input_audio_transcription.delta', item_id: item.id, content_index: 0, delta });
    const job = (async () => {
      let transcript: string | null = null;
      try {
        let result: TranscriptionResult | null = null;
        if (speculation) {
          result = await speculation.result.catch(() => null);
          if (result) {
            for (const delta of speculation.deltas) sendDelta(delta);
            result = { ...result, audioSeconds: audioSeconds(pcm) };
          }
        }
        result ??= await recognizer.transcribe({ pcm, ...(pcm16k ? { pcm16k } : {}), language: transcription.language ?? 'en', prompt: transcription.prompt }, sendDelta);
        transcript = result.text.trim();
        item.content = [{ type: 'input_audio', transcript }];
        host.emit({
          type: 'conversation.item.input_audio_transcription.completed',
          item_id: item.id,
          content_index: 0,
          transcript,
          usage: transcriptionUsage(result.audioSeconds, transcript),
        });
      } catch (err) {
        const e = err instanceof AppError ? err : new RealtimeError('transcription_failed', 'Transcription failed.', null, 'server_error');
        host.log.warn('transcription failed', { sessionId: host.sessionId, itemId: item.id, err });
        host.emit({
          type: 'conversation.item.input_audio_transcription.failed',
          item_id: item.id,
          content_index: 0,
          error: { type: e.type, code: e.code, message: e.message, param: e.param },
        });
      }
      done(transcript);
    })();
    this.transcriptions.add(job);
    void job.finally(() => this.transcriptions.delete(job));
  }

  /** Aborts what is speculative and waits for transcriptions in progress. */
  async close(): Promise<void> {
    this.dropSpeculation();
    this.dropEarlyReply();
    await Promise.allSettled([...this.transcriptions]);
  }

  /**
   * The transcript of a pause and, under semantic_vad with a local model that can say it, the
   * model's probability that the message ends there (its punctuation removed; turn-judge.ts).
   * Bounded by WORDS_READING_DEADLINE_MS; a model that fails leaves the words to the rules.
   */
  private async readWords(s: Speculation, transcript: string): Promise<TurnWords | null> {
    const text = transcript.trim();
    if (this.speculation !== s || text === '') return null;
    const settings = this.host.settings();
    const words = spokenWords(text);
    const model = this.host.llm.forModel(settings.session.model);
    if (!settings.turnDetection?.segmenter.endOfTurn || words === null || !model.local || !model.endOfTurnProbability) return { text, endProbability: null };
    const turn: MessageItem = { id: s.itemId, object: 'realtime.item', type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_audio', transcript: words }] };
    const request = this.host.replyRequest([...this.host.messages(), ...toMessages([turn])]);
    const deadline = AbortSignal.any([s.abort.signal, AbortSignal.timeout(WORDS_READING_DEADLINE_MS)]);
    const started = performance.now();
    try {
      const endProbability = await model.endOfTurnProbability({ ...request, signal: deadline });
      s.wordsRead = { endProbability, ms: Math.round(performance.now() - started) };
      return { text, endProbability };
    } catch (err) {
      this.host.log.warn('reading the words for the end of the turn failed', { sessionId: this.host.sessionId, err });
      return { text, endProbability: null };
    }
  }

  /** Starts the reply the turn would get if it ends in this pause (see the header); buffered, unseen. */
  private startEarlyReply(s: Speculation, transcript: string): void {
    const host = this.host;
    if (this.speculation !== s || host.closed() || s.reply || host.responding()) return;
    // A transcription still running elsewhere would add words to the conversation first.
    const settings = host.settings();
    if (!settings.turnDetection?.createResponse || this.transcriptions.size > 0) return;
    const text = transcript.trim();
    const model = host.llm.forModel(settings.session.model);
    if (text === '' || !model.local) return;
    const turn: MessageItem = { id: s.itemId, object: 'realtime.item', type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_audio', transcript: text }] };
    s.reply = new EarlyReply(model, host.replyRequest([...host.messages(), ...toMessages([turn])]));
  }
}

/**
 * Transcription usage in the token form (strict SDK schemas, e.g. @openai/agents-realtime, accept
 * only this one): audio at OpenAI's published rate of one token per 100 ms, and the transcript at
 * the usual estimate of one token per four characters (local recognisers report no tokens).
 */
function transcriptionUsage(seconds: number, transcript: string) {
  const audioTokens = Math.ceil(seconds * 10);
  const outputTokens = Math.ceil(transcript.length / 4);
  return {
    type: 'tokens' as const,
    total_tokens: audioTokens + outputTokens,
    input_tokens: audioTokens,
    input_token_details: { text_tokens: 0, audio_tokens: audioTokens },
    output_tokens: outputTokens,
  };
}
