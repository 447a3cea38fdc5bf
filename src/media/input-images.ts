/**
 * Input images (`input_image` parts: camera frames, screenshots) checked before the engine takes
 * them: the implementation of the engine's door, InputImages (src/realtime/input-images.ts). The
 * composition root constructs one InputImageChecker per process and hands it to the engine.
 *
 * What is accepted: a `data:` URL of base64 data whose declared type is image/jpeg (image/jpg is
 * read as image/jpeg), image/png, image/webp or image/gif, and whose bytes start with that
 * format's signature. The server fetches nothing: an http(s) URL is refused
 * (`unsupported_image_url`), so a client cannot make it reach other hosts (no SSRF). Anything
 * else that is not such a URL (another scheme, no `;base64`, characters outside the base64
 * alphabet, which Node's decoder would skip) is `invalid_image_url`; another declared type, or
 * bytes of another format than the declared one, `invalid_image_format`.
 *
 * Cost is bounded by what the data claims before it is decoded, each step by the one before:
 *  1. the URL's header and its base64 length, without touching the payload: the decoded size
 *     must be at most MAX_IMAGE_BYTES (`image_too_large`);
 *  2. the first 12 bytes (16 base64 characters): the format's signature (`invalid_image_format`);
 *  3. then, holding one of the process's decode slots: the base64 payload, decoded in slices;
 *  4. the image header alone (sharp's metadata reads no pixels): at most MAX_IMAGE_SIDE_PX a side
 *     and MAX_IMAGE_PIXELS (`invalid_image_size`), so a few kB of PNG that claims 30000x30000,
 *     or a decompression bomb whose header is honest, is refused before any pixel is decoded;
 *  5. a full decode by libvips with `limitInputPixels` set to the header's size (a header that
 *     lies cannot make libvips allocate more) and failOn 'warning' (a truncated JPEG is refused,
 *     not grey-filled): `invalid_image` when it does not decode.
 *
 * What the model gets: an image whose longer side is within MODEL_SIDE_PX for its detail (2048 for
 * high and auto, 512 for low, as OpenAI's own vision preprocessing bounds them) is handed on as
 * the client's bytes; a larger one, an animated one (its first frame) or one with an EXIF
 * rotation is re-encoded upright as JPEG (RESIZED_JPEG_QUALITY, transparency over white) within
 * that bound. The size reported is the image as the model sees it.
 *
 * The event loop: libvips work (header, decode, resize, encode) runs on libuv's pool. Decoding
 * base64 is the only work proportional to the image on the event loop: Buffer.from of 10 MiB of
 * data (13.3 M characters) took 10-11 ms in one piece on the development machine (Node 20, 2
 * cores), so the payload is decoded in slices of BASE64_SLICE_CHARS (1 M characters: 0.27 ms
 * median, 0.3-2.5 ms when cold) with the loop free between them; a whole check of a 10 MB PNG
 * cost the main thread 0-20 ms of CPU in 150-900 ms of wall time there. (Validating the
 * alphabet with a regular expression would have cost 90 ms, so bad characters are found from
 * the decoded length instead.) The URL should be the string JSON.parse made, which is flat; a
 * concatenated one is flattened by V8 on its first read, ~20 ms for 13 M characters.
 *
 * Concurrency: at most MAX_CONCURRENT_CHECKS images are decoded at once in the process (libuv has
 * four threads by default, shared with file I/O and every other native job), the others wait in
 * arrival order. A check waits for its slot before its payload is decoded, so the waiting ones
 * hold no decoded bytes. Past MAX_WAITING_CHECKS waiting, a check is refused at once
 * (`rate_limit_exceeded`, a rate_limit_error: send images less often) rather than the line and its
 * delay growing without bound.
 *
 * Errors are AppErrors naming the caller's `param`, status 400 (invalid_request_error) or 429
 * for `rate_limit_exceeded` (rate_limit_error, the code REST and WebSocket limits use); the
 * engine's `error` event shows them as it shows a RealtimeError.
 *
 * Not done here: fetching URLs, keeping more than the first frame of an animation, validating
 * the `detail` value (the engine's item reader does).
 */
