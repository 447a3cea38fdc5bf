/**
 * Language-model configuration from the environment: which provider answers (a local GGUF through
 * llama.cpp, any OpenAI-compatible server, or the rule-based offline responder), how session
 * `model` names are routed to providers, which manifest model the local provider loads, and its
 * threads and context. Its rows are read by src/core/env.ts and merged by src/config.ts into
 * CONFIG_VARS (the table in docs/configuration.md); a bad value throws ConfigError naming the variable.
 *
 * Routing (LLM_MODEL_ROUTES): comma-separated `pattern=provider` rules, tried in order, first
 * match wins. A pattern is a session `model` name where `*` matches any run of characters
 * (`gpt-*`, `*-local`, `*`); the provider is openai, llama-cpp, offline, or default (the provider
 * LLM_PROVIDER selects). Names no rule matches go to the default provider. Example:
 * `gpt-*=openai,qwen*=llama-cpp,*=default`.
 *
 * LLM_LOCAL_MODEL names a models/manifest.json entry of kind llm; it is checked against the
 * manifest of MODELS_DIR here, so a misspelt name stops start-up instead of quietly falling back
 * to the offline responder. setup:models reads it too (loadLocalLlmModel), to fetch an on-request
 * model the operator chose.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../core/errors.js';
import { envVar, integer, oneOf, optionalHttpUrl, optionalText, readVar, readVars, text, type Env, type EnvVar } from '../../core/env.js';
import { loadManifest, manifestPath, modelsDirFrom, type ManifestEntry } from '../../models/manifest.js';

/** The manifest entry (models/manifest.json) of the default local model. */
export const DEFAULT_LLM_MODEL_NAME = 'llm-default';

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
  /** The manifest model (kind llm) the local provider loads unless ggufPath names a file. */
  localModel: string;
  /** A GGUF file to use instead of the manifest model; null = the manifest model. */
  ggufPath: string | null;
  /** Output limit when a request gives none. */
  maxOutputTokens: number;
  /** How long the openai provider waits from the request to the first token, its retry included. */
  firstTokenTimeoutMs: number;
  /** How long a started stream may go without a token. */
  tokenGapTimeoutMs: number;
  /** What the avatar says when no model could answer (in the session's voice); null: nothing. */
  fallbackLine: string | null;
  /** How often a hosted model found down is asked again (a one-token request) until it answers. */
  probeIntervalMs: number;
  /** Which models may start a reply before the turn is confirmed: every one, or only those in this process. */
  earlyReply: 'on' | 'local';
  /** Whether the local GGUF reads a pause's words for semantic_vad's judge when another provider answers. */
  wordsReader: 'auto' | 'off';
}

const PROVIDERS: readonly LlmProviderName[] = ['llama-cpp', 'openai', 'offline'];

