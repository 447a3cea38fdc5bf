/**
 * Starts a real server on 127.0.0.1 (any free port) over a real SQLite file in a fresh temporary
 * data directory (with TEST_STORE=postgres: a fresh database of a real PostgreSQL instead), and
 * gives tests a small HTTP client for it. `restart()` closes the server and opens a new one on the
 * same data directory and store (the store must survive).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import type { Clock } from '../../src/core/clock.js';
import { Logger } from '../../src/core/log.js';
import { startServer, type RunningServer } from '../../src/server/server.js';
import type { RealtimeRuntime } from '../../src/signaling/realtime-connection.js';
import { sharedPostgres } from './postgres-server.js';

export const REPO_ROOT = path.resolve(import.meta.dirname, '../..');

export interface TestServer {
  url: string;
  /** The bootstrap API key (user 'default'). */
  key: string;
  dataDir: string;
  server: RunningServer;
  request(method: string, urlPath: string, options?: RequestOptions): Promise<TestResponse>;
  /** A fresh API key for another user. */
  keyFor(userId: string): Promise<string>;
  restart(env?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export interface RequestOptions {
  key?: string | null;
  json?: unknown;
  body?: RequestInit['body'];
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  dataDir?: string;
  clock?: Clock;
  pendingTimeoutMs?: number;
  /** Realtime providers to use instead of the configured ones (see realtime-server.ts). */
  runtime?: Partial<RealtimeRuntime>;
  /** How long an unauthenticated realtime socket may wait before authenticating. */
  realtimeAuthTimeoutMs?: number;
}

export function tempDir(prefix = 'avatar-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? tempDir();
  let key = '';
  const boot = async (env: Record<string, string>) => {
    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...env });
    return startServer(config, {
      clock: options.clock,
      log: new Logger('silent'),
      pendingTimeoutMs: options.pendingTimeoutMs,
      runtime: options.runtime,
      realtimeAuthTimeoutMs: options.realtimeAuthTimeoutMs,
      onBootstrapKey: (k) => {
        key = k;
      },
    });
  };
  let env = options.env ?? {};
  // TEST_STORE=postgres: every test server on its own database of one PostgreSQL server.
  if (process.env.TEST_STORE === 'postgres' && env.DATABASE_URL === undefined) env = { ...env, DATABASE_URL: await (await sharedPostgres()).createDatabase() };
  let server = await boot(env);
  // An existing data directory has keys already, none of which we know: make one for 'default'.
  if (!key) key = (await server.services.keys.createApiKey('default', 'test')).key;

  const t: TestServer = {
    get url() {
      return server.url;
    },
    get server() {
      return server;
    },
    key,
    dataDir,
    request: (method, urlPath, opts = {}) => request(server.url, method, urlPath, opts.key === undefined ? { ...opts, key } : opts),
    keyFor: async (userId) => (await server.services.keys.createApiKey(userId, 'test')).key,
    restart: async (newEnv) => {
      await server.close();
      if (newEnv) env = { ...newEnv, ...(env.DATABASE_URL !== undefined && newEnv.DATABASE_URL === undefined ? { DATABASE_URL: env.DATABASE_URL } : {}) };
      server = await boot(env);
    },
    close: async () => {
      await server.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

export async function request(base: string, method: string, urlPath: string, opts: RequestOptions = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body = opts.body;
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await fetch(base + urlPath, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = undefined;
  if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed, text };
}