import sharp, { type Metadata, type SharpOptions } from 'sharp';
import { AppError } from '../core/errors.js';
import type { CheckedImage, InputImages } from '../realtime/input-images.js';

export type InputImageDetail = 'auto' | 'low' | 'high';

/** Formats accepted, by declared MIME type. */
export const SUPPORTED_IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif'] as const;
export type SupportedImageType = (typeof SUPPORTED_IMAGE_TYPES)[number];

/**
 * Largest image in bytes (decoded from base64). A client event is at most 16 MiB
 * (MAX_CLIENT_EVENT_BYTES), ~12 MiB of base64-decoded bytes; 10 MiB leaves room for the rest of
 * the event and is far above a camera frame (50-300 kB) or a 4K screenshot as PNG (2-8 MB).
 */
export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
/** Longest side the header may claim: 8K screens fit; anything larger is refused unread. */
export const MAX_IMAGE_SIDE_PX = 8192;
/**
 * Most pixels the header may claim: 40 MP (a 7680x4320 8K screenshot is 33 MP) decodes to at most
 * 160 MB of RGBA, at MAX_CONCURRENT_CHECKS of them at once; larger claims are refused unread.
 */
export const MAX_IMAGE_PIXELS = 40_000_000;
/** Longer side a model gets for each detail; larger images are downscaled to it. */
export const MODEL_SIDE_PX: Readonly<Record<InputImageDetail, number>> = { auto: 2048, high: 2048, low: 512 };
/** JPEG quality of a re-encoded image: no visible loss for a vision model at a third of PNG's bytes. */
export const RESIZED_JPEG_QUALITY = 85;
/** Images decoded at once per process (each holds a libuv thread while libvips decodes it). */
export const MAX_CONCURRENT_CHECKS = 2;
/**
 * Checks that may wait for a slot. A 640x480 camera frame took 6-8 ms to check and a 10 MB
 * screenshot 0.15-0.5 s on the development machine, so a full line is a fraction of a second of
 * camera frames from many sessions, or seconds of large screenshots; past it the client is told
 * to slow down.
 */
export const MAX_WAITING_CHECKS = 64;
/** Base64 characters decoded per turn of the event loop (a multiple of 4): 0.3-2.5 ms each. */
export const BASE64_SLICE_CHARS = 1024 * 1024;

/** The data URL's header (`data:image/png;base64`) is at most this long; longer is not an image URL. */
const MAX_HEADER_CHARS = 256;
/** Characters of base64 that hold the signatures below (12 bytes). */
const SIGNATURE_CHARS = 16;
/** libvips messages are quoted in errors up to this length. */
const MAX_QUOTED_CHARS = 200;

export interface InputImageCheckerOptions {
  /** Images decoded at once (MAX_CONCURRENT_CHECKS). */
  maxConcurrent?: number;
  /** Checks that may wait for a slot before more are refused (MAX_WAITING_CHECKS). */
  maxWaiting?: number;
}

/** A data URL read as far as its header and length: the payload is still the caller's string. */
interface DataUrl {
  type: SupportedImageType;
  /** The whole URL and where the base64 payload starts in it. */
  url: string;
  payloadStart: number;
  /** Base64 characters without padding. */
  payloadChars: number;
  /** Bytes the payload decodes to. */
  bytes: number;
}

export class InputImageChecker implements InputImages {
  private readonly slots: Slots;

  constructor(options: InputImageCheckerOptions = {}) {
    this.slots = new Slots(options.maxConcurrent ?? MAX_CONCURRENT_CHECKS, options.maxWaiting ?? MAX_WAITING_CHECKS);
  }

  /** Images being decoded now. */
  get running(): number {
    return this.slots.running;
  }

  /** Checks waiting for a slot. */
  get waiting(): number {
    return this.slots.waiting;
  }

