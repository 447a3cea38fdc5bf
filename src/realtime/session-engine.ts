/**
 * The realtime engine of one session: takes client events in order and produces server events,
 * over the conversation, the input audio buffer (with server VAD), responses (response.ts) and
 * the avatar. Transport-free: the WebSocket layer (src/signaling/realtime-ws.ts) hands it text
 * messages and sends what it emits; the same engine can serve a WebRTC data channel.
 *
 * Rules kept here:
 *  - events are handled strictly in arrival order (one chain), so a session.update that switches
 *    faces completes before the response.create after it;
 *  - every bad event gets an `error` event naming its event_id, and the session goes on; a failure
 *    that is not the client's (a bug) is logged with the event's id and type, answered with a
 *    server_error naming the event, and the session goes on too: nothing a handler, a response or
 *    a server event throws escapes the engine or leaves it wedged (a response is active exactly
 *    while its run has not finished, whatever failed on the way);
 *  - one response at a time; user speech (server VAD with interrupt_response) cancels it
 *    (barge-in), and so does response.cancel;
 *  - a voice turn: speech_started → speech_stopped → input_audio_buffer.committed →
 *    conversation.item.added → transcription (.delta*, .completed | .failed) →
 *    conversation.item.done → response (when create_response);
 *  - the voice input (the input buffer, turn detection and its judge, the pauses' and the turns'
 *    transcription) is one stage, audio-recognition.ts, and the reply begun while a turn is being
 *    decided (the words' reading, the early reply) is preemptive-generation.ts; the engine turns
 *    the stage's events into protocol events and answers the turn once its transcript is in;
 *  - client events are checked and typed at the edge (client-events.ts, on the openai package's GA
 *    client-event types) before a handler sees them;
 *  - items are parsed by items.ts, response.create by response-request.ts, the model's request is
 *    built by reply-request.ts, and a response runs in response.ts; the engine's options,
 *    dependencies and the ports it reports through are in engine-ports.ts (only the connection
 *    imports this file); what remains here is the protocol: dispatch, session.update, the item
 *    events, the input buffer, turns and responses in order;
 *  - memory is bounded: the conversation keeps at most MAX_CONVERSATION_ITEMS items and
 *    MAX_CONVERSATION_TEXT_CHARS characters (conversation.ts), dropping the oldest (each announced
 *    with conversation.item.deleted, never the response in progress), and at most
 *    MAX_RECORDED_CHAT_CHARS of chat history is written to the store per session.
 */
import { AppError } from '../core/errors.js';
import type { EngineDeps, EngineOptions } from './engine-ports.js';
import { idleNudge, replyRequest } from './reply-request.js';
import { AudioRecognition, type PauseTranscription, type UserTurn } from './audio-recognition.js';
import { PreemptiveGeneration } from './preemptive-generation.js';
import { DEFAULT_INSTRUCTIONS } from '../sessions/session-config.js';
import { Conversation } from './conversation.js';
import { type Item, type MessageItem, type ParsedItem, itemText, parseItem, toMessages } from './items.js';
import { parseResponseRequest } from './response-request.js';
import { type ClientEventOf, typedClientEvent } from './client-events.js';
import { InputAudioDecoder } from '../audio/wire-format.js';
import {
  type ClientEvent,
  type Json,
  type ServerEventDraft,
  RealtimeError,
  decodeBase64,
  decodePcm16,
  errorEvent,
  isObject,
  newConversationId,
  newItemId,
  newResponseId,
  readClientEvent,
  requireString,
} from './protocol.js';
import { ResponseRun, type ResponseOutcome } from './response.js';
import { legacySessionObject } from './session-object.js';
import { applySessionUpdate, type SessionSettings } from './session-update.js';

/**
 * Chat history (user and assistant turns) one session writes to the store, in characters. Turns
 * beyond it are not recorded (a warning says so, once): 4M characters is hours of conversation, and
 * at most a few MB of database per session.
 */
export const MAX_RECORDED_CHAT_CHARS = 4_000_000;

