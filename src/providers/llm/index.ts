/**
 * Builds the process's language models from LlmConfig and routes each session `model` name to
 * one of them (LLM_MODEL_ROUTES, then the default provider). Providers are created on first use
 * and shared: one local llama.cpp model for every session, one OpenAI-compatible client per
 * upstream model name, one offline responder.
 *
 * The default provider (LLM_PROVIDER=auto) is openai when LLM_BASE_URL or LLM_API_KEY is set,
 * else llama-cpp when its GGUF is present (LLM_GGUF_PATH, or the manifest model LLM_LOCAL_MODEL
 * names, llm-default by default, fetched by npm run setup:models), else the offline responder.
 * Wherever llama-cpp is wanted (by LLM_PROVIDER or a route) but no GGUF is present, the offline
 * responder serves instead and one warning line says so and which setup:models command fetches the
 * chosen model; nothing here throws for a missing model.
 */
import { modelPath } from '../../models/manifest.js';
import { DependencyHealth } from '../../core/dependency-health.js';
import type { Logger } from '../../core/log.js';
import type { LanguageModel, LanguageModels } from './base.js';
import { DEFAULT_LLM_MODEL_NAME, matchRoute, type LlmConfig, type LlmProviderName } from './config.js';
import { LlamaCppModel } from './llama-cpp.js';
import { OfflineResponder } from './offline-responder.js';
import { OpenAiModel } from './openai.js';

/**
 * OpenAI-compatible clients kept, one per upstream model name (the session's model name when
 * LLM_MODEL is unset, which any client chooses): the least recently used is let go beyond this, so
 * a stream of made-up model names cannot grow memory. A real deployment uses a handful.
 */
export const MAX_OPENAI_CLIENTS = 32;

export type { LlmConfig } from './config.js';
export { DEFAULT_LLM_MODEL_NAME, LLM_CONFIG_VARS, loadLlmConfig } from './config.js';

export function createLanguageModels(config: LlmConfig, modelsDir: string, log: Logger): LanguageModels {
  return new RoutedLanguageModels(config, modelsDir, log);
}

class RoutedLanguageModels implements LanguageModels {
  /** The provider names that do not depend on the session's model name resolve to one instance. */
  private llamaCpp: LlamaCppModel | null = null;
  private offline: OfflineResponder | null = null;
  private readonly openai = new Map<string, OpenAiModel>();
  private readonly ggufPath: string | null;
  private readonly defaultProvider: LlmProviderName;
  private warnedOffline = false;
  readonly fallbackLine: string | null;
  /** The hosted model's health (every OpenAiModel here reports to it), and its probe while down. */
  private readonly hosted: DependencyHealth;
  private probe: NodeJS.Timeout | null = null;

  constructor(
    private readonly config: LlmConfig,
    modelsDir: string,
    private readonly log: Logger,
  ) {
    this.ggufPath = config.ggufPath ?? modelPath(modelsDir, config.localModel);
    this.fallbackLine = config.fallbackLine;
    this.hosted = new DependencyHealth('language_model', log);
    this.defaultProvider =
      config.provider !== 'auto'
        ? config.provider
        : config.baseUrl !== null || config.apiKey !== null
          ? 'openai'
          : this.ggufPath !== null
            ? 'llama-cpp'
            : 'offline';
    log.info('language model provider selected', {
      provider: this.defaultProvider,
      ...(this.defaultProvider === 'llama-cpp' ? { file: this.ggufPath, ...(config.ggufPath === null ? { model: config.localModel } : {}) } : {}),
      ...(this.defaultProvider === 'openai' ? { baseUrl: config.baseUrl ?? 'https://api.openai.com/v1', model: config.model ?? '(session model)' } : {}),
      routes: config.routes.map((r) => `${r.pattern}=${r.provider}`).join(','),
    });
    if (this.defaultProvider === 'offline' && config.provider === 'auto') {
      this.warnOffline(config.localModel === DEFAULT_LLM_MODEL_NAME ? 'no language model is configured' : `LLM_LOCAL_MODEL=${config.localModel} but its model file is absent`);
    }
    if (this.defaultProvider === 'llama-cpp' && this.ggufPath === null) this.warnOffline('LLM_PROVIDER=llama-cpp but its model file is absent');
  }

