/**
 * Starts a real `redis-server` for a test: on 127.0.0.1, on a free port, in a fresh temporary
 * directory, without persistence (`--save '' --appendonly no`). `startRedis()` resolves once the
 * server answers PING; `stop()` ends it (SIGTERM, SIGKILL after 2 s) and removes the directory.
 * For outages: `kill()` ends the server process (SIGKILL, as a crash would) and keeps its port and
 * directory; `restart()` then starts a fresh one on the same port, empty (nothing is persisted),
 * which is what a Redis restarted without persistence looks like to its clients.
 *
 * `startTcpProxy(port)` is a loopback TCP proxy in front of a server, for a partition of one client:
 * `blackhole(true)` keeps accepting connections but forwards nothing either way on any connection
 * (the bytes are dropped, as by a network that lost its route); `blackhole(false)` resets the
 * connections that went through it (a partition long enough for the peers to give up on them) and
 * forwards again.
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
  /** Kills the server process (SIGKILL); the port and directory stay for restart(). */
  kill(): Promise<void>;
  /** After kill(): a fresh, empty server on the same port, resolved once it answers PING. */
  restart(): Promise<void>;
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
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'avatar-redis-'));
    try {
      return withRestart(binary, dir, await startOnce(binary, await freePort(), dir));
    } catch (error) {
      fs.rmSync(dir, { recursive: true, force: true });
      lastError = error as Error;
      if (!/address already in use/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError!;
}

/** The server as the test sees it: one port, each process on it in turn. */
function withRestart(binary: string, dir: string, first: RedisProcess): RedisServer {
  let current: RedisProcess | null = first;
  let stopped: Promise<void> | null = null;
  return {
    url: first.url,
    port: first.port,
    async kill() {
      const running = current;
      current = null;
      await running?.kill();
    },
    async restart() {
      if (current || stopped) throw new Error('restart() is for a server that kill() ended');
      // The port was just freed: another process may bind it in between (then this throws).
      for (let attempt = 0; ; attempt++) {
        try {
          current = await startOnce(binary, first.port, dir);
          return;
        } catch (error) {
          if (attempt >= 20 || !/address already in use/i.test((error as Error).message)) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
    stop: () =>
      (stopped ??= (async () => {
        const running = current;
        current = null;
        await running?.stop();
        fs.rmSync(dir, { recursive: true, force: true });
      })()),
  };
}

interface RedisProcess {
  url: string;
  port: number;
  /** SIGTERM, SIGKILL after the grace. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL. Idempotent. */
  kill(): Promise<void>;
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

async function startOnce(binary: string, port: number, dir: string): Promise<RedisProcess> {
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
  const end = (signal: 'SIGTERM' | 'SIGKILL'): Promise<void> =>
    (stopped ??= (async () => {
      process.removeListener('exit', killOnExit);
      watchdog?.kill('SIGKILL');
      if (exitCode === null) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
    })());
  const stop = () => end('SIGTERM');

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
  return { url: `redis://127.0.0.1:${port}`, port, stop, kill: () => end('SIGKILL') };
}

export interface TcpProxy {
  /** `redis://127.0.0.1:<port>` of the proxy. */
  url: string;
  port: number;
  /** On: accept, forward nothing (drop every byte). Off: reset the connections made so far and forward again. */
  blackhole(on: boolean): void;
  close(): Promise<void>;
}

/** A loopback TCP proxy to 127.0.0.1:`targetPort` that a test can switch to a blackhole. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let holed = false;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const forward = (to: net.Socket) => (chunk: Buffer) => {
      if (!holed && !to.destroyed) to.write(chunk);
    };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of pair) {
      socket.on('error', close);
      socket.on('close', close);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    blackhole(on) {
      if (holed && !on) for (const [client, upstream] of [...pairs]) (client.destroy(), upstream.destroy());
      holed = on;
    },
    async close() {
      for (const [client, upstream] of [...pairs]) (client.destroy(), upstream.destroy());
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
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
