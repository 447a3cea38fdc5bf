/**
 * OpenAI Realtime turn detection on top of a VoiceActivityDetector: `server_vad` (a fixed silence
 * ends the turn) and `semantic_vad` (an end-of-turn model decides after a short silence). push()
 * takes the realtime input format (PCM16 mono 24 kHz), resamples it to the detector's rate, cuts
 * fixed frames and scores them strictly in order through a queue (one detector call at a time,
 * since the detector's state for frame n+1 depends on frame n). Turn rules, per frame:
 *  - idle → speaking when probability ≥ threshold; `speech_started.audioStartMs` = start of that
 *    frame − prefixPaddingMs, clamped at 0 and at the end of the previous turn / the last clear();
 *  - while speaking, frames below (threshold − 0.15) (hysteresis) are silence; frames ≥ threshold
 *    restart the silence, frames in between neither count nor restart it;
 *  - once a silence has lasted PAUSE_MS (semantic_vad: `endOfTurn.pauseMs`; or the window, if
 *    shorter), `speech_paused` reports
 *    the audio so far, once per silence: the engine may start transcribing it before the turn is
 *    certain; speech that breaks that silence emits `speech_resumed` (the work is stale), and a
 *    turn that ends in it names it in `speech_stopped.pause`;
 *  - server_vad: the turn ends once the silence has lasted silenceDurationMs;
 *  - semantic_vad with a judge (turn-judge.ts): every scored frame of a silence in the turn is
 *    shown to the judge (`TurnEndJudge.onSilence`), which gathers its evidence (the melody, the
 *    words of the pause's transcript) as it comes and ends the turn when it is sure enough, at
 *    that frame or later through `SilenceFrame.requestEnd`. A later end takes effect at the
 *    latest scored frame, and only if the silence is still unbroken once every frame received by
 *    the time of the request has been scored (on a busy machine frames queue up, and speech in
 *    them makes the decision stale: the speaker had only paused). Otherwise the turn goes on, at
 *    most to silenceDurationMs, the ceiling, so a person who pauses mid-sentence is not cut off.
 *    Speech that breaks the silence, a clear() and the end of the turn tell the judge the
 *    silence is over (`onSilenceEnd`). Without a judge, `endOfTurn.fallbackSilenceMs` is the
 *    silence that ends the turn;
 *  - at the end, `speech_stopped.audioEndMs` is the end of the frame that ended the turn, and the
 *    event carries the committed audio [audioStartMs, audioEndMs) as 24 kHz PCM16.
 * A turn's audio at the detector's rate is made once: the resampler's output for the VAD is kept
 * beside the 24 kHz input (same retention, same clear()), and the judge's audio model (at the
 * detector's rate), speech_paused and speech_stopped (`audio16k`, for Whisper, when that rate is
 * 16 kHz) read spans of it instead of resampling the turn again each time.
 * All times are integer ms of the input stream derived from sample counts, never the wall clock
 * (the model's answer arrives in wall-clock time; the turn then ends at the last frame scored).
 * The resampler's ~1 ms group delay is below the 32 ms frame resolution and not compensated for
 * the frames; the kept spans are read that much later, so they line up with the 24 kHz spans
 * (their last ~1 ms, not resampled yet, is zeros: the end of a turn or a pause is silence).
 */
import { EventEmitter } from 'node:events';
import { VadError, type VoiceActivityDetector } from '../providers/vad/base.js';
import { Resampler } from '../audio/resample.js';
import { PCM_RATE_HZ, PCM_SAMPLES_PER_MS } from '../audio/pcm.js';
import { WHISPER_SAMPLE_RATE_HZ } from '../audio/whisper-mel.js';

/** Hysteresis: once speaking, a frame counts as silence only below threshold − this. (Silero's
 * own VADIterator uses the same 0.15 margin.) */
export const VAD_EXIT_MARGIN = 0.15;

/**
 * Silence after which `speech_paused` reports the turn so far (for speculative transcription).
 * Early enough that under server_vad's 500 ms the pause's transcript (Whisper base: 0.3-0.6 s here)
 * is ready about when the turn ends, so the early reply has started by then; a pause the speaker
 * breaks costs an aborted transcription (whisper.cpp stops between graph nodes).
 */
