import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CONFIG_VARS, ConfigError, loadConfig } from '../../src/config.js';

test('loadConfig applies every documented default', () => {
  const config = loadConfig({}, '/srv/app');
  assert.is(config.host, '127.0.0.1');
  assert.is(config.port, 8000);
  assert.is(config.dataDir, '/srv/app/data');
  assert.is(config.databaseUrl, 'sqlite:/srv/app/data/avatar.db');
  assert.is(config.workerCapacity, 4);
  assert.is(config.maxSessionSeconds, 3600);
  assert.is(config.defaultModel, 'gpt-5.2');
  assert.is(config.ephemeralKeyTtlSeconds, 60);
  assert.is(config.rateLimitPerMinute, 600);
  assert.is(config.webhook, null);
  assert.is(path.basename(config.modelsDir), 'models');
});

test('configuration is read only through its rows: no module reads an undocumented variable', () => {
  const documented = new Set(CONFIG_VARS.map((v) => v.name));
  // Not server settings: where the wheel cache lives, and the model fetcher's PyPI mirror.
  const tooling = new Set(['HOME', 'XDG_CACHE_HOME', 'PYPI_URL']);
  const files = fs.readdirSync(path.resolve(import.meta.dirname, '../../src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  let reads = 0;
  for (const file of files) {
    const source = fs.readFileSync(path.resolve(import.meta.dirname, '../../src', file), 'utf8');
    for (const m of source.matchAll(/\benv(?:\.([A-Z_][A-Z0-9_]*)|\[['"]([A-Z_][A-Z0-9_]*)['"]\])/g)) {
      const name = m[1] ?? m[2]!;
      reads++;
      assert.ok(documented.has(name) || tooling.has(name), `src/${file} reads ${name}, which CONFIG_VARS does not document`);
    }
  }
  assert.ok(reads > 0);
  const rows = new Set<string>();
  for (const v of CONFIG_VARS) {
    assert.not.ok(rows.has(v.name), `${v.name} has two rows`);
    rows.add(v.name);
    assert.type(v.parse, 'function', `${v.name} carries its parser`);
  }
});

test('every row parses its own default', () => {
  for (const v of CONFIG_VARS) assert.not.throws(() => v.parse(v.default, v.name), v.name);
  assert.throws(() => loadConfig({ PORT: ' -1 ' }, '/tmp'), (e: unknown) => e instanceof ConfigError && /between 0 and 65535/.test((e as Error).message));
  assert.is(loadConfig({ PORT: ' 9000 ', PRELOAD_MODELS: 'false' }, '/tmp').port, 9000);
});

test('bad values stop start-up with a message naming the variable', () => {
  const cases: [Record<string, string>, string][] = [
    [{ PORT: 'http' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ WORKER_CAPACITY: '0' }, 'WORKER_CAPACITY'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'postgres://' }, 'DATABASE_URL'],
    [{ WEBHOOK_URL: 'ftp://x' }, 'WEBHOOK_URL'],
    [{ WEBHOOK_URL: 'http://127.0.0.1:9/x' }, 'WEBHOOK_SECRET'],
    [{ EPHEMERAL_KEY_TTL_SECONDS: '9000' }, 'EPHEMERAL_KEY_TTL_SECONDS'],
    [{ BOOTSTRAP_USER_ID: 'a b' }, 'BOOTSTRAP_USER_ID'],
    [{ NODE_ROLE: 'api' }, 'NODE_ROLE'],
    [{ NODE_ROLE: 'boss' }, 'NODE_ROLE'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379', FLEET_TOKEN: 't'.repeat(16) }, 'DATABASE_URL'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgres://u@h/db', FLEET_TOKEN: 'short' }, 'FLEET_TOKEN'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgres://u@h/db', FLEET_TOKEN: 't'.repeat(16), NODE_ID: 'a b' }, 'NODE_ID'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgres://u@h/db', FLEET_TOKEN: 't'.repeat(16), NODE_ROLE: 'worker', HOST: '0.0.0.0' }, 'WORKER_URL'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgres://u@h/db', FLEET_TOKEN: 't'.repeat(16), FLEET_WORKER_TTL_MS: '100' }, 'FLEET_WORKER_TTL_MS'],
  ];
  for (const [env, variable] of cases) {
    try {
      loadConfig(env, '/tmp');
      assert.unreachable(`${JSON.stringify(env)} must be rejected`);
    } catch (err) {
      assert.instance(err, ConfigError);
      assert.is((err as ConfigError).variable, variable);
      assert.ok((err as Error).message.startsWith(`${variable}: `));
    }
  }
});

test('a webhook needs URL and secret together', () => {
  const config = loadConfig({ WEBHOOK_URL: 'https://example.test/hook', WEBHOOK_SECRET: 's'.repeat(16) }, '/tmp');
  assert.is(config.webhook?.url, 'https://example.test/hook');
  assert.is(config.webhook?.maxAttempts, 25);
});

test('fleet mode: REDIS_URL with the PostgreSQL store and a token; each node gets its own id unless given one', () => {
  assert.is(loadConfig({}, '/tmp').fleet, null, 'the embedded default');
  const env = { REDIS_URL: 'redis://10.0.0.2:6379', DATABASE_URL: 'postgres://avatar:pw@10.0.0.3/avatar', FLEET_TOKEN: 't'.repeat(24), NODE_ROLE: 'worker', WORKER_URL: 'http://10.0.0.5:8000/' };
  const a = loadConfig(env, '/tmp').fleet!;
  const b = loadConfig(env, '/tmp').fleet!;
  assert.equal([a.role, a.redisUrl, a.workerUrl, a.workerTtlMs], ['worker', 'redis://10.0.0.2:6379', 'http://10.0.0.5:8000', 5000]);
  assert.match(a.nodeId, /^[\w.-]+-[0-9A-Za-z]{8}$/);
  assert.is.not(a.nodeId, b.nodeId, 'a restarted node registers under a new id');
  assert.is(loadConfig({ ...env, NODE_ID: 'gpu-7' }, '/tmp').fleet!.nodeId, 'gpu-7');
});

test('docs/configuration.md lists every variable of CONFIG_VARS with its default', () => {
  const page = fs.readFileSync(path.join(import.meta.dirname, '../../docs/configuration.md'), 'utf8');
  for (const v of CONFIG_VARS) {
    const shown = v.default === '' ? '(unset)' : `\`${v.default}\``;
    assert.ok(page.includes(`| \`${v.name}\` | ${shown} |`), `docs/configuration.md lacks the row of ${v.name}`);
  }
});

test.run();
