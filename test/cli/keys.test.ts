import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, request, startTestServer, tempDir, type TestServer } from '../../harness/servers/server.js';

const run = promisify(execFile);
const Keys = suite<{ t: TestServer; dataDir: string }>('npm run keys', {} as { t: TestServer; dataDir: string });

async function keysCli(dataDir: string, ...args: string[]) {
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'src/cli/keys.ts'), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATA_DIR: dataDir },
    });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout + e.stderr };
  }
}

Keys.before.each(async (ctx) => {
  ctx.dataDir = tempDir();
  ctx.t = await startTestServer({ dataDir: ctx.dataDir });
});
Keys.after.each(async (ctx) => {
  await ctx.t.close();
});

Keys('create prints a working key once; list shows it by prefix; revoke stops it, while the server runs', async ({ t, dataDir }) => {
  const created = await keysCli(dataDir, 'create', '--user', 'dana', '--name', 'laptop', '--json');
  assert.is(created.code, 0, created.stdout);
  const info = JSON.parse(created.stdout);
  assert.match(info.key, /^avs_[0-9A-Za-z]{40}$/);
  assert.is(info.user_id, 'dana');
  assert.is(info.name, 'laptop');
  const session = await request(t.url, 'POST', '/v1/sessions', { key: info.key });
  assert.is(session.status, 200);
  assert.is(session.body.user_id, 'dana');

  const listed = await keysCli(dataDir, 'list', '--user', 'dana');
  assert.is(listed.code, 0);
  assert.match(listed.stdout, new RegExp(`${info.id}\\s+${info.prefix}…\\s+user=dana\\s+active`));
  assert.not.match(listed.stdout, new RegExp(info.key), 'list never shows a full key');

  const revoked = await keysCli(dataDir, 'revoke', info.key);
  assert.is(revoked.code, 0, revoked.stdout);
  assert.match(revoked.stdout, new RegExp(`revoked ${info.id}`));
  assert.is((await request(t.url, 'GET', '/v1/usage', { key: info.key })).status, 401);
  assert.match((await keysCli(dataDir, 'list', '--user', 'dana')).stdout, /revoked/);
  const again = await keysCli(dataDir, 'revoke', info.id);
  assert.is(again.code, 1);
});

Keys('bad usage exits 2 with the usage text', async ({ dataDir }) => {
  const res = await keysCli(dataDir, 'frobnicate');
  assert.is(res.code, 2);
  assert.match(res.stdout, /usage:/);
  const bad = await keysCli(dataDir, 'create', '--user', 'has spaces');
  assert.is(bad.code, 2);
  assert.match(bad.stdout, /user_id/);
});

Keys.run();
