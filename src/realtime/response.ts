/**
 * One response: the language model writes, and what it writes becomes the response's output
 * items in the order it writes them: an assistant message (response-speech.ts: spoken sentence by
 * sentence through the avatar, or written) and function calls (response-function-call.ts). The
 * run owns the lifecycle, the output list and `response.done`; the parts own their own events.
 *
 * Order of events (GA names; the connection renames them for the older dialect):
 *   response.created →
 *     per output item, in the model's order, output_index counting from 0:
 *     response.output_item.added → conversation.item.added → (the part's events) →
 *     response.output_item.done → conversation.item.done
 *   → response.done (always last, `output` listing every item, with usage).
 * The message item opens with the model's first words (not before: a reply that is only a call
 * has no message); a reply with neither words nor calls still gets one empty message. Function
 * calls are done as soon as the model has written them; a spoken message is done when its audio
 * has played out, so a call made after the words may be done before them.
 *
 * Ending: completed once the model is done and the speech has played out; cancelled (client,
 * barge-in, or a truncate of its message while it plays) at once — the avatar is interrupted so
 * audio and video stop on the next frame, and a call cut mid-arguments ends incomplete; failed
 * when a provider fails (an `error` event is sent first); incomplete when the output limit cut the
 * reply. Either way every open item is closed and response.done comes.
 *
 * A run cannot be left half-started: every entry point (start, the generation task, the avatar's
 * audio and frame callbacks) is guarded, and anything thrown inside one fails the run (`error`
 * event naming the response.create that asked for it, then response.done with status failed).
 * `done` is emitted once whatever happens while the closing events are sent, so the engine always
 * learns that the run is over; `finished` is the run's own truth.
 *
 * Usage is counted as it is delivered (deps.addUsage): each tick's audio and each frame right after
 * its event, the model's tokens as soon as it reports them; so a run cut short (cancel, barge-in,
 * truncate, a dropped connection) bills what the client was sent, never what was only generated.
 *
 * Its critical path is logged when it ends ('response timing', info): ms from start() to the
 * model's first text, the first clause handed to the voice, the voice's first chunk queued on
 * the avatar, and the first audio played out to the client (`npm run bench -- realtime` reads it).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../core/log.js';
import type { ChatMessage, LanguageModel, TokenUsage, ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import { AppError } from '../core/errors.js';
import { type AvatarAudioChunk, type AvatarFrame, type AvatarOutput } from './avatar-output.js';
import { type Item, type MessageItem, assistantMessage, functionCallItem, openedItem } from './items.js';
import { type ServerEventDraft, errorEvent } from './protocol.js';
import { MessageOutput, type ResponseTiming, type VoiceSource } from './response-speech.js';
import { FunctionCallOutput } from './response-function-call.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import { OutputAudioEncoder, type WireAudioFormat } from '../audio/wire-format.js';
import type { UsageDelta } from './engine-ports.js';

export type { ResponseTiming } from './response-speech.js';

export type ResponseStatus = 'completed' | 'cancelled' | 'failed' | 'incomplete';
export type CancelReason = 'client_cancelled' | 'turn_detected';

/** What the model is asked: the prompt and the tools it may call. */
export interface ModelRequest {
  /** Instructions first, then the context. */
  messages: ChatMessage[];
  /** Null: the provider's own limit. */
  maxOutputTokens: number | null;
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
}

/** Where a response's items go in the conversation (null for out-of-band responses). */
export interface ResponseConversation {
  id: string;
  /** Adds an output item at the end; returns the id of the item before it. */
  insert(item: Item): string | null;
}

export interface ResponseSpec {
  id: string;
  conversation: ResponseConversation | null;
  outputModalities: string[];
  request: ModelRequest;
  /** As the response object shows it. */
  maxOutputTokens: number | 'inf';
  /** Validated OpenAI metadata (string pairs), echoed in the response object. */
  metadata: Record<string, string> | null;
  /** The event_id of the response.create that asked for it (null for automatic responses): failures name it. */
  clientEventId: string | null;
  voiceName: string;
  speed: number;
  /** Whether image deltas are sent. */
  images: boolean;
  /**
   * How the audio reaches the client: 'deltas' (WebSocket: response.output_audio.delta events) or
   * 'rtp' (WebRTC: the avatar's audio goes out as RTP, so no deltas; output_audio_buffer.started /
   * stopped / cleared tell the client when it plays, as OpenAI's WebRTC does).
   */
  audioDelivery: 'deltas' | 'rtp';
  /** The session's output audio format (audio deltas are encoded in it). */
  outputFormat: WireAudioFormat;
}

