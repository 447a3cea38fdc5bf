/**
 * The realtime engine of one session: it takes client events in order, dispatches them, and owns
 * the conversation, the response in progress and the session's settings. Transport-free: the
 * connection (signaling/realtime-connection.ts, the only importer of this file) hands it text and
 * sends what it emits; its options, dependencies and ports are in engine-ports.ts.
 *
 * Rules kept here:
 *  - events are handled strictly in arrival order (one chain: client-message.ts), so a session.update
 *    that switches faces completes before the response.create after it;
 *  - every bad event gets an `error` event naming its event_id and the session goes on; a failure
 *    that is not the client's (a bug) is logged and answered with a server_error naming the event:
 *    nothing a handler, a response or a server event throws escapes the engine or wedges it (a
 *    response is active exactly while its run has not finished, whatever failed on the way);
 *  - one response at a time; user speech (server VAD with interrupt_response) and response.cancel
 *    cancel it;
 *  - a voice turn: speech_started → speech_stopped → input_audio_buffer.committed →
 *    conversation.item.added → transcription (.delta*, .completed | .failed) →
 *    conversation.item.done → response (when create_response);
 *  - memory is bounded: the conversation keeps at most MAX_CONVERSATION_ITEMS items and
 *    MAX_CONVERSATION_TEXT_CHARS characters (conversation.ts), dropping the oldest (each announced
 *    with conversation.item.deleted, never the response in progress).
 * Where the rest is: client events typed at the edge (client-events.ts); items (items.ts); the
 * voice input, its turns and the idle timer (audio-recognition.ts); the reply begun before a turn
 * is decided (preemptive-generation.ts); response.create checked and finished into a run's spec
 * (response-request.ts, reply-request.ts) and run (response.ts); the response in progress and
 * finished responses' audio for truncation (response-slot.ts); the MCP servers declared, listed
 * and offered (mcp-toolbox.ts); the chat history written to the store (chat-record.ts).
 * An mcp_approval_response a client adds is answered by a response of its own, at once or when
 * the response in progress ends: it runs the approved call, then the model speaks.
 */
import { AppError } from '../core/errors.js';
import { AudioRecognition, type PauseTranscription, type UserTurn } from './audio-recognition.js';
import { ChatRecord } from './chat-record.js';
import { type ClientEventOf, checkTransport, typedClientEvent } from './client-events.js';
import { Conversation } from './conversation.js';
import { MotionStream } from './motion-stream.js';
import type { EngineDeps, EngineOptions } from './engine-ports.js';
import { type MessageItem, checkItemImages, itemText, parseItem, userAudioItem } from './items.js';
import { McpToolbox } from './mcp-toolbox.js';
import type { McpServerDeclaration } from './tools.js';
import { PreemptiveGeneration } from './preemptive-generation.js';
import { type MessageReader, clientEventOf } from './client-message.js';
import { type ClientEvent, type ClientEventType, type Json, type ServerEventDraft, RealtimeError, errorEvent, newConversationId, newItemId } from './protocol.js';
import { idleNudge } from './reply-request.js';
import { type ResponseContext, checkResponse, responseSpec } from './response-request.js';
import { ResponseRun, type ResponseOutcome } from './response.js';
import type { AudioDelivery } from './response-speech.js';
import { ResponseSlot } from './response-slot.js';
import { imagesWanted, sessionObjectOf } from './session-object.js';
import { applySessionUpdate, changedAssets, type SessionSettings } from './session-update.js';

export class RealtimeSessionEngine {
  private settings: SessionSettings;
  private readonly conversation = new Conversation(newConversationId());
  /** Client events in arrival order, and the engine's own work ordered with them (client-message.ts). */
  private chain: Promise<void> = Promise.resolve();
  private readonly reader: MessageReader<ClientEventType>;
  private closed = false;
  /** A face the client draws: its faces and frames (nothing when the server draws it). */
  private readonly motion: MotionStream;

