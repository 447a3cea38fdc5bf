/**
 * A closed log pipe: the real server (src/main.ts) with stdout and stderr on pipes whose reader
 * goes away (a log shipper restarting, `npm start | head`). Every log line then fails with EPIPE;
 * the server must go on serving, stay idle when idle (no error loop through the process safety
 * net), and stop promptly on SIGTERM. CPU use is read from /proc/<pid>/stat (utime + stime).
 */
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { request, tempDir } from '../../harness/servers/server.js';

/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on every Linux we run on). */
const CLOCK_TICKS = 100;

const Pipe = suite<{ node: ServerProcess; dir: string }>('a closed log pipe', {} as { node: ServerProcess; dir: string });

Pipe.before(async (ctx) => {
  ctx.dir = tempDir();
  ctx.node = await spawnServer({ DATA_DIR: ctx.dir, LLM_PROVIDER: 'offline', LOG_LEVEL: 'info' });
});

Pipe.after(async (ctx) => {
  if (ctx.node?.child.exitCode === null && ctx.node.child.signalCode === null) ctx.node.child.kill('SIGKILL');
  await ctx.node?.exited;
  if (ctx.dir) fs.rmSync(ctx.dir, { recursive: true, force: true });
});

/** CPU seconds the process has used (user + system). */
function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd (state) on
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS; // utime and stime: the 14th and 15th
}

Pipe('with its log readers gone the server goes on serving, stays idle and stops on SIGTERM', async ({ node }) => {
  const pid = node.child.pid!;
  assert.is((await request(node.url, 'GET', '/healthz')).status, 200);
  // The reader side goes away: the server's next writes to either stream fail with EPIPE.
  node.child.stdout!.destroy();
  node.child.stderr!.destroy();
  // Log lines on both streams: access lines (stdout), failed authentication (a warn or an error on stderr).
  for (let i = 0; i < 20; i++) {
    const health = await request(node.url, 'GET', '/healthz');
    assert.is(health.status, 200, `request ${i} after the pipes closed`);
    await request(node.url, 'GET', '/v1/sessions', { key: 'avs_not-a-key' });
    await request(node.url, 'GET', '/no/such/route');
  }
  const before = cpuSeconds(pid);
  const started = performance.now();
  await new Promise((r) => setTimeout(r, 1000));
  const share = (cpuSeconds(pid) - before) / ((performance.now() - started) / 1000);
  assert.ok(share < 0.5, `an idle server with broken log pipes uses ${Math.round(share * 100)}% of a core`);
  const ready = await request(node.url, 'GET', '/readyz');
  assert.ok(ready.status === 200 || ready.status === 503, 'readiness still answers');
  assert.is((await request(node.url, 'GET', '/healthz')).status, 200, 'still serving after the idle second');

  const signalled = performance.now();
  node.child.kill('SIGTERM');
  const code = await Promise.race([node.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 15_000))]);
  assert.is.not(code, 'hung', 'SIGTERM ends it');
  assert.is(code, 0, 'a clean shutdown');
  assert.ok(performance.now() - signalled < 15_000);
});

Pipe.run();
