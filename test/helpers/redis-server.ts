/**
 * Starts a real `redis-server` for a test: on 127.0.0.1, on a free port, in a fresh temporary
 * directory, without persistence (`--save '' --appendonly no`). `startRedis()` resolves once the
 * server answers PING; `stop()` ends it (SIGTERM, SIGKILL after 2 s) and removes the directory.
 *
 * The server is a child of the test process (not detached), so it ends with the test process's
 * process group. Two more guards cover a test process that ends without calling stop(): an `exit`
 * listener kills the server, and a tiny watchdog shell (reading a pipe from the test process) sends
 * SIGTERM when that pipe closes, which also happens when the test process is killed with SIGKILL.
 *
 * Without redis-server installed this throws, naming the set-up command; fleet tests never skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './net.js';

export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** Ends the server and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 15_000;
const PING_TIMEOUT_MS = 500;
const POLL_MS = 50;
const KILL_GRACE_MS = 2_000;
/** A free port can be taken by someone else before redis-server binds it: try again this often. */
const START_ATTEMPTS = 3;
const LOG_LIMIT = 64 * 1024;

export async function startRedis(): Promise<RedisServer> {
  const binary = findRedisServer();
  let lastError: Error | null = null;
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    try {
      return await startOnce(binary, await freePort());
    } catch (error) {
      lastError = error as Error;
      if (!/address already in use/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError!;
}

function findRedisServer(): string {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, 'redis-server');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error('redis-server is not installed: run `bash src/cli/setup.sh --fleet` to install it for the fleet tests');
}

async function startOnce(binary: string, port: number): Promise<RedisServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'avatar-redis-'));
  const child = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--logfile', '', '--daemonize', 'no'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  const onOutput = (chunk: Buffer) => {
    log += chunk.toString();
    if (log.length > LOG_LIMIT) log = log.slice(-LOG_LIMIT);
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  let exitCode: number | string | null = null;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitCode = code ?? signal;
      resolve();
    });
  });
  child.once('error', (error) => onOutput(Buffer.from(`spawn error: ${error.message}\n`)));

  const watchdog = startWatchdog(child);
  // Once the server is gone its pid may be reused: the watchdog must not outlive it.
  void exited.then(() => watchdog?.kill('SIGKILL'));
  const killOnExit = () => {
    if (exitCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      process.removeListener('exit', killOnExit);
      watchdog?.kill('SIGKILL');
      if (exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exitCode !== null) {
      await stop();
      throw new Error(`redis-server exited (${exitCode}) before answering PING on port ${port}; its log:\n${log}`);
    }
    if (await ping(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on port ${port} within ${READY_TIMEOUT_MS} ms; its log:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return { url: `redis://127.0.0.1:${port}`, port, stop };
}

/**
 * A shell that waits for its stdin (a pipe from this process) to close, then sends the server
 * SIGTERM. The pipe closes when this process ends in any way, SIGKILL included. Unreferenced, so it
 * never keeps the test process alive.
 */
function startWatchdog(server: ChildProcess): ChildProcess | null {
  if (server.pid === undefined) return null;
  const watchdog = spawn('sh', ['-c', 'cat >/dev/null; kill -TERM "$1" 2>/dev/null', 'redis-watchdog', String(server.pid)], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  watchdog.on('error', () => {}); // no sh: the other guards remain
  watchdog.stdin!.on('error', () => {});
  watchdog.unref();
  (watchdog.stdin as net.Socket).unref();
  return watchdog;
}

/** One PING over a fresh connection: true on +PONG within PING_TIMEOUT_MS. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), PING_TIMEOUT_MS);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('error', () => done(false));
  });
}
