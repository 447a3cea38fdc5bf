/**
 * Assets: the standard catalog plus each user's uploads (faces, voices, driving motions).
 *
 * An upload is checked in this order, each failure a clear client error: the declared content type
 * is one this kind accepts, or generic (415 otherwise); the bytes are of an accepted kind by their
 * magic numbers (415); the size is within MAX_UPLOAD_BYTES (413, enforced while streaming, before
 * this module); the file really decodes: images by libvips (sharp), audio by the WAV reader or mpg123,
 * motions by the pickle reader (400 invalid_file); a face photo must show one usable, frontal face
 * (422, from face registration, whose landmarks are cached for the renderer). Only then is the file written (temp file, then
 * rename) and the record inserted; a failed insert removes the file.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import type { Clock } from '../core/clock.js';
import { AppError, notFound } from '../core/errors.js';
import { LoadOnce } from '../core/load-once.js';
import { isUuid, newAssetId } from '../core/ids.js';
import type { AssetKind, AssetRecord, Store } from '../store/store.js';
import { OffThread } from '../core/off-thread.js';
import { sniffAudio } from './audio-file.js';
import { KIND_DIRS, isOpenAiVoiceName, type CatalogEntry, type StandardAssets } from './catalog.js';
import type { MotionTemplate } from './motion-template.js';

/** Finds the face in a photo (src/media/face-registration.ts); throws a 422 AppError when there is no usable face. */
export interface FaceRegistrar {
  register(image: Buffer): Promise<{
    box: number[];
    pose: { pitchDeg: number; yawDeg: number; rollDeg: number };
    landmarks: unknown[];
    faces: number;
    frame: { x: number; y: number; width: number; height: number };
  }>;
}

export interface AssetResolver {
  /** Throws 400 `unknown_<kind>` naming `param` unless `id` is a standard id or an asset `userId` owns. */
  require(kind: AssetKind, id: string, userId: string, param: string): Promise<void>;
}

export interface UploadInput {
  kind: AssetKind;
  userId: string;
  data: Buffer;
  /** As declared by the client (multipart part type or request Content-Type); may be generic. */
  contentType: string | null;
  filename: string | null;
  name: string | null;
  description: string | null;
}

/** The entry shape of GET /v1/faces etc. (spec 2.5), plus `type` so callers can tell them apart. */
export interface AssetEntry {
  id: string;
  filename: string;
  description: string;
}

const ACCEPTED_TYPES: Record<AssetKind, string[]> = {
  face: ['image/jpeg', 'image/png', 'image/webp'],
  voice: ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/vnd.wave', 'audio/mpeg', 'audio/mp3'],
  driving: ['application/x-pickle', 'application/python-pickle', 'application/vnd.python.pickle'],
};
const GENERIC_TYPES = ['application/octet-stream', 'binary/octet-stream'];
const EXTENSIONS: Record<string, string> = {
  jpeg: '.jpg',
  png: '.png',
  webp: '.webp',
  wav: '.wav',
  mp3: '.mp3',
  pickle: '.pkl',
};
const MIME_OF: Record<string, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  pickle: 'application/x-pickle',
};
/** The content type of a standard asset's file, by its extension. */
function mimeOfFile(filename: string): string {
  const ext = path.extname(filename).toLowerCase();
  const kind = Object.keys(EXTENSIONS).find((k) => EXTENSIONS[k] === ext || (k === 'jpeg' && ext === '.jpeg'));
  return (kind && MIME_OF[kind]) ?? 'application/octet-stream';
}

/** Faces smaller than this cannot give a usable 512x512 render; larger ones are pointlessly costly. */
const FACE_MIN_PX = 64;
const FACE_MAX_PX = 8192;
/**
 * ...and at most this many pixels: a 50-megapixel phone photo (8000x6000) is fine; a few kB of
 * PNG that inflates to 8000x8000 (192 MB of RGB) is refused before it is decoded.
 */
