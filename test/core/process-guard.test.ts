import { spawn } from 'node:child_process';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../helpers/server.js';

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

Guard('without the net, the same exception ends the process (what the net prevents)', async () => {
  const child = spawn(process.execPath, ['-e', "setTimeout(() => { throw new Error('x'); }, 1)"], { stdio: 'ignore' });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.is.not(code, 0);
});

Guard.run();
