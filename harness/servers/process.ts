/**
 * Runs the real server entry point (src/main.ts) as a child process, reads its JSON log lines and
 * the one-time key banner, and waits for events on them instead of sleeping (waitWarm: the
 * start-up warm-up); responseTimings reads the critical-path timings it logs for every response.
 * SERVER_NODE_ARGS (space-separated) goes to the server's node before its script: `--cpu-prof
 * --cpu-prof-dir=DIR` profiles the server of a test or bench (node refuses --cpu-prof in
 * NODE_OPTIONS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from './server.js';
import { until } from './wait.js';

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** The key printed on first start, or null when the store already had keys. */
  bootstrapKey: string | null;
  stdout: () => string;
  exited: Promise<number | null>;
}

const START_TIMEOUT_MS = 30_000;

export async function spawnServer(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...(process.env.SERVER_NODE_ARGS?.split(' ') ?? []), '--import', 'tsx', path.join(REPO_ROOT, 'src/main.ts')], {
    cwd: REPO_ROOT,
    // Models are not preloaded unless a test asks: most tests never speak, and loading costs seconds of CPU.
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', PRELOAD_MODELS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}\n${err}`)), START_TIMEOUT_MS);
    const check = () => {
      const m = /^avatar server listening on (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
  const banner = /^\s+(avs_[0-9A-Za-z]{40})$/m.exec(out);
  return { child, url, bootstrapKey: banner ? banner[1]! : null, stdout: () => out + err, exited };
}

/**
 * The server as `npm start` runs it, with `dataDir` for its store: the default providers (the
 * embedded models), loaded at start, and nothing from this environment that would send the model
 * elsewhere. Resolves when /readyz answers 200 (the models loaded).
 */
export async function spawnAsNpmStart(dataDir: string): Promise<ServerProcess> {
  const proc = await spawnServer({ DATA_DIR: dataDir, PRELOAD_MODELS: 'true', LLM_PROVIDER: 'auto', LLM_BASE_URL: '', LLM_API_KEY: '', LLM_MODEL_ROUTES: '' });
  await until(() => fetch(`${proc.url}/readyz`), (r) => r.status === 200, 'the models to load (/readyz 200)', 180_000);
  return proc;
}

/** Resolves once the server has logged 'models warmed up' (PRELOAD_MODELS=true); throws after 3 minutes. */
export async function waitWarm(server: ServerProcess): Promise<void> {
  for (let waited = 0; !server.stdout().includes('models warmed up'); waited += 100) {
    if (waited > 180_000) throw new Error('the server did not finish warming up in 3 minutes');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The server's 'response timing' log line: ms from the response's start to each step (null: not reached). */
export interface ResponseTiming {
  firstTextMs: number | null;
  firstClauseMs: number | null;
  firstVoiceChunkMs: number | null;
  firstAudioMs: number | null;
}

/** Every response's timing in the server's output so far, by response id. */
export function responseTimings(server: ServerProcess): Map<string, ResponseTiming> {
  const timings = new Map<string, ResponseTiming>();
  for (const m of server.stdout().matchAll(/^\{.*"msg":"response timing".*\}$/gm)) {
    const r = JSON.parse(m[0]) as ResponseTiming & { responseId: string };
    timings.set(r.responseId, r);
  }
  return timings;
}