export const PAUSE_MS = 120;

/** semantic_vad's part of the turn rules (session-update.ts maps `eagerness` to it). */
export interface EndOfTurnConfig {
  /** Silence after which speech_paused reports the turn so far, in ms: the judge reads its transcript. */
  pauseMs: number;
  /** How sure the judge must be that the turn has ended (turn-judge.ts, `TurnPolicy`), 0..1. */
  confidence: number;
  /** Silence that ends the turn when there is no judge, in ms. */
  fallbackSilenceMs: number;
}

/** A scored frame of a silence in a turn, as the judge sees it (semantic_vad). */
export interface SilenceFrame {
  /** Counts the silences of the stream: frames of one silence share it. */
  run: number;
  /** Input ms at which the turn began (its prefix padding included) and this silence began (the first silent frame's start). */
  turnStartMs: number;
  silenceStartMs: number;
  /** End of this frame, and the silence so far (endMs − silenceStartMs). */
  endMs: number;
  silentMs: number;
  /** The speech_paused this silence emitted (its `pause`), or null while it has not. */
  pause: number | null;
  endOfTurn: EndOfTurnConfig;
  /** The turn's audio up to this frame's end, at most its last `windowMs`, mono float at `rateHz`. */
  audio(windowMs: number, rateHz: number): Float32Array;
  /**
   * Ends the turn later (see the header): at the latest scored frame, once every frame received
   * by now is scored, if this silence is still unbroken. `probability`: the judge's, for the event.
   */
  requestEnd(probability: number): void;
}

/** Decides, silence by silence, whether a semantic_vad turn has ended (turn-judge.ts). */
export interface TurnEndJudge {
  /** A scored frame of a silence: a probability to end the turn at this frame with, or null. */
  onSilence(frame: SilenceFrame): number | null;
  /** Silence `run` is over: speech broke it, the turn ended, or the stream was cleared or closed. */
  onSilenceEnd(run: number): void;
}

export interface SegmenterConfig {
  /** Probability at or above which a frame is speech (0..1). */
  threshold: number;
  /** Audio kept before the first speech frame, in ms. */
  prefixPaddingMs: number;
  /** Silence that ends a turn, in ms (with a model judging turns: the ceiling when it says "incomplete"). */
  silenceDurationMs: number;
  /** semantic_vad: the judge's part; null for server_vad. */
  endOfTurn: EndOfTurnConfig | null;
}

/** OpenAI's defaults for `server_vad`. */
export const DEFAULT_SEGMENTER_CONFIG: SegmenterConfig = { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null };

export interface SpeechStartedEvent {
  audioStartMs: number;
}

export interface SpeechPausedEvent {
  audioStartMs: number;
  /** End of the frame at which the silence reached PAUSE_MS. */
  pausedAtMs: number;
  /** Counts the pauses of the stream; the turn's speech_stopped names the pause it ended in. */
  pause: number;
  /** [audioStartMs, pausedAtMs) as PCM16 mono 24 kHz. */
  audio: Int16Array;
  /** The same span at 16 kHz (float, as Whisper takes it), or null when the detector's rate is not 16 kHz. */
  audio16k: Float32Array | null;
}

export interface SpeechStoppedEvent {
  audioStartMs: number;
  audioEndMs: number;
  /** End of the last frame at or above threshold (the speech proper, without the trailing silence). */
  lastSpeechEndMs: number;
  /** The committed span [audioStartMs, audioEndMs) as PCM16 mono 24 kHz. */
  audio: Int16Array;
  /** The same span at 16 kHz (float, as Whisper takes it), or null when the detector's rate is not 16 kHz. */
  audio16k: Float32Array | null;
  /** The speech_paused whose silence this turn ended in (no speech since), or null. */
  pause: number | null;
  /** What ended the turn: the silence window, or the judge. */
  endedBy: 'silence' | 'model';
  /** The judge's probability that the turn had ended, when the judge ended it. */
  endOfTurnProbability: number | null;
}

