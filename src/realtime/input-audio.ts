/**
 * The input side of a session: the input audio buffer a WebSocket client appends to and commits,
 * the microphone of a WebRTC call, and server-VAD turns over either. It keeps the audio and the
 * turn state; the engine turns what it reports into events and user items.
 *
 * Rules:
 *  - appended audio is buffered (at most MAX_INPUT_BUFFER_SAMPLES: 5 minutes, OpenAI's limit) until
 *    a commit or clear, and goes through the VAD when turn detection is on;
 *  - microphone audio only goes through the VAD: with turn detection off it is dropped, so a call
 *    never grows a buffer nobody can commit (input_audio_buffer events are WebSocket-only);
 *  - a turn's item id is chosen at speech start and used again by speech stop and the commit;
 *  - times come from sample counts (SpeechSegmenter), never from the wall clock.
 */
import { EventEmitter } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from '../core/log.js';
import type { VoiceActivityDetector } from '../providers/vad/base.js';
import type { EndOfTurnModel } from '../providers/turn/base.js';
import { SpeechSegmenter } from './speech-segmenter.js';
import type { TurnDetection } from './session-update.js';
import { RealtimeError, newItemId } from './protocol.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';

/** OpenAI refuses to commit less than this much audio. */
export const MIN_COMMIT_MS = 100;
/** The input buffer holds at most this much uncommitted audio (about 15 MiB, OpenAI's limit). */
const MAX_INPUT_BUFFER_SAMPLES = PCM_RATE_HZ * 60 * 5;
/** Audio the VAD hears between two turns of the event loop: one second (a few ms of work). */
const HEARD_SLICE_SAMPLES = PCM_RATE_HZ;

export interface InputAudioEvents {
  speech_started: [{ audioStartMs: number; itemId: string }];
  /** A pause in the turn: `audio` is the turn so far (`audio16k` the same at 16 kHz, or null); the turn may end in this pause (see `pause`). */
  speech_paused: [{ itemId: string; pause: number; audio: Int16Array; audio16k: Float32Array | null }];
  /** Speech broke that pause: work started on it is stale. */
  speech_resumed: [{ pause: number }];
  /** The turn ended; `audio` is the turn's speech (with its prefix padding; `audio16k` the same at 16 kHz, or null), `pause` the speech_paused it ended in. */
  speech_stopped: [SpeechStopped];
}

/** A VAD turn that ended, as the engine gets it. */
export interface SpeechStopped {
  audioEndMs: number;
  itemId: string;
  audio: Int16Array;
  audio16k: Float32Array | null;
  pause: number | null;
  endedBy: 'silence' | 'model';
  endOfTurnProbability: number | null;
}

export class InputAudio extends EventEmitter<InputAudioEvents> {
  private segmenter: SpeechSegmenter | null = null;
  private vad: VoiceActivityDetector | null = null;
  private chunks: Int16Array[] = [];
  /** Set by close(): an append still being heard stops feeding the VAD. */
  private closed = false;
  private samples = 0;
  /** Samples heard since the session started (appended or from the microphone): the input clock. */
  private heardSamples = 0;
  /** The item id announced by speech_started, used again by speech_stopped and the commit. */
  private speechItemId: string | null = null;

  constructor(
    private readonly createVad: () => Promise<VoiceActivityDetector>,
    /** semantic_vad's judge (shared by the process); resolves to null when no model is installed. */
    private readonly endOfTurnModel: () => Promise<EndOfTurnModel | null>,
    private readonly log: Logger,
  ) {
    super();
  }

  /** Milliseconds of input audio heard so far (the time base of audio_start_ms / audio_end_ms). */
  get heardMs(): number {
    return Math.round((this.heardSamples * 1000) / PCM_RATE_HZ);
  }

  /** Milliseconds of audio in the input buffer (not yet committed). */
  get bufferedMs(): number {
    return (this.samples * 1000) / PCM_RATE_HZ;
  }

  /** Whether the VAD hears the user speaking now. */
  get isSpeaking(): boolean {
    return this.segmenter?.isSpeaking ?? false;
  }

