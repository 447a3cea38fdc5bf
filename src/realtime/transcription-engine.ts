/**
 * The engine of a transcription session (transcription-session.ts, docs/realtime.md): the client's
 * audio in, its turns and their transcripts out, and no response. No language model, voice or
 * avatar runs. The counterpart of session-engine.ts for `session.type: "transcription"`; the
 * connection core (realtime-connection.ts) runs one of the three engines.
 *
 *   input_audio_buffer.append / a call's microphone ─▶ AudioRecognition (VAD, turns)
 *     speech_started ─▶ input_audio_buffer.speech_started
 *     turn_ended     ─▶ input_audio_buffer.speech_stopped ─▶ .committed ─▶ conversation.item.added
 *                       ─▶ conversation.item.input_audio_transcription.delta* ─▶ .completed | .failed
 *                       ─▶ conversation.item.done
 *   input_audio_buffer.commit (turn_detection null, or any time) ─▶ the same from .committed
 *
 * Rules kept as in the realtime engine: client events are handled in arrival order on one chain;
 * a bad event gets an `error` naming its event_id and the session goes on; nothing a handler
 * throws escapes. The user items form a conversation bounded like the realtime one (the oldest
 * dropped with conversation.item.deleted), which conversation.item.retrieve and .delete reach;
 * events that ask for a response, or add other items, are refused by name. Each transcript is
 * written to the session's chat history.
 */
import type { Logger } from '../core/log.js';
import { AppError } from '../core/errors.js';
import type { SpeechRecognizers } from '../providers/asr/base.js';
import type { VoiceActivityDetector } from '../providers/vad/base.js';
import type { EndOfTurnModel } from '../providers/turn/base.js';
import { AudioRecognition, type PauseTranscription, type UserTurn } from './audio-recognition.js';
import { ChatRecord } from './chat-record.js';
import { checkTransport, typedClientEvent } from './client-events.js';
import { Conversation } from './conversation.js';
import type { EngineTransport, SessionRecorder } from './engine-ports.js';
import { type MessageItem, userAudioItem } from './items.js';
import { type MessageReader, clientEventOf } from './client-message.js';
import { type ClientEvent, type ClientEventType, type Json, type ServerEventDraft, RealtimeError, errorEvent, newConversationId } from './protocol.js';
import { type TranscriptionSessionSettings, applyTranscriptionUpdate, transcriptionSessionObject } from './transcription-session.js';

export interface TranscriptionEngineOptions {
  sessionId: string;
  userId: string;
  transport: EngineTransport;
  /** Unix seconds at which the session ends. */
  expiresAt: number;
  /** The opening config (`type: "transcription"` and its fields). */
  initial: Json;
}

export interface TranscriptionEngineDeps {
  send(event: ServerEventDraft): void;
  asr: SpeechRecognizers;
  createVad(): Promise<VoiceActivityDetector>;
  endOfTurnModel(): Promise<EndOfTurnModel | null>;
  recorder: SessionRecorder;
  log: Logger;
}

/** The initial config's settings, or the error that refuses it (before a session exists). */
export function transcriptionSettingsFrom(initial: Json): TranscriptionSessionSettings {
  return applyTranscriptionUpdate(null, initial);
}

export class TranscriptionSessionEngine {
  private settings: TranscriptionSessionSettings;
  private readonly conversation = new Conversation(newConversationId());
  private readonly input: AudioRecognition;
  private readonly chat: ChatRecord;
  private chain: Promise<void> = Promise.resolve();
  private readonly reader: MessageReader<ClientEventType>;
  private closed = false;

  constructor(
    private readonly options: TranscriptionEngineOptions,
    private readonly deps: TranscriptionEngineDeps,
  ) {
    this.settings = transcriptionSettingsFrom(options.initial);
    this.reader = { emit: (e) => this.emit(e), log: deps.log, sessionId: options.sessionId };
    const log = deps.log.child({ sessionId: options.sessionId });
    this.chat = new ChatRecord(deps.recorder, log);
    this.input = new AudioRecognition({
      createVad: deps.createVad,
      endOfTurnModel: deps.endOfTurnModel,
      asr: deps.asr,
      // No reply side: a pause's words are judged by rule only (turn-judge.ts), none is read by a model.
      pauseWords: async () => null,
      settings: () => this.settings,
      emit: (e) => this.emit(e),
      log,
    });
    this.input.on('speech_started', (e) => this.emit({ type: 'input_audio_buffer.speech_started', audio_start_ms: e.audioStartMs, item_id: e.itemId }));
    this.input.on('turn_ended', (e) => this.onTurnEnded(e));
  }

