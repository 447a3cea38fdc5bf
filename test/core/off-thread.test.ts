import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import { OffThread } from '../../src/core/off-thread.js';
import { rejection } from '../helpers/assert-error.js';

const WORKER = new URL('../fixtures/workers/echo-worker.ts', import.meta.url);
const Jobs = suite<{ pool: OffThread }>('OffThread', {} as { pool: OffThread });
Jobs.before.each((ctx) => {
  ctx.pool = new OffThread(WORKER, 'test worker');
});
Jobs.after.each(async (ctx) => {
  await ctx.pool.close();
});

Jobs('runs jobs on one reused worker thread, in order', async ({ pool }) => {
  const [a, b] = await Promise.all([pool.run<{ input: number; threadId: number }>('echo', 1), pool.run<{ input: number; threadId: number }>('echo', 2)]);
  assert.equal([a.input, b.input], [1, 2]);
  assert.ok(a.threadId > 0, 'not the main thread');
  assert.is(a.threadId, b.threadId, 'the same worker');
});

Jobs('an AppError thrown in the worker arrives as an AppError with its code, status, param and message', async ({ pool }) => {
  const err = await rejection(pool.run('refuse', 'no face here'));
  assert.instance(err, AppError);
  assert.equal([(err as AppError).code, (err as AppError).status, (err as AppError).param, (err as AppError).message], ['not_acceptable_here', 422, 'file', 'no face here']);
  const bug = await rejection(pool.run('bug', null));
  assert.is((bug as AppError).status, 500, 'anything else is a 500');
});

Jobs('a job over its time limit is rejected with processing_timeout and the next job gets a fresh worker', async ({ pool }) => {
  const first = await pool.run<{ threadId: number }>('echo', 0);
  const err = await rejection(pool.run('hang', null, { timeoutMs: 200 }));
  assert.is((err as AppError).code, 'processing_timeout');
  assert.is((err as AppError).status, 400);
  const next = await pool.run<{ threadId: number }>('echo', 1);
  assert.is.not(next.threadId, first.threadId, 'a new worker');
});

Jobs('a worker that dies rejects its job (worker_failed); the next job works', async ({ pool }) => {
  const err = await rejection(pool.run('die', null));
  assert.is((err as AppError).code, 'worker_failed');
  assert.is((await pool.run<{ input: string }>('echo', 'again')).input, 'again');
});

Jobs('recycle ends the worker after the job', async ({ pool }) => {
  const a = await pool.run<{ threadId: number }>('echo', 0, { recycle: true });
  const b = await pool.run<{ threadId: number }>('echo', 0);
  assert.is.not(a.threadId, b.threadId);
});

Jobs.run();
