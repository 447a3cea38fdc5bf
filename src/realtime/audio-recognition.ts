/**
 * A session's voice input as one stage: audio in (a WebSocket client's appends, a call's
 * microphone), the user's turns out, with their transcripts. What it joins:
 *  - the input audio buffer a WebSocket client appends to and commits (at most
 *    MAX_INPUT_BUFFER_SAMPLES: 5 minutes, OpenAI's limit), and a call's microphone, which only
 *    feeds turn detection (with turn detection off it is dropped, so a call never grows a buffer
 *    nobody can commit);
 *  - turn detection: the VAD segmenter (speech-segmenter.ts) and, under semantic_vad, its judge
 *    (turn-judge.ts), which reads the melody and the words of each pause;
 *  - the pause's transcription: when the turn pauses (speech_paused) a local recogniser starts on
 *    the turn so far; if the turn ends in that same pause its result is the turn's transcript
 *    (the rest is silence), its deltas sent only then; if the user speaks on it is aborted, and
 *    nothing of it ever reaches the client. Never with a remote batch recogniser (it would be
 *    billed for work thrown away). A recogniser that streams (Transcriber.stream) is fed the turn
 *    as it is heard instead, from its start, and asked for the transcript so far at each pause.
 *    The pause's transcript goes to the reply side (`RecognitionDeps.pauseWords`), which may start
 *    the turn's reply on it and, under semantic_vad, reads it (the language model's probability
 *    that the message ends there); the judge reads the transcript and that reading;
 *  - the transcription of every user audio item (a VAD turn, a commit, an input_audio item):
 *    .delta*, .completed | .failed; responses wait for those in progress (`settled()`).
 * Events, in the vocabulary of LiveKit Agents' audio recognition: `speech_started` (a turn began:
 * its item id is chosen here and used again by its end and its commit), `speech_resumed` (speech
 * broke that pause: whatever started on it is stale), `turn_ended` (the turn's audio, and the
 * pause transcription it ended in, if any), `idle` (turn_detection.idle_timeout_ms passed in
 * silence after armIdle(): the user's turn timed out).
 *
 * Rules: times come from sample counts (the segmenter's), never from the wall clock; a turn's
 * audio is kept by the segmenter at 24 kHz and at the VAD's 16 kHz once, and every consumer (the
 * judge's audio model, the pause's and the turn's transcription) reads spans of it; the input
 * buffer keeps what was appended for a commit.
 */
import { EventEmitter } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from '../core/log.js';
import { AppError } from '../core/errors.js';
import type { VoiceActivityDetector } from '../providers/vad/base.js';
import type { EndOfTurnModel } from '../providers/turn/base.js';
import { audioSeconds, type SpeechRecognizers, type Transcriber, type TranscriptionResult, type TranscriptionStream } from '../providers/asr/base.js';
import { SpeechSegmenter } from './speech-segmenter.js';
import { TurnEndDetector, type PauseWords } from './turn-judge.js';
import type { MessageItem } from './items.js';
import type { TranscriptionSettings, TurnDetection } from './session-update.js';
import { RealtimeError, decodeBase64, decodePcm16, newItemId, type ServerEventDraft } from './protocol.js';
import { InputAudioDecoder, type WireAudioFormat } from '../audio/wire-format.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';

/** OpenAI refuses to commit less than this much audio. */
export const MIN_COMMIT_MS = 100;
/** The input buffer holds at most this much uncommitted audio (about 15 MiB, OpenAI's limit). */
const MAX_INPUT_BUFFER_SAMPLES = PCM_RATE_HZ * 60 * 5;
/** Audio the VAD hears between two turns of the event loop: one second (a few ms of work). */
const HEARD_SLICE_SAMPLES = PCM_RATE_HZ;

/** A pause's transcription of the turn so far, in case the turn ends in that pause. */
export interface PauseTranscription {
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
  /** What the judge reads: the transcript (null: none, or it failed), then the reply side's reading of it. */
  words: PauseWords;
}

/** A VAD turn that ended. */
export interface UserTurn {
  itemId: string;
  audioEndMs: number;
  /** The turn's speech with its prefix padding, PCM16 24 kHz, and the same at 16 kHz (or null). */
  audio: Int16Array;
  audio16k: Float32Array | null;
  endedBy: 'silence' | 'model';
  endOfTurnProbability: number | null;
  /** The transcription of the pause the turn ended in, with the same recogniser settings; else null. */
  transcription: PauseTranscription | null;
}