  /** The provider name that serves a session model name (routes first, then the default). */
  providerFor(model: string): LlmProviderName {
    const route = matchRoute(this.config.routes, model);
    return !route || route.provider === 'default' ? this.defaultProvider : route.provider;
  }

  forModel(model: string): LanguageModel {
    const provider = this.providerFor(model);
    if (provider === 'openai') return this.openaiFor(this.config.model ?? model);
    if (provider === 'llama-cpp' && this.ggufPath !== null) return this.local(this.ggufPath);
    if (provider === 'llama-cpp') this.warnOffline(`model '${model}' is routed to llama-cpp but its model file is absent`);
    this.offline ??= new OfflineResponder();
    return this.offline;
  }

  wordsReader(): LanguageModel | null {
    return this.ggufPath !== null && this.config.wordsReader === 'auto' ? this.local(this.ggufPath) : null;
  }

  /** The one local model, serving replies routed to it and the judge's readings alike. */
  private local(ggufPath: string): LlamaCppModel {
    this.llamaCpp ??= new LlamaCppModel({
      modelFile: ggufPath,
      threads: this.config.threads,
      contextTokens: this.config.contextTokens,
      parallel: this.config.parallel,
      maxOutputTokens: this.config.maxOutputTokens,
      log: this.log,
    });
    return this.llamaCpp;
  }

  upstream(): DependencyHealth | null {
    return this.defaultProvider === 'openai' || this.config.routes.some((r) => r.provider === 'openai') ? this.hosted : null;
  }

  /**
   * The hosted model failed: until it answers again, `model` is asked for one token every
   * LLM_PROBE_INTERVAL_MS (its first token reports the recovery through the health hook), so
   * /readyz and /metrics come back by themselves even with no conversation running.
   */
  private probeUntilUp(model: OpenAiModel): void {
    if (this.probe) return;
    let probing = false;
    this.probe = setInterval(() => {
      if (this.hosted.up) {
        clearInterval(this.probe!);
        this.probe = null;
        return;
      }
      if (probing) return;
      probing = true;
      const abort = new AbortController();
      void (async () => {
        try {
          for await (const chunk of model.generate({ messages: [{ role: 'user', content: 'Hi' }], maxOutputTokens: 1, signal: abort.signal })) {
            if (chunk.type !== 'done') abort.abort();
          }
        } catch {
          // still down: told to the health by the model itself
        } finally {
          probing = false;
        }
      })();
    }, this.config.probeIntervalMs);
    this.probe.unref();
  }

  async close(): Promise<void> {
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    const all: LanguageModel[] = [...this.openai.values()];
    if (this.llamaCpp) all.push(this.llamaCpp);
    if (this.offline) all.push(this.offline);
    await Promise.allSettled(all.map((m) => m.close()));
  }

  private openaiFor(upstreamModel: string): OpenAiModel {
    let model = this.openai.get(upstreamModel);
    if (model) {
      // Most recently used last (Map order), so the first entry is the one to let go.
      this.openai.delete(upstreamModel);
      this.openai.set(upstreamModel, model);
    } else {
      // A client let go is not closed: replies in flight keep using it; it holds no other resource.
      while (this.openai.size >= MAX_OPENAI_CLIENTS) this.openai.delete(this.openai.keys().next().value as string);
      const created: OpenAiModel = new OpenAiModel({
        baseUrl: this.config.baseUrl,
        apiKey: this.config.apiKey,
        model: upstreamModel,
        maxOutputTokens: this.config.maxOutputTokens,
        contextTokens: this.config.contextTokens,
        firstTokenTimeoutMs: this.config.firstTokenTimeoutMs,
        tokenGapTimeoutMs: this.config.tokenGapTimeoutMs,
        health: {
          succeeded: () => this.hosted.succeeded(),
          failed: (err) => {
            this.hosted.failed(err);
            this.probeUntilUp(created);
          },
        },
        speculative: this.config.earlyReply === 'on',
      });
      model = created;
      this.openai.set(upstreamModel, model);
    }
    return model;
  }

  private warnOffline(why: string): void {
    if (this.warnedOffline) return;
    this.warnedOffline = true;
    this.log.warn(
      `${why}: replies come from the built-in offline responder (rule-based, not a language model). ` +
        `Run npm run setup:models -- --only ${this.config.localModel} for the local model (${this.config.localModel}), or set LLM_BASE_URL/LLM_API_KEY for an OpenAI-compatible server.`,
    );
  }
}
