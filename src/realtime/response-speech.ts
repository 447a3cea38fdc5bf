/**
 * The spoken (or written) part of a response: the assistant message item a ResponseRun opens when
 * the model's first words arrive. For audio, the text goes sentence by sentence through the voice
 * to the avatar, and the played result streams back to the client as it plays:
 *
 *   model text ──▶ SentenceSplitter ──▶ Voice.speak (one sentence at a time) ──▶ AvatarOutput.pushSpeech
 *                                                                                    │ (one clock)
 *   client ◀── output_audio.delta / output_image.delta / transcript.delta ◀── onAudio / onFrame
 *
 * Audio deltas are the avatar's own played audio, cut to the message's speech span, so audio and
 * image deltas of the same tick carry the same pts: a client that plays them as they come is in
 * sync. A sentence's transcript delta is sent when its audio starts playing, which is also what
 * makes truncation exact: the transcript kept is what was heard. For text, the words go out as
 * output_text.delta as the model writes them.
 *
 * Its events, within the run's (response.ts): response.content_part.added → (output_audio.delta |
 * output_audio_transcript.delta | output_image.delta)* → output_audio.done →
 * output_audio_transcript.done → content_part.done → output_image.done; text messages use
 * output_text.delta/.done. On WebRTC (`audioDelivery: 'rtp'`) the audio goes out as RTP: no
 * output_audio.delta; instead output_audio_buffer.started comes with the first audio played and
 * output_audio_buffer.stopped (played out) or .cleared (cut) right before output_audio.done;
 * `'rtp+deltas'` sends the deltas as well (a Live call's observers hear the audio reflected).
 * Audio deltas are encoded in the session's output format (PCM16 24 kHz, or G.711 for telephony).
 */
import type { SpeechService, Voice } from '../providers/tts/base.js';
import type { AvatarAudioChunk, AvatarFrame, AvatarOutput } from './avatar-output.js';
import type { MessageItem } from './items.js';
import type { ServerEventDraft } from './protocol.js';
import { SentenceSplitter } from './sentences.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import type { OutputAudioEncoder } from '../audio/wire-format.js';

const NS_PER_SAMPLE = 1e9 / PCM_RATE_HZ;
const BYTES_PER_SAMPLE = 2;

/** The critical path of a response, ms since it started (response.ts logs it). */
/** Where a response's audio goes: events (WebSocket), RTP (a call), or both (a call whose audio is also reflected as events). */
export type AudioDelivery = 'deltas' | 'rtp' | 'rtp+deltas';

export interface ResponseTiming {
  firstTextMs: number | null;
  firstClauseMs: number | null;
  firstVoiceChunkMs: number | null;
  firstAudioMs: number | null;
}

export interface MessageOutputOptions {
  responseId: string;
  item: MessageItem;
  outputIndex: number;
  /** Spoken (audio) or written (text). */
  audio: boolean;
  /** Whether image deltas are sent. */
  images: boolean;
  /** 'deltas' (WebSocket events) or 'rtp' (a WebRTC call's track; output_audio_buffer.* events). */
  audioDelivery: AudioDelivery;
  /** Audio deltas carry `pts_ms` (a face the client draws times its frames by them). */
  audioPts: boolean;
  speed: number;
  /** Encodes audio deltas in the session's output format (WebSocket). */
  encoder: OutputAudioEncoder | null;
}

/** A response's voice: the speech service and what to ask it for. */
export interface VoiceSource {
  tts: Pick<SpeechService, 'voice'>;
  request: Parameters<SpeechService['voice']>[0];
}

export interface MessageOutputDeps {
  emit(event: ServerEventDraft): void;
  avatar: AvatarOutput;
  /** Where the voice comes from (audio messages only): resolved when the message opens. */
  voice: VoiceSource;
  signal: AbortSignal;
  mark(step: keyof ResponseTiming): void;
  /** The transcript so far, as it is heard (for the chat history in progress). */
  onProgress?: (text: string) => void;
  /** Usage as it is delivered: each tick's audio and each frame, right after its event. */
  addUsage(delta: { audioSecondsOut?: number; framesOut?: number }): void;
  /** The last sentence has played out. */
  onPlayedOut(): void;
}

interface Sentence {
  text: string;
  startPtsNs: number;
  endPtsNs: number;
  /** Whether its transcript delta was sent (its audio started playing). */
  announced: boolean;
}