  /** The response in progress, and finished ones' audio for truncation. */
  private readonly responses = new ResponseSlot();
  /** A voice turn was not answered because the user kept talking: the next turn answers it. */
  private owedResponse = false;
  /** The voice input: the input audio buffer, a call's microphone, turns and their transcripts. */
  private readonly input: AudioRecognition;
  /** The words' reading, the early reply of a turn being decided, the session's prompt prepared. */
  private readonly preemptive: PreemptiveGeneration;
  private readonly chat: ChatRecord;
  /** The MCP servers the session and its responses declare, and the approvals answered. */
  private readonly mcp: McpToolbox;

  constructor(
    private readonly options: EngineOptions,
    private readonly deps: EngineDeps,
  ) {
    this.settings = applySessionUpdate(null, options.initial, options.defaultModel);
    this.reader = { emit: (e) => this.emit(e), log: deps.log, sessionId: options.sessionId };
    const log = deps.log.child({ sessionId: options.sessionId });
    this.chat = new ChatRecord(deps.recorder, log);
    this.preemptive = new PreemptiveGeneration({
      sessionId: options.sessionId,
      settings: () => this.offeredSettings(),
      llm: deps.llm,
      log: deps.log,
      closed: () => this.closed,
      responding: () => this.responses.active !== null,
      transcribing: () => this.input.transcribing,
      messages: () => this.conversation.messages(),
    });
    this.input = new AudioRecognition({
      createVad: deps.createVad,
      endOfTurnModel: deps.endOfTurnModel,
      asr: deps.asr,
      pauseWords: this.preemptive.hearPause.bind(this.preemptive),
      settings: () => this.settings,
      emit: (e) => this.emit(e),
      log,
    });
    this.mcp = new McpToolbox({
      connector: deps.mcp,
      emit: (e) => this.emit(e),
      insert: (item) => this.conversation.insert(item, null),
      log,
    });
    this.input.on('speech_started', (e) => this.onSpeechStarted(e));
    this.preemptive.follow(this.input); // speech resuming
    this.input.on('turn_ended', (e) => this.onTurnEnded(e));
    this.input.on('idle', (e) => (this.chain = this.chain.then(() => this.onIdleTimeout(e.startMs, e.idleMs))));
    // A run hears the avatar's audio and frames itself while it runs (response.ts); a face the
    // client draws is sent every frame, idle or speaking.
    this.motion = new MotionStream(deps.avatar, (e) => this.emit(e));
    deps.avatar.on('failed', (err) => {
      deps.log.error('avatar output failed', { sessionId: options.sessionId, err });
      this.responses.cancel('client_cancelled');
      this.emit(errorEvent(new RealtimeError('avatar_failed', 'The avatar media pipeline failed; no further audio or video can be produced.', null, 'server_error'), null));
    });
  }

  /** Sends session.created and starts turn detection; call once, before the first message. */
  async start(): Promise<void> {
    await this.input.configure(this.settings.turnDetection); // the VAD and the idle timeout, as the settings say
    this.emit({ type: 'session.created', session: this.sessionObject() });
    this.motion.start();
    this.preemptive.prepareSession();
    try {
      this.mcp.check(this.settings.mcp, 'session.tools', this.settings.raw.tools); // an ephemeral key's or a REST session's tools
      this.listMcp(this.settings.mcp, null);
    } catch (err) {
      this.emit(errorEvent(err, null));
    }
  }

  /** Lists the servers not listed yet: their mcp_list_tools items join the conversation. */
  private listMcp(servers: McpServerDeclaration[], eventId: string | null): void {
    this.mcp.list(servers, eventId);
    this.enforceConversationBound();
  }

  /**
   * One text message from the client; handled after every earlier one. Never throws. Audio appends
   * are ordered with everything else through the same chain (a large G.711 one yields to the event
   * loop while it decodes; the events after it wait their turn).
   */
  receive(text: string): void {
    const event = clientEventOf(text, this.reader);
    if (event) this.chain = this.chain.then(() => this.handle(event));
  }

  /** Resolves once every message received so far has been handled. */
  idle(): Promise<void> {
    return this.chain;
  }

