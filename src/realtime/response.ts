/**
 * One response: the language model writes, and what it writes becomes the response's output
 * items in the order it writes them: assistant messages (response-speech.ts: spoken sentence by
 * sentence through the avatar, or written), function calls (response-function-call.ts) and MCP
 * calls this server runs (response-mcp-call.ts). The run owns the lifecycle, the output list and
 * `response.done`; the parts own their own events.
 *
 * Steps: when the model calls MCP tools (and nothing else), the run calls them while what it said
 * first (a preamble: "Let me look that up.") is spoken, then asks the model again with their
 * outcomes, and the answer is a new message item of the same response: one response, several
 * items (message, mcp_call, message), as gpt-realtime-2 makes them. A message's closing events
 * come when its audio has played out, which may be after the next item has opened. At most
 * MAX_STEPS model requests per response (the last one is offered no tools). A response may also
 * begin with calls the client approved (spec.approvedCalls), run before the model is asked.
 *
 * Order of events (GA names; the connection renames them for the older dialect):
 *   response.created →
 *     per output item, in the model's order, output_index counting from 0:
 *     response.output_item.added → conversation.item.added → (the part's events) →
 *     response.output_item.done → conversation.item.done
 *   → response.done (always last, `output` listing every item, with usage).
 * A message item opens with the model's first words of a step (not before: a reply that is only a
 * call has no message); a reply with neither words nor calls still gets one empty message.
 * Function calls are done as soon as the model has written them, MCP calls when they have run; a
 * spoken message is done when its audio has played out, so a call made after the words may be done
 * before them.
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
import { type ChatMessage, type LanguageModel, ProviderError, type TokenUsage, type ToolChoice, type ToolDefinition } from '../providers/llm/base.js';
import { AppError } from '../core/errors.js';
import { type AvatarAudioChunk, type AvatarFrame, type AvatarOutput } from './avatar-output.js';
import { type Item, type McpApprovalRequestItem, type McpCallItem, type MessageItem, assistantMessage, functionCallItem, openedItem } from './items.js';
import type { McpOffer, McpRoute } from './mcp-toolbox.js';
import { type ServerEventDraft, errorEvent } from './protocol.js';
import { type AudioDelivery, MessageOutput, type ResponseTiming, type VoiceSource } from './response-speech.js';
import { FunctionCallOutput } from './response-function-call.js';
import { McpApprovalOutput, McpCallOutput, afterCalls, mcpCallItem } from './response-mcp-call.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import { OutputAudioEncoder, type WireAudioFormat } from '../audio/wire-format.js';
import type { UsageDelta } from './engine-ports.js';

export type { ResponseTiming } from './response-speech.js';

export type ResponseStatus = 'completed' | 'cancelled' | 'failed' | 'incomplete';

/** Model requests one response may make (its MCP calls' outcomes read between them). */
export const MAX_STEPS = 4;