const FACE_MAX_PIXELS = 50_000_000;
const MAX_NAME_CHARS = 200;
/**
 * A voice or motion check may take this long on its worker thread: a 600 s WAV decodes in well
 * under a second here; past this the file is refused (processing_timeout) and the worker replaced.
 */
const INSPECT_TIMEOUT_MS = 30_000;
/** After checking a file this big, the worker is ended so the memory its decode used is returned. */
const RECYCLE_AFTER_BYTES = 1024 * 1024;

/** A standard asset described like an upload: its catalog entry and what inspecting its file measured. */
export interface StandardAssetInfo {
  kind: AssetKind;
  entry: CatalogEntry;
  contentType: string;
  bytes: number;
  sha256: string;
  metadata: Record<string, unknown>;
}

export class AssetService implements AssetResolver {
  /** Decodes uploaded voices and motions off the event loop (inspect.ts runs there). */
  private readonly inspector = new OffThread(new URL('./inspect-worker.ts', import.meta.url), 'asset inspector');
  /** Standard assets already described (their files do not change while the server runs). */
  private readonly standardInfo = new LoadOnce<StandardAssetInfo>();

  constructor(
    private readonly store: Store,
    readonly standard: StandardAssets,
    private readonly dataDir: string,
    private readonly clock: Clock,
    /** Face photos are registered (landmarks, pose) at upload; one without a usable face is a 422. */
    private readonly faces: FaceRegistrar,
  ) {}

  /** A driving file's motion template, parsed off the event loop (a long template takes tens of ms). */
  readMotion(data: Buffer): Promise<MotionTemplate> {
    return this.inspector.run<MotionTemplate>('template', data, { timeoutMs: INSPECT_TIMEOUT_MS });
  }

  /** Ends the inspection worker. */
  async close(): Promise<void> {
    await this.inspector.close();
  }

  async require(kind: AssetKind, id: string, userId: string, param: string): Promise<void> {
    if (this.standard.find(kind, id)) return;
    if (kind === 'voice' && isOpenAiVoiceName(id)) return;
    if (isUuid(id)) {
      const asset = await this.store.getAsset(id.toLowerCase());
      if (asset && asset.kind === kind && asset.userId === userId) return;
    }
    const ids = this.standard.entries(kind).map((e) => e.id).join(', ') + (kind === 'voice' ? ', or an OpenAI voice name' : '');
    throw new AppError(
      `unknown_${kind}`,
      `Unknown ${kind} '${id}'. Use a standard id (${ids}) or the UUID of a ${kind} you uploaded.`,
      { status: 400, param },
    );
  }

  /** Standard entries, then the caller's own uploads when the caller is known. */
  async list(kind: AssetKind, userId: string | null): Promise<AssetEntry[]> {
    const standard = this.standard.entries(kind).map(({ id, filename, description }) => ({ id, filename, description }));
    if (userId === null) return standard;
    const own = await this.store.listAssets(userId, kind);
    return [...standard, ...own.map(({ id, filename, description }) => ({ id, filename, description }))];
  }

  async get(kind: AssetKind, id: string, userId: string): Promise<AssetRecord> {
    const asset = isUuid(id) ? await this.store.getAsset(id.toLowerCase()) : null;
    if (!asset || asset.kind !== kind || asset.userId !== userId) throw notFound(kind, id);
    return asset;
  }

  /**
   * A standard asset, inspected as an upload would be (a face: size, face box, pose and the
   * head-and-shoulders frame the avatar shows), once per server run; undefined for other ids.
   */
  describeStandard(kind: AssetKind, id: string): Promise<StandardAssetInfo> | undefined {
    const entry = this.standard.find(kind, id);
    if (!entry) return undefined;
    // A failure (file missing until setup runs) is not remembered.
    return this.standardInfo.get(`${kind}/${entry.id}`, async () => {
      const data = await fs.readFile(this.standard.filePath(kind, entry));
      const metadata = await this.inspect(kind, data);
      return {
        kind,
        entry,
        contentType: mimeOfFile(entry.filename),
        bytes: data.length,
        sha256: createHash('sha256').update(data).digest('hex'),
        metadata,
      };
    });
  }