  /** The effective session object, for session.created/updated (session-object.ts). */
  sessionObject(): Json {
    const { sessionId: id, expiresAt, dialect } = this.options;
    return sessionObjectOf(this.settings.session, { dialect, id, expiresAt, images: this.imagesWanted() });
  }

  /** Stops everything; no events are sent afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.responses.cancel('client_cancelled');
    this.preemptive.close();
    await Promise.all([this.input.close(), this.mcp.close()]);
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
      checkTransport(event.type, this.options.transport ?? 'websocket');
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
          return await this.input.appendEncoded(event.audio);
        case 'input_audio_buffer.commit':
          return this.onCommit();
        case 'input_audio_buffer.clear':
          return this.onClear();
        case 'output_audio_buffer.clear':
          return this.onOutputAudioClear();
        case 'response.create':
          return await this.startResponse(event.response, event.event_id);
        case 'response.cancel':
          return this.responses.cancelRequested(event.response_id);
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
    await Promise.all(changedAssets(before, after, update).map((a) => this.deps.assets.require(a.kind, a.id, this.options.userId, a.param)));
    // Switch the avatar before committing the settings: a face that fails to load leaves the old one.
    if (after.face !== before.face) await this.deps.avatar.setFace(after.face ?? 'default');
    this.mcp.check(next.mcp, 'session.tools', next.raw.tools);
    if (after.driving !== before.driving) await this.deps.avatar.setDriving(after.driving ?? 'default');
    this.settings = next;
    await this.input.configure(this.settings.turnDetection); // the VAD and the idle timeout, as the settings say
    this.emit({ type: 'session.updated', session: this.sessionObject() });
    this.preemptive.prepareSession();
    this.listMcp(next.mcp, event.event_id);
  }

  /** The settings with the session's MCP tools among its tools, as an automatic response offers them (so an early reply asks what the response will). */
  private offeredSettings(): SessionSettings {
    const { settings } = this;
    if (settings.mcp.length === 0) return settings;
    const { tools } = this.mcp.offer(settings.mcp, new Set(settings.tools.map((t) => t.name)));
    return tools.length === 0 ? settings : { ...settings, tools: [...settings.tools, ...tools] };
  }

  private imagesWanted(): boolean {
    return imagesWanted(this.settings.session.output_modalities, this.options);
  }

  // ---- idle timeout (turn_detection.idle_timeout_ms: AudioRecognition's timer) ----