  /** Sends session.created and starts turn detection; call once, before the first message. */
  async start(): Promise<void> {
    await this.input.configure(this.settings.turnDetection);
    this.emit({ type: 'session.created', session: this.sessionObject() });
  }

  sessionObject(): Json {
    return transcriptionSessionObject(this.settings, this.options.sessionId, this.options.expiresAt);
  }

  /** A call's microphone (PCM16 mono 24 kHz): heard by the VAD like appended audio. */
  pushMicrophone(pcm: Int16Array): void {
    if (!this.closed) this.input.pushMicrophone(pcm);
  }

  /** One text message from the client; handled after every earlier one. Never throws. */
  receive(text: string): void {
    const event = clientEventOf(text, this.reader);
    if (event) this.chain = this.chain.then(() => this.handle(event));
  }

  /** Resolves once every message received so far has been handled. */
  idle(): Promise<void> {
    return this.chain;
  }

  /** Stops hearing; transcriptions in progress are waited for, and no event is sent afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.input.close();
  }

  private emit(event: ServerEventDraft): void {
    if (this.closed) return;
    try {
      this.deps.send(event);
    } catch (err) {
      this.deps.log.error('server event could not be sent', { sessionId: this.options.sessionId, type: event.type, err });
    }
  }

  private async handle(read: ClientEvent): Promise<void> {
    if (this.closed) return;
    try {
      const event = typedClientEvent(read);
      checkTransport(event.type, this.options.transport);
      switch (event.type) {
        case 'session.update':
          return await this.onSessionUpdate(event.session);
        case 'input_audio_buffer.append':
          return await this.input.appendEncoded(event.audio);
        case 'input_audio_buffer.commit': {
          const { itemId, pcm } = this.input.commit();
          return this.commitAudio(itemId, pcm, null, null);
        }
        case 'input_audio_buffer.clear':
          this.input.clearAppended();
          return this.emit({ type: 'input_audio_buffer.cleared' });
        case 'conversation.item.retrieve':
          return this.emit({ type: 'conversation.item.retrieved', item: this.conversation.require(event.item_id, 'item_id', 'retrieve') });
        case 'conversation.item.delete':
          return this.dropItem(event.item_id);
        default:
          throw new RealtimeError(
            'unsupported_in_transcription_session',
            `'${event.type}' is not available in a transcription session: it transcribes the input audio, and no model responds. Open a realtime session (session.type 'realtime') for a conversation.`,
            'type',
          );
      }
    } catch (err) {
      if (!(err instanceof AppError)) {
        this.deps.log.error('transcription session event failed', { sessionId: this.options.sessionId, eventId: read.eventId, type: read.type, err });
      }
      this.emit(errorEvent(err, read.eventId));
    }
  }

  private async onSessionUpdate(update: Json): Promise<void> {
    this.settings = applyTranscriptionUpdate(this.settings, update);
    await this.input.configure(this.settings.turnDetection);
    this.emit({ type: 'session.updated', session: this.sessionObject() });
  }

  private onTurnEnded(e: UserTurn): void {
    if (this.closed) return;
    this.emit({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: e.audioEndMs, item_id: e.itemId });
    this.commitAudio(e.itemId, e.audio, e.transcription, e.audio16k);
  }

  /** The buffer committed as a user audio item, and its transcription. */
  private commitAudio(itemId: string, pcm: Int16Array, fromPause: PauseTranscription | null, pcm16k: Float32Array | null): void {
    const item: MessageItem = userAudioItem(itemId, null);
    const previousItemId = this.conversation.insert(item, null);
    this.emit({ type: 'input_audio_buffer.committed', previous_item_id: previousItemId, item_id: itemId });
    this.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item });
    this.enforceConversationBound();
    this.input.transcribe(item, pcm, pcm16k, fromPause, (transcript) => {
      if (transcript !== null && transcript !== '') this.chat.turn('user', transcript);
      if (this.conversation.get(item.id)) this.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
    });
  }

  /** Drops the oldest items beyond the conversation's bound, announcing each (conversation.ts). */
  private enforceConversationBound(): void {
    for (const id of this.conversation.overflow(() => false)) this.dropItem(id);
  }

  private dropItem(itemId: string): void {
    this.conversation.delete(itemId);
    this.emit({ type: 'conversation.item.deleted', item_id: itemId });
  }
}