  /** Creates, reconfigures or removes the VAD segmenter (null: the client commits turns itself). */
  async configure(turnDetection: TurnDetection | null): Promise<void> {
    if (turnDetection === null) {
      await this.segmenter?.close();
      this.segmenter = null;
      return;
    }
    if (this.segmenter) {
      this.segmenter.update(turnDetection.segmenter);
      return;
    }
    this.vad ??= await this.createVad();
    const segmenter = new SpeechSegmenter(this.vad, turnDetection.segmenter, await this.endOfTurnModel());
    segmenter.on('speech_started', (e) => {
      this.speechItemId = newItemId();
      this.emit('speech_started', { audioStartMs: e.audioStartMs, itemId: this.speechItemId });
    });
    segmenter.on('speech_paused', (e) => {
      this.speechItemId ??= newItemId();
      this.emit('speech_paused', { itemId: this.speechItemId, pause: e.pause, audio: e.audio, audio16k: e.audio16k });
    });
    segmenter.on('speech_resumed', (e) => this.emit('speech_resumed', e));
    segmenter.on('speech_stopped', (e) => {
      const itemId = this.speechItemId ?? newItemId();
      this.speechItemId = null;
      this.resetBuffer();
      const { audioEndMs, audio, audio16k, pause, endedBy, endOfTurnProbability } = e;
      this.emit('speech_stopped', { audioEndMs, itemId, audio, audio16k, pause, endedBy, endOfTurnProbability });
    });
    segmenter.on('error', (err) => this.log.warn('turn detection failed on a frame or a judgement (the turn goes on)', { err }));
    this.segmenter = segmenter;
  }

  /**
   * input_audio_buffer.append: buffered whole (or refused whole when the buffer cannot take it),
   * and heard by the VAD a second at a time, the event loop running between seconds: the largest
   * event a client may send is minutes of audio, and the VAD's resampling and inference over it
   * seconds of work. Resolves once the VAD has heard all of it.
   */
  async append(pcm: Int16Array): Promise<void> {
    if (this.samples + pcm.length > MAX_INPUT_BUFFER_SAMPLES) {
      throw new RealtimeError('input_audio_buffer_full', 'The input audio buffer is full (5 minutes); commit or clear it.', 'audio');
    }
    this.chunks.push(pcm);
    this.samples += pcm.length;
    this.heardSamples += pcm.length;
    for (let at = 0; at < pcm.length; at += HEARD_SLICE_SAMPLES) {
      if (at > 0) await nextTurn();
      if (this.closed) return;
      this.segmenter?.push(pcm.subarray(at, at + HEARD_SLICE_SAMPLES));
    }
  }

  /** A call's microphone: heard by the VAD only (dropped with turn detection off). */
  pushMicrophone(pcm: Int16Array): void {
    this.heardSamples += pcm.length;
    this.segmenter?.push(pcm);
  }

  /** input_audio_buffer.commit: the buffered audio and the item id it becomes; the buffer empties. */
  commit(): { itemId: string; pcm: Int16Array } {
    const ms = (this.samples * 1000) / PCM_RATE_HZ;
    if (ms < MIN_COMMIT_MS) {
      throw new RealtimeError(
        'input_audio_buffer_commit_empty',
        `Error committing input audio buffer: buffer too small. Expected at least ${MIN_COMMIT_MS}ms of audio, but buffer only has ${ms.toFixed(2)}ms of audio.`,
      );
    }
    const pcm = new Int16Array(this.samples);
    let at = 0;
    for (const c of this.chunks) {
      pcm.set(c, at);
      at += c.length;
    }
    const itemId = this.speechItemId ?? newItemId();
    this.speechItemId = null;
    this.resetBuffer();
    this.segmenter?.clear();
    return { itemId, pcm };
  }

  /** input_audio_buffer.clear. */
  clear(): void {
    this.resetBuffer();
    this.speechItemId = null;
    this.segmenter?.clear();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.segmenter?.close().catch(() => undefined);
    await this.vad?.close().catch(() => undefined);
  }

  private resetBuffer(): void {
    this.chunks = [];
    this.samples = 0;
  }
}