export interface SegmenterEvents {
  speech_started: [SpeechStartedEvent];
  speech_paused: [SpeechPausedEvent];
  /** Speech broke the silence of this pause: the turn goes on. */
  speech_resumed: [{ pause: number }];
  speech_stopped: [SpeechStoppedEvent];
  /** A frame the detector failed on; it is skipped (counted in failedFrames), the stream goes on. */
  error: [Error];
}

interface QueuedFrame {
  samples: Float32Array;
  startMs: number;
  endMs: number;
}

export class SpeechSegmenter extends EventEmitter<SegmenterEvents> {
  private config: SegmenterConfig;
  private readonly resampler: Resampler;
  private readonly frameSamples: number;
  private readonly detectorRateHz: number;

  // Stream clock (input samples at 24 kHz since creation) and the frame clock since the last clear.
  private inputSamples = 0;
  /** Input ms at which the detector-rate sample 0 lies (moves on clear()). */
  private originMs = 0;
  /** Detector-rate samples produced since the origin. */
  private detectorSamples = 0;
  private partial: Float32Array;
  private partialFill = 0;

  // Retained input audio: samples from absolute input index `audioStart` on.
  private audio: Int16Array = new Int16Array(PCM_RATE_HZ);
  private audioStart = 0;
  private audioFill = 0;
  // The same audio at the detector's rate, as the resampler made it: samples from index
  // `detectorAudioStart` (counted from the origin, like `detectorSamples`) on.
  private detectorAudio: Float32Array;
  private detectorAudioStart = 0;
  private detectorAudioFill = 0;
  /** The resampler's group delay in detector-rate samples: kept spans are read this much later. */
  private readonly delaySamples: number;

  // Frame queue; `generation` invalidates in-flight work on clear()/close().
  private readonly queue: QueuedFrame[] = [];
  private draining: Promise<void> | null = null;
  private generation = 0;
  private closed = false;

  // Turn state.
  private speaking = false;
  private startMs = 0;
  private lastSpeechEndMs = 0;
  private silenceStartMs: number | null = null;
  /** Counts silences (a new one starts when speech breaks the last): judgements and pauses name theirs. */
  private silenceRun = 0;
  /** The silence run a speech_paused was emitted for, and its number. */
  private pausedRun = -1;
  private pauses = 0;
  /** The silence run the judge was last shown (told of its end once). */
  private judgedRun = -1;
  /** Ends the judge asked for, waiting for the frames before them to be scored (close() waits for them). */
  private readonly judgements = new Set<Promise<void>>();
  /** Audio before this ms belongs to a committed turn or was cleared: prefix padding stops here. */
  private floorMs = 0;
  private processedMs = 0;
  /** End of the last frame queued for scoring (input ms). */
  private queuedUpToMs = 0;
  /** Ends requested by the judge, waiting for the frames received before the request to be scored. */
  private readonly scoredWaiters = new Set<{ ms: number; resolve: () => void }>();

  /** Frames the detector failed on (each also emitted as `error`). */
  failedFrames = 0;
  /** Frames scored. */
  framesProcessed = 0;

  constructor(
    private readonly detector: VoiceActivityDetector,
    config: Partial<SegmenterConfig> = {},
    /** Judges semantic_vad turns; null: they end on `endOfTurn.fallbackSilenceMs` of silence. */
    private readonly judge: TurnEndJudge | null = null,
  ) {
    super();
    this.config = checkConfig({ ...DEFAULT_SEGMENTER_CONFIG, ...config });
    this.detectorRateHz = detector.sampleRateHz;
    this.frameSamples = detector.frameSamples;
    this.resampler = new Resampler(PCM_RATE_HZ, this.detectorRateHz);
    this.delaySamples = Math.round((this.resampler.delayMs * this.detectorRateHz) / 1000);
    this.detectorAudio = new Float32Array(this.detectorRateHz);
    this.partial = new Float32Array(this.frameSamples);
  }

  get isSpeaking(): boolean {
    return this.speaking;
  }

  /** Input ms pushed so far. */
  get inputMs(): number {
    return Math.floor(this.inputSamples / PCM_SAMPLES_PER_MS);
  }