  /**
   * The file of an asset, to serve as it is: a standard one (public) from the catalog's folder, or
   * an upload of `userId`'s (null: no caller, so only standard assets are found).
   */
  async content(kind: AssetKind, id: string, userId: string | null): Promise<{ path: string; contentType: string; filename: string }> {
    const entry = this.standard.find(kind, id);
    if (entry) return { path: this.standard.filePath(kind, entry), contentType: mimeOfFile(entry.filename), filename: entry.filename };
    if (userId === null) throw notFound(kind, id);
    const asset = await this.get(kind, id, userId);
    return { path: this.storedFilePath(asset), contentType: asset.contentType, filename: asset.filename };
  }

  /** Absolute path of an uploaded asset's stored file (read by e.g. the TTS voice analysis). */
  storedFilePath(asset: AssetRecord): string {
    return path.join(this.dataDir, asset.storagePath);
  }

  async delete(kind: AssetKind, id: string, userId: string): Promise<AssetRecord> {
    if (this.standard.find(kind, id)) {
      throw new AppError('standard_asset_immutable', `'${id}' is a standard ${kind} and cannot be deleted.`, {
        status: 400,
        param: 'id',
      });
    }
    const asset = await this.get(kind, id, userId);
    await this.store.deleteAsset(asset.id);
    await fs.rm(path.join(this.dataDir, asset.storagePath), { force: true });
    return asset;
  }

  async upload(input: UploadInput): Promise<AssetRecord> {
    const { kind } = input;
    const declared = input.contentType?.split(';')[0]?.trim().toLowerCase() || null;
    if (declared && !GENERIC_TYPES.includes(declared) && !ACCEPTED_TYPES[kind].includes(declared)) {
      throw unsupported(kind, `Content type '${declared}' is not accepted for a ${kind}.`);
    }
    if (input.data.length === 0) throw new AppError('empty_file', 'The uploaded file is empty.', { param: 'file' });
    const sniffed = sniff(kind, input.data);
    if (!sniffed) throw unsupported(kind, `The file is not a ${kind === 'face' ? 'JPEG, PNG or WebP image' : kind === 'voice' ? 'WAV or MP3 file' : 'pickle (.pkl) file'}.`);
    const metadata = await this.inspect(kind, input.data);

    const id = newAssetId();
    const ext = EXTENSIONS[sniffed] ?? '';
    const storagePath = path.join('assets', KIND_DIRS[kind], `${id}${ext}`);
    const absolute = path.join(this.dataDir, storagePath);
    await fs.mkdir(path.dirname(absolute), { recursive: true });
    const tmp = `${absolute}.tmp`;
    await fs.writeFile(tmp, input.data);
    await fs.rename(tmp, absolute);

    const filename = safeFilename(input.filename) ?? `${id}${ext}`;
    const record: AssetRecord = {
      id,
      userId: input.userId,
      kind,
      name: clip(input.name) ?? path.parse(filename).name,
      filename,
      description: clip(input.description) ?? '',
      contentType: MIME_OF[sniffed] ?? 'application/octet-stream',
      bytes: input.data.length,
      sha256: createHash('sha256').update(input.data).digest('hex'),
      storagePath,
      metadata,
      createdAtUs: this.clock.nowUs(),
    };
    try {
      await this.store.insertAsset(record);
    } catch (err) {
      await fs.rm(absolute, { force: true });
      throw err;
    }
    return record;
  }

