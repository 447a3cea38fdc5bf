import { spawn } from 'node:child_process';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../../harness/servers/server.js';

const Guard = suite('process safety net');

/** Runs `body` in a child Node process with the safety net installed; returns its exit code, stdout and stderr. */
function runChild(body: string): Promise<{ code: number | null; out: string; err: string }> {
  const script = `
    import { installProcessSafetyNet, escapedErrors } from ${JSON.stringify(path.join(REPO_ROOT, 'src/core/process-guard.ts'))};
    import { Logger } from ${JSON.stringify(path.join(REPO_ROOT, 'src/core/log.ts'))};
    installProcessSafetyNet(new Logger('error', { module: 'process' }));
    ${body}
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out, err })));
}

Guard('an uncaught exception and an unhandled rejection are logged with their stacks and counted; the process goes on', async () => {
  const r = await runChild(`
    setTimeout(() => { throw new Error('thrown from a timer'); }, 1);
    setTimeout(() => { void Promise.reject(new Error('rejected, never handled')); }, 5);
    setTimeout(() => { console.log(JSON.stringify(escapedErrors())); }, 50);
  `);
  assert.is(r.code, 0, r.err);
  assert.equal(JSON.parse(r.out.trim()), { uncaught_exception: 1, unhandled_rejection: 1 }, 'both counted, and the process lived to say so');
  const lines = r.err.trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string; err: { message: string; stack: string } });
  assert.is(lines.length, 2);
  assert.ok(lines.every((l) => l.level === 'error' && /a bug/.test(l.msg)), r.err);
  assert.ok(lines[0]!.err.stack.includes('thrown from a timer'), 'the stack is logged');
  assert.ok(lines[1]!.err.message.includes('rejected, never handled'));
});

Guard('installed again (a second server in the process), the net keeps one handler of each kind and logs with the newest logger', async () => {
  const r = await runChild(`
    installProcessSafetyNet(new Logger('error', { module: 'second' }));
    console.log(JSON.stringify([process.listenerCount('uncaughtException'), process.listenerCount('unhandledRejection')]));
    setTimeout(() => { throw new Error('thrown once'); }, 1);
    setTimeout(() => { console.log(JSON.stringify(escapedErrors())); }, 50);
  `);
  assert.is(r.code, 0, r.err);
  const [listeners, counted] = r.out.trim().split('\n').map((l) => JSON.parse(l) as unknown);
  assert.equal(listeners, [1, 1], 'one handler each, so an error is neither logged nor counted twice');
  assert.equal(counted, { uncaught_exception: 1, unhandled_rejection: 0 });
  const lines = r.err.trim().split('\n').map((l) => JSON.parse(l) as { module?: string; err: { message: string } });
  assert.is(lines.length, 1, r.err);
  assert.is(lines[0]!.module, 'second');
  assert.is(lines[0]!.err.message, 'thrown once');
});

Guard.run();
