/**
 * One response: the language model writes, the voice speaks it sentence by sentence through the
 * avatar, and the played result streams back to the client as it plays.
 *
 *   LLM text ──▶ SentenceSplitter ──▶ Voice.speak (one sentence at a time) ──▶ AvatarOutput.pushSpeech
 *                                                                                   │ (one clock)
 *   client ◀── output_audio.delta / output_image.delta / transcript.delta ◀── onAudio / onFrame
 *
 * Audio deltas are the avatar's own played audio, cut to the response's speech span, so audio and
 * image deltas of the same tick carry the same pts: a client that plays them as they come is in
 * sync. A sentence's transcript delta is sent when its audio starts playing, which is also what
 * makes truncation exact: the transcript kept is what was heard.
 *
 * Order of events (GA names; the connection renames them for the older dialect):
 *   response.created → response.output_item.added → conversation.item.added →
 *   response.content_part.added → (output_audio.delta | output_audio_transcript.delta |
 *   output_image.delta)* → output_audio.done → output_audio_transcript.done → content_part.done →
 *   output_image.done → output_item.done → conversation.item.done → response.done (always last).
 * Text responses use output_text.delta/.done in place of the audio and transcript events.
 * On WebRTC (`audioDelivery: 'rtp'`) the audio goes out as RTP: no output_audio.delta; instead
 * output_audio_buffer.started comes with the first audio played and output_audio_buffer.stopped
 * (played out) or .cleared (cut) right before output_audio.done.
 *
 * Ending: completed once the speech has played out; cancelled (client, barge-in, or a truncate of
 * its item while it plays) at once — the avatar is interrupted so audio and video stop on the next
 * frame; failed when a provider fails
 * (an `error` event is sent first). Either way every open part is closed and response.done comes.
 *
 * A run cannot be left half-started: every entry point (start, the generation task, the avatar's
 * audio and frame callbacks) is guarded, and anything thrown inside one fails the run (`error`
 * event naming the response.create that asked for it, then response.done with status failed).
 * `done` is emitted once whatever happens while the closing events are sent, so the engine always
 * learns that the run is over; `finished` is the run's own truth.
 *
 * Its critical path is logged when it ends ('response timing', info): ms from start() to the
 * model's first text, the first clause handed to the voice, the voice's first chunk queued on
 * the avatar, and the first audio played out to the client (`npm run bench -- realtime` reads it).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../core/log.js';
import type { ChatMessage, LanguageModel, TokenUsage } from '../providers/llm/base.js';
import type { Voice } from '../providers/tts/base.js';
import { AppError } from '../core/errors.js';
import { type AvatarAudioChunk, type AvatarFrame, type AvatarOutput } from './avatar-output.js';
import type { MessageItem } from './conversation.js';
import { type ServerEventDraft, errorEvent } from './protocol.js';
import { SentenceSplitter } from './sentences.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';

const NS_PER_SAMPLE = 1e9 / PCM_RATE_HZ;
const BYTES_PER_SAMPLE = 2;

export type ResponseStatus = 'completed' | 'cancelled' | 'failed' | 'incomplete';
export type CancelReason = 'client_cancelled' | 'turn_detected';

export interface ResponseSpec {
  id: string;
  /** Null for out-of-band responses (`conversation: "none"`). */
  conversationId: string | null;
  outputModalities: string[];
  /** Instructions first, then the context. */
  messages: ChatMessage[];
  maxOutputTokens: number | 'inf';
  /** Validated OpenAI metadata (string pairs), echoed in the response object. */
  metadata: Record<string, string> | null;
  /** The event_id of the response.create that asked for it (null for automatic responses): failures name it. */
  clientEventId: string | null;
  voiceName: string;
  speed: number;
  /** The assistant item this response fills (status in_progress, no content yet). */
  item: MessageItem;
  /** The item before it in the conversation (conversation responses only). */
  previousItemId: string | null;
  /** Whether image deltas are sent. */
  images: boolean;
  /**
   * How the audio reaches the client: 'deltas' (WebSocket: response.output_audio.delta events) or
   * 'rtp' (WebRTC: the avatar's audio goes out as RTP, so no deltas; output_audio_buffer.started /
   * stopped / cleared tell the client when it plays, as OpenAI's WebRTC does).
   */
  audioDelivery: 'deltas' | 'rtp';
}

export interface ResponseDeps {
  emit(event: ServerEventDraft): void;
  avatar: AvatarOutput;
  llm: LanguageModel;
  /** Resolves the voice (audio responses only). */
  voice: () => Promise<Voice>;
  log: Logger;
  /** The assistant's transcript so far, as it is heard (for the chat history in progress). */
  onProgress?: (text: string) => void;
}