export class RealtimeSessionEngine {
  private settings: SessionSettings;
  private readonly conversation = new Conversation(newConversationId());
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  /** The latest response run; it is the active one until it has finished (see `active`). */
  private current: ResponseRun | null = null;
  private recordedChatChars = 0;
  /** The last store write failed: further failures are not logged until one succeeds. */
  private recordFailing = false;
  private chatLimitWarned = false;
  /** The voice input: the input audio buffer, a call's microphone, turns and their transcripts. */
  private readonly input: AudioRecognition;
  /** The words' reading and the early reply of a turn being decided (preemptive-generation.ts). */
  private readonly preemptive: PreemptiveGeneration;
  /** What the model was last asked to prepare (prepareModel). */
  private prepared = '';

  constructor(
    private readonly options: EngineOptions,
    private readonly deps: EngineDeps,
  ) {
    this.settings = applySessionUpdate(null, options.initial, options.defaultModel);
    const log = deps.log.child({ sessionId: options.sessionId });
    this.preemptive = new PreemptiveGeneration({
      sessionId: options.sessionId,
      settings: () => this.settings,
      llm: deps.llm,
      log: deps.log,
      closed: () => this.closed,
      responding: () => this.active !== null,
      transcribing: () => this.input.transcribing,
      messages: () => this.conversation.messages(),
      replyRequest: (context) => {
        const { session } = this.settings;
        return replyRequest(session.instructions, session.output_modalities, context, session.max_output_tokens, this.settings);
      },
      readingRequest: (words) => replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [{ role: 'user', content: words }], 'inf'),
    });
    this.input = new AudioRecognition({
      createVad: deps.createVad,
      endOfTurnModel: deps.endOfTurnModel,
      asr: deps.asr,
      readWords: (p) => this.preemptive.readWords(p),
      settings: () => this.settings,
      emit: (e) => this.emit(e),
      log,
    });
    this.input.on('speech_started', (e) => this.onSpeechStarted(e));
    this.input.on('pause_transcript', (e) => this.preemptive.onPauseTranscript(e));
    this.input.on('speech_resumed', (e) => this.preemptive.onResumed(e.pause));
    this.input.on('turn_ended', (e) => this.onTurnEnded(e));
    this.input.on('idle', (e) => (this.chain = this.chain.then(() => this.onIdleTimeout(e.startMs, e.idleMs))));
    // A run hears the avatar's audio and frames itself while it runs (response.ts).
    deps.avatar.on('failed', (err) => {
      deps.log.error('avatar output failed', { sessionId: options.sessionId, err });
      this.active?.cancel('client_cancelled');
      this.emit(errorEvent(new RealtimeError('avatar_failed', 'The avatar media pipeline failed; no further audio or video can be produced.', null, 'server_error'), null));
    });
  }

  /** The response in progress: the latest run, until it has finished (however it finished). */
  private get active(): ResponseRun | null {
    return this.current && !this.current.finished ? this.current : null;
  }

  /** Sends session.created and starts turn detection; call once, before the first message. */
  async start(): Promise<void> {
    await this.applyTurnDetection();
    this.emit({ type: 'session.created', session: this.sessionObject() });
    this.prepareModel();
  }

  /** One text message from the client; handled after every earlier one. Never throws. */
  receive(text: string): void {
    try {
      const read = readClientEvent(text);
      if (read.error) {
        this.emit(errorEvent(read.error, read.eventId));
        return;
      }
      const event: ClientEvent = read.event;
      // Audio appends are ordered with everything else through the same chain (a large G.711 one
      // yields to the event loop while it decodes; the events after it wait their turn).
      this.chain = this.chain.then(() => this.handle(event));
    } catch (err) {
      this.deps.log.error('reading a client event failed', { sessionId: this.options.sessionId, err });
      this.emit(errorEvent(err, null));
    }
  }

  /** Resolves once every message received so far has been handled. */
  idle(): Promise<void> {
    return this.chain;
  }

  /** The effective session object, for session.created/updated (session-object.ts). */
  sessionObject(): Json {
    const { sessionId: id, expiresAt } = this.options;
    const s = this.settings.session;
    if (this.options.dialect === 'legacy') return legacySessionObject(s, { id, expiresAt, video: this.imagesWanted() });
    return { ...s, id, expires_at: expiresAt };
  }

  /** Stops everything; no events are sent afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.active?.cancel('client_cancelled');
    this.preemptive.close();
    await this.input.close();
  }

  /**
   * Sends a server event. One that cannot be sent (it failed to serialise: a bug, since client
   * values are depth-checked and bounded) is logged with its type and replaced by a server_error,
   * so a handler or a response never fails half-way because of its own output.
   */
  private emit(event: ServerEventDraft): void {
    if (this.closed) return;
    try {
      this.deps.send(event);
    } catch (err) {
      this.deps.log.error('server event could not be sent', { sessionId: this.options.sessionId, type: event.type, err });
      if (event.type !== 'error') {
        this.emit(errorEvent(new RealtimeError('server_error', `The server could not send a ${event.type} event.`, null, 'server_error'), null));
      }
    }
  }

  private async handle(read: ClientEvent): Promise<void> {
    if (this.closed) return;
    try {
      const event = typedClientEvent(read);
      switch (event.type) {
        case 'session.update':
          return await this.onSessionUpdate(event);
        case 'conversation.item.create':
          return await this.onItemCreate(event);
        case 'conversation.item.truncate':
          return this.onItemTruncate(event);
        case 'conversation.item.delete':
          return this.onItemDelete(event);
        case 'conversation.item.retrieve':
          return this.onItemRetrieve(event);
        case 'input_audio_buffer.append':
          return await this.onAppend(event);
        case 'input_audio_buffer.commit':
          return this.onCommit(event);
        case 'input_audio_buffer.clear':
          return this.onClear(event);
        case 'output_audio_buffer.clear':
          return this.onOutputAudioClear(event);
        case 'response.create':
          return await this.onResponseCreate(event);
        case 'response.cancel':
          return this.onResponseCancel(event);
      }
    } catch (err) {
      if (!(err instanceof AppError)) {
        this.deps.log.error('realtime event failed', { sessionId: this.options.sessionId, eventId: read.eventId, type: read.type, err });
      }
      this.emit(errorEvent(err, read.eventId));
    }
  }

  // ---- session ----

  private async onSessionUpdate(event: ClientEventOf<'session.update'>): Promise<void> {
    const update = event.session;
    const next = applySessionUpdate(this.settings.raw, update, this.options.defaultModel);
    const before = this.settings.session;
    const after = next.session;
    const { userId } = this.options;
    const checks: Promise<void>[] = [];
    const check = (kind: 'face' | 'voice' | 'driving', id: string | null, param: string) => {
      if (id !== null) checks.push(this.deps.assets.require(kind, id, userId, param));
    };
    if (after.voice !== before.voice) check('voice', after.voice, update.voice !== undefined ? 'session.voice' : 'session.audio.output.voice');
    if (after.face !== before.face) check('face', after.face, 'session.face');
    if (after.driving !== before.driving) check('driving', after.driving, 'session.driving');
    await Promise.all(checks);
    // Switch the avatar before committing the settings: a face that fails to load leaves the old one.
    if (after.face !== before.face) await this.deps.avatar.setFace(after.face ?? 'default');
    if (after.driving !== before.driving) await this.deps.avatar.setDriving(after.driving ?? 'default');
    this.settings = next;
    await this.applyTurnDetection();
    this.emit({ type: 'session.updated', session: this.sessionObject() });
    this.prepareModel();
  }

  /**
   * Lets the model evaluate this session's instructions and tools while the user is still
   * speaking or typing (LanguageModel.prepare), not in the first reply. In the background: a
   * failure costs only that head start.
   */
  private prepareModel(): void {
    const { session } = this.settings;
    const model = this.deps.llm.forModel(session.model);
    if (!model.prepare) return;
    const { messages, tools, toolChoice } = replyRequest(session.instructions, session.output_modalities, [], session.max_output_tokens, this.settings);
    // Once per change of what the prompt starts with, not on every session.update.
    const prepared = JSON.stringify([session.model, messages, tools, toolChoice]);
    if (prepared === this.prepared) return;
    this.prepared = prepared;
    model.prepare({ messages, tools, toolChoice }).catch((err: unknown) => {
      this.deps.log.debug('preparing the model for the session failed', { sessionId: this.options.sessionId, err });
    });
  }

  private imagesWanted(): boolean {
    if (this.options.imageEvents === false) return false;
    const modalities = this.settings.session.output_modalities;
    if (this.options.dialect === 'legacy') return this.options.legacyVideo || modalities.includes('image') || modalities.includes('video');
    return modalities.includes('image');
  }

  /** Creates, reconfigures or removes the VAD (and the idle timeout) to match the settings. */
  private async applyTurnDetection(): Promise<void> {
    await this.input.configure(this.settings.turnDetection);
  }

  // ---- idle timeout (turn_detection.idle_timeout_ms: AudioRecognition's timer) ----

  /**
   * input_audio_buffer.timeout_triggered, as OpenAI's: the buffer is committed as the user's
   * (silent) turn and, with create_response, the model is asked to check in on the user.
   */
  private async onIdleTimeout(startMs: number, idleMs: number): Promise<void> {
    if (this.closed || this.active || this.input.isSpeaking || !this.settings.turnDetection?.idleTimeoutMs) return;
    try {
      const itemId = newItemId();
      this.emit({ type: 'input_audio_buffer.timeout_triggered', audio_start_ms: startMs, audio_end_ms: this.input.heardMs, item_id: itemId });
      this.input.clear();
      this.preemptive.dropPending();
      const item: MessageItem = { id: itemId, object: 'realtime.item', type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_audio', transcript: '' }] };
      const previousItemId = this.conversation.insert(item, null);
      this.emit({ type: 'input_audio_buffer.committed', previous_item_id: previousItemId, item_id: itemId });
      this.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item });
      this.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
      this.enforceConversationBound();
      if (this.settings.turnDetection.createResponse) {
        const seconds = Math.round(idleMs / 100) / 10;
        await this.startResponse({ instructions: `${this.settings.session.instructions}\n\n${idleNudge(seconds)}` }, null);
      }
    } catch (err) {
      this.emit(errorEvent(err, null));
    }
  }

  // ---- conversation items ----

  private async onItemCreate(event: ClientEventOf<'conversation.item.create'>): Promise<void> {
    const previous = event.previous_item_id;
    const parsed = parseItem(event.item, 'item');
    const { item } = parsed;
    // Checked before the audio and images are decoded (insert() checks again after).
    this.conversation.checkPlace(item, previous);
    const pcm = parsed.audio !== null ? await this.decodeInput(parsed.audio, 'item.content.audio', new InputAudioDecoder(this.settings.inputFormat)) : null;
    await this.checkImages(parsed);
    if (this.closed) return;
    const previousItemId = this.conversation.insert(item, previous);
    this.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item });
    if (pcm && item.type === 'message') {
      this.input.transcribe(item, pcm, null, null, (transcript) => this.onTranscribed(item, previousItemId, transcript, false));
      this.enforceConversationBound();
      return;
    }
    this.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
    this.enforceConversationBound();
    if (item.type === 'message' && item.role !== 'system') this.recordTurn(item.role, itemText(item));
  }

  /**
   * Base64 audio in the session's input format as PCM16 24 kHz: PCM checked as always, G.711
   * decoded and resampled by `decoder` (whose state carries across the appends of one stream),
   * yielding to the event loop between seconds of audio (a large G.711 append is seconds of work).
   */
  private async decodeInput(audio: string, param: string, decoder: InputAudioDecoder): Promise<Int16Array> {
    if (decoder.format.type === 'audio/pcm') return decodePcm16(audio, param);
    return decoder.decodeYielding(decodeBase64(audio, param));
  }

  /** Checks an item's images (off the event loop) and keeps each as the model will get it. */
  private async checkImages(parsed: ParsedItem): Promise<void> {
    const checked = await Promise.all(parsed.images.map(({ part, param }) => this.deps.images.check(part.image_url, param, part.detail)));
    parsed.images.forEach(({ part }, i) => (part.image_url = (checked[i] as { url: string }).url));
  }

  /**
   * conversation.item.truncate. For an item whose response has finished: the transcript is cut at
   * `audio_end_ms` (at most what was played). For the item of the response still playing (how the
   * openai-agents SDK interrupts): its audio stops now, the transcript heard up to `audio_end_ms`
   * is kept (clamped to what was played: a client's playback clock can run a little ahead of the
   * server's count), and the response ends cancelled before conversation.item.truncated.
   */
  private onItemTruncate(event: ClientEventOf<'conversation.item.truncate'>): void {
    const { item_id: itemId, content_index: contentIndex, audio_end_ms: audioEndMs } = event;
    const item = this.conversation.require(itemId, 'item_id', 'truncate');
    const running = this.active?.messageItemId === itemId ? this.active : null;
    if (running) {
      if (contentIndex !== 0) throw new RealtimeError('invalid_value', `Item '${itemId}' has its audio at content_index 0.`, 'content_index');
      const cutMs = running.truncate(audioEndMs);
      this.emit({ type: 'conversation.item.truncated', item_id: itemId, content_index: 0, audio_end_ms: cutMs });
      return;
    }
    const part = item.type === 'message' ? item.content[contentIndex] : undefined;
    if (item.type !== 'message' || item.role !== 'assistant' || !part || part.type !== 'output_audio') {
      throw new RealtimeError('invalid_value', `Item '${itemId}' has no assistant audio at content_index ${contentIndex}.`, 'content_index');
    }
    const run = this.truncatable.get(itemId);
    if (!run) throw new RealtimeError('invalid_value', `Item '${itemId}' has no audio that can be truncated.`, 'item_id');
    if (audioEndMs > run.playedMs) {
      throw new RealtimeError('invalid_value', `audio_end_ms ${audioEndMs} is past the end of the item's audio (${run.playedMs} ms).`, 'audio_end_ms');
    }
    const transcript = run.transcriptAt(audioEndMs);
    item.content[contentIndex] = { type: 'output_audio', transcript };
    item.status = 'incomplete';
    this.emit({ type: 'conversation.item.truncated', item_id: itemId, content_index: contentIndex, audio_end_ms: audioEndMs });
  }

  /** output_audio_buffer.clear (WebRTC): the avatar stops speaking now and the response ends cancelled. */
  private onOutputAudioClear(event: ClientEventOf<'output_audio_buffer.clear'>): void {
    if (this.options.transport !== 'webrtc') {
      throw new RealtimeError('unsupported_on_websocket', "'output_audio_buffer.clear' is for WebRTC calls; on WebSocket send response.cancel, or conversation.item.truncate.", 'type');
    }
    // Nothing playing: nothing to clear (the event names the response whose audio it cut).
    this.active?.cancel('client_cancelled');
  }

  private onItemDelete(event: ClientEventOf<'conversation.item.delete'>): void {
    const itemId = event.item_id;
    if (this.active?.hasItem(itemId)) {
      throw new RealtimeError('item_in_use', `Item '${itemId}' belongs to the response in progress; cancel it first.`, 'item_id');
    }
    this.conversation.delete(itemId);
    this.truncatable.delete(itemId);
    this.emit({ type: 'conversation.item.deleted', item_id: itemId });
  }

  /**
   * Drops the oldest items while the conversation is beyond its bound (never the response in
   * progress), announcing each with conversation.item.deleted so a client's mirror stays exact.
   */
  private enforceConversationBound(): void {
    const active = this.active;
    const dropped = this.conversation.overflow((id) => active?.hasItem(id) ?? false);
    for (const id of dropped) {
      this.conversation.delete(id);
      this.truncatable.delete(id);
      this.emit({ type: 'conversation.item.deleted', item_id: id });
    }
    if (dropped.length > 0) this.deps.log.debug('oldest conversation items dropped', { sessionId: this.options.sessionId, dropped: dropped.length });
  }

  private onItemRetrieve(event: ClientEventOf<'conversation.item.retrieve'>): void {
    const itemId = event.item_id;
    this.emit({ type: 'conversation.item.retrieved', item: this.conversation.require(itemId, 'item_id', 'retrieve') });
  }

  // ---- input audio ----

  private async onAppend(event: ClientEventOf<'input_audio_buffer.append'>): Promise<void> {
    this.refuseOnWebRtc(event);
    // One decoder per input format, kept across appends (no clicks at their seams).
    if (this.inputDecoder?.format !== this.settings.inputFormat) this.inputDecoder = new InputAudioDecoder(this.settings.inputFormat);
    const pcm = await this.decodeInput(event.audio, 'audio', this.inputDecoder);
    if (this.closed) return;
    await this.input.append(pcm);
  }

  /** The decoder of appended audio, for the input format it was made for. */
  private inputDecoder: InputAudioDecoder | null = null;

  private onCommit(event: ClientEventOf<'input_audio_buffer.commit'>): void {
    this.refuseOnWebRtc(event);
    const { itemId, pcm } = this.input.commit();
    this.deps.avatar.listen(false);
    this.preemptive.dropPending();
    this.commitAudio(itemId, pcm, false);
  }

  private onClear(event: ClientEventOf<'input_audio_buffer.clear'>): void {
    this.refuseOnWebRtc(event);
    this.input.clear();
    this.inputDecoder?.reset();
    this.deps.avatar.listen(false);
    this.preemptive.dropPending();
    this.emit({ type: 'input_audio_buffer.cleared' });
  }

  /** Spec 4.5 rule 4: a call's microphone travels as RTP; input_audio_buffer events are WebSocket-only. */
  private refuseOnWebRtc(event: { type: string }): void {
    if (this.options.transport !== 'webrtc') return;
    throw new RealtimeError(
      'unsupported_on_webrtc',
      `'${event.type}' is not available on a WebRTC call: the microphone travels as RTP on the audio track, and server VAD commits turns. Send audio over /v1/realtime (WebSocket) to use the input audio buffer.`,
      'type',
    );
  }

  /** Decoded microphone audio of a call (PCM16 mono 24 kHz): heard by the VAD like appended audio. */
  pushMicrophone(pcm: Int16Array): void {
    if (!this.closed) this.input.pushMicrophone(pcm);
  }

  private onSpeechStarted(e: { audioStartMs: number; itemId: string }): void {
    if (this.closed) return;
    this.emit({ type: 'input_audio_buffer.speech_started', audio_start_ms: e.audioStartMs, item_id: e.itemId });
    this.deps.avatar.listen(true);
    this.preemptive.dropEarlyReply(); // a turn's reply not started by now is not wanted any more
    const td = this.settings.turnDetection;
    if (td?.interruptResponse && this.active) this.active.cancel('turn_detected');
  }

  private onTurnEnded(e: UserTurn): void {
    if (this.closed) return;
    this.emit({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: e.audioEndMs, item_id: e.itemId });
    this.deps.avatar.listen(false);
    const wordsRead = this.preemptive.onTurnEnded(e.itemId, e.transcription?.pause ?? null);
    this.deps.log.info('turn ended', {
      sessionId: this.options.sessionId,
      itemId: e.itemId,
      endedBy: e.endedBy,
      endOfTurnProbability: e.endOfTurnProbability,
      speculativeTranscript: e.transcription !== null,
      wordsEndProbability: wordsRead?.endProbability ?? null,
      wordsReadMs: wordsRead?.ms ?? null,
      earlyReply: this.preemptive.hasEarlyReply,
    });
    this.commitAudio(e.itemId, e.audio, this.settings.turnDetection?.createResponse ?? false, e.transcription, e.audio16k);
  }

  /** input_audio_buffer.committed, the user item, its transcription, and (VAD) the response. */
  private commitAudio(itemId: string, pcm: Int16Array, respond: boolean, fromPause: PauseTranscription | null = null, pcm16k: Float32Array | null = null): void {
    const item: MessageItem = {
      id: itemId,
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_audio', transcript: null }],
    };
    const previousItemId = this.conversation.insert(item, null);
    this.emit({ type: 'input_audio_buffer.committed', previous_item_id: previousItemId, item_id: itemId });
    this.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item });
    this.input.transcribe(item, pcm, pcm16k, fromPause, (transcript) => this.onTranscribed(item, previousItemId, transcript, respond));
    this.enforceConversationBound();
  }

  /**
   * A user audio item's transcription ended (`transcript` null: it failed): the item is done, and
   * a VAD turn (`respond`) is answered.
   */
  private onTranscribed(item: MessageItem, previousItemId: string | null, transcript: string | null, respond: boolean): void {
    if (transcript !== null) this.recordTurn('user', transcript);
    if (this.conversation.get(item.id)) {
      this.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
      this.enforceConversationBound();
    }
    if (respond && !this.closed) {
      // Chained like a client's response.create, so it is ordered with the client's events.
      const heardWords = transcript !== null && transcript !== '';
      this.chain = this.chain.then(() => this.respondToTurn(heardWords));
    }
  }

  // ---- responses ----

  /** A voice turn was not answered because the user kept talking: the next turn answers it. */
  private owedResponse = false;

  /** Runs whose audio can still be truncated, by item id (the latest few). */
  private readonly truncatable = new Map<string, ResponseRun>();

  private async onResponseCreate(event: ClientEventOf<'response.create'>): Promise<void> {
    await this.startResponse(event.response, event.event_id);
  }

  /**
   * The automatic response to a voice turn (create_response). Not when the user is already
   * talking again: the next turn's response answers both. A response still running from an
   * earlier turn gives way to the newer turn when interrupt_response is on; otherwise this turn
   * waits in the conversation for the next response.
   */
  private async respondToTurn(heardWords: boolean): Promise<void> {
    try {
      // A turn with no words (noise, a cough) answers only a turn that was left waiting.
      if (!heardWords && !this.owedResponse) return;
      if (this.input.isSpeaking) {
        this.owedResponse = true;
        return;
      }
      this.owedResponse = false;
      if (this.active) {
        if (!this.settings.turnDetection?.interruptResponse) return;
        this.active.cancel('turn_detected');
      }
      await this.startResponse(null, null);
    } catch (err) {
      this.emit(errorEvent(err, null));
    } finally {
      this.preemptive.dropEarlyReply(); // the turn's response took it, or asked for another reply
    }
  }

  /** Validates a response request and starts its run; `clientEventId` is the response.create's (null: automatic). */
  private async startResponse(body: unknown, clientEventId: string | null): Promise<void> {
    if (this.active) {
      throw new RealtimeError(
        'conversation_already_has_active_response',
        `Conversation already has an active response in progress: ${this.active.id}. Wait until the response is finished before creating a new one.`,
      );
    }
    const r = parseResponseRequest(body, this.settings);
    // A voice for this response only is checked as session.update checks one: refused now, naming
    // the event, not a response that fails later with no event to name.
    if (r.voice !== null && r.voice.id !== this.settings.session.audio.output.voice) await this.deps.assets.require('voice', r.voice.id, this.options.userId, r.voice.param);
    const s = this.settings.session;
    const input = r.input === null ? null : await this.inputItems(r.input);
    // Wait for transcriptions in progress so the model hears what was said, and for the model's
    // reading of the turn's words, which holds the sequence the reply continues.
    await this.input.settled();
    await this.preemptive.settled();
    if (this.closed) return;
    if (this.active) throw new RealtimeError('conversation_already_has_active_response', 'Conversation already has an active response in progress.');

    const context = input === null ? this.conversation.messages() : toMessages(input);
    const request = replyRequest(r.instructions, r.outputModalities, context, r.maxOutputTokens, r);
    const responseId = newResponseId();
    const model = this.deps.llm.forModel(s.model);
    // audio.output.voice holds an OpenAI voice name (the speech service maps it) or our voice id.
    const voiceId = r.voice?.id ?? s.audio.output.voice;
    const conversation = this.conversation;
    const run = new ResponseRun(
      {
        id: responseId,
        conversation: r.inConversation ? { id: conversation.id, insert: (item) => conversation.insert(item, null) } : null,
        outputModalities: r.outputModalities,
        request,
        maxOutputTokens: r.maxOutputTokens,
        metadata: r.metadata,
        clientEventId,
        voiceName: voiceId,
        speed: s.audio.output.speed,
        images: this.imagesWanted() && (!r.modalitiesGiven || r.outputModalities.includes('image') || this.options.legacyVideo),
        audioDelivery: this.options.transport === 'webrtc' ? 'rtp' : 'deltas',
        outputFormat: this.settings.outputFormat,
      },
      {
        emit: (e) => {
          this.emit(e);
          // A response's items join the conversation as they open: keep it within its bounds.
          if (e.type === 'conversation.item.added') this.enforceConversationBound();
        },
        avatar: this.deps.avatar,
        llm: this.preemptive.takeEarlyReply(model, request, responseId) ?? model,
        voice: () => this.deps.tts.voice({ voiceId, userId: this.options.userId, source: this.options.ttsSource }),
        log: this.deps.log,
        onProgress: (text) => void this.record(() => this.deps.recorder.setCurrentTranscript(text)),
        addUsage: (delta) => this.deps.recorder.addUsage(delta),
      },
    );
    this.current = run;
    this.input.disarmIdle();
    run.once('done', (outcome) => this.onResponseDone(run, outcome));
    // start() never throws: a failure on the way finishes the run as failed (response.done), and
    // `active` follows the run's own state, so the session cannot be left with a dead response.
    run.start();
  }

  /** response.create's `input`: items by reference or given whole (images checked), for an out-of-band context. */
  private async inputItems(input: unknown[]): Promise<Item[]> {
    const items: Item[] = [];
    for (const [i, raw] of input.entries()) {
      if (isObject(raw) && raw.type === 'item_reference') {
        items.push(this.conversation.require(requireString(raw, 'id', `response.input[${i}].id`), `response.input[${i}].id`, 'retrieve'));
        continue;
      }
      const parsed = parseItem(raw, `response.input[${i}]`);
      await this.checkImages(parsed);
      items.push(parsed.item);
    }
    return items;
  }

  private onResponseDone(run: ResponseRun, outcome: ResponseOutcome): void {
    if (this.current === run) this.current = null;
    if (outcome.status === 'completed' && run.inConversation) this.input.armIdle();
    const messageId = run.messageItemId;
    if (run.inConversation && messageId !== null && this.conversation.get(messageId)) {
      this.truncatable.set(messageId, run);
      while (this.truncatable.size > 8) this.truncatable.delete(this.truncatable.keys().next().value as string);
    }
    if (run.inConversation) {
      for (const item of outcome.items) if (item.type === 'message') this.recordTurn('assistant', itemText(item));
      this.enforceConversationBound();
    }
    // Its usage was counted as it was delivered (ResponseDeps.addUsage), committed before response.done went out.
    void this.record(() => this.deps.recorder.setCurrentTranscript(''));
  }

  private onResponseCancel(event: ClientEventOf<'response.cancel'>): void {
    const responseId = event.response_id;
    if (!this.active || (responseId !== null && responseId !== this.active.id)) {
      throw new RealtimeError(
        'response_cancel_not_active',
        responseId !== null && this.active ? `Response '${responseId}' is not the active response.` : 'Cancellation failed: no active response found.',
        responseId !== null ? 'response_id' : null,
      );
    }
    this.active.cancel('client_cancelled');
  }

  /** Records a chat turn in the store, within the session's MAX_RECORDED_CHAT_CHARS. */
  private recordTurn(role: 'user' | 'assistant', text: string): void {
    if (text.trim() === '') return;
    if (this.recordedChatChars + text.length > MAX_RECORDED_CHAT_CHARS) {
      if (!this.chatLimitWarned) {
        this.chatLimitWarned = true;
        this.deps.log.warn('chat history limit reached: later turns of this session are not recorded', {
          sessionId: this.options.sessionId,
          limitChars: MAX_RECORDED_CHAT_CHARS,
        });
      }
      return;
    }
    this.recordedChatChars += text.length;
    void this.record(() => this.deps.recorder.appendTurn(role, text));
  }

  /**
   * Store writes never break the conversation: a failure is logged, once per run of failures (a
   * store outage would otherwise log every turn; the store logs the outage itself).
   */
  private async record(write: () => Promise<void>): Promise<void> {
    try {
      await write();
      this.recordFailing = false;
    } catch (err) {
      if (this.recordFailing) return;
      this.recordFailing = true;
      this.deps.log.error('recording chat or usage failed (later failures in a row are not logged)', { sessionId: this.options.sessionId, err });
    }
  }
}