export interface ResponseDeps {
  emit(event: ServerEventDraft): void;
  avatar: AvatarOutput;
  llm: LanguageModel;
  /** Resolves the voice (audio responses only). */
  voice: VoiceSource;
  log: Logger;
  /** The assistant's transcript so far, as it is heard (for the chat history in progress). */
  onProgress?: (text: string) => void;
  /** Usage as it is delivered: audio played and frames sent (right after their events), the model's tokens once reported. */
  addUsage(delta: UsageDelta): void;
}

export interface ResponseOutcome {
  status: ResponseStatus;
  /** Every output item, in output_index order. */
  items: Item[];
  usage: TokenUsage | null;
  /** Seconds of speech sent. */
  audioSeconds: number;
  frames: number;
}

export class ResponseRun extends EventEmitter<{ done: [ResponseOutcome] }> {
  readonly id: string;
  private readonly spec: ResponseSpec;
  private readonly deps: ResponseDeps;
  private readonly abort = new AbortController();
  private readonly audioOut: boolean;
  private state: 'running' | 'finished' = 'running';

  /** Output items in output_index order. */
  private readonly outputs: Item[] = [];
  private message: MessageOutput | null = null;
  /** Function calls by the model's index of the call in this reply. */
  private readonly calls = new Map<number, FunctionCallOutput>();
  /** Whitespace the model wrote before anything else (not worth a message of its own). */
  private leadingSpace = '';
  private usage: TokenUsage | null = null;
  private finishReason: 'stop' | 'length' | 'aborted' | 'tool_calls' = 'stop';
  /** Where a truncation cut the audio (ms of this response's audio); null: not truncated. */
  private cutAtMs: number | null = null;
  /** The critical path, ms since start() (see the header). */
  private readonly timing: ResponseTiming = { firstTextMs: null, firstClauseMs: null, firstVoiceChunkMs: null, firstAudioMs: null };
  private startedAt = 0;

  constructor(spec: ResponseSpec, deps: ResponseDeps) {
    super();
    this.id = spec.id;
    this.spec = spec;
    this.deps = deps;
    this.audioOut = spec.outputModalities.includes('audio');
  }

  get inConversation(): boolean {
    return this.spec.conversation !== null;
  }

  get finished(): boolean {
    return this.state === 'finished';
  }

  /** The id of the assistant message item, once the model has started writing one. */
  get messageItemId(): string | null {
    return this.message?.item.id ?? null;
  }

  /** Whether `itemId` is one of this response's output items. */
  hasItem(itemId: string): boolean {
    return this.outputs.some((item) => item.id === itemId);
  }

  /** Milliseconds of this response's audio sent to the client so far. */
  get playedMs(): number {
    return this.message?.playedMs ?? 0;
  }

  /**
   * Announces the response and starts generating; a failure on the way fails the run (never
   * throws). From here until it finishes the run hears the avatar's audio and frames itself.
   */
  start(): void {
    this.startedAt = performance.now();
    this.deps.avatar.on('audio', this.onAudio);
    this.deps.avatar.on('frame', this.onFrame);
    this.guarded(() => {
      this.deps.emit({ type: 'response.created', response: this.responseObject('in_progress', null) });
      void this.generate();
    });
  }

  /** Stops at once: generation and synthesis are aborted, the avatar goes idle, response.done follows. */
  cancel(reason: CancelReason): void {
    if (this.state !== 'running') return;
    this.stopOutput();
    this.finish('cancelled', { type: 'cancelled', reason });
  }

  /**
   * conversation.item.truncate of this response's message while it plays (how the openai-agents
   * SDK interrupts): the audio stops now, the transcript kept is what was heard up to
   * `audioEndMs` (clamped to what was played), and the response ends cancelled. Returns the cut, in ms.
   */
  truncate(audioEndMs: number): number {
    this.cutAtMs = Math.min(audioEndMs, this.playedMs);
    this.cancel('client_cancelled');
    return this.cutAtMs;
  }

  /** The message's transcript as heard up to `audioEndMs` (see MessageOutput.transcriptAt). */
  transcriptAt(audioEndMs: number): string {
    return this.message?.transcriptAt(audioEndMs) ?? '';
  }

  /** Audio the avatar played in one tick (a listener while the run runs: start(), finish()). */
  private readonly onAudio = (chunk: AvatarAudioChunk): void => {
    if (this.state === 'running' && this.message) this.guarded(() => this.message?.onAudio(chunk));
  };