  /** Input ms up to which frames have been scored. */
  get processedUpToMs(): number {
    return this.processedMs;
  }

  get currentConfig(): SegmenterConfig {
    return { ...this.config };
  }

  /** The turn in progress as heard so far (its prefix padding included, up to the last sample pushed), PCM16 24 kHz; empty when none is. */
  turnAudio(): Int16Array {
    return this.speaking ? this.audioSpan(this.startMs, this.inputMs) : new Int16Array(0);
  }

  /** Changes the turn parameters; they apply from the next scored frame. */
  update(config: Partial<SegmenterConfig>): void {
    this.config = checkConfig({ ...this.config, ...config });
  }

  /** Appends realtime input audio (PCM16 mono 24 kHz). Scoring happens asynchronously, in order. */
  push(pcm24k: Int16Array): void {
    if (this.closed) throw new VadError('SpeechSegmenter: push() after close()');
    if (pcm24k.length === 0) return;
    this.storeAudio(pcm24k);
    this.inputSamples += pcm24k.length;
    const floats = new Float32Array(pcm24k.length);
    for (let i = 0; i < pcm24k.length; i++) floats[i] = (pcm24k[i] ?? 0) / 32768;
    const resampled = this.resampler.push(floats);
    this.storeDetectorAudio(resampled);
    let at = 0;
    while (at < resampled.length) {
      const n = Math.min(this.frameSamples - this.partialFill, resampled.length - at);
      this.partial.set(resampled.subarray(at, at + n), this.partialFill);
      this.partialFill += n;
      at += n;
      if (this.partialFill === this.frameSamples) {
        const startMs = this.originMs + Math.round((this.detectorSamples * 1000) / this.detectorRateHz);
        this.detectorSamples += this.frameSamples;
        const endMs = this.originMs + Math.round((this.detectorSamples * 1000) / this.detectorRateHz);
        this.queue.push({ samples: this.partial, startMs, endMs });
        this.queuedUpToMs = endMs;
        this.partial = new Float32Array(this.frameSamples);
        this.partialFill = 0;
      }
    }
    // Started on a later microtask so `draining` is set before drain() can finish (and clear it).
    if (this.queue.length > 0 && !this.draining) this.draining = Promise.resolve().then(() => this.drain());
  }

  /** Resolves once every frame pushed so far has been scored (and its events emitted). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /**
   * input_audio_buffer.clear: drops unscored frames and retained audio, resets the detector and
   * the turn state. The stream clock keeps running (OpenAI's ms count all audio of the session). A
   * turn in progress is abandoned without speech_stopped.
   */
  clear(): void {
    this.generation++;
    this.queue.length = 0;
    this.detector.reset();
    this.resampler.reset();
    this.partialFill = 0;
    this.originMs = this.inputMs;
    this.detectorSamples = 0;
    this.speaking = false;
    this.silenceStartMs = null;
    this.pausedRun = -1;
    this.endJudgedSilence();
    this.floorMs = this.originMs;
    this.processedMs = this.originMs;
    this.queuedUpToMs = this.originMs;
    this.wakeScored(true);
    this.audioStart = this.inputSamples;
    this.audioFill = 0;
    this.detectorAudioStart = 0;
    this.detectorAudioFill = 0;
  }

  /** Stops scoring, waits for an in-flight frame, and closes the detector (the segmenter owns it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.generation++;
    this.queue.length = 0;
    await this.idle();
    await Promise.allSettled([...this.judgements]);
    this.endJudgedSilence();
    await this.detector.close();
  }

  /** The single consumer of the queue. `draining` is cleared in the same tick as the loop sees the
   * queue empty, so a push() never finds a finished drain still marked as running. */
  private async drain(): Promise<void> {
    try {
      let frame: QueuedFrame | undefined;
      while ((frame = this.queue.shift())) {
        this.wakeScored(false); // the frames before this one are scored
        const generation = this.generation;
        let probability: number;
        try {
          probability = await this.detector.probability(frame.samples);
        } catch (err) {
          if (generation !== this.generation) continue;
          this.failedFrames++;
          this.processedMs = frame.endMs;
          this.emit('error', new VadError(`voice activity detection failed on frame ${frame.startMs}–${frame.endMs} ms`, { cause: err }));
          continue;
        }
        if (generation !== this.generation) continue; // cleared while in flight
        this.framesProcessed++;
        try {
          this.onFrame(probability, frame.startMs, frame.endMs);
        } catch (err) {
          // A bug in the turn rules must cost this turn, not the process (drain has no caller to
          // throw to): report it and start over from this frame.
          this.speaking = false;
          this.silenceStartMs = null;
          this.judgedRun = -1;
          this.floorMs = frame.endMs;
          this.emit('error', err instanceof Error ? err : new VadError(String(err)));
        }
      }
    } finally {
      this.draining = null;
      this.wakeScored(true); // nothing is left to score
    }
  }