export interface RecognitionEvents {
  speech_started: [{ audioStartMs: number; itemId: string }];
  /** Speech broke pause `pause`: work started on it is stale. */
  speech_resumed: [{ pause: number }];
  turn_ended: [UserTurn];
  /** idle_timeout_ms passed with the user silent since armIdle(), `startMs` on the input clock then. */
  idle: [{ startMs: number; idleMs: number }];
}

export interface RecognitionDeps {
  createVad(): Promise<VoiceActivityDetector>;
  /** semantic_vad's audio model (shared by the process), or null when none is installed. */
  endOfTurnModel(): Promise<EndOfTurnModel | null>;
  asr: SpeechRecognizers;
  /**
   * The reply side hears the turn so far, transcribed in pause `pause`: the turn's reply may start
   * on it, and with `read` (semantic_vad) it resolves with the language model's probability that
   * the message ends after its last word, for the judge (null: not read, or no model reads it).
   * Once per pause transcript; the signal fires when the pause is stale.
   */
  pauseWords(pause: { itemId: string; pause: number; text: string; read: boolean; signal: AbortSignal }): Promise<number | null>;
  settings(): { turnDetection: TurnDetection | null; transcription: TranscriptionSettings; inputFormat: WireAudioFormat };
  /** Sends a transcription event of a user item. */
  emit(event: ServerEventDraft): void;
  log: Logger;
}

