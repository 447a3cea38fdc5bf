/**
 * Language-model configuration from the environment: which provider answers (a local GGUF through
 * llama.cpp, any OpenAI-compatible server, or the rule-based offline responder), how session
 * `model` names are routed to providers, and the local model's threads and context. Validated once
 * at start-up; a bad value throws ConfigError naming the variable, like src/config.ts (whose
 * CONFIG_VARS the lead merges LLM_CONFIG_VARS into).
 *
 * Routing (LLM_MODEL_ROUTES): comma-separated `pattern=provider` rules, tried in order, first
 * match wins. A pattern is a session `model` name where `*` matches any run of characters
 * (`gpt-*`, `*-local`, `*`); the provider is openai, llama-cpp, offline, or default (the provider
 * LLM_PROVIDER selects). Names no rule matches go to the default provider. Example:
 * `gpt-*=openai,qwen*=llama-cpp,*=default`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../core/errors.js';

export type LlmProviderName = 'llama-cpp' | 'openai' | 'offline';
export type LlmProviderChoice = 'auto' | LlmProviderName;

export interface LlmRoute {
  /** Glob over session model names; `*` matches any characters. */
  pattern: string;
  provider: LlmProviderName | 'default';
}

export interface LlmConfig {
  provider: LlmProviderChoice;
  /** OpenAI-compatible base URL (…/v1); null = the OpenAI API. */
  baseUrl: string | null;
  apiKey: string | null;
  /** Upstream model name for the openai provider; null = the session's own model name. */
  model: string | null;
  routes: LlmRoute[];
  /** CPU threads llama.cpp decodes with. */
  threads: number;
  /** Context window (tokens) of each llama.cpp sequence. */
  contextTokens: number;
  /** Replies llama.cpp generates at once (sequences of one context); further requests queue. */
  parallel: number;
  /** A GGUF file to use instead of the manifest's llm-default; null = the manifest model. */
  ggufPath: string | null;
  /** Output limit when a request gives none. */
  maxOutputTokens: number;
  /** Time the openai provider waits for the upstream's answer to begin. */
  requestTimeoutMs: number;
}

interface VarSpec {
  name: string;
  default: string;
  description: string;
}

/** The documented variables, in README order (same shape as CONFIG_VARS in src/config.ts). */
export const LLM_CONFIG_VARS: VarSpec[] = [
  { name: 'LLM_PROVIDER', default: 'auto', description: 'auto, llama-cpp, openai or offline. auto: openai when LLM_BASE_URL or LLM_API_KEY is set, else llama-cpp when the local model (npm run setup:models, or LLM_GGUF_PATH) is present, else the offline responder (rule-based, not a language model; a warning says so).' },
  { name: 'LLM_BASE_URL', default: '', description: 'Base URL of an OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp server), e.g. http://127.0.0.1:11434/v1. Empty: https://api.openai.com/v1.' },
  { name: 'LLM_API_KEY', default: '', description: 'Bearer key for LLM_BASE_URL (local servers usually need none).' },
  { name: 'LLM_MODEL', default: '', description: "Upstream model name sent to the OpenAI-compatible server. Empty: the session's own model name." },
  { name: 'LLM_MODEL_ROUTES', default: '', description: 'Which provider serves which session model name: comma-separated pattern=provider rules, first match wins; * matches any characters; providers openai, llama-cpp, offline, default. E.g. gpt-*=openai,*=llama-cpp. Unmatched names use LLM_PROVIDER.' },
  { name: 'LLM_THREADS', default: '1', description: 'CPU threads of the local model, 1..256. One thread measured 14-16 tokens/s on a 2-core machine; two were 6-14x slower there because speech and video share the cores.' },
  { name: 'LLM_CONTEXT_TOKENS', default: '4096', description: 'Context window per reply, 256..131072 tokens: the local model\'s window, and the size every conversation is cut to before any model sees it (newest turns first, about 4 characters a token, less room for the reply; instructions at most half).' },
  { name: 'LLM_PARALLEL', default: '2', description: 'Replies the local model generates at the same time (sequences of one context, each with its own LLM_CONTEXT_TOKENS), 1..64; more requests wait in order.' },
  { name: 'LLM_GGUF_PATH', default: '', description: 'A GGUF chat model to use instead of the one npm run setup:models fetches.' },
  { name: 'LLM_MAX_OUTPUT_TOKENS', default: '1024', description: 'Reply length limit when the session sets none (max_output_tokens inf), 1..32768.' },
  { name: 'LLM_TIMEOUT_MS', default: '30000', description: 'How long the OpenAI-compatible server may take to start answering, 1000..600000.' },
];

