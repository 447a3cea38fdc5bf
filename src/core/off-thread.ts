/**
 * Heavy one-off work (decoding an uploaded file, running the face models) on a worker thread, so
 * that no request blocks the event loop for the others. One `OffThread` owns one worker, started
 * on the first job and reused; jobs run one at a time in arrival order.
 *
 * Invariants:
 * - A job resolves with the worker's answer or rejects; it never hangs: a job over its time limit
 *   terminates the worker (the next job starts a fresh one) and rejects with a 400
 *   `processing_timeout` AppError, and a worker that dies rejects every job it held.
 * - Errors cross the thread as data: an AppError thrown in the worker arrives as an AppError with
 *   the same code, status, param and message; anything else as a 500.
 * - Memory a job leaves behind in the worker is given back: `recycle: true` ends the worker after
 *   the job (big decodes), and an idle worker ends after IDLE_EXIT_MS. An idle worker never keeps
 *   the process alive.
 * - Worker modules are TypeScript run by tsx, which each worker registers for itself (see
 *   TSX_BOOTSTRAP), whatever loaded tsx in the main thread (`--import tsx`, or uvu's `-r tsx`).
 *
 * The worker side: a module that calls `serveJobs({ task: async (input) => output, ... })`.
 */
import { isMainThread, parentPort, Worker, type Transferable } from 'node:worker_threads';
import { AppError, type ErrorType } from './errors.js';

/**
 * Worker modules are TypeScript: the worker registers tsx's loader itself, then imports the module.
 * (Node 20 does not apply `--import tsx` from a worker's execArgv before loading a .ts entry.)
 */
const TSX_BOOTSTRAP = `
  const { workerData } = require('node:worker_threads');
  import('tsx/esm/api').then(({ register }) => { register(); return import(workerData.moduleUrl); });
`;

/** An idle worker ends after this long by default; the next job starts one again (~0.2 s with tsx). */
const IDLE_EXIT_MS = 30_000;

interface JobRequest {
  id: number;
  task: string;
  input: unknown;
}

type JobReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { message: string; code?: string; status?: number; type?: ErrorType; param?: string | null; app: boolean } };

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface JobOptions {
  /** Buffers handed to the worker without copying (they become unusable here). */
  transfer?: Transferable[];
  /** The job may take at most this long; past it the worker is ended and the job rejected. */
  timeoutMs?: number;
  /** End the worker after this job (it held a lot of memory). */
  recycle?: boolean;
}

export class OffThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private queue: Promise<unknown> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;

  private readonly idleExitMs: number;

  /** `moduleUrl`: the worker module (it calls serveJobs); `name` shows in errors and thread lists. */
  constructor(
    private readonly moduleUrl: URL,
    private readonly name: string,
    options: { idleExitMs?: number } = {},
  ) {
    this.idleExitMs = options.idleExitMs ?? IDLE_EXIT_MS;
  }

  /** Runs `task` in the worker after the jobs before it. */
  run<T>(task: string, input: unknown, options: JobOptions = {}): Promise<T> {
    const job = this.queue.then(() => this.runNow<T>(task, input, options));
    this.queue = job.catch(() => undefined);
    return job;
  }

  /** Ends the worker; jobs still queued or running reject. */
  async close(): Promise<void> {
    this.closed = true;
    await this.stopWorker(new Error(`${this.name}: closed`));
  }

  private runNow<T>(task: string, input: unknown, options: JobOptions): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`${this.name}: closed`));
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const worker = this.ensureWorker();
    worker.ref();
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | null = null;
      const settle = () => {
        if (timer) clearTimeout(timer);
        this.pending.delete(id);
        if (options.recycle) void this.stopWorker(null);
        else if (this.pending.size === 0) this.armIdle();
      };
      this.pending.set(id, {
        resolve: (value) => {
          settle();
          resolve(value as T);
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      });
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          const seconds = Math.round((options.timeoutMs ?? 0) / 100) / 10;
          void this.stopWorker(
            new AppError('processing_timeout', `Processing the file took longer than ${seconds} s; it was stopped. Send a smaller or simpler file.`, {
              status: 400,
              param: 'file',
            }),
          );
        }, options.timeoutMs);
      }
      const request: JobRequest = { id, task, input };
      worker.postMessage(request, options.transfer ?? []);
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(TSX_BOOTSTRAP, { eval: true, name: this.name, workerData: { moduleUrl: this.moduleUrl.href } });
    worker.on('message', (reply: JobReply) => {
      const job = this.pending.get(reply.id);
      if (!job) return;
      if (reply.ok) job.resolve(reply.value);
      else job.reject(reviveError(reply.error));
    });
    worker.on('error', (err) => void this.stopWorker(new AppError('worker_failed', `${this.name} failed: ${err.message}`, { status: 500, cause: err })));
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failAll(new AppError('worker_failed', `${this.name} stopped unexpectedly.`, { status: 500 }));
    });
    this.worker = worker;
    return worker;
  }

  private armIdle(): void {
    this.worker?.unref();
    this.idleTimer = setTimeout(() => void this.stopWorker(null), this.idleExitMs);
    this.idleTimer.unref();
  }

  /** Ends the current worker; jobs it held reject with `reason` (or a generic error). */
  private async stopWorker(reason: unknown): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    this.failAll(reason ?? new Error(`${this.name}: stopped`));
    if (worker) await worker.terminate();
  }

  private failAll(reason: unknown): void {
    for (const job of [...this.pending.values()]) job.reject(reason);
    this.pending.clear();
  }
}

function reviveError(e: Extract<JobReply, { ok: false }>['error']): Error {
  if (e.app && e.code) return new AppError(e.code, e.message, { status: e.status, type: e.type, param: e.param ?? null });
  return new AppError('internal_error', e.message, { status: 500 });
}

/** Worker side: answers jobs by task name until the worker is ended. Call once, at module load. */
export function serveJobs(tasks: Record<string, (input: never) => unknown>): void {
  if (isMainThread || !parentPort) throw new Error('serveJobs() runs in a worker thread');
  const port = parentPort;
  port.on('message', async (request: JobRequest) => {
    let reply: JobReply;
    try {
      const handler = tasks[request.task];
      if (!handler) throw new Error(`no task '${request.task}'`);
      reply = { id: request.id, ok: true, value: await handler(request.input as never) };
    } catch (err) {
      const app = err instanceof AppError;
      reply = {
        id: request.id,
        ok: false,
        error: app
          ? { app, message: err.message, code: err.code, status: err.status, type: err.type, param: err.param }
          : { app, message: err instanceof Error ? err.message : String(err) },
      };
    }
    port.postMessage(reply);
  });
}