  private async inspect(kind: AssetKind, data: Buffer): Promise<Record<string, unknown>> {
    if (kind === 'face') {
      const image = await inspectImage(data);
      const face = await this.faces.register(data);
      return {
        ...image,
        face_box: face.box.map((v) => Math.round(v)),
        face_pose: face.pose,
        face_frame: face.frame,
        landmarks: face.landmarks.length,
        faces_found: face.faces,
      };
    }
    // The bytes are copied to the worker (the caller still writes them to disk).
    return this.inspector.run<Record<string, unknown>>(kind === 'voice' ? 'voice' : 'motion', data, {
      timeoutMs: INSPECT_TIMEOUT_MS,
      recycle: data.length > RECYCLE_AFTER_BYTES,
    });
  }
}

/**
 * The image's size from its header first (refused outside FACE_MIN_PX..FACE_MAX_PX before any
 * pixel is decoded), then a full decode on libuv's pool bounded by that size (`limitInputPixels`:
 * a header that lies cannot make libvips allocate more).
 */
async function inspectImage(data: Buffer): Promise<Record<string, unknown>> {
  let header: { width: number; height: number };
  try {
    const meta = await sharp(data).metadata();
    header = { width: meta.autoOrient.width, height: meta.autoOrient.height };
  } catch (err) {
    throw invalidFile(`The image could not be decoded: ${(err as Error).message}`, err);
  }
  checkImageSize(header.width, header.height);
  let info: { width: number; height: number; channels: number };
  try {
    // A full decode, not just the header. failOn 'warning': libjpeg reports corrupt entropy data
    // only as a warning, and a damaged face photo must be refused at upload, not at render time.
    ({ info } = await sharp(data, { failOn: 'warning', limitInputPixels: header.width * header.height }).rotate().raw().toBuffer({ resolveWithObject: true }));
  } catch (err) {
    throw invalidFile(`The image could not be decoded: ${(err as Error).message}`, err);
  }
  checkImageSize(info.width, info.height);
  return { width: info.width, height: info.height, channels: info.channels };
}

function checkImageSize(width: number, height: number): void {
  if (width < FACE_MIN_PX || height < FACE_MIN_PX || width > FACE_MAX_PX || height > FACE_MAX_PX || width * height > FACE_MAX_PIXELS) {
    throw new AppError(
      'invalid_image_size',
      `Face images must be ${FACE_MIN_PX} to ${FACE_MAX_PX} pixels on each side and at most ${FACE_MAX_PIXELS / 1e6} megapixels; this one is ${width}x${height}.`,
      { status: 400, param: 'file' },
    );
  }
}

function sniff(kind: AssetKind, data: Buffer): string | null {
  if (kind === 'face') {
    if (data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'jpeg';
    if (data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
    if (data.subarray(0, 4).toString('latin1') === 'RIFF' && data.subarray(8, 12).toString('latin1') === 'WEBP') return 'webp';
    return null;
  }
  if (kind === 'voice') return sniffAudio(data);
  // Pickle protocol 2+ starts with PROTO (0x80) and the protocol number; protocol 0/1 files start
  // with an opcode such as '(' (MARK), '}' (EMPTY_DICT) or ']' (EMPTY_LIST).
  if (data[0] === 0x80 && (data[1] ?? 0) >= 2 && (data[1] ?? 0) <= 5) return 'pickle';
  if (data[0] !== undefined && '(}]'.includes(String.fromCharCode(data[0]))) return 'pickle';
  return null;
}

function unsupported(kind: AssetKind, message: string): AppError {
  return new AppError('unsupported_media_type', `${message} Accepted: ${ACCEPTED_TYPES[kind].join(', ')}.`, {
    status: 415,
    param: 'file',
  });
}

function invalidFile(message: string, cause: unknown): AppError {
  return new AppError('invalid_file', message, { status: 400, param: 'file', cause });
}

function safeFilename(name: string | null): string | null {
  if (!name) return null;
  const base = path.basename(name.replace(/\\/g, '/')).replace(/[^\w.\- ]/g, '_').slice(0, MAX_NAME_CHARS);
  return base === '' || base === '.' || base === '..' ? null : base;
}

function clip(text: string | null): string | null {
  return text === null || text.trim() === '' ? null : text.trim().slice(0, MAX_NAME_CHARS);
}