const VARS = {
  provider: envVar('LLM_PROVIDER', 'auto', 'auto, llama-cpp, openai or offline. auto: openai when LLM_BASE_URL or LLM_API_KEY is set, else llama-cpp when the local model (npm run setup:models, or LLM_GGUF_PATH) is present, else the offline responder (rule-based, not a language model; a warning says so).', oneOf<LlmProviderChoice>('auto', ...PROVIDERS)),
  baseUrl: envVar('LLM_BASE_URL', '', 'Base URL of an OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp server), e.g. http://127.0.0.1:11434/v1. Empty: https://api.openai.com/v1.', optionalHttpUrl),
  apiKey: envVar('LLM_API_KEY', '', 'Bearer key for LLM_BASE_URL (local servers usually need none).', optionalText),
  model: envVar('LLM_MODEL', '', "Upstream model name sent to the OpenAI-compatible server. Empty: the session's own model name.", optionalText),
  routes: envVar('LLM_MODEL_ROUTES', '', 'Which provider serves which session model name: comma-separated pattern=provider rules, first match wins; * matches any characters; providers openai, llama-cpp, offline, default. E.g. gpt-*=openai,*=llama-cpp. Unmatched names use LLM_PROVIDER.', (t) => parseRoutes(t)),
  threads: envVar('LLM_THREADS', '1', 'CPU threads of the local model, 1..256. One thread measured 14-16 tokens/s on a 2-core machine; two were 6-14x slower there because speech and video share the cores.', integer(1, 256)),
  contextTokens: envVar('LLM_CONTEXT_TOKENS', '4096', 'Context window per reply, 256..131072 tokens: the local model\'s window, and the size every conversation is cut to before any model sees it (newest turns first, about 4 characters a token, less room for the reply; instructions at most half).', integer(256, 131_072)),
  parallel: envVar('LLM_PARALLEL', '4', 'Replies the local model generates at the same time (sequences of one context, each with its own LLM_CONTEXT_TOKENS, evaluated in one batch), 1..64; more requests wait, confirmed turns first. The default matches WORKER_CAPACITY: with four people talking at once, 4 sequences answered every turn (2,370 ms p50 from the end of speech on a slow day) where 2 left 9 of 20 unanswered after 5 s.', integer(1, 64)),
  localModel: envVar(
    'LLM_LOCAL_MODEL',
    DEFAULT_LLM_MODEL_NAME,
    'Which language model of models/manifest.json the local provider (llama-cpp) loads: llm-default (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB on disk, fetched by npm run setup:models) or llm-qwen2.5-coder-1.5b (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB on disk, fetched only on request: by set-up when this variable names it, or by npm run setup:models -- --only llm-qwen2.5-coder-1.5b). It also reads the words for LLM_WORDS_READER. A name that is not a manifest model of kind llm stops start-up; LLM_GGUF_PATH wins over it. The default is the 0.5B on every machine this build runs on (llama.cpp on the CPU): measured on 2 cores, the 1.5B answers everyday questions better (77 of 77 against 59) but takes 2.4 times as long to its first token (608 against 252 ms) and, with the call gate set for the 0.5B, makes no call when tools are offered (it writes about the call in words instead), so it suits sessions without tools on a machine with cores to spare.',
    text,
  ),
  ggufPath: envVar('LLM_GGUF_PATH', '', 'A GGUF chat model to use instead of the manifest model LLM_LOCAL_MODEL names.', optionalText),
  maxOutputTokens: envVar('LLM_MAX_OUTPUT_TOKENS', '1024', 'Reply length limit when the session sets none (max_output_tokens inf), 1..32768.', integer(1, 32_768)),
  earlyReply: envVar('LLM_EARLY_REPLY', 'on', "on or local. on: in a voice turn's pause the reply starts on the pause's transcript before the end of the turn is decided, with any model (a hosted one bills for the replies thrown away when the user speaks on after a pause: on the realtime bench 16 for 42 voice turns, most in the questions with a pause mid-sentence); local: only with a model running in this process.", oneOf<'on' | 'local'>('on', 'local')),
  wordsReader: envVar('LLM_WORDS_READER', 'auto', "auto or off. auto: where the local model's weights are present (npm run setup:models), it reads the words of every pause for semantic_vad's judge even when another provider answers (loaded for that job: with llm-default about 0.5 GB of memory and 50-130 ms of one core a pause); off: the words are judged by rule.", oneOf<'auto' | 'off'>('auto', 'off')),
  firstTokenTimeoutMs: envVar(
    'LLM_FIRST_TOKEN_TIMEOUT_MS',
    '2500',
    "How long an OpenAI-compatible server may take from the request to its reply's first token (text or a tool call; headers and empty chunks do not count), its one retry of a failed connection or a 408/429/5xx included: past it the reply fails with llm_request_failed, at this time and not twice it. 500..600000.",
    integer(500, 600_000),
  ),
  tokenGapTimeoutMs: envVar('LLM_TOKEN_GAP_TIMEOUT_MS', '2000', 'How long a reply streaming from an OpenAI-compatible server may go without a token before it is given up as stalled (llm_request_failed; what was said stays), 500..600000.', integer(500, 600_000)),
  fallbackLine: envVar(
    'LLM_FALLBACK_LINE',
    "Sorry, I can't answer right now. Please ask me again in a moment.",
    "What the avatar says, in the session's voice, when its language model fails before saying anything (no first token in time, an error answer, a refused connection): said after the error event, so the client hears a reply rather than silence; the response still ends failed. off: nothing is said. At most 300 characters.",
    (t, name) => {
      if (t.trim() === '' || t.trim().toLowerCase() === 'off') return null;
      if (t.length > 300) throw new ConfigError(name, `at most 300 characters, got ${t.length}`);
      return t.trim();
    },
  ),
  probeIntervalMs: envVar('LLM_PROBE_INTERVAL_MS', '10000', 'How often a hosted model that failed (an error, no first token in time) is asked again with a one-token request until it answers, 200..600000: /readyz and /metrics show it degraded meanwhile, and healthy again by themselves once it answers.', integer(200, 600_000)),
  legacyTimeoutMs: envVar('LLM_TIMEOUT_MS', '', "The former name of LLM_FIRST_TOKEN_TIMEOUT_MS, read when that is unset (deprecated).", (t, name) => (t === '' ? null : integer(500, 600_000)(t, name))),
};