export class AudioRecognition extends EventEmitter<RecognitionEvents> {
  private segmenter: SpeechSegmenter | null = null;
  private vad: VoiceActivityDetector | null = null;
  private chunks: Int16Array[] = [];
  /** Set by close(): an append still being heard stops feeding the VAD. */
  private closed = false;
  /** The decoder of appended audio, for the input format it was made for. */
  private decoder: InputAudioDecoder | null = null;
  private samples = 0;
  /** Samples heard since the session started (appended or from the microphone): the input clock. */
  private heardSamples = 0;
  /** The item id announced by speech_started, used again by the turn's end and the commit. */
  private speechItemId: string | null = null;
  /** The transcription started in a pause of the current turn. */
  private pauseTranscription: PauseTranscription | null = null;
  /** The current turn heard by a streaming recogniser, from its start (see the header). */
  private turnStream: { stream: TranscriptionStream; transcriber: Transcriber } | null = null;
  private readonly transcriptions = new Set<Promise<void>>();
  /** The idle timeout running (armIdle()), or null. */
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: RecognitionDeps) {
    super();
  }

  /** Milliseconds of input audio heard so far (the time base of audio_start_ms / audio_end_ms). */
  get heardMs(): number {
    return Math.round((this.heardSamples * 1000) / PCM_RATE_HZ);
  }

  /** Whether the VAD hears the user speaking now. */
  get isSpeaking(): boolean {
    return this.segmenter?.isSpeaking ?? false;
  }

  /** Whether a transcription of a user item is in progress. */
  get transcribing(): boolean {
    return this.transcriptions.size > 0;
  }

  /** Resolves once every transcription of a user item in progress has ended. */
  async settled(): Promise<void> {
    if (this.transcriptions.size > 0) await Promise.allSettled([...this.transcriptions]);
  }

  /**
   * Starts turn_detection.idle_timeout_ms (none set: nothing): if the user says nothing for it,
   * `idle` is emitted. Speech, disarmIdle() (a new response), settings without it or close() stop it.
   */
  armIdle(): void {
    this.disarmIdle();
    const ms = this.deps.settings().turnDetection?.idleTimeoutMs;
    if (!ms || this.closed) return;
    const startMs = this.heardMs;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      this.emit('idle', { startMs, idleMs: ms });
    }, ms);
    this.idleTimer.unref?.();
  }

  disarmIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  /** Creates, reconfigures or removes turn detection (null: the client commits turns itself). */
  async configure(turnDetection: TurnDetection | null): Promise<void> {
    if (!turnDetection?.idleTimeoutMs) this.disarmIdle();
    if (turnDetection === null) {
      await this.segmenter?.close();
      this.segmenter = null;
      return;
    }
    if (this.segmenter) {
      this.segmenter.update(turnDetection.segmenter);
      return;
    }
    this.vad ??= await this.deps.createVad();
    const judge = new TurnEndDetector(await this.deps.endOfTurnModel(), (pause) => this.wordsOfPause(pause), (err) =>
      this.deps.log.warn('the end-of-turn audio model failed on a judgement (the turn goes on)', { err }),
    );
    const segmenter = new SpeechSegmenter(this.vad, turnDetection.segmenter, judge);
    segmenter.on('speech_started', (e) => {
      this.disarmIdle();
      this.speechItemId = newItemId();
      this.openTurnStream(segmenter);
      this.emit('speech_started', { audioStartMs: e.audioStartMs, itemId: this.speechItemId });
    });
    segmenter.on('speech_paused', (e) => {
      this.speechItemId ??= newItemId();
      this.transcribePause(this.speechItemId, e.pause, e.audio, e.audio16k);
    });
    segmenter.on('speech_resumed', (e) => {
      if (this.pauseTranscription?.pause === e.pause) this.dropPauseTranscription();
      this.emit('speech_resumed', e);
    });
    segmenter.on('speech_stopped', (e) => {
      const itemId = this.speechItemId ?? newItemId();
      this.speechItemId = null;
      this.resetBuffer();
      const transcription = this.takePauseTranscription(itemId, e.pause);
      this.closeTurnStream();
      this.emit('turn_ended', { itemId, audioEndMs: e.audioEndMs, audio: e.audio, audio16k: e.audio16k, endedBy: e.endedBy, endOfTurnProbability: e.endOfTurnProbability, transcription });
    });
    segmenter.on('error', (err) => this.deps.log.warn('turn detection failed on a frame (the turn goes on)', { err }));
    this.segmenter = segmenter;
  }

  /**
   * input_audio_buffer.append's base64 audio in the session's input format: decoded (one decoder
   * per input format, kept across appends: no clicks at their seams), then appended.
   */
  async appendEncoded(audio: string): Promise<void> {
    const format = this.deps.settings().inputFormat;
    const decoder = this.decoder?.format === format ? this.decoder : (this.decoder = new InputAudioDecoder(format));
    const pcm = await decodeInput(audio, 'audio', decoder);
    if (!this.closed) await this.append(pcm);
  }

  /** An item's base64 audio in the session's input format, as PCM16 24 kHz (its own decoder). */
  decodeItemAudio(audio: string, param: string): Promise<Int16Array> {
    return decodeInput(audio, param, new InputAudioDecoder(this.deps.settings().inputFormat));
  }

  /** input_audio_buffer.clear: clear(), and the appends' decoder starts afresh. */
  clearAppended(): void {
    this.clear();
    this.decoder?.reset();
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
      this.hear(pcm.subarray(at, at + HEARD_SLICE_SAMPLES));
    }
  }

  /** A call's microphone: heard by the VAD only (dropped with turn detection off). */
  pushMicrophone(pcm: Int16Array): void {
    if (this.closed) return;
    this.heardSamples += pcm.length;
    this.hear(pcm);
  }

  /** Audio for turn detection, and for the turn's stream when one is open (it has the turn up to the last push already). */
  private hear(pcm: Int16Array): void {
    this.segmenter?.push(pcm);
    this.turnStream?.stream.push(pcm);
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
    this.clear();
    return { itemId, pcm };
  }

  /** input_audio_buffer.clear (and a commit, a timeout): the buffer, the turn in progress and its pause's work are dropped. */
  clear(): void {
    this.resetBuffer();
    this.speechItemId = null;
    this.segmenter?.clear();
    this.dropPauseTranscription();
    this.closeTurnStream();
  }

  /**
   * Transcribes a user audio item (from its turn's pause transcription when it has one, falling
   * back to a fresh transcription if that failed) and sends its events, then calls `done` with
   * the transcript (null: it failed). `pcm16k`: the same audio at 16 kHz when the segmenter made
   * it (a VAD turn), else null.
   */
  transcribe(item: MessageItem, pcm: Int16Array, pcm16k: Float32Array | null, fromPause: PauseTranscription | null, done: (transcript: string | null) => void): void {
    const { deps } = this;
    const { transcription } = deps.settings();
    const recognizer = deps.asr.forModel(transcription.model, transcription.language);
    const sendDelta = (delta: string): void => deps.emit({ type: 'conversation.item.input_audio_transcription.delta', item_id: item.id, content_index: 0, delta });
    const job = (async () => {
      let transcript: string | null = null;
      try {
        let result: TranscriptionResult | null = null;
        if (fromPause) {
          result = await fromPause.result.catch(() => null);
          if (result) {
            for (const delta of fromPause.deltas) sendDelta(delta);
            result = { ...result, audioSeconds: audioSeconds(pcm) };
          }
        }
        result ??= await recognizer.transcribe({ pcm, ...(pcm16k ? { pcm16k } : {}), language: transcription.language ?? 'en', prompt: transcription.prompt }, sendDelta);
        transcript = result.text.trim();
        item.content = [{ type: 'input_audio', transcript }];
        deps.emit({
          type: 'conversation.item.input_audio_transcription.completed',
          item_id: item.id,
          content_index: 0,
          transcript,
          usage: transcriptionUsage(result.audioSeconds, transcript),
        });
      } catch (err) {
        const e = err instanceof AppError ? err : new RealtimeError('transcription_failed', 'Transcription failed.', null, 'server_error');
        deps.log.warn('transcription failed', { itemId: item.id, err });
        deps.emit({
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

  /** Stops hearing, aborts what is speculative and waits for transcriptions in progress. */
  async close(): Promise<void> {
    this.closed = true;
    this.disarmIdle();
    this.dropPauseTranscription();
    this.closeTurnStream();
    await this.segmenter?.close().catch(() => undefined);
    await this.vad?.close().catch(() => undefined);
    await Promise.allSettled([...this.transcriptions]);
  }

  /** A pause in the turn: transcribes the turn so far with the session's recogniser when it is local (see the header). */
  private transcribePause(itemId: string, pause: number, audio: Int16Array, audio16k: Float32Array | null): void {
    this.dropPauseTranscription();
    if (this.closed) return;
    const settings = this.deps.settings();
    const { model, language, prompt } = settings.transcription;
    const transcriber = this.deps.asr.forModel(model, language);
    const streamed = this.turnStream?.transcriber.id === transcriber.id ? this.turnStream.stream : null;
    if (!streamed && !transcriber.local) return;
    const deltas: string[] = [];
    const abort = new AbortController();
    // Speculative until the turn ends in this pause (it is then taken): confirmed turns of other sessions go first.
    const speculative = (): boolean => this.pauseTranscription === t;
    const result = streamed
      ? streamed.transcript((delta) => deltas.push(delta), abort.signal)
      : transcriber.transcribe(
          { pcm: audio, ...(audio16k ? { pcm16k: audio16k } : {}), language: language ?? 'en', prompt, signal: abort.signal, speculative },
          (delta) => deltas.push(delta),
        );
    // A failure (or the abort) is for whoever takes the result; to the judge the words are then unknown.
    const text = result.then((r) => r.text.trim() || null, () => null);
    const endProbability = text.then((words) => {
      if (words === null || this.pauseTranscription !== t) return null;
      const read = Boolean(settings.turnDetection?.segmenter.endOfTurn);
      return this.deps.pauseWords({ itemId, pause, text: words, read, signal: abort.signal }).catch((err: unknown) => {
        this.deps.log.warn('reading the words for the end of the turn failed', { err });
        return null;
      });
    });
    const t: PauseTranscription = { itemId, pause, transcriber, language, prompt, deltas, abort, result, words: { transcript: text, endProbability } };
    this.pauseTranscription = t;
  }

  /** At a turn's start: a stream for it when the session's recogniser streams, fed the turn so far. */
  private openTurnStream(segmenter: SpeechSegmenter): void {
    this.closeTurnStream();
    const { model, language, prompt } = this.deps.settings().transcription;
    const transcriber = this.deps.asr.forModel(model, language);
    if (!transcriber.stream) return;
    const stream = transcriber.stream({ language: language ?? 'en', prompt });
    stream.push(segmenter.turnAudio());
    this.turnStream = { stream, transcriber };
  }

  private closeTurnStream(): void {
    this.turnStream?.stream.close();
    this.turnStream = null;
  }

  /** The words of pause `pause`, for the judge: null when no transcription of that pause is running. */
  private wordsOfPause(pause: number): PauseWords | null {
    return this.pauseTranscription?.pause === pause ? this.pauseTranscription.words : null;
  }

  /** The pause transcription of the turn that ended in pause `pause`, if it is that turn's with the current settings; else it is dropped. */
  private takePauseTranscription(itemId: string, pause: number | null): PauseTranscription | null {
    const t = this.pauseTranscription;
    const s = this.deps.settings().transcription;
    const usable =
      t !== null && pause !== null && t.pause === pause && t.itemId === itemId &&
      t.transcriber.id === this.deps.asr.forModel(s.model, s.language).id && t.language === s.language && t.prompt === s.prompt;
    if (!usable) {
      this.dropPauseTranscription();
      return null;
    }
    this.pauseTranscription = null;
    return t;
  }

  private dropPauseTranscription(): void {
    this.pauseTranscription?.abort.abort();
    this.pauseTranscription = null;
  }

  private resetBuffer(): void {
    this.chunks = [];
    this.samples = 0;
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

/**
 * Base64 audio as PCM16 24 kHz: PCM checked as always, G.711 decoded and resampled by `decoder`
 * (whose state carries across the appends of one stream), yielding to the event loop between
 * seconds of audio (a large G.711 append is seconds of work).
 */
async function decodeInput(audio: string, param: string, decoder: InputAudioDecoder): Promise<Int16Array> {
  if (decoder.format.type === 'audio/pcm') return decodePcm16(audio, param);
  return decoder.decodeYielding(decodeBase64(audio, param));
}
