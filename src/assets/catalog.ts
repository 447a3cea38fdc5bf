/**
 * The standard assets: faces, voices and driving motions every user can name by id. The list lives
 * in models/assets/catalog.json (id, filename, description, provenance, and for voices the offline
 * engine settings that render the sample); the files beside it are committed (faces) or made by
 * `npm run setup:assets` from the sources the catalog names (voice samples, driving motions).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AssetKind } from '../store/store.js';

/**
 * OpenAI's voice names. OpenAI clients send them (audio.output.voice); they are voices here too,
 * wherever a voice id is taken: each speaks with a standard voice of a fitting character
 * (providers/tts maps them), or upstream as given with tts_source `openai`.
 */
export const OPENAI_VOICE_NAMES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse', 'marin', 'cedar'] as const;

export function isOpenAiVoiceName(id: string): boolean {
  return (OPENAI_VOICE_NAMES as readonly string[]).includes(id);
}

export interface VoiceEngineSettings {
  engine: 'flite' | 'espeak-ng' | 'piper';
  /** flite voice (slt, rms, awb, kal16), espeak-ng voice (en-us+f3, ...), or a Piper model's name in models/manifest.json (tts-piper-joe). */
  voice: string;
  /** espeak-ng pitch 0..99 / flite int_f0_target_mean in Hz (Piper: unused). */
  pitch?: number;
  /** Relative speaking rate, 1 = the engine's default. */
  rate?: number;
  /** espeak-ng pitch range 0..100 (50 = normal). */
  range?: number;
}

export interface CatalogEntry {
  id: string;
  filename: string;
  description: string;
  /** Where the file comes from: a path in the repository, a package, or the generator that makes it. */
  source: string;
  license: string;
  /** Voices: the settings the standard sample is spoken with (flite or espeak-ng). */
  voice?: VoiceEngineSettings;
  /** Voices: how each TTS engine speaks this voice, in preference order. tts_source `auto` takes the first available (Piper only when its model is fetched), `offline` the first flite/espeak-ng one, a named engine its own entry (src/providers/tts/index.ts). */
  engines?: VoiceEngineSettings[];
  /** Voices: the OpenAI voice name used for tts_source `openai`. */
  openaiVoice?: string;
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