  /** A frame the avatar rendered (a listener while the run runs). */
  private readonly onFrame = (frame: AvatarFrame): void => {
    if (this.state === 'running' && this.message) this.guarded(() => this.message?.onFrame(frame));
  };

  /** Marks the first time a step of the critical path happened. */
  mark(step: keyof ResponseTiming): void {
    this.timing[step] ??= Math.round(performance.now() - this.startedAt);
  }

  private async generate(): Promise<void> {
    try {
      const { request } = this.spec;
      const hasTools = request.tools.length > 0 && request.toolChoice !== 'none';
      const stream = this.deps.llm.generate({
        messages: request.messages,
        maxOutputTokens: request.maxOutputTokens,
        signal: this.abort.signal,
        ...(hasTools ? { tools: request.tools, toolChoice: request.toolChoice, parallelToolCalls: request.parallelToolCalls } : {}),
      });
      for await (const chunk of stream) {
        if (this.state !== 'running') break;
        switch (chunk.type) {
          case 'text':
            this.onText(chunk.text);
            break;
          case 'tool_call_start':
            this.openCall(chunk.index, chunk.callId, chunk.name);
            break;
          case 'tool_call_arguments':
            this.calls.get(chunk.index)?.append(chunk.delta);
            break;
          case 'done':
            this.usage = chunk.usage;
            this.finishReason = chunk.finishReason;
            if (chunk.usage) this.deps.addUsage({ inputTokens: chunk.usage.inputTokens, outputTokens: chunk.usage.outputTokens });
            break;
        }
      }
      if (this.state !== 'running') return;
      const cutShort = this.finishReason === 'length';
      // The model is done: calls it finished are done now (a cut-off one stays open: incomplete).
      if (!cutShort) for (const call of this.calls.values()) call.complete();
      if (!this.message && this.calls.size === 0) this.openMessage();
      const message = this.message;
      const toPlay = message ? await message.endOfText() : false;
      if (this.state !== 'running') return;
      // Otherwise the message finishes the response once its last sentence has played.
      if (!toPlay) this.finish(cutShort ? 'incomplete' : 'completed', cutShort ? { type: 'incomplete', reason: 'max_output_tokens' } : null);
    } catch (err) {
      this.fail(err);
    }
  }

  private onText(text: string): void {
    if (text === '') return;
    this.mark('firstTextMs');
    if (!this.message) {
      if (text.trim() === '') {
        this.leadingSpace += text;
        return;
      }
      this.openMessage();
      text = this.leadingSpace.trimStart() + text;
      this.leadingSpace = '';
    }
    this.message?.addText(text);
  }