/** The documented variables, in docs/configuration.md's order (merged into CONFIG_VARS by src/config.ts). */
export const LLM_CONFIG_VARS: EnvVar[] = Object.values(VARS);

export function loadLlmConfig(env: Env = process.env, cwd: string = process.cwd()): LlmConfig {
  const v = readVars(env, VARS);
  const openaiReachable = v.baseUrl !== null || v.apiKey !== null;
  if (!openaiReachable && (v.provider === 'openai' || v.routes.some((r) => r.provider === 'openai'))) {
    const variable = v.provider === 'openai' ? 'LLM_PROVIDER' : 'LLM_MODEL_ROUTES';
    throw new ConfigError(variable, 'the openai provider needs LLM_BASE_URL (a compatible server) or LLM_API_KEY (the OpenAI API)');
  }
  const ggufPath = v.ggufPath === null ? null : path.resolve(cwd, v.ggufPath);
  if (ggufPath !== null && !fs.statSync(ggufPath, { throwIfNoEntry: false })?.isFile()) {
    throw new ConfigError('LLM_GGUF_PATH', `no such file: ${ggufPath}`);
  }
  const { legacyTimeoutMs, ...settings } = v;
  // The old name counts only where the new one is not set.
  const firstTokenTimeoutMs = (env.LLM_FIRST_TOKEN_TIMEOUT_MS ?? '') === '' && legacyTimeoutMs !== null ? legacyTimeoutMs : v.firstTokenTimeoutMs;
  return { ...settings, firstTokenTimeoutMs, localModel: checkLocalModel(v.localModel, env, cwd), ggufPath };
}

/** LLM_LOCAL_MODEL alone, checked against the manifest (for setup:models, which needs no other setting). */
export function loadLocalLlmModel(env: Env = process.env, cwd: string = process.cwd()): string {
  return checkLocalModel(readVar(env, VARS.localModel), env, cwd);
}

function checkLocalModel(name: string, env: Env, cwd: string): string {
  // The default needs no check: a manifest without it (or none at all) means no local model, which
  // the offline fallback handles as it always has; only an operator's choice must name a real one.
  if (name === DEFAULT_LLM_MODEL_NAME) return name;
  const modelsDir = modelsDirFrom(env, cwd);
  let models: ManifestEntry[];
  try {
    models = loadManifest(modelsDir).models;
  } catch (err) {
    throw new ConfigError('LLM_LOCAL_MODEL', `cannot check '${name}' against the manifest: ${(err as Error).message}`);
  }
  const llms = models.filter((m) => m.kind === 'llm').map((m) => m.name);
  if (!llms.includes(name)) {
    const other = models.find((m) => m.name === name);
    const why = other ? `'${name}' is a ${other.kind} model` : `no model named '${name}'`;
    throw new ConfigError('LLM_LOCAL_MODEL', `${why} in ${manifestPath(modelsDir)}; expected one of kind llm: ${llms.join(', ')}`);
  }
  return name;
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