  /**
   * Validates `imageUrl` and resolves with the image as a model gets it at `detail`; rejects with
   * an AppError naming `param`. The checks that need no decoding run before this returns.
   */
  async check(imageUrl: string, param: string, detail: InputImageDetail = 'auto'): Promise<CheckedImage> {
    const dataUrl = readDataUrl(imageUrl, param);
    const slot = this.slots.acquire();
    if (!slot) {
      throw new AppError('rate_limit_exceeded', `Too many images are being checked at once (${this.slots.waiting} waiting); send images less often.`, {
        status: 429,
        param,
      });
    }
    await slot;
    try {
      return await decodeImage(dataUrl, param, MODEL_SIDE_PX[detail] ?? MODEL_SIDE_PX.auto);
    } finally {
      this.slots.release();
    }
  }
}

/**
 * Steps 1 and 2 (see the top): the URL's scheme, type and length, and the signature of its first
 * bytes. Synchronous and independent of the payload's size.
 */
function readDataUrl(url: string, param: string): DataUrl {
  if (typeof url !== 'string') throw invalid('invalid_image_url', 'The image URL must be a string.', param);
  const head = url.slice(0, MAX_HEADER_CHARS);
  if (/^https?:/i.test(head)) {
    throw invalid('unsupported_image_url', 'Image URLs are not fetched by this server; send the image inline as a base64 data URL (data:image/jpeg;base64,...).', param);
  }
  const comma = head.indexOf(',');
  const header = comma < 0 ? null : /^data:([^;,]*)((?:;[^;,]*)*);base64$/i.exec(head.slice(0, comma));
  if (!header) throw invalid('invalid_image_url', 'Expected a base64 data URL of an image (data:image/jpeg;base64,...).', param);
  const declared = header[1]!.trim().toLowerCase();
  const type = declared === 'image/jpg' ? 'image/jpeg' : SUPPORTED_IMAGE_TYPES.find((t) => t === declared);
  if (!type) {
    throw invalid('invalid_image_format', `Unsupported image type '${declared.slice(0, 64)}'. Supported types are: ${SUPPORTED_IMAGE_TYPES.join(', ')}.`, param);
  }
  const payloadStart = comma + 1;
  let end = url.length;
  if (url.charCodeAt(end - 1) === 0x3d /* = */) end--;
  if (url.charCodeAt(end - 1) === 0x3d) end--;
  const payloadChars = end - payloadStart;
  // Unpadded base64 is read too; a length of 1 mod 4 is not base64 at all.
  if (payloadChars === 0 || payloadChars % 4 === 1) throw invalid('invalid_image_url', 'The data URL does not hold valid base64 data.', param);
  const bytes = Math.floor((payloadChars * 3) / 4);
  if (bytes > MAX_IMAGE_BYTES) {
    throw invalid('image_too_large', `The image is ${bytes} bytes; images may be at most ${MAX_IMAGE_BYTES} bytes (${MAX_IMAGE_BYTES / 1024 / 1024} MiB).`, param);
  }
  const start = Buffer.from(url.slice(payloadStart, payloadStart + Math.min(SIGNATURE_CHARS, payloadChars)), 'base64');
  const actual = formatOf(start);
  if (actual !== type) {
    const seen = actual ? `it is ${actual.slice('image/'.length).toUpperCase()}` : 'it is not an image of a supported type';
    throw invalid('invalid_image_format', `The data URL declares ${type} but ${seen}.`, param);
  }
  return { type, url, payloadStart, payloadChars, bytes };
}