  /** Adds an output item: output_item.added, and conversation.item.added for conversation responses. */
  private addOutput(item: Item): { outputIndex: number; close: () => void } {
    const outputIndex = this.outputs.length;
    this.outputs.push(item);
    const conversation = this.spec.conversation;
    const previousItemId = conversation ? conversation.insert(item) : null;
    this.deps.emit({ type: 'response.output_item.added', response_id: this.id, output_index: outputIndex, item: openedItem(item) });
    if (conversation) this.deps.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item: openedItem(item) });
    const close = () => {
      this.deps.emit({ type: 'response.output_item.done', response_id: this.id, output_index: outputIndex, item });
      if (conversation) this.deps.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
    };
    return { outputIndex, close };
  }

  private openMessage(): void {
    const item: MessageItem = assistantMessage();
    const { outputIndex, close } = this.addOutput(item);
    this.messageClose = close;
    this.message = new MessageOutput(
      {
        responseId: this.id,
        item,
        outputIndex,
        audio: this.audioOut,
        images: this.spec.images,
        audioDelivery: this.spec.audioDelivery,
        speed: this.spec.speed,
        encoder: this.spec.outputFormat.type === 'audio/pcm' ? null : new OutputAudioEncoder(this.spec.outputFormat),
      },
      {
        emit: this.deps.emit,
        avatar: this.deps.avatar,
        voice: this.deps.voice,
        signal: this.abort.signal,
        mark: (step) => this.mark(step),
        onProgress: this.deps.onProgress,
        addUsage: (delta) => this.deps.addUsage(delta),
        onPlayedOut: () => this.finish('completed', null),
      },
    );
    this.message.open();
  }

  /** Sends the message item's output_item.done / conversation.item.done. */
  private messageClose: (() => void) | null = null;

  private openCall(index: number, callId: string, name: string): void {
    if (this.calls.has(index)) return;
    const item = functionCallItem(callId, name);
    const { outputIndex, close } = this.addOutput(item);
    this.calls.set(index, new FunctionCallOutput(item, outputIndex, this.id, (e) => this.deps.emit(e), close));
  }

  /** Runs `step`; anything it throws fails the run instead of escaping to the caller. */
  private guarded(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.fail(err);
    }
  }

  /** Ends a running response as failed: an `error` event naming the response.create, then response.done. */
  private fail(err: unknown): void {
    if (this.state !== 'running') {
      // Work still unwinding after a cancel (an aborted provider call) fails harmlessly: nothing is open.
      this.deps.log.debug('response step failed after the response ended', { responseId: this.id, err });
      return;
    }
    const internal = !(err instanceof AppError);
    if (internal) this.deps.log.error('response failed', { responseId: this.id, clientEventId: this.spec.clientEventId, err });
    else this.deps.log.warn('response failed', { responseId: this.id, clientEventId: this.spec.clientEventId, err });
    this.stopOutput();
    this.deps.emit(errorEvent(err, this.spec.clientEventId));
    const e = internal ? null : err;
    this.finish('failed', { type: 'failed', error: { type: e?.type ?? 'server_error', code: e?.code ?? 'response_failed' } });
  }

  /** Aborts generation and synthesis and silences the avatar; a failing interrupt is logged, not thrown. */
  private stopOutput(): void {
    this.abort.abort();
    if (!this.audioOut) return;
    try {
      this.deps.avatar.interrupt();
    } catch (err) {
      this.deps.log.error('avatar interrupt failed', { responseId: this.id, err });
    }
  }

  private finish(status: ResponseStatus, statusDetails: unknown): void {
    if (this.state !== 'running') return;
    this.state = 'finished';
    this.deps.avatar.off('audio', this.onAudio);
    this.deps.avatar.off('frame', this.onFrame);
    this.deps.log.info('response timing', { responseId: this.id, status, ...this.timing });
    try {
      this.sendClosingEvents(status, statusDetails);
    } catch (err) {
      // The run is over either way; the engine must hear so (it would otherwise keep it active).
      this.deps.log.error('closing events of a response failed', { responseId: this.id, err });
    } finally {
      this.emit('done', {
        status,
        items: this.outputs,
        usage: this.usage,
        audioSeconds: (this.message?.samples ?? 0) / PCM_RATE_HZ,
        frames: this.message?.frames ?? 0,
      });
    }
  }

  private sendClosingEvents(status: ResponseStatus, statusDetails: unknown): void {
    if (this.message) {
      this.message.close(status === 'completed', this.cutAtMs);
      this.message.item.status = status === 'completed' ? 'completed' : 'incomplete';
      this.messageClose?.();
    }
    for (const call of this.calls.values()) call.abandon();
    this.deps.emit({ type: 'response.done', response: this.responseObject(status, statusDetails) });
  }

  private responseObject(status: ResponseStatus | 'in_progress', statusDetails: unknown) {
    const { spec } = this;
    return {
      object: 'realtime.response',
      id: this.id,
      status,
      status_details: statusDetails,
      output: status === 'in_progress' ? [] : this.outputs,
      conversation_id: spec.conversation?.id ?? null,
      output_modalities: spec.outputModalities.filter((m) => m === 'audio' || m === 'text'),
      max_output_tokens: spec.maxOutputTokens,
      audio: { output: { format: wireFormatJson(spec.outputFormat), voice: spec.voiceName } },
      usage: status === 'in_progress' ? null : usageObject(this.usage),
      metadata: spec.metadata,
    };
  }
}

function wireFormatJson(format: WireAudioFormat) {
  return format.type === 'audio/pcm' ? { type: 'audio/pcm', rate: PCM_RATE_HZ } : { type: format.type };
}

/** The GA usage object; zeros when the model reported nothing (strict clients read it unconditionally). */
function usageObject(usage: TokenUsage | null) {
  const input = usage?.inputTokens ?? 0;
  const output = usage?.outputTokens ?? 0;
  return {
    total_tokens: input + output,
    input_tokens: input,
    output_tokens: output,
    input_token_details: {
      cached_tokens: 0,
      text_tokens: input,
      audio_tokens: 0,
      image_tokens: 0,
      cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
    },
    output_token_details: { text_tokens: output, audio_tokens: 0 },
  };
}
