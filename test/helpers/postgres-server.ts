/**
 * A real PostgreSQL server for tests: Debian's binaries (installed by `bash src/cli/setup.sh
 * --fleet`, which `npm test` runs), a fresh cluster in a temporary directory, listening on loopback
 * on a free port, durability off (fsync and synchronous commit: a test cluster is thrown away).
 * PostgreSQL refuses to run as root, so under root the cluster belongs to the `postgres` user the
 * package creates. `createDatabase()` gives each test its own empty database; `stop()` shuts the
 * server down and removes the directory.
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
 * One server for the whole test process, for `TEST_STORE=postgres` (test/helpers/server.ts runs
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
  const child: ChildProcess = spawn(path.join(bin, 'postgres'), args, { ...asOwner, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (options.unref) {
    child.unref();
    (child.stdout as unknown as { unref(): void }).unref();
    (child.stderr as unknown as { unref(): void }).unref();
    process.once('exit', () => {
      child.kill('SIGQUIT');
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }
  const url = `postgres://avatar@127.0.0.1:${port}/postgres`;

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}:\n${log}`);
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`postgres did not accept connections within ${START_TIMEOUT_MS} ms (${(err as Error).message}):\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  let databases = 0;
  return {
    url,
    port,
    async createDatabase() {
      const name = `t${process.pid}_${++databases}`;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://avatar@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGINT'); // fast shutdown: ends open connections
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(killer);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
