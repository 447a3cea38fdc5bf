/**
 * Text-to-speech settings from the environment. `TTS_CONFIG_VARS` has the shape of CONFIG_VARS in
 * src/config.ts (which merges it into the README table); `loadTtsConfig` validates them, throwing
 * ConfigError naming the variable. OpenAI TTS is enabled only when both its base URL and key are
 * set; everything else works offline.
 */
import os from 'node:os';
import { ConfigError } from '../../core/errors.js';
import { intVar, type Env } from '../../core/env.js';

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

export const TTS_CONFIG_VARS: Array<{ name: string; default: string; description: string }> = [
  { name: 'TTS_OPENAI_BASE_URL', default: '', description: 'OpenAI-compatible API base for `tts_source: openai` voices (e.g. https://api.openai.com/v1); with TTS_OPENAI_API_KEY it enables OpenAI TTS (`POST {base}/audio/speech`, PCM 24 kHz).' },
  { name: 'TTS_OPENAI_API_KEY', default: '', description: 'Bearer key for TTS_OPENAI_BASE_URL.' },
  { name: 'TTS_OPENAI_MODEL', default: 'gpt-4o-mini-tts', description: 'Speech model asked of the OpenAI TTS endpoint.' },
  { name: 'TTS_OPENAI_TIMEOUT_MS', default: '15000', description: 'Time allowed for the OpenAI TTS answer to start, 100..120000.' },
  { name: 'TTS_PIPER_THREADS', default: String(DEFAULT_PIPER_THREADS), description: 'CPU threads one Piper inference may use, 1..64 (default: 2, or 1 on a single core).' },
];


export function loadTtsConfig(env: Env = process.env): TtsConfig {
  const baseUrl = env.TTS_OPENAI_BASE_URL?.trim() ?? '';
  const apiKey = env.TTS_OPENAI_API_KEY?.trim() ?? '';
  if (baseUrl && !/^https?:\/\/[^\s/]+/.test(baseUrl)) throw new ConfigError('TTS_OPENAI_BASE_URL', `expected an http(s) URL, got '${baseUrl}'`);
  if (baseUrl && !apiKey) throw new ConfigError('TTS_OPENAI_API_KEY', 'must be set when TTS_OPENAI_BASE_URL is');
  const model = env.TTS_OPENAI_MODEL?.trim() || 'gpt-4o-mini-tts';
  const timeoutMs = intVar(env, 'TTS_OPENAI_TIMEOUT_MS', 15000, 100, 120000);
  return {
    openai: baseUrl ? { baseUrl: baseUrl.replace(/\/+$/, ''), apiKey, model, timeoutMs } : null,
    piperThreads: intVar(env, 'TTS_PIPER_THREADS', DEFAULT_PIPER_THREADS, 1, 64),
  };
}
