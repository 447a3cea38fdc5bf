/**
 * A real PostgreSQL server for tests: Debian's binaries (installed by `bash src/cli/setup.sh
 * --fleet`, which `npm test` runs), a fresh cluster in a temporary directory, listening on loopback
 * on a free port, durability off (fsync and synchronous commit: a test cluster is thrown away).
 * PostgreSQL refuses to run as root, so under root the cluster belongs to the `postgres` user the
 * package creates. `createDatabase()` gives each test its own empty database; `halt()`, `resume()`
 * and `restart()` stop and start the same server on the same data and port (an outage, a restart);
 * `stop()` shuts the server down and removes the directory.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './net.js';

export interface TestPostgres {
  /** The server's maintenance database (postgres://avatar@127.0.0.1:PORT/postgres). */
  url: string;
  port: number;
  /** A new empty database on this server; its URL. */
  createDatabase(): Promise<string>;
  /**
   * Stops the server and keeps its data (an outage): 'fast' as an operator's stop or restart does
   * (open connections are told 57P01 admin_shutdown), 'immediate' as a crash (they are cut; with
   * synchronous_commit off, the last few hundred milliseconds of commits are lost in recovery).
   */
  halt(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts it again on the same data directory and port; resolves once it accepts connections. */
  resume(): Promise<void>;
  /** halt() then resume(). */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  /**
   * Stops every server process (SIGSTOP) without closing anything: a server that hangs. Connections
   * open but are never answered, queries never return. thaw() lets it go on (SIGCONT).
   */
  freeze(): void;
  thaw(): void;
  /** Shuts the server down for good and removes its directory. */
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;
const SETUP_HINT = 'run `bash src/cli/setup.sh --fleet` (installs Debian\'s postgresql and redis-server)';

/** The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin). */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return null;
  const majors = fs.readdirSync(root).filter((d) => /^\d+$/.test(d) && fs.existsSync(path.join(root, d, 'bin', 'postgres')));
  majors.sort((a, b) => Number(b) - Number(a));
  return majors.length ? path.join(root, majors[0]!, 'bin') : null;
}

/** The uid and gid to run the server as: ours, or the `postgres` user's when we are root. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(`PostgreSQL cannot run as root and there is no 'postgres' user: ${SETUP_HINT}`);
  }
}

/**
 * One server for the whole test process, for `TEST_STORE=postgres` (harness/servers/server.ts runs
 * every test server on its own database of it). It does not keep the process alive and is shut
 * down when the process exits.
 */
let shared: Promise<TestPostgres> | null = null;
export function sharedPostgres(): Promise<TestPostgres> {
  shared ??= startPostgres({ unref: true });
  return shared;
}

export async function startPostgres(options: { unref?: boolean } = {}): Promise<TestPostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error(`PostgreSQL is not installed: ${SETUP_HINT}`);
  const owner = runAs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'avatar-pg-'));
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const data = path.join(dir, 'data');
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  execFileSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'avatar', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'], {
    ...asOwner,
    stdio: 'pipe',
    env: { ...process.env, LC_ALL: 'C' },
  });
  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'synchronous_commit=off',
    '-c', 'full_page_writes=off', '-c', 'max_connections=200', '-c', 'shared_buffers=32MB'];
  const url = `postgres://avatar@127.0.0.1:${port}/postgres`;

  /** The running postmaster (null while halted) and the promise of its exit. */
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let log = '';
  if (options.unref) {
    process.once('exit', () => {
      child?.kill('SIGQUIT');
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }

  /** Starts the postmaster on the data directory and port and waits until it accepts connections. */
  const launch = async (): Promise<void> => {
    const proc: ChildProcess = spawn(path.join(bin, 'postgres'), args, { ...asOwner, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    log = '';
    proc.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    if (options.unref) {
      proc.unref();
      (proc.stdout as unknown as { unref(): void }).unref();
      (proc.stderr as unknown as { unref(): void }).unref();
    }
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`postgres exited with ${proc.exitCode}:\n${log}`);
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {}); // a failed attempt is retried below
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return;
      } catch (err) {
        await client.end().catch(() => {});
        if (Date.now() > deadline) {
          proc.kill('SIGKILL');
          throw new Error(`postgres did not accept connections within ${START_TIMEOUT_MS} ms (${(err as Error).message}):\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };

  /** Stops the postmaster, keeping the data directory: SIGINT is a fast shutdown, SIGQUIT an immediate one (a crash). */
  const halt = async (mode: 'fast' | 'immediate' = 'fast'): Promise<void> => {
    const proc = child;
    if (!proc || proc.exitCode !== null) return;
    proc.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT'); // fast: ends open connections (57P01)
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
    child = null;
  };

  /** Signals the postmaster and each of its children (backends and helpers). */
  const signalAll = (signal: NodeJS.Signals): void => {
    const pid = child?.pid;
    if (!pid) throw new Error('postgres is not running');
    let children: number[] = [];
    try {
      children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
    } catch {
      // pgrep exits 1 when there are none
    }
    for (const p of [pid, ...children]) process.kill(p, signal);
  };

  await launch();

  let databases = 0;
  return {
    url,
    port,
    async createDatabase() {
      const name = `t${process.pid}_${++databases}`;
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {}); // the query below fails with it
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://avatar@127.0.0.1:${port}/${name}`;
    },
    halt,
    async resume() {
      if (child) return;
      await launch();
    },
    async restart(mode = 'fast') {
      await halt(mode);
      await launch();
    },
    freeze: () => signalAll('SIGSTOP'),
    thaw: () => signalAll('SIGCONT'),
    async stop() {
      await halt();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