  /** Resolves once the frames up to `ms` are scored (or nothing is left to score). */
  private scored(ms: number): Promise<void> {
    if (this.processedMs >= ms || !this.draining) return Promise.resolve();
    return new Promise((resolve) => this.scoredWaiters.add({ ms, resolve }));
  }

  private wakeScored(all: boolean): void {
    for (const w of this.scoredWaiters) {
      if (!all && w.ms > this.processedMs) continue;
      this.scoredWaiters.delete(w);
      w.resolve();
    }
  }

  private onFrame(probability: number, startMs: number, endMs: number): void {
    this.processedMs = endMs;
    const { threshold, prefixPaddingMs, silenceDurationMs } = this.config;
    if (!this.speaking) {
      if (probability >= threshold) {
        this.speaking = true;
        // Padding reaches back at most to the end of the previous turn / the last clear(), and to
        // the audio retained under the previous padding (if update() just made it longer).
        const retainedFromMs = Math.ceil(this.audioStart / PCM_SAMPLES_PER_MS);
        this.startMs = Math.max(this.floorMs, retainedFromMs, startMs - prefixPaddingMs, 0);
        this.lastSpeechEndMs = endMs;
        this.silenceStartMs = null;
        this.emit('speech_started', { audioStartMs: this.startMs });
      } else {
        this.trimAudio(Math.max(this.floorMs, endMs - prefixPaddingMs));
      }
      return;
    }
    if (probability >= threshold) {
      this.lastSpeechEndMs = endMs;
      if (this.silenceStartMs !== null) {
        this.endJudgedSilence();
        if (this.pausedRun === this.silenceRun) {
          this.pausedRun = -1;
          this.emit('speech_resumed', { pause: this.pauses });
        }
      }
      this.silenceStartMs = null;
    } else if (probability < threshold - VAD_EXIT_MARGIN && this.silenceStartMs === null) {
      this.silenceStartMs = startMs;
      this.silenceRun++;
    }
    if (this.silenceStartMs === null) return;
    const silentMs = endMs - this.silenceStartMs;
    const endOfTurn = this.config.endOfTurn;
    const limitMs = endOfTurn && !this.judge ? endOfTurn.fallbackSilenceMs : silenceDurationMs;
    const pauseMs = Math.min(endOfTurn && this.judge ? endOfTurn.pauseMs : PAUSE_MS, limitMs);
    if (this.pausedRun !== this.silenceRun && silentMs >= pauseMs) {
      this.pausedRun = this.silenceRun;
      this.pauses++;
      const audio = this.audioSpan(this.startMs, endMs);
      this.emit('speech_paused', { audioStartMs: this.startMs, pausedAtMs: endMs, pause: this.pauses, audio, audio16k: this.whisperSpan(this.startMs, audio.length) });
    }
    if (endOfTurn && this.judge) {
      const probability = this.judge.onSilence(this.silenceFrame(endOfTurn, endMs, silentMs));
      this.judgedRun = this.silenceRun;
      if (probability !== null) {
        this.endTurn(endMs, 'model', probability);
        return;
      }
    }
    if (silentMs >= limitMs) this.endTurn(endMs, 'silence', null);
  }