  /**
   * input_audio_buffer.timeout_triggered, as OpenAI's: the buffer is committed as the user's
   * (silent) turn and, with create_response, the model is asked to check in on the user.
   */
  private async onIdleTimeout(startMs: number, idleMs: number): Promise<void> {
    if (this.closed || this.responses.active || this.input.isSpeaking || !this.settings.turnDetection?.idleTimeoutMs) return;
    try {
      const itemId = newItemId();
      this.emit({ type: 'input_audio_buffer.timeout_triggered', audio_start_ms: startMs, audio_end_ms: this.input.heardMs, item_id: itemId });
      this.input.clear();
      this.preemptive.dropPending();
      const { item, previousItemId } = this.commitUserItem(itemId, '');
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
    const pcm = parsed.audio !== null ? await this.input.decodeItemAudio(parsed.audio, 'item.content.audio') : null;
    await checkItemImages(parsed, this.deps.images);
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
    if (item.type === 'message' && item.role !== 'system') this.chat.turn(item.role, itemText(item));
    if (item.type === 'mcp_approval_response') {
      this.mcp.answered(item);
      await this.answerApprovals(event.event_id);
    }
  }

  /** conversation.item.truncate (response-slot.ts): the response playing stops, a finished one's transcript is cut. */
  private onItemTruncate(event: ClientEventOf<'conversation.item.truncate'>): void {
    const { item_id: itemId, content_index: contentIndex } = event;
    const item = this.conversation.require(itemId, 'item_id', 'truncate');
    const cutMs = this.responses.truncate(item, contentIndex, event.audio_end_ms);
    this.emit({ type: 'conversation.item.truncated', item_id: itemId, content_index: contentIndex, audio_end_ms: cutMs });
  }

  /** output_audio_buffer.clear (WebRTC): the avatar stops speaking now and the response ends cancelled (nothing playing: nothing to clear). */
  private onOutputAudioClear(): void {
    this.responses.cancel('client_cancelled');
  }

  private onItemDelete(event: ClientEventOf<'conversation.item.delete'>): void {
    const itemId = event.item_id;
    if (this.responses.holds(itemId)) {
      throw new RealtimeError('item_in_use', `Item '${itemId}' belongs to the response in progress; cancel it first.`, 'item_id');
    }
    this.dropItem(itemId);
  }

  private dropItem(itemId: string): void {
    this.conversation.delete(itemId);
    this.responses.forget(itemId);
    this.emit({ type: 'conversation.item.deleted', item_id: itemId });
  }

  /**
   * Drops the oldest items while the conversation is beyond its bound (never the response in
   * progress), announcing each with conversation.item.deleted so a client's mirror stays exact.
   */
  private enforceConversationBound(): void {
    const dropped = this.conversation.overflow((id) => this.responses.holds(id));
    for (const id of dropped) this.dropItem(id);
    if (dropped.length > 0) this.deps.log.debug('oldest conversation items dropped', { sessionId: this.options.sessionId, dropped: dropped.length });
  }

  private onItemRetrieve(event: ClientEventOf<'conversation.item.retrieve'>): void {
    const itemId = event.item_id;
    this.emit({ type: 'conversation.item.retrieved', item: this.conversation.require(itemId, 'item_id', 'retrieve') });
  }

  // ---- input audio ----

  private onCommit(): void {
    const { itemId, pcm } = this.input.commit();
    this.deps.avatar.listen(false);
    this.preemptive.dropPending();
    this.commitAudio(itemId, pcm, false);
  }

  private onClear(): void {
    this.input.clearAppended();
    this.deps.avatar.listen(false);
    this.preemptive.dropPending();
    this.emit({ type: 'input_audio_buffer.cleared' });
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
    if (td?.interruptResponse) this.responses.cancel('turn_detected');
  }

  private onTurnEnded(e: UserTurn): void {
    if (this.closed) return;
    this.emit({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: e.audioEndMs, item_id: e.itemId });
    this.deps.avatar.listen(false);
    this.preemptive.onTurnEnded(e);
    this.commitAudio(e.itemId, e.audio, this.settings.turnDetection?.createResponse ?? false, e.transcription, e.audio16k);
  }

  /** The input buffer committed as the user's audio item: input_audio_buffer.committed, conversation.item.added. */
  private commitUserItem(itemId: string, transcript: string | null): { item: MessageItem; previousItemId: string | null } {
    const item = userAudioItem(itemId, transcript);
    const previousItemId = this.conversation.insert(item, null);
    this.emit({ type: 'input_audio_buffer.committed', previous_item_id: previousItemId, item_id: itemId });
    this.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item });
    return { item, previousItemId };
  }

  /** The user item of a commit or a turn, its transcription, and (VAD) the response. */
  private commitAudio(itemId: string, pcm: Int16Array, respond: boolean, fromPause: PauseTranscription | null = null, pcm16k: Float32Array | null = null): void {
    const { item, previousItemId } = this.commitUserItem(itemId, null);
    this.input.transcribe(item, pcm, pcm16k, fromPause, (transcript) => this.onTranscribed(item, previousItemId, transcript, respond));
    this.enforceConversationBound();
  }

  /**
   * A user audio item's transcription ended (`transcript` null: it failed): the item is done, and
   * a VAD turn (`respond`) is answered.
   */
  private onTranscribed(item: MessageItem, previousItemId: string | null, transcript: string | null, respond: boolean): void {
    if (transcript !== null) this.chat.turn('user', transcript);
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
      if (this.responses.active) {
        if (!this.settings.turnDetection?.interruptResponse) return;
        this.responses.cancel('turn_detected');
      }
      await this.startResponse(null, null);
    } catch (err) {
      this.emit(errorEvent(err, null));
    } finally {
      this.preemptive.dropEarlyReply(); // the turn's response took it, or asked for another reply
    }
  }

  /** Checks a response request, finishes it into a run's spec and starts the run; `clientEventId` is the response.create's (null: automatic). */
  private async startResponse(body: unknown, clientEventId: string | null): Promise<void> {
    this.responses.refuseWhileActive();
    const ctx: ResponseContext = { settings: this.settings, conversation: this.conversation, userId: this.options.userId, assets: this.deps.assets, images: this.deps.images };
    const checked = await checkResponse(body, ctx);
    const servers = checked.request.mcp;
    if (servers !== this.settings.mcp) {
      this.mcp.check(servers, 'response.tools', (body as { tools?: unknown } | null)?.tools);
      this.listMcp(servers, clientEventId);
    }
    // Wait for transcriptions in progress so the model hears what was said, for the model's
    // reading of the turn's words, which holds the sequence the reply continues, and for the
    // listings of its MCP servers.
    await this.input.settled();
    await this.preemptive.settled();
    await this.mcp.settled(servers);
    if (this.closed) return;
    this.responses.refuseWhileActive();
    const delivery = { imagesWanted: this.imagesWanted(), legacyVideo: this.options.legacyVideo, audioDelivery: audioDeliveryOf(this.options), audioPts: this.deps.avatar.clientFace !== null } as const;
    const offer = this.mcp.offer(servers, new Set(checked.request.tools.map((t) => t.name)));
    const approvedCalls = this.mcp.takeApproved(offer, (id) => this.conversation.get(id));
    const spec = { ...responseSpec(checked, { ...ctx, settings: this.settings }, delivery, clientEventId, { offer, approvedCalls }), fallbackLine: this.deps.llm.fallbackLine };
    const model = this.deps.llm.forModel(this.settings.session.model);
    const { userId, ttsSource } = this.options;
    const run = new ResponseRun(spec, {
      emit: (e) => {
        this.emit(e);
        // A response's items join the conversation as they open: keep it within its bounds.
        if (e.type === 'conversation.item.added') this.enforceConversationBound();
      },
      avatar: this.deps.avatar,
      llm: this.preemptive.takeEarlyReply(model, spec.request, spec.id) ?? model,
      voice: { tts: this.deps.tts, request: { voiceId: spec.voiceName, userId, source: ttsSource } },
      log: this.deps.log,
      onProgress: (text) => this.chat.progress(text),
      addUsage: (delta) => this.deps.recorder.addUsage(delta),
    });
    this.input.disarmIdle();
    this.responses.start(run, (outcome) => this.onResponseDone(run, outcome));
  }

  private onResponseDone(run: ResponseRun, outcome: ResponseOutcome): void {
    if (outcome.status === 'completed' && run.inConversation) this.input.armIdle();
    if (run.inConversation) this.responses.remember(run, (itemId) => this.conversation.get(itemId) !== undefined);
    if (run.inConversation) {
      for (const item of outcome.items) if (item.type === 'message') this.chat.turn('assistant', itemText(item));
      this.enforceConversationBound();
    }
    // Its usage was counted as it was delivered (ResponseDeps.addUsage), committed before response.done went out.
    this.chat.progress('');
    // Approvals answered while it ran: their calls run now, in a response of their own.
    if (this.mcp.answersWaiting && !this.closed) this.chain = this.chain.then(() => this.answerApprovals(null));
  }

  /** A response for the approvals answered (mcp_approval_response items), unless one is already in progress. */
  private async answerApprovals(eventId: string | null): Promise<void> {
    if (this.responses.active || !this.mcp.answersWaiting) return;
    try {
      await this.startResponse(null, eventId);
    } catch (err) {
      this.emit(errorEvent(err, eventId));
    }
  }
}

/** How a response's audio goes out: as RTP on a call (and as events too where they are wanted), as events otherwise. */
function audioDeliveryOf(options: EngineOptions): AudioDelivery {
  if (options.transport !== 'webrtc') return 'deltas';
  return options.audioEventsToo ? 'rtp+deltas' : 'rtp';
}