function formatOf(b: Buffer): SupportedImageType | null {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  if (b.length >= 6 && /^GIF8[79]a$/.test(b.toString('latin1', 0, 6))) return 'image/gif';
  return null;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Steps 3 to 5 (see the top), then the image as the model gets it. */
async function decodeImage(dataUrl: DataUrl, param: string, sidePx: number): Promise<CheckedImage> {
  const data = await decodeBase64(dataUrl, param);
  let meta: Metadata;
  try {
    // The header only: no limit here, so that an oversized claim is reported as such below.
    meta = await sharp(data, { limitInputPixels: false }).metadata();
  } catch (err) {
    throw undecodable(err, param);
  }
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!(width >= 1 && height >= 1) || width > MAX_IMAGE_SIDE_PX || height > MAX_IMAGE_SIDE_PX || width * height > MAX_IMAGE_PIXELS) {
    throw invalid(
      'invalid_image_size',
      `The image is ${width}x${height} pixels; images may be at most ${MAX_IMAGE_SIDE_PX} pixels a side and ${MAX_IMAGE_PIXELS / 1e6} megapixels.`,
      param,
    );
  }
  const input: SharpOptions = { limitInputPixels: width * height, failOn: 'warning' };
  const asIs = Math.max(width, height) <= sidePx && (meta.pages ?? 1) === 1 && (meta.orientation ?? 1) === 1;
  try {
    if (asIs) {
      // Decoded only to prove it decodes (at most sidePx² pixels here); the client's bytes go on.
      const { info } = await sharp(data, input).raw().toBuffer({ resolveWithObject: true });
      if (info.width !== width || info.height !== height) throw new Error(`decoded ${info.width}x${info.height}, the header says ${width}x${height}`);
      const url = dataUrl.url.startsWith(`data:${dataUrl.type};base64,`) ? dataUrl.url : `data:${dataUrl.type};base64,${dataUrl.url.slice(dataUrl.payloadStart)}`;
      return { url, width, height, bytes: data.length };
    }
    const { data: jpeg, info } = await sharp(data, input)
      .autoOrient()
      .resize({ width: sidePx, height: sidePx, fit: 'inside', withoutEnlargement: true })
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: RESIZED_JPEG_QUALITY })
      .toBuffer({ resolveWithObject: true });
    return { url: `data:image/jpeg;base64,${jpeg.toString('base64')}`, width: info.width, height: info.height, bytes: jpeg.length };
  } catch (err) {
    throw undecodable(err, param);
  }
}

/**
 * The payload's bytes, decoded BASE64_SLICE_CHARS at a time with the event loop free between
 * slices. Buffer's decoder skips characters outside the alphabet, so a payload with any is
 * found by decoding to fewer bytes than its length promises.
 */
async function decodeBase64(dataUrl: DataUrl, param: string): Promise<Buffer> {
  const out = Buffer.allocUnsafe(dataUrl.bytes);
  const end = dataUrl.payloadStart + dataUrl.payloadChars;
  let written = 0;
  for (let at = dataUrl.payloadStart; at < end; at += BASE64_SLICE_CHARS) {
    if (at > dataUrl.payloadStart) await new Promise<void>((resolve) => setImmediate(resolve));
    const slice = dataUrl.url.slice(at, Math.min(at + BASE64_SLICE_CHARS, end));
    const n = out.write(slice, written, 'base64');
    if (n !== Math.floor((slice.length * 3) / 4)) throw invalid('invalid_image_url', 'The data URL does not hold valid base64 data.', param);
    written += n;
  }
  return out;
}

function invalid(code: string, message: string, param: string): AppError {
  return new AppError(code, message, { status: 400, param });
}

function undecodable(err: unknown, param: string): AppError {
  const reason = (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, MAX_QUOTED_CHARS);
  return new AppError('invalid_image', `The image could not be decoded: ${reason}`, { status: 400, param, cause: err });
}

/** A fixed number of slots handed out in arrival order, with a bounded line of waiters. */
class Slots {
  private active = 0;
  private readonly line: (() => void)[] = [];

  constructor(
    private readonly size: number,
    private readonly maxWaiting: number,
  ) {}

  get running(): number {
    return this.active;
  }

  get waiting(): number {
    return this.line.length;
  }

  /** Resolves once a slot is held (release() it after); null when the line is full. */
  acquire(): Promise<void> | null {
    if (this.active < this.size) {
      this.active++;
      return Promise.resolve();
    }
    if (this.line.length >= this.maxWaiting) return null;
    return new Promise((resolve) => this.line.push(resolve));
  }

  /** Frees a slot, handing it to the first in line. */
  release(): void {
    const next = this.line.shift();
    if (next) next();
    else this.active--;
  }
}