  /** Frame `endMs` of the current silence, for the judge (see SilenceFrame). */
  private silenceFrame(endOfTurn: EndOfTurnConfig, endMs: number, silentMs: number): SilenceFrame {
    const generation = this.generation;
    const run = this.silenceRun;
    const turnStartMs = this.startMs;
    return {
      run,
      turnStartMs,
      silenceStartMs: this.silenceStartMs ?? endMs,
      endMs,
      silentMs,
      pause: this.pausedRun === run ? this.pauses : null,
      endOfTurn,
      audio: (windowMs, rateHz) => {
        const fromMs = Math.max(turnStartMs, endMs - windowMs);
        const span = this.audioSpan(fromMs, endMs);
        return rateHz === this.detectorRateHz ? this.detectorSpan(fromMs, span.length) : toModelRate(span, rateHz);
      },
      requestEnd: (probability) => this.requestEnd(generation, run, probability),
    };
  }

  /** The judge's later end of silence `run` (SilenceFrame.requestEnd; see the header). */
  private requestEnd(generation: number, run: number, probability: number): void {
    const stale = () => generation !== this.generation || this.closed || !this.speaking || this.silenceRun !== run || this.silenceStartMs === null;
    if (stale()) return;
    // Audio received by now may not be scored yet (a busy machine: the detector's frames queue
    // up), and speech in it would make the decision stale: end only once it is scored.
    const ending = this.scored(this.queuedUpToMs).then(() => {
      if (!stale()) this.endTurn(this.processedMs, 'model', probability);
    });
    this.judgements.add(ending);
    void ending.finally(() => this.judgements.delete(ending));
  }

  /** Tells the judge that the silence it was shown last is over (once). */
  private endJudgedSilence(): void {
    if (this.judgedRun < 0) return;
    const run = this.judgedRun;
    this.judgedRun = -1;
    this.judge?.onSilenceEnd(run);
  }

  /** Ends the turn in progress at `endMs` (the end of a scored frame). */
  private endTurn(endMs: number, endedBy: SpeechStoppedEvent['endedBy'], endOfTurnProbability: number | null): void {
    const audioStartMs = this.startMs;
    const audio = this.audioSpan(audioStartMs, endMs);
    const audio16k = this.whisperSpan(audioStartMs, audio.length);
    const pause = this.pausedRun === this.silenceRun ? this.pauses : null;
    this.speaking = false;
    this.silenceStartMs = null;
    this.endJudgedSilence();
    this.floorMs = endMs;
    this.trimAudio(Math.max(this.floorMs, endMs - this.config.prefixPaddingMs));
    this.emit('speech_stopped', { audioStartMs, audioEndMs: endMs, lastSpeechEndMs: this.lastSpeechEndMs, audio, audio16k, pause, endedBy, endOfTurnProbability });
  }

  /** The kept detector-rate span for Whisper (16 kHz), or null when the detector hears at another rate. */
  private whisperSpan(startMs: number, samples24k: number): Float32Array | null {
    return this.detectorRateHz === WHISPER_SAMPLE_RATE_HZ ? this.detectorSpan(startMs, samples24k) : null;
  }

  /**
   * The kept detector-rate audio of the 24 kHz span of `samples24k` samples from `startMs`: as many
   * samples as resampling that span gives, read `delaySamples` later so they line up with it.
   */
  private detectorSpan(startMs: number, samples24k: number): Float32Array {
    const from = this.detectorIndex(startMs) + this.delaySamples - this.detectorAudioStart;
    if (from < 0) throw new VadError(`SpeechSegmenter: the detector-rate audio from ${startMs} ms is not retained`);
    const out = new Float32Array(Math.floor((samples24k * this.detectorRateHz) / PCM_RATE_HZ));
    out.set(this.detectorAudio.subarray(Math.min(from, this.detectorAudioFill), Math.min(from + out.length, this.detectorAudioFill)));
    return out;
  }

  /** The detector-rate sample index (from the origin) of input ms `ms`. */
  private detectorIndex(ms: number): number {
    return Math.round(((ms - this.originMs) * this.detectorRateHz) / 1000);
  }

