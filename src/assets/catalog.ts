/**
 * The standard assets: faces, voices and driving motions every user can name by id. The list lives
 * in models/assets/catalog.json (id, filename, description, provenance, and for voices the offline
 * engine settings that render the sample); the files beside it are committed (faces) or made by
 * `npm run setup:assets` from the sources the catalog names (voice samples, driving motions).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AssetKind } from '../store/store.js';

export interface VoiceEngineSettings {
  engine: 'flite' | 'espeak-ng';
  /** flite voice (slt, rms, awb, kal16) or espeak-ng voice (en-us+f3, ...). */
  voice: string;
  /** espeak-ng pitch 0..99 / flite int_f0_target_mean in Hz. */
  pitch?: number;
  /** Relative speaking rate, 1 = the engine's default. */
  rate?: number;
}

export interface CatalogEntry {
  id: string;
  filename: string;
  description: string;
  /** Where the file comes from: a path in the repository, a package, or the generator that makes it. */
  source: string;
  license: string;
  voice?: VoiceEngineSettings;
}

export interface Catalog {
  faces: CatalogEntry[];
  voices: CatalogEntry[];
  driving: CatalogEntry[];
}

export const KIND_DIRS: Record<AssetKind, keyof Catalog> = { face: 'faces', voice: 'voices', driving: 'driving' };

export class StandardAssets {
  constructor(
    readonly catalog: Catalog,
    /** models/assets */
    readonly dir: string,
  ) {}

  static load(modelsDir: string): StandardAssets {
    const dir = path.join(modelsDir, 'assets');
    const catalog = JSON.parse(fs.readFileSync(path.join(dir, 'catalog.json'), 'utf8')) as Catalog;
    return new StandardAssets(catalog, dir);
  }

  entries(kind: AssetKind): CatalogEntry[] {
    return this.catalog[KIND_DIRS[kind]];
  }

  find(kind: AssetKind, id: string): CatalogEntry | undefined {
    return this.entries(kind).find((e) => e.id === id);
  }

  filePath(kind: AssetKind, entry: CatalogEntry): string {
    return path.join(this.dir, KIND_DIRS[kind], entry.filename);
  }

  /** Standard entries whose file is not on disk (the setup has not run, or a file was removed). */
  missing(): string[] {
    const out: string[] = [];
    for (const kind of ['face', 'voice', 'driving'] as const) {
      for (const entry of this.entries(kind)) {
        if (!fs.existsSync(this.filePath(kind, entry))) out.push(`${KIND_DIRS[kind]}/${entry.filename}`);
      }
    }
    return out;
  }
}
