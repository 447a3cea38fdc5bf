/**
 * Text-to-speech settings from the environment: rows read by src/core/env.ts, merged by
 * src/config.ts into CONFIG_VARS (the table in docs/configuration.md); `loadTtsConfig` reads and cross-checks them,
 * throwing ConfigError naming the variable. OpenAI TTS is enabled only when both its base URL and key are
 * set; everything else works offline.
 */
import os from 'node:os';
import { ConfigError } from '../../core/errors.js';
import { envVar, integer, optionalBaseUrl, optionalText, readVars, text, type Env, type EnvVar } from '../../core/env.js';

export interface OpenAiTtsConfig {
  /** e.g. https://api.openai.com/v1 (no trailing slash). */
  baseUrl: string;
  apiKey: string;
  model: string;
  timeoutMs: number;
}

export interface TtsConfig {
  openai: OpenAiTtsConfig | null;
  /** onnxruntime intra-op threads for Piper inference. */
  piperThreads: number;
}

/** Two threads: RTF 0.11 for the medium Piper model on a lightly loaded 2-core machine (one: 0.14);
 * on a busy one a single thread did better (0.19 vs 0.28). More steal cores from media sessions. */
const DEFAULT_PIPER_THREADS = Math.max(1, Math.min(2, os.availableParallelism()));

const VARS = {
  baseUrl: envVar('TTS_OPENAI_BASE_URL', '', 'OpenAI-compatible API base for `tts_source: openai` voices (e.g. https://api.openai.com/v1); with TTS_OPENAI_API_KEY it enables OpenAI TTS (`POST {base}/audio/speech`, PCM 24 kHz).', optionalBaseUrl),
  apiKey: envVar('TTS_OPENAI_API_KEY', '', 'Bearer key for TTS_OPENAI_BASE_URL.', optionalText),
  model: envVar('TTS_OPENAI_MODEL', 'gpt-4o-mini-tts', 'Speech model asked of the OpenAI TTS endpoint.', text),
  timeoutMs: envVar('TTS_OPENAI_TIMEOUT_MS', '15000', 'Time allowed for the OpenAI TTS answer to start, 100..120000.', integer(100, 120_000)),
  piperThreads: envVar('TTS_PIPER_THREADS', String(DEFAULT_PIPER_THREADS), 'CPU threads one Piper inference may use, 1..64 (default: 2, or 1 on a single core).', integer(1, 64)),
};

/** The documented variables, in docs/configuration.md's order (merged into CONFIG_VARS by src/config.ts). */
export const TTS_CONFIG_VARS: EnvVar[] = Object.values(VARS);

export function loadTtsConfig(env: Env = process.env): TtsConfig {
  const v = readVars(env, VARS);
  if (v.baseUrl !== null && v.apiKey === null) throw new ConfigError('TTS_OPENAI_API_KEY', 'must be set when TTS_OPENAI_BASE_URL is');
  return {
    openai: v.baseUrl !== null && v.apiKey !== null ? { baseUrl: v.baseUrl, apiKey: v.apiKey, model: v.model, timeoutMs: v.timeoutMs } : null,
    piperThreads: v.piperThreads,
  };
}