type Env = Record<string, string | undefined>;

const PROVIDERS: readonly LlmProviderName[] = ['llama-cpp', 'openai', 'offline'];

export function loadLlmConfig(env: Env = process.env, cwd: string = process.cwd()): LlmConfig {
  const defaults = new Map(LLM_CONFIG_VARS.map((v) => [v.name, v.default]));
  const get = (name: string): string => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? defaults.get(name)! : value.trim();
  };
  const int = (name: string, min: number, max: number): number => {
    const text = get(name);
    if (!/^\d+$/.test(text)) throw new ConfigError(name, `expected an integer, got '${text}'`);
    const value = Number(text);
    if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
    return value;
  };
  const optional = (name: string): string | null => get(name) || null;

  const provider = get('LLM_PROVIDER');
  if (provider !== 'auto' && !PROVIDERS.includes(provider as LlmProviderName)) {
    throw new ConfigError('LLM_PROVIDER', `expected auto, llama-cpp, openai or offline, got '${provider}'`);
  }
  const baseUrl = optional('LLM_BASE_URL');
  if (baseUrl !== null) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new ConfigError('LLM_BASE_URL', `expected an http(s) URL, got '${baseUrl}'`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('LLM_BASE_URL', `expected an http(s) URL, got '${baseUrl}'`);
  }
  const apiKey = optional('LLM_API_KEY');
  const routes = parseRoutes(get('LLM_MODEL_ROUTES'));
  const openaiReachable = baseUrl !== null || apiKey !== null;
  if (!openaiReachable && (provider === 'openai' || routes.some((r) => r.provider === 'openai'))) {
    const variable = provider === 'openai' ? 'LLM_PROVIDER' : 'LLM_MODEL_ROUTES';
    throw new ConfigError(variable, 'the openai provider needs LLM_BASE_URL (a compatible server) or LLM_API_KEY (the OpenAI API)');
  }
  const gguf = optional('LLM_GGUF_PATH');
  const ggufPath = gguf === null ? null : path.resolve(cwd, gguf);
  if (ggufPath !== null && !fs.statSync(ggufPath, { throwIfNoEntry: false })?.isFile()) {
    throw new ConfigError('LLM_GGUF_PATH', `no such file: ${ggufPath}`);
  }
  return {
    provider: provider as LlmProviderChoice,
    baseUrl,
    apiKey,
    model: optional('LLM_MODEL'),
    routes,
    threads: int('LLM_THREADS', 1, 256),
    contextTokens: int('LLM_CONTEXT_TOKENS', 256, 131072),
    parallel: int('LLM_PARALLEL', 1, 64),
    ggufPath,
    maxOutputTokens: int('LLM_MAX_OUTPUT_TOKENS', 1, 32768),
    requestTimeoutMs: int('LLM_TIMEOUT_MS', 1000, 600000),
  };
}

/** Parses LLM_MODEL_ROUTES (see the module comment). */
export function parseRoutes(text: string): LlmRoute[] {
  if (text === '') return [];
  return text.split(',').map((rule) => {
    const eq = rule.lastIndexOf('=');
    const pattern = eq < 0 ? '' : rule.slice(0, eq).trim();
    const provider = eq < 0 ? '' : rule.slice(eq + 1).trim();
    if (pattern === '' || provider === '') {
      throw new ConfigError('LLM_MODEL_ROUTES', `expected pattern=provider rules separated by commas, got '${rule.trim()}'`);
    }
    if (provider !== 'default' && !PROVIDERS.includes(provider as LlmProviderName)) {
      throw new ConfigError('LLM_MODEL_ROUTES', `unknown provider '${provider}' in '${rule.trim()}' (openai, llama-cpp, offline or default)`);
    }
    return { pattern, provider: provider as LlmRoute['provider'] };
  });
}

/** The first route whose pattern matches the model name, or null. */
export function matchRoute(routes: readonly LlmRoute[], model: string): LlmRoute | null {
  return routes.find((r) => globMatch(r.pattern, model)) ?? null;
}

function globMatch(pattern: string, text: string): boolean {
  const source = pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
  return new RegExp(`^${source}$`, 's').test(text);
}
