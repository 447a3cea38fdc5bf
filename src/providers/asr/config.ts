/**
 * Speech-recognition settings from the environment: rows read by src/core/env.ts, merged by
 * src/config.ts into CONFIG_VARS (the table in docs/configuration.md); `loadAsrConfig` reads and cross-checks them,
 * throwing ConfigError naming the variable. OpenAI transcription is enabled only when both its
 * base URL and key are set; the offline Whisper recogniser needs only its model file: the one
 * ASR_WHISPER_MODEL names among those setup converts (models/whisper-ggml.ts WHISPER_MODELS, whose
 * DEFAULT_WHISPER_MODEL is the default), unless ASR_WHISPER_MODEL_PATH names another.
 */
import os from 'node:os';
import { ConfigError } from '../../core/errors.js';
import { envVar, integer, oneOf, optionalBaseUrl, optionalText, readVars, text, type Env, type EnvVar } from '../../core/env.js';
import { DEFAULT_WHISPER_MODEL, WHISPER_MODEL_NAMES, type WhisperModelName } from '../../models/whisper-ggml.js';

export type AsrProviderName = 'auto' | 'whisper-cpp' | 'openai';

export interface OpenAiAsrConfig {
  /** e.g. https://api.openai.com/v1 (no trailing slash). */
  baseUrl: string;
  apiKey: string;
  /** Model asked for when the session names none or one the upstream does not serve. */
  model: string;
  timeoutMs: number;
}

export interface WhisperAsrConfig {
  /** Which converted model (models/weights/asr/ggml-<model>.bin) to load. */
  model: WhisperModelName;
  /** A ggml model file to use instead of the converted one (`model` is then unused). */
  modelPath: string | null;
  /** CPU threads one transcription uses. */
  threads: number;
  /** Transcriptions that may run at once; the rest wait in order. */
  concurrency: number;
}

export interface AsrConfig {
  /** The default route: auto = openai when configured, else whisper-cpp. */
  provider: AsrProviderName;
  openai: OpenAiAsrConfig | null;
  whisper: WhisperAsrConfig;
}

/** Two threads: a short utterance took ~0.5-0.7 s with 2 threads vs ~1 s with 1 on the 2-core
 * machine; more threads than cores make whisper.cpp's spinning workers wait on each other. */
const DEFAULT_WHISPER_THREADS = Math.max(1, Math.min(2, os.availableParallelism()));
/** One at a time: on a small machine two concurrent transcriptions each take twice as long, so
 * queueing gives the first speaker their answer sooner. Raise it with the core count
 * (about cores / ASR_WHISPER_THREADS). */
const DEFAULT_WHISPER_CONCURRENCY = 1;
const VARS = {
  provider: envVar('ASR_PROVIDER', 'auto', 'Speech recognition for input audio transcription: auto (openai when ASR_OPENAI_BASE_URL is set, else the offline Whisper model of ASR_WHISPER_MODEL), whisper-cpp or openai.', oneOf<AsrProviderName>('auto', 'whisper-cpp', 'openai')),
  baseUrl: envVar('ASR_OPENAI_BASE_URL', '', 'OpenAI-compatible API base for transcription (e.g. https://api.openai.com/v1); with ASR_OPENAI_API_KEY it enables `POST {base}/audio/transcriptions`.', optionalBaseUrl),
  apiKey: envVar('ASR_OPENAI_API_KEY', '', 'Bearer key for ASR_OPENAI_BASE_URL.', optionalText),
  model: envVar('ASR_OPENAI_MODEL', 'gpt-4o-mini-transcribe', 'Transcription model asked of the OpenAI endpoint when the session names none (whisper-1, gpt-4o-transcribe and gpt-4o-mini-transcribe are passed through).', text),
  timeoutMs: envVar('ASR_OPENAI_TIMEOUT_MS', '30000', 'Time allowed for one OpenAI transcription, 100..300000.', integer(100, 300_000)),
  whisperModel: envVar(
    'ASR_WHISPER_MODEL',
    DEFAULT_WHISPER_MODEL,
    'The offline Whisper model, both fetched and converted by setup: tiny.en (39M parameters, English only, about half the time per turn: 194 ms against 413 ms for a pause of the turn-end benchmark; word error rate 18.1 % against 15.1 %; models/weights/asr/ggml-tiny.en.bin; a session asking for another language is transcribed by base where it is converted) or base (74M, multilingual; models/weights/asr/ggml-base.bin).',
    oneOf<WhisperModelName>(...WHISPER_MODEL_NAMES),
  ),
  whisperModelPath: envVar('ASR_WHISPER_MODEL_PATH', '', 'whisper.cpp ggml model file to use instead of the converted model ASR_WHISPER_MODEL names.', optionalText),
  whisperThreads: envVar('ASR_WHISPER_THREADS', String(DEFAULT_WHISPER_THREADS), 'CPU threads one Whisper transcription uses at most, 1..64 (default: 2, or 1 on a single core); each call takes one per core idle when it starts, so a busy machine gets one thread instead of two that wait on each other.', integer(1, 64)),
  whisperConcurrency: envVar('ASR_WHISPER_CONCURRENCY', String(DEFAULT_WHISPER_CONCURRENCY), 'Whisper transcriptions run at once, 1..64; others wait in order. 1 suits a 2-core machine (two at once each take twice as long); about cores / ASR_WHISPER_THREADS on larger ones.', integer(1, 64)),
};

/** The documented variables, in the order of docs/configuration.md (merged into CONFIG_VARS by src/config.ts). */
export const ASR_CONFIG_VARS: EnvVar[] = Object.values(VARS);

export function loadAsrConfig(env: Env = process.env): AsrConfig {
  const v = readVars(env, VARS);
  if (v.baseUrl !== null && v.apiKey === null) throw new ConfigError('ASR_OPENAI_API_KEY', 'must be set when ASR_OPENAI_BASE_URL is');
  if (v.provider === 'openai' && v.baseUrl === null) throw new ConfigError('ASR_PROVIDER', 'openai needs ASR_OPENAI_BASE_URL and ASR_OPENAI_API_KEY');
  return {
    provider: v.provider,
    openai: v.baseUrl !== null && v.apiKey !== null ? { baseUrl: v.baseUrl, apiKey: v.apiKey, model: v.model, timeoutMs: v.timeoutMs } : null,
    whisper: { model: v.whisperModel, modelPath: v.whisperModelPath, threads: v.whisperThreads, concurrency: v.whisperConcurrency },
  };
}
