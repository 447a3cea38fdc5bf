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
 *  - once a silence has lasted PAUSE_MS (or the window, or half the model's candidate silence
 *    with semantic_vad, if shorter), `speech_paused` reports
 *    the audio so far, once per silence: the engine may start transcribing it before the turn is
 *    certain; speech that breaks that silence emits `speech_resumed` (the work is stale), and a
 *    turn that ends in it names it in `speech_stopped.pause`;
 *  - server_vad: the turn ends once the silence has lasted silenceDurationMs;
 *  - semantic_vad with a model: once the silence has lasted `endOfTurn.candidateSilenceMs` the
 *    model judges the turn so far (asynchronously; frames go on being scored), and again at 4 and
 *    8 times that silence (JUDGEMENTS), each time with a lower bar: the longer someone has been
 *    quiet, the less sure the model needs to be. The judgement at 4× is the first verdict held to
 *    the lower bar (the model is not asked again): it hears the turn up to the candidate silence,
 *    not the longer silence since. Smart Turn hears a long trailing silence as an end whatever was
 *    said (on flite's "Can you tell me about the | history of Rome?" with a 600 ms pause its
 *    probability rises from 0.01 at 160 ms of silence to 0.79 at 460 and 0.92 at 580 ms), so a
 *    model that heard the growing silence would count it twice, once in its verdict and once in
 *    the falling bar, and end pauses of about half a second mid-sentence. Only the last judgement,
 *    at 8×, hears the whole silence: past a second of it, silence is itself evidence that the
 *    speaker is done. A verdict over the bar ends the turn at the
 *    latest scored frame, if the silence is still unbroken once every frame received by the time
 *    the verdict came has been scored (on a busy machine frames queue up, and speech in them makes
 *    the verdict stale: the speaker had only paused); otherwise (or if the
 *    judgement failed) the turn goes on, at most to silenceDurationMs, the ceiling, so a person
 *    who pauses mid-sentence is not cut off. Without a model, `endOfTurn.fallbackSilenceMs` is the
 *    silence that ends the turn;
 *  - at the end, `speech_stopped.audioEndMs` is the end of the frame that ended the turn, and the
 *    event carries the committed audio [audioStartMs, audioEndMs) as 24 kHz PCM16.
 * A turn's audio at the detector's rate is made once: the resampler's output for the VAD is kept
 * beside the 24 kHz input (same retention, same clear()), and the end-of-turn model (at the
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
import { END_OF_TURN_THRESHOLD, type EndOfTurnModel } from '../providers/turn/base.js';
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

/**
 * semantic_vad: when the end-of-turn model is asked (silence, in multiples of the candidate
 * silence) and the probability of "complete" that then ends the turn.
 */
export const JUDGEMENTS: ReadonlyArray<{ afterCandidates: number; threshold: number; hears: 'candidate' | 'whole' }> = [
  { afterCandidates: 1, threshold: END_OF_TURN_THRESHOLD, hears: 'candidate' },
  { afterCandidates: 4, threshold: 0.3, hears: 'candidate' },
  { afterCandidates: 8, threshold: 0.15, hears: 'whole' },
];

export interface EndOfTurnConfig {
  /** Silence after which the end-of-turn model judges the turn, in ms. */
  candidateSilenceMs: number;
  /** Silence that ends the turn when no model is installed, in ms. */
  fallbackSilenceMs: number;
}

export interface SegmenterConfig {
  /** Probability at or above which a frame is speech (0..1). */
  threshold: number;
  /** Audio kept before the first speech frame, in ms. */
  prefixPaddingMs: number;
  /** Silence that ends a turn, in ms (with a model judging turns: the ceiling when it says "incomplete"). */
  silenceDurationMs: number;
  /** semantic_vad: the model's part; null for server_vad. */
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
  /** What ended the turn: the silence window, or the end-of-turn model. */
  endedBy: 'silence' | 'model';
  /** The model's last judgement of this turn (probability complete), when it gave one. */
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
  /** The silence run the model was asked about, and how many times (an index into JUDGEMENTS). */
  private judgedRun = -1;
  private judgedTimes = 0;
  /** The model's answer about the current silence's candidate point (asked once, see JUDGEMENTS). */
  private verdict: { generation: number; run: number; atMs: number; probability: Promise<number> } | null = null;
  /** End of the frame at which the current silence reached the candidate silence. */
  private candidateAtMs = 0;
  private endOfTurnProbability: number | null = null;
  /** Judgements in flight (close() waits for them). */
  private readonly judgements = new Set<Promise<void>>();
  /** Audio before this ms belongs to a committed turn or was cleared: prefix padding stops here. */
  private floorMs = 0;
  private processedMs = 0;
  /** End of the last frame queued for scoring (input ms). */
  private queuedUpToMs = 0;
  /** Judgements waiting for the frames received before their verdict to be scored. */
  private readonly scoredWaiters = new Set<{ ms: number; resolve: () => void }>();

  /** Frames the detector failed on (each also emitted as `error`). */
  failedFrames = 0;
  /** Frames scored. */
  framesProcessed = 0;

  /** Judgements the end-of-turn model failed (each also emitted as `error`). */
  failedJudgements = 0;

  constructor(
    private readonly detector: VoiceActivityDetector,
    config: Partial<SegmenterConfig> = {},
    /** Judges semantic_vad turns; null: they end on `endOfTurn.fallbackSilenceMs` of silence. */
    private readonly turnModel: EndOfTurnModel | null = null,
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
    this.judgedRun = -1;
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
      if (this.silenceStartMs !== null && this.pausedRun === this.silenceRun) {
        this.pausedRun = -1;
        this.emit('speech_resumed', { pause: this.pauses });
      }
      this.silenceStartMs = null;
    } else if (probability < threshold - VAD_EXIT_MARGIN && this.silenceStartMs === null) {
      this.silenceStartMs = startMs;
      this.silenceRun++;
    }
    if (this.silenceStartMs === null) return;
    const silentMs = endMs - this.silenceStartMs;
    const endOfTurn = this.config.endOfTurn;
    const limitMs = endOfTurn && !this.turnModel ? endOfTurn.fallbackSilenceMs : silenceDurationMs;
    // semantic_vad's judge reads the pause's transcript, which is on its critical path: the pause
    // comes at half the candidate silence, so the transcript is about ready when the model answers.
    const pauseMs = Math.min(PAUSE_MS, limitMs, endOfTurn && this.turnModel ? Math.round(endOfTurn.candidateSilenceMs / 2) : PAUSE_MS);
    if (this.pausedRun !== this.silenceRun && silentMs >= pauseMs) {
      this.pausedRun = this.silenceRun;
      this.pauses++;
      const audio = this.audioSpan(this.startMs, endMs);
      this.emit('speech_paused', { audioStartMs: this.startMs, pausedAtMs: endMs, pause: this.pauses, audio, audio16k: this.whisperSpan(this.startMs, audio.length) });
    }
    if (endOfTurn && this.turnModel) {
      if (this.judgedRun !== this.silenceRun) {
        this.judgedRun = this.silenceRun;
        this.judgedTimes = 0;
        this.endOfTurnProbability = null;
      }
      const next = JUDGEMENTS[this.judgedTimes];
      if (next && silentMs >= next.afterCandidates * endOfTurn.candidateSilenceMs) {
        if (this.judgedTimes === 0) this.candidateAtMs = endMs;
        this.judgedTimes++;
        this.judge(this.turnModel, next.hears === 'whole' ? endMs : this.candidateAtMs, next.threshold);
      }
    }
    if (silentMs >= limitMs) this.endTurn(endMs, 'silence');
  }

  /** Ends the turn in progress at `endMs` (the end of a scored frame). */
  private endTurn(endMs: number, endedBy: SpeechStoppedEvent['endedBy']): void {
    const audioStartMs = this.startMs;
    const audio = this.audioSpan(audioStartMs, endMs);
    const audio16k = this.whisperSpan(audioStartMs, audio.length);
    const pause = this.pausedRun === this.silenceRun ? this.pauses : null;
    const endOfTurnProbability = this.judgedRun === this.silenceRun ? this.endOfTurnProbability : null;
    this.speaking = false;
    this.silenceStartMs = null;
    this.endOfTurnProbability = null;
    this.floorMs = endMs;
    this.trimAudio(Math.max(this.floorMs, endMs - this.config.prefixPaddingMs));
    this.emit('speech_stopped', { audioStartMs, audioEndMs: endMs, lastSpeechEndMs: this.lastSpeechEndMs, audio, audio16k, pause, endedBy, endOfTurnProbability });
  }

  /**
   * Judges the turn so far [startMs, atMs): the model's answer (asked once per span of one
   * silence; a failed answer is asked again) ends the turn if it reaches `threshold` and still
   * applies: same stream generation, still speaking, and the same unbroken silence.
   */
  private judge(model: EndOfTurnModel, atMs: number, threshold: number): void {
    const generation = this.generation;
    const run = this.silenceRun;
    const cached = this.verdict;
    const reused = cached !== null && cached.generation === generation && cached.run === run && cached.atMs === atMs;
    const asked = reused ? cached : { generation, run, atMs, probability: this.ask(model, atMs) };
    this.verdict = asked;
    const judgement = (async () => {
      let probability: number;
      try {
        probability = await asked.probability;
      } catch (err) {
        if (this.verdict === asked) this.verdict = null; // the next judgement asks again
        if (reused || generation !== this.generation) return; // reported once, by whoever asked
        this.failedJudgements++;
        this.emit('error', err instanceof Error ? err : new VadError(String(err)));
        return;
      }
      const stale = () => generation !== this.generation || this.closed || !this.speaking || this.silenceRun !== run || this.silenceStartMs === null;
      if (stale()) return;
      this.endOfTurnProbability = probability;
      if (probability < threshold) return;
      // The verdict is about the audio up to atMs. Audio received since may not be scored yet (a
      // busy machine: the detector's frames queue up), and speech in it would make the verdict
      // stale: decide only once every frame received by now has been scored.
      await this.scored(this.queuedUpToMs);
      if (!stale()) this.endTurn(this.processedMs, 'model');
    })();
    this.judgements.add(judgement);
    void judgement.finally(() => this.judgements.delete(judgement));
  }

  /**
   * The model's probability that the turn [startMs, atMs) is complete (the audio is taken now: the
   * span kept at the detector's rate when the model hears at that rate, else resampled).
   */
  private async ask(model: EndOfTurnModel, atMs: number): Promise<number> {
    const fromMs = Math.max(this.startMs, atMs - model.windowMs);
    const span = this.audioSpan(fromMs, atMs);
    const audio = model.sampleRateHz === this.detectorRateHz ? this.detectorSpan(fromMs, span.length) : toModelRate(span, model.sampleRateHz);
    return model.completeProbability(audio);
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
    for (const key of ['candidateSilenceMs', 'fallbackSilenceMs'] as const) {
      if (!Number.isInteger(endOfTurn[key]) || endOfTurn[key] < 0) throw new VadError(`endOfTurn.${key} must be a non-negative integer, got ${endOfTurn[key]}`);
    }
  }
  return { threshold, prefixPaddingMs, silenceDurationMs, endOfTurn: endOfTurn && { ...endOfTurn } };
}