  private storeDetectorAudio(samples: Float32Array): void {
    this.detectorAudio = appendTo(this.detectorAudio, this.detectorAudioFill, samples, (n) => new Float32Array(n));
    this.detectorAudioFill += samples.length;
  }

  private storeAudio(pcm: Int16Array): void {
    this.audio = appendTo(this.audio, this.audioFill, pcm, (n) => new Int16Array(n));
    this.audioFill += pcm.length;
  }

  /** Drops retained audio before `ms` (prefix padding for the next turn is kept by the caller's choice of ms). */
  private trimAudio(ms: number): void {
    const drop = Math.min(ms * PCM_SAMPLES_PER_MS - this.audioStart, this.audioFill);
    if (drop > 0) {
      this.audio.copyWithin(0, drop, this.audioFill);
      this.audioFill -= drop;
      this.audioStart += drop;
    }
    // Both buffers keep the same span: a later turn starts at or after `ms` in either.
    const dropDetector = Math.min(this.detectorIndex(ms) - this.detectorAudioStart, this.detectorAudioFill);
    if (dropDetector > 0) {
      this.detectorAudio.copyWithin(0, dropDetector, this.detectorAudioFill);
      this.detectorAudioFill -= dropDetector;
      this.detectorAudioStart += dropDetector;
    }
  }

  private audioSpan(startMs: number, endMs: number): Int16Array {
    const from = startMs * PCM_SAMPLES_PER_MS - this.audioStart;
    // The resampler's output count can run a few ms ahead of the input it has seen (its last
    // frame ends past the latest input sample): the committed audio ends where the input does.
    const to = Math.min(endMs * PCM_SAMPLES_PER_MS - this.audioStart, this.audioFill);
    if (from < 0 || to < from) {
      // Retention is sized by the turn rules above; a miss is a bug, not a condition to paper over.
      throw new VadError(`SpeechSegmenter: committed audio ${startMs}–${endMs} ms is not retained`);
    }
    return this.audio.slice(from, to);
  }
}

/** `buffer` with `samples` written at `fill`, grown first (at least doubled) when they do not fit. */
function appendTo<A extends Int16Array | Float32Array>(buffer: A, fill: number, samples: A, make: (length: number) => A): A {
  let out = buffer;
  if (fill + samples.length > buffer.length) {
    out = make(Math.max(buffer.length * 2, fill + samples.length));
    out.set(buffer.subarray(0, fill));
  }
  out.set(samples, fill);
  return out;
}

/** PCM16 at 24 kHz → float at the model's rate. */
function toModelRate(pcm: Int16Array, rateHz: number): Float32Array {
  const floats = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) floats[i] = (pcm[i] ?? 0) / 32768;
  return rateHz === PCM_RATE_HZ ? floats : new Resampler(PCM_RATE_HZ, rateHz).push(floats);
}

function checkConfig(config: SegmenterConfig): SegmenterConfig {
  const { threshold, prefixPaddingMs, silenceDurationMs, endOfTurn } = config;
  if (!(threshold >= 0 && threshold <= 1)) throw new VadError(`threshold must be within 0..1, got ${threshold}`);
  if (!Number.isInteger(prefixPaddingMs) || prefixPaddingMs < 0) {
    throw new VadError(`prefixPaddingMs must be a non-negative integer, got ${prefixPaddingMs}`);
  }
  if (!Number.isInteger(silenceDurationMs) || silenceDurationMs < 0) {
    throw new VadError(`silenceDurationMs must be a non-negative integer, got ${silenceDurationMs}`);
  }
  if (endOfTurn !== null) {
    for (const key of ['pauseMs', 'fallbackSilenceMs'] as const) {
      if (!Number.isInteger(endOfTurn[key]) || endOfTurn[key] < 0) throw new VadError(`endOfTurn.${key} must be a non-negative integer, got ${endOfTurn[key]}`);
    }
    if (!(endOfTurn.confidence > 0 && endOfTurn.confidence < 1)) throw new VadError(`endOfTurn.confidence must be within (0, 1), got ${endOfTurn.confidence}`);
  }
  return { threshold, prefixPaddingMs, silenceDurationMs, endOfTurn: endOfTurn && { ...endOfTurn } };
}