export class MessageOutput {
  private readonly sentences: Sentence[] = [];
  private readonly splitter = new SentenceSplitter();
  private readonly speech: SpeechQueue | null;
  private text = '';
  private synthesisDone = false;
  private samplesSent = 0;
  /** The output pts up to which audio was sent. */
  private sentUpToNs = 0;
  private framesSent = 0;
  private closed = false;

  constructor(
    private readonly options: MessageOutputOptions,
    private readonly deps: MessageOutputDeps,
  ) {
    this.speech = options.audio ? new SpeechQueue(this, deps, options.speed) : null;
  }

  get item(): MessageItem {
    return this.options.item;
  }

  /** Everything the model wrote for this message. */
  get writtenText(): string {
    return this.text;
  }

  /** Samples of audio sent to the client so far. */
  get samples(): number {
    return this.samplesSent;
  }

  get frames(): number {
    return this.framesSent;
  }

  /** Milliseconds of this message's audio sent to the client so far. */
  get playedMs(): number {
    return Math.round((this.samplesSent * 1000) / PCM_RATE_HZ);
  }

  /** Sends content_part.added. */
  open(): void {
    this.deps.emit({
      type: 'response.content_part.added',
      ...this.partRef(),
      part: this.options.audio ? { type: 'audio', transcript: '' } : { type: 'text', text: '' },
    });
  }

  /** More of the model's text. */
  addText(text: string): void {
    this.text += text;
    if (this.speech) {
      for (const sentence of this.splitter.push(text)) {
        this.deps.mark('firstClauseMs');
        this.speech.add(sentence);
      }
    } else {
      this.deps.emit({ type: 'response.output_text.delta', ...this.partRef(), delta: text });
      this.deps.onProgress?.(this.text);
    }
  }

  /**
   * The model has written everything: the rest is spoken. Resolves once all of it is queued on
   * the avatar (rethrowing a synthesis failure); returns whether there is audio still to play
   * (onPlayedOut follows once it has).
   */
  async endOfText(): Promise<boolean> {
    if (!this.speech) return false;
    const rest = this.splitter.flush();
    if (rest !== '') {
      this.deps.mark('firstClauseMs');
      this.speech.add(rest);
    }
    await this.speech.drain();
    this.synthesisDone = true;
    return this.sentences.length > 0;
  }

  /** Audio the avatar played in one tick. */
  onAudio(chunk: AvatarAudioChunk): void {
    if (this.closed || !this.options.audio) return;
    const first = this.sentences[0];
    if (!first) return;
    const samples = chunk.data.length / BYTES_PER_SAMPLE;
    const chunkEnd = chunk.ptsNs + samples * NS_PER_SAMPLE;
    const from = Math.max(chunk.ptsNs, first.startPtsNs, this.sentUpToNs);
    const last = this.sentences.at(-1) as Sentence;
    const to = this.synthesisDone ? Math.min(chunkEnd, last.endPtsNs) : chunkEnd;
    if (to > from) {
      const a = Math.round((from - chunk.ptsNs) / NS_PER_SAMPLE);
      const b = Math.round((to - chunk.ptsNs) / NS_PER_SAMPLE);
      if (b > a) {
        if (this.samplesSent === 0) this.deps.mark('firstAudioMs');
        if (this.samplesSent === 0 && this.options.audioDelivery !== 'deltas') this.deps.emit({ type: 'output_audio_buffer.started', response_id: this.options.responseId });
        this.announceSentencesUpTo(to);
        if (this.options.audioDelivery !== 'rtp') {
          const pcm = chunk.data.subarray(a * BYTES_PER_SAMPLE, b * BYTES_PER_SAMPLE);
          const wire = this.options.encoder ? this.options.encoder.encode(pcm) : pcm;
          const pts = this.options.audioPts ? { pts_ms: Math.round(from / 1e6) } : {};
          if (wire.length > 0) this.deps.emit({ type: 'response.output_audio.delta', ...this.partRef(), delta: wire.toString('base64'), ...pts });
        }
        this.samplesSent += b - a;
        this.deps.addUsage({ audioSecondsOut: (b - a) / PCM_RATE_HZ });
      }
      this.sentUpToNs = to;
    }
    if (this.synthesisDone && this.sentUpToNs >= last.endPtsNs) this.deps.onPlayedOut();
  }