export interface ResponseOutcome {
  status: ResponseStatus;
  item: MessageItem;
  usage: TokenUsage | null;
  /** Seconds of speech sent. */
  audioSeconds: number;
  frames: number;
}

/** ms from the response's start to each step of its critical path (null: not reached). */
export interface ResponseTiming {
  firstTextMs: number | null;
  firstClauseMs: number | null;
  firstVoiceChunkMs: number | null;
  firstAudioMs: number | null;
}

interface Sentence {
  text: string;
  startPtsNs: number;
  endPtsNs: number;
  /** Whether its transcript delta was sent (its audio started playing). */
  announced: boolean;
}

export class ResponseRun extends EventEmitter<{ done: [ResponseOutcome] }> {
  readonly id: string;
  private readonly spec: ResponseSpec;
  private readonly deps: ResponseDeps;
  private readonly abort = new AbortController();
  private readonly audioOut: boolean;
  private state: 'running' | 'finished' = 'running';

  private readonly sentences: Sentence[] = [];
  private synthesisDone = false;
  private text = '';
  private usage: TokenUsage | null = null;
  private finishReason: 'stop' | 'length' | 'aborted' = 'stop';
  /** Forwarded audio: samples sent, and the output pts up to which audio was sent. */
  private samplesSent = 0;
  private sentUpToNs = 0;
  private framesSent = 0;
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

  get itemId(): string {
    return this.spec.item.id;
  }

  get inConversation(): boolean {
    return this.spec.conversationId !== null;
  }

  get finished(): boolean {
    return this.state === 'finished';
  }

  /** Milliseconds of this response's audio sent to the client so far. */
  get playedMs(): number {
    return Math.round((this.samplesSent * 1000) / PCM_RATE_HZ);
  }

