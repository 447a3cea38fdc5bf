/**
 * Speech-recognition settings from the environment. `ASR_CONFIG_VARS` has the shape of CONFIG_VARS
 * in src/config.ts (which merges it into the README table); `loadAsrConfig` validates them,
 * throwing ConfigError naming the variable. OpenAI transcription is enabled only when both its
 * base URL and key are set; the offline Whisper recogniser needs only its model file.
 */
import os from 'node:os';
import { ConfigError } from '../../core/errors.js';
import { intVar, type Env } from '../../core/env.js';

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
  /** A ggml model file to use instead of the converted models/weights/asr/ggml-base.bin. */
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
const DEFAULT_OPENAI_ASR_MODEL = 'gpt-4o-mini-transcribe';

export const ASR_CONFIG_VARS: Array<{ name: string; default: string; description: string }> = [
  { name: 'ASR_PROVIDER', default: 'auto', description: 'Speech recognition for input audio transcription: auto (openai when ASR_OPENAI_BASE_URL is set, else the offline Whisper base model), whisper-cpp or openai.' },
  { name: 'ASR_OPENAI_BASE_URL', default: '', description: 'OpenAI-compatible API base for transcription (e.g. https://api.openai.com/v1); with ASR_OPENAI_API_KEY it enables `POST {base}/audio/transcriptions`.' },
  { name: 'ASR_OPENAI_API_KEY', default: '', description: 'Bearer key for ASR_OPENAI_BASE_URL.' },
  { name: 'ASR_OPENAI_MODEL', default: DEFAULT_OPENAI_ASR_MODEL, description: 'Transcription model asked of the OpenAI endpoint when the session names none (whisper-1, gpt-4o-transcribe and gpt-4o-mini-transcribe are passed through).' },
  { name: 'ASR_OPENAI_TIMEOUT_MS', default: '30000', description: 'Time allowed for one OpenAI transcription, 100..300000.' },
  { name: 'ASR_WHISPER_MODEL_PATH', default: '', description: 'whisper.cpp ggml model file to use instead of models/weights/asr/ggml-base.bin (made by setup from the fetched Whisper base).' },
  { name: 'ASR_WHISPER_THREADS', default: String(DEFAULT_WHISPER_THREADS), description: 'CPU threads one Whisper transcription uses, 1..64 (default: 2, or 1 on a single core).' },
  { name: 'ASR_WHISPER_CONCURRENCY', default: String(DEFAULT_WHISPER_CONCURRENCY), description: 'Whisper transcriptions run at once, 1..64; others wait in order. 1 suits a 2-core machine (two at once each take twice as long); about cores / ASR_WHISPER_THREADS on larger ones.' },
];


export function loadAsrConfig(env: Env = process.env): AsrConfig {
  const provider = (env.ASR_PROVIDER?.trim() || 'auto') as AsrProviderName;
  if (!['auto', 'whisper-cpp', 'openai'].includes(provider)) {
    throw new ConfigError('ASR_PROVIDER', `expected auto, whisper-cpp or openai, got '${provider}'`);
  }
  const baseUrl = env.ASR_OPENAI_BASE_URL?.trim() ?? '';
  const apiKey = env.ASR_OPENAI_API_KEY?.trim() ?? '';
  if (baseUrl && !/^https?:\/\/[^\s/]+/.test(baseUrl)) throw new ConfigError('ASR_OPENAI_BASE_URL', `expected an http(s) URL, got '${baseUrl}'`);
  if (baseUrl && !apiKey) throw new ConfigError('ASR_OPENAI_API_KEY', 'must be set when ASR_OPENAI_BASE_URL is');
  if (provider === 'openai' && !baseUrl) throw new ConfigError('ASR_PROVIDER', 'openai needs ASR_OPENAI_BASE_URL and ASR_OPENAI_API_KEY');
  const timeoutMs = intVar(env, 'ASR_OPENAI_TIMEOUT_MS', 30000, 100, 300000);
  return {
    provider,
    openai: baseUrl
      ? { baseUrl: baseUrl.replace(/\/+$/, ''), apiKey, model: env.ASR_OPENAI_MODEL?.trim() || DEFAULT_OPENAI_ASR_MODEL, timeoutMs }
      : null,
    whisper: {
      modelPath: env.ASR_WHISPER_MODEL_PATH?.trim() || null,
      threads: intVar(env, 'ASR_WHISPER_THREADS', DEFAULT_WHISPER_THREADS, 1, 64),
      concurrency: intVar(env, 'ASR_WHISPER_CONCURRENCY', DEFAULT_WHISPER_CONCURRENCY, 1, 64),
    },
  };
}