  /** A frame the avatar rendered. */
  onFrame(frame: AvatarFrame): void {
    if (this.closed || !this.options.images) return;
    this.deps.emit({
      type: 'response.output_image.delta',
      ...this.partRef(),
      delta: frame.data.toString('base64'),
      frame_index: this.framesSent,
      pts_ms: Math.round(frame.ptsNs / 1e6),
    });
    this.framesSent++;
    this.deps.addUsage({ framesOut: 1 });
  }

  /** Called by SpeechQueue for each synthesised chunk once it is queued on the avatar. */
  addSpeech(text: string | null, startPtsNs: number, endPtsNs: number): void {
    const current = this.sentences.at(-1);
    if (text === null && current) current.endPtsNs = Math.max(current.endPtsNs, endPtsNs);
    else this.sentences.push({ text: text ?? '', startPtsNs, endPtsNs, announced: false });
  }

  /**
   * The transcript as heard up to `audioEndMs` of this message's audio: whole sentences that
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

  /** After it has closed: the item keeps what was heard up to `audioEndMs` and is incomplete (a truncation). */
  cutTranscript(audioEndMs: number): void {
    this.options.item.content = [{ type: 'output_audio', transcript: this.transcriptAt(audioEndMs) }];
    this.options.item.status = 'incomplete';
  }

  /**
   * Closes the part: what was heard goes into the item (everything when `complete`, else up to
   * `cutAtMs` or what was played) and the part's closing events are sent. The item's own
   * output_item.done is the run's to send.
   */
  close(complete: boolean, cutAtMs: number | null): void {
    if (this.closed) return;
    this.closed = true;
    const { item } = this.options;
    if (this.options.audio) {
      if (this.options.audioDelivery !== 'deltas' && this.samplesSent > 0) {
        // WebRTC: the audio buffer played out, or was cut.
        const responseId = this.options.responseId;
        this.deps.emit(complete ? { type: 'output_audio_buffer.stopped', response_id: responseId } : { type: 'output_audio_buffer.cleared', response_id: responseId });
      }
      const transcript = complete ? this.sentences.map((s) => s.text).join(' ') : this.transcriptAt(cutAtMs ?? this.playedMs);
      item.content = [{ type: 'output_audio', transcript }];
      this.deps.emit({ type: 'response.output_audio.done', ...this.partRef() });
      this.deps.emit({ type: 'response.output_audio_transcript.done', ...this.partRef(), transcript });
      this.deps.emit({ type: 'response.content_part.done', ...this.partRef(), part: { type: 'audio', transcript } });
    } else {
      item.content = [{ type: 'output_text', text: this.text }];
      this.deps.emit({ type: 'response.output_text.done', ...this.partRef(), text: this.text });
      this.deps.emit({ type: 'response.content_part.done', ...this.partRef(), part: { type: 'text', text: this.text } });
    }
    if (this.options.images) this.deps.emit({ type: 'response.output_image.done', ...this.partRef(), total_frames: this.framesSent });
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

  private partRef() {
    return { response_id: this.options.responseId, item_id: this.options.item.id, output_index: this.options.outputIndex, content_index: 0 };
  }
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
    private readonly message: MessageOutput,
    private readonly deps: MessageOutputDeps,
    private readonly speed: number,
  ) {
    // Resolved while the model writes its first sentence, not after it.
    this.voice = this.deps.voice.tts.voice(this.deps.voice.request);
    this.voice.catch(() => undefined); // a failure surfaces when the first sentence is spoken
  }

  add(sentence: string): void {
    const voice = this.voice;
    const { signal } = this.deps;
    this.chain = this.chain.then(async () => {
      if (signal.aborted || this.failure !== null) return;
      try {
        let first = true;
        for await (const chunk of (await voice).speak(sentence, { speed: this.speed, signal })) {
          if (signal.aborted) return;
          if (chunk.pcm.length === 0) continue;
          const placed = this.deps.avatar.pushSpeech(chunk.pcm, chunk.sampleRateHz, chunk.phonemes);
          this.deps.mark('firstVoiceChunkMs');
          this.message.addSpeech(first ? sentence : null, placed.startPtsNs, placed.endPtsNs);
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