  /** Announces the response and starts generating; a failure on the way fails the run (never throws). */
  start(): void {
    this.startedAt = performance.now();
    this.guarded(() => {
      const { spec } = this;
      this.deps.emit({ type: 'response.created', response: this.responseObject('in_progress', null) });
      this.deps.emit({ type: 'response.output_item.added', response_id: this.id, output_index: 0, item: { ...spec.item, content: [] } });
      if (this.inConversation) {
        this.deps.emit({ type: 'conversation.item.added', previous_item_id: spec.previousItemId, item: { ...spec.item, content: [] } });
      }
      this.deps.emit({
        type: 'response.content_part.added',
        ...this.partRef(),
        part: this.audioOut ? { type: 'audio', transcript: '' } : { type: 'text', text: '' },
      });
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
   * conversation.item.truncate of this response while it runs (how the openai-agents SDK
   * interrupts): the audio stops now, the transcript kept is what was heard up to `audioEndMs`
   * (clamped to what was played), and the response ends cancelled. Returns the cut, in ms.
   */
  truncate(audioEndMs: number): number {
    this.cutAtMs = Math.min(audioEndMs, this.playedMs);
    this.cancel('client_cancelled');
    return this.cutAtMs;
  }

  /** Audio the avatar played in one tick. */
  onAudio(chunk: AvatarAudioChunk): void {
    this.guarded(() => this.forwardAudio(chunk));
  }

  /** A frame the avatar rendered. */
  onFrame(frame: AvatarFrame): void {
    this.guarded(() => this.forwardFrame(frame));
  }

  private forwardAudio(chunk: AvatarAudioChunk): void {
    if (this.state !== 'running' || !this.audioOut) return;
    const first = this.sentences[0];
    if (!first) return;
    const samples = chunk.pcm.length / BYTES_PER_SAMPLE;
    const chunkEnd = chunk.ptsNs + samples * NS_PER_SAMPLE;
    const from = Math.max(chunk.ptsNs, first.startPtsNs, this.sentUpToNs);
    const last = this.sentences.at(-1) as Sentence;
    const to = this.synthesisDone ? Math.min(chunkEnd, last.endPtsNs) : chunkEnd;
    if (to > from) {
      const a = Math.round((from - chunk.ptsNs) / NS_PER_SAMPLE);
      const b = Math.round((to - chunk.ptsNs) / NS_PER_SAMPLE);
      if (b > a) {
        if (this.samplesSent === 0) this.mark('firstAudioMs');
        if (this.samplesSent === 0 && this.spec.audioDelivery === 'rtp') this.deps.emit({ type: 'output_audio_buffer.started', response_id: this.id });
        this.announceSentencesUpTo(to);
        if (this.spec.audioDelivery === 'deltas') {
          const pcm = chunk.pcm.subarray(a * BYTES_PER_SAMPLE, b * BYTES_PER_SAMPLE);
          this.deps.emit({ type: 'response.output_audio.delta', ...this.partRef(), delta: pcm.toString('base64') });
        }
        this.samplesSent += b - a;
      }
      this.sentUpToNs = to;
    }
    if (this.synthesisDone && this.sentUpToNs >= last.endPtsNs) this.finish('completed', null);
  }

  private forwardFrame(frame: AvatarFrame): void {
    if (this.state !== 'running' || !this.spec.images) return;
    this.deps.emit({
      type: 'response.output_image.delta',
      ...this.partRef(),
      delta: frame.jpeg.toString('base64'),
      frame_index: this.framesSent,
      pts_ms: Math.round(frame.ptsNs / 1e6),
    });
    this.framesSent++;
  }

  /**
   * The transcript as heard up to `audioEndMs` of this response's audio: whole sentences that
   * ended by then, and the words of the sentence in progress in proportion to its elapsed time.
   */
  transcriptAt(audioEndMs: number): string {
    const first = this.sentences[0];
    if (!first) return '';
    const endNs = first.startPtsNs + audioEndMs * 1e6;
    const parts: string[] = [];
    for (const s of this.sentences) {
      if (s.endPtsNs <= endNs) parts.push(s.text);
      else if (s.startPtsNs < endNs) {
        const words = s.text.split(/\s+/);
        const keep = Math.floor((words.length * (endNs - s.startPtsNs)) / (s.endPtsNs - s.startPtsNs));
        if (keep > 0) parts.push(words.slice(0, keep).join(' '));
        break;
      } else break;
    }
    return parts.join(' ');
  }

  private async generate(): Promise<void> {
    try {
      const splitter = new SentenceSplitter();
      const speech = this.audioOut ? new SpeechQueue(this, this.deps, this.spec, this.abort.signal) : null;
      const stream = this.deps.llm.generate({
        messages: this.spec.messages,
        maxOutputTokens: this.spec.maxOutputTokens === 'inf' ? null : this.spec.maxOutputTokens,
        signal: this.abort.signal,
      });
      for await (const chunk of stream) {
        if (this.state !== 'running') break;
        if (chunk.type === 'text') {
          if (chunk.text === '') continue;
          this.mark('firstTextMs');
          this.text += chunk.text;
          if (speech) {
            for (const sentence of splitter.push(chunk.text)) {
              this.mark('firstClauseMs');
              speech.add(sentence);
            }
          } else {
            this.deps.emit({ type: 'response.output_text.delta', ...this.partRef(), delta: chunk.text });
            this.deps.onProgress?.(this.text);
          }
        } else {
          this.usage = chunk.usage;
          this.finishReason = chunk.finishReason;
        }
      }
      if (this.state !== 'running') return;
      if (!speech) {
        this.finish(this.finishReason === 'length' ? 'incomplete' : 'completed', this.finishReason === 'length' ? { type: 'incomplete', reason: 'max_output_tokens' } : null);
        return;
      }
      const rest = splitter.flush();
      if (rest !== '') {
        this.mark('firstClauseMs');
        speech.add(rest);
      }
      await speech.drain();
      if (this.state !== 'running') return;
      this.synthesisDone = true;
      if (this.sentences.length === 0) this.finish('completed', null);
      // Otherwise onAudio finishes the response once the last sentence has played.
    } catch (err) {
      this.fail(err);
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

  /** Called by SpeechQueue for each synthesised chunk once it is queued on the avatar. */
  addSpeech(text: string | null, startPtsNs: number, endPtsNs: number): void {
    const current = this.sentences.at(-1);
    if (text === null && current) current.endPtsNs = Math.max(current.endPtsNs, endPtsNs);
    else this.sentences.push({ text: text ?? '', startPtsNs, endPtsNs, announced: false });
  }

  private announceSentencesUpTo(ptsNs: number): void {
    for (const s of this.sentences) {
      if (s.announced) continue;
      if (s.startPtsNs >= ptsNs) break;
      const delta = this.heardTranscript() === '' ? s.text : ` ${s.text}`;
      s.announced = true;
      this.deps.emit({ type: 'response.output_audio_transcript.delta', ...this.partRef(), delta });
      this.deps.onProgress?.(this.heardTranscript());
    }
  }

  /** Sentences whose audio has started, joined: the transcript the client was sent. */
  private heardTranscript(): string {
    return this.sentences
      .filter((s) => s.announced)
      .map((s) => s.text)
      .join(' ');
  }

  /** Records the first time a step of the critical path happened. */
  mark(step: keyof ResponseTiming): void {
    this.timing[step] ??= Math.round(performance.now() - this.startedAt);
  }

  private finish(status: ResponseStatus, statusDetails: unknown): void {
    if (this.state !== 'running') return;
    this.state = 'finished';
    this.deps.log.info('response timing', { responseId: this.id, status, ...this.timing });
    const { spec } = this;
    const item = spec.item;
    try {
      this.sendClosingEvents(status, statusDetails);
    } catch (err) {
      // The run is over either way; the engine must hear so (it would otherwise keep it active).
      this.deps.log.error('closing events of a response failed', { responseId: this.id, err });
    } finally {
      this.emit('done', {
        status,
        item,
        usage: this.usage,
        audioSeconds: this.samplesSent / PCM_RATE_HZ,
        frames: this.framesSent,
      });
    }
  }

  private sendClosingEvents(status: ResponseStatus, statusDetails: unknown): void {
    const { spec } = this;
    const item = spec.item;
    if (this.audioOut && this.spec.audioDelivery === 'rtp' && this.samplesSent > 0) {
      // WebRTC: the audio buffer played out, or was cut.
      this.deps.emit({ type: status === 'completed' ? 'output_audio_buffer.stopped' : 'output_audio_buffer.cleared', response_id: this.id });
    }
    if (this.audioOut) {
      // What was heard: everything on completion, the played (or truncated) part otherwise.
      const transcript = status === 'completed' ? this.sentences.map((s) => s.text).join(' ') : this.transcriptAt(this.cutAtMs ?? this.playedMs);
      item.content = [{ type: 'output_audio', transcript }];
      this.deps.emit({ type: 'response.output_audio.done', ...this.partRef() });
      this.deps.emit({ type: 'response.output_audio_transcript.done', ...this.partRef(), transcript });
      this.deps.emit({ type: 'response.content_part.done', ...this.partRef(), part: { type: 'audio', transcript } });
    } else {
      item.content = [{ type: 'output_text', text: this.text }];
      this.deps.emit({ type: 'response.output_text.done', ...this.partRef(), text: this.text });
      this.deps.emit({ type: 'response.content_part.done', ...this.partRef(), part: { type: 'text', text: this.text } });
    }
    if (spec.images) this.deps.emit({ type: 'response.output_image.done', ...this.partRef(), total_frames: this.framesSent });
    item.status = status === 'completed' ? 'completed' : 'incomplete';
    this.deps.emit({ type: 'response.output_item.done', response_id: this.id, output_index: 0, item });
    if (this.inConversation) this.deps.emit({ type: 'conversation.item.done', previous_item_id: spec.previousItemId, item });
    this.deps.emit({ type: 'response.done', response: this.responseObject(status, statusDetails) });
  }

  private partRef() {
    return { response_id: this.id, item_id: this.spec.item.id, output_index: 0, content_index: 0 };
  }

  private responseObject(status: ResponseStatus | 'in_progress', statusDetails: unknown) {
    const { spec } = this;
    return {
      object: 'realtime.response',
      id: this.id,
      status,
      status_details: statusDetails,
      output: status === 'in_progress' ? [] : [spec.item],
      conversation_id: spec.conversationId,
      output_modalities: spec.outputModalities.filter((m) => m === 'audio' || m === 'text'),
      max_output_tokens: spec.maxOutputTokens,
      audio: { output: { format: { type: 'audio/pcm', rate: PCM_RATE_HZ }, voice: spec.voiceName } },
      usage: status === 'in_progress' ? null : usageObject(this.usage),
      metadata: spec.metadata,
    };
  }
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

/**
 * Speaks sentences one at a time, in order, while the model keeps writing: each sentence's chunks
 * are queued on the avatar as they are synthesised, so speech starts after the first sentence.
 */
class SpeechQueue {
  private chain: Promise<void> = Promise.resolve();
  private readonly voice: Promise<Voice>;
  private failure: unknown = null;

  constructor(
    private readonly run: ResponseRun,
    private readonly deps: ResponseDeps,
    private readonly spec: ResponseSpec,
    private readonly signal: AbortSignal,
  ) {
    // Resolved while the model writes its first sentence, not after it.
    this.voice = this.deps.voice();
    this.voice.catch(() => undefined); // a failure surfaces when the first sentence is spoken
  }

  add(sentence: string): void {
    const voice = this.voice;
    this.chain = this.chain.then(async () => {
      if (this.signal.aborted || this.failure !== null) return;
      try {
        let first = true;
        for await (const chunk of (await voice).speak(sentence, { speed: this.spec.speed, signal: this.signal })) {
          if (this.signal.aborted) return;
          if (chunk.pcm.length === 0) continue;
          const placed = this.deps.avatar.pushSpeech(chunk.pcm, chunk.sampleRateHz, chunk.phonemes);
          this.run.mark('firstVoiceChunkMs');
          this.run.addSpeech(first ? sentence : null, placed.startPtsNs, placed.endPtsNs);
          first = false;
        }
      } catch (err) {
        this.failure = err;
      }
    });
  }

  /** Resolves when every sentence added so far is queued on the avatar; rethrows a synthesis failure. */
  async drain(): Promise<void> {
    await this.chain;
    if (this.failure !== null) throw this.failure;
  }
}