/** A call the client approved (its mcp_approval_request), run first; `route` null when its tool is no longer offered. */
export interface ApprovedCall {
  request: McpApprovalRequestItem;
  route: McpRoute | null;
}
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
  audioDelivery: AudioDelivery;
  /** response.output_audio.delta carries `pts_ms`, its first sample's time on the avatar's clock (video_render: client). */
  audioPts: boolean;
  /** The session's output audio format (audio deltas are encoded in it). */
  outputFormat: WireAudioFormat;
  /** The MCP tools offered (their definitions are in `request.tools`); NO_MCP when none. */
  mcp?: McpOffer;
  /** Approved MCP calls to run before the model is asked. */
  approvedCalls?: ApprovedCall[];
  /** What the avatar says when the model fails before saying anything (LLM_FALLBACK_LINE); null: nothing. */
  fallbackLine?: string | null;
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
  /** Every message of the response, in order, with its item's closer; `message` is the one the model is writing now. */
  private readonly messages: Array<{ output: MessageOutput; close: () => void; closed: boolean }> = [];
  private message: MessageOutput | null = null;
  /** The current step's calls by the model's index of the call in its reply. */
  private readonly calls = new Map<number, FunctionCallOutput | McpCallOutput | McpApprovalOutput>();
  /** Every MCP call the response ran or runs (closed if it ends first). */
  private readonly mcpCalls: McpCallOutput[] = [];
  /** Set once the model is done for good: how the response ends once every message has played out. */
  private ending: { status: 'completed' | 'incomplete' | 'failed'; details: unknown } | null = null;
  /** Whitespace the model wrote before anything else (not worth a message of its own). */
  private leadingSpace = '';
  private usage: TokenUsage | null = null;
  private finishReason: 'stop' | 'length' | 'aborted' | 'tool_calls' = 'stop';
  /** Where a truncation cut a playing message's audio (ms of that message's audio); null: not truncated. */
  private cut: { itemId: string; atMs: number } | null = null;
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

  /** The ids of the response's assistant message items, in order. */
  get messageItemIds(): string[] {
    return this.messages.map((m) => m.output.item.id);
  }

  /** Whether `itemId` is one of this response's output items. */
  hasItem(itemId: string): boolean {
    return this.outputs.some((item) => item.id === itemId);
  }

  /** Milliseconds of message `itemId`'s audio sent to the client so far. */
  playedMsOf(itemId: string): number {
    return this.messageOf(itemId)?.playedMs ?? 0;
  }

  private messageOf(itemId: string): MessageOutput | null {
    return this.messages.find((m) => m.output.item.id === itemId)?.output ?? null;
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
  truncate(itemId: string, audioEndMs: number): number {
    const entry = this.messages.find((m) => m.output.item.id === itemId);
    const cut = Math.min(audioEndMs, entry?.output.playedMs ?? 0);
    // A message of this response that already played out has its transcript cut; the rest was not heard either.
    if (entry?.closed) entry.output.cutTranscript(cut);
    else this.cut = { itemId, atMs: cut };
    this.cancel('client_cancelled');
    return cut;
  }

  /** A finished message `itemId` keeps what was heard up to `audioEndMs` (MessageOutput.cutTranscript). */
  cutTranscript(itemId: string, audioEndMs: number): void {
    this.messageOf(itemId)?.cutTranscript(audioEndMs);
  }

  /** Audio the avatar played in one tick (a listener while the run runs: start(), finish()); each open message takes its own span. */
  private readonly onAudio = (chunk: AvatarAudioChunk): void => {
    if (this.state !== 'running') return;
    for (const m of this.messages) if (!m.closed) this.guarded(() => m.output.onAudio(chunk));
  };

  /** A frame the avatar rendered (a listener while the run runs): the earliest open message's. */
  private readonly onFrame = (frame: AvatarFrame): void => {
    if (this.state !== 'running') return;
    const playing = this.messages.find((m) => !m.closed);
    if (playing) this.guarded(() => playing.output.onFrame(frame));
  };

  /** Marks the first time a step of the critical path happened. */
  mark(step: keyof ResponseTiming): void {
    this.timing[step] ??= Math.round(performance.now() - this.startedAt);
  }

  private async generate(): Promise<void> {
    try {
      const { request } = this.spec;
      let messages = request.messages;
      const approved = await this.runApproved();
      if (approved.length > 0) messages = [...messages, ...afterCalls('', approved)];
      for (let step = 0; this.state === 'running'; step++) {
        const last = step === MAX_STEPS - 1;
        await this.generateStep(messages, last ? 'none' : step === 0 ? request.toolChoice : 'auto');
        if (this.state !== 'running') return;
        const cutShort = this.finishReason === 'length';
        const calls = [...this.calls.values()];
        this.calls.clear();
        // The model is done with this step: calls it finished are done now (a cut-off one stays open: incomplete).
        if (!cutShort) for (const call of calls) call.complete();
        if (!this.message && calls.length === 0 && this.messages.length === 0) this.openMessage();
        const message = this.message;
        this.message = null;
        const running = calls.flatMap((c) => (c instanceof McpCallOutput ? [c.execute(this.abort.signal)] : []));
        // The words so far are spoken while the MCP calls run.
        const [toPlay] = await Promise.all([message ? message.endOfText() : false, ...running]);
        if (this.state !== 'running') return;
        if (message && !toPlay) this.closeMessage(message, !cutShort);
        const ran = calls.filter((c): c is McpCallOutput => c instanceof McpCallOutput && c.ran);
        // Another step when every call of this one was an MCP call that ran: the model reads their outcomes.
        if (cutShort || ran.length === 0 || ran.length !== calls.length) {
          this.ending = cutShort ? { status: 'incomplete', details: { type: 'incomplete', reason: 'max_output_tokens' } } : { status: 'completed', details: null };
          this.finishWhenPlayed();
          return;
        }
        messages = [...messages, ...afterCalls(message?.writtenText ?? '', ran.map((c) => c.item))];
      }
    } catch (err) {
      if (!(await this.speakForItself(err))) this.fail(err);
    }
  }

  /**
   * The model failed before the response said anything (no first token in time, an error answer,
   * a refused connection): after the error event the avatar says the fallback line in the
   * session's voice, so the user hears a reply rather than silence, and the response ends failed
   * once it has played. False (nothing done) when there is no line, no audio, or something was
   * said or called already: the response then fails as any other.
   */
  private async speakForItself(err: unknown): Promise<boolean> {
    const line = this.spec.fallbackLine ?? null;
    const modelFailed = err instanceof ProviderError && err.code.startsWith('llm_');
    if (line === null || this.state !== 'running' || !this.audioOut || !modelFailed || this.outputs.length > 0) return false;
    this.deps.log.warn('the language model failed before answering: the avatar says the fallback line', { responseId: this.id, err });
    this.deps.emit(errorEvent(err, this.spec.clientEventId));
    this.ending = { status: 'failed', details: { type: 'failed', error: { type: err.type, code: err.code } } };
    try {
      this.onText(line);
      const message = this.message;
      this.message = null;
      const toPlay = message ? await message.endOfText() : false;
      if (this.state !== 'running') return true;
      if (message && !toPlay) this.closeMessage(message, true);
      this.finishWhenPlayed();
    } catch (voiceErr) {
      this.fail(voiceErr); // the line could not be said either (the voice failed): the response fails as it stands
    }
    return true;
  }

  /** One model request: its text and calls become output items as they come. */
  private async generateStep(messages: ChatMessage[], toolChoice: ToolChoice): Promise<void> {
    const { request } = this.spec;
    const hasTools = request.tools.length > 0 && toolChoice !== 'none';
    this.finishReason = 'stop';
    const stream = this.deps.llm.generate({
      messages,
      maxOutputTokens: request.maxOutputTokens,
      signal: this.abort.signal,
      ...(hasTools ? { tools: request.tools, toolChoice, parallelToolCalls: request.parallelToolCalls } : {}),
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
          this.addModelUsage(chunk.usage);
          this.finishReason = chunk.finishReason;
          if (chunk.usage) this.deps.addUsage({ inputTokens: chunk.usage.inputTokens, outputTokens: chunk.usage.outputTokens });
          break;
      }
    }
  }

  /** Runs the calls the client approved (spec.approvedCalls), each as an mcp_call item; returns those that ran. */
  private async runApproved(): Promise<McpCallItem[]> {
    const approved = this.spec.approvedCalls ?? [];
    const outputs = approved.map(({ request, route }) => {
      const stand: McpRoute = route ?? {
        server: { label: request.server_label } as McpRoute['server'],
        tool: { name: request.name } as McpRoute['tool'],
        approval: false,
        call: async () => ({ output: null, error: { type: 'protocol_error', code: -32601, message: `Tool '${request.name}' of MCP server '${request.server_label}' is no longer offered to this session.` } }),
      };
      const call = new McpCallOutput(mcpCallItem(stand, request.arguments, request.id), stand, this.id, (e) => this.deps.emit(e), (item) => this.addOutput(item));
      this.mcpCalls.push(call);
      call.complete();
      return call;
    });
    await Promise.all(outputs.map((c) => c.execute(this.abort.signal)));
    return outputs.filter((c) => c.ran).map((c) => c.item);
  }

  /** Adds the model's reported tokens of one step to the response's. */
  private addModelUsage(usage: TokenUsage | null): void {
    if (!usage) return;
    this.usage = { inputTokens: (this.usage?.inputTokens ?? 0) + usage.inputTokens, outputTokens: (this.usage?.outputTokens ?? 0) + usage.outputTokens };
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
    const output: MessageOutput = new MessageOutput(
      {
        responseId: this.id,
        item,
        outputIndex,
        audio: this.audioOut,
        images: this.spec.images,
        audioDelivery: this.spec.audioDelivery,
        audioPts: this.spec.audioPts,
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
        onPlayedOut: () => {
          this.closeMessage(output, true);
          this.finishWhenPlayed();
        },
      },
    );
    this.message = output;
    this.messages.push({ output, close, closed: false });
    output.open();
  }

  /** Closes a message that has played out (or was written): its part's closing events, then output_item.done. */
  private closeMessage(output: MessageOutput, complete: boolean, cutAtMs: number | null = null): void {
    const entry = this.messages.find((m) => m.output === output);
    if (!entry || entry.closed) return;
    entry.closed = true;
    output.close(complete, cutAtMs);
    output.item.status = complete ? 'completed' : 'incomplete';
    entry.close();
  }

  /** Ends the response once the model is done for good and every message has played out. */
  private finishWhenPlayed(): void {
    if (this.state !== 'running' || !this.ending || this.messages.some((m) => !m.closed)) return;
    this.finish(this.ending.status, this.ending.details);
  }

  private openCall(index: number, callId: string, name: string): void {
    if (this.calls.has(index)) return;
    const route = this.spec.mcp?.route(name) ?? null;
    const emit = (e: ServerEventDraft) => this.deps.emit(e);
    if (route?.approval) {
      this.calls.set(index, new McpApprovalOutput(route, (item) => this.addOutput(item)));
    } else if (route) {
      const call = new McpCallOutput(mcpCallItem(route), route, this.id, emit, (item) => this.addOutput(item));
      this.mcpCalls.push(call);
      this.calls.set(index, call);
    } else {
      const item = functionCallItem(callId, name);
      const { outputIndex, close } = this.addOutput(item);
      this.calls.set(index, new FunctionCallOutput(item, outputIndex, this.id, emit, close));
    }
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
        audioSeconds: this.messages.reduce((sum, m) => sum + m.output.samples, 0) / PCM_RATE_HZ,
        frames: this.messages.reduce((sum, m) => sum + m.output.frames, 0),
      });
    }
  }

  private sendClosingEvents(status: ResponseStatus, statusDetails: unknown): void {
    for (const m of this.messages) {
      if (m.closed) continue;
      this.closeMessage(m.output, status === 'completed', this.cut?.itemId === m.output.item.id ? this.cut.atMs : null);
    }
    for (const call of this.calls.values()) call.abandon();
    for (const call of this.mcpCalls) call.abandon();
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
