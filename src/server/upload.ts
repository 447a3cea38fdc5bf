/**
 * Reads an asset upload from a request, in either form:
 *   multipart/form-data   the file in a part named `file` (or the kind: `image`, `face`, `audio`,
 *                         `voice`, `driving`), optional text fields `name` and `description`
 *   raw body              the file bytes with their own Content-Type; `name`, `description` and
 *                         `filename` from the query string
 *
 * Invariants:
 * - Every stream read here has an 'error' listener (the request, the multipart parser, each file
 *   part, parts that are skipped): a body cut short, malformed or aborted is a 400
 *   `invalid_multipart` (or `incomplete_body`), never an unhandled 'error' event.
 * - The body is bounded before and while it is read: a Content-Length over the limit is refused
 *   before a byte is read, and counting stops at MAX_UPLOAD_BYTES (413 `request_too_large`).
 * - A refused body is not cut off mid-stream: the rest is read and thrown away (up to
 *   DISCARD_LIMIT_BYTES, for at most DISCARD_TIMEOUT_MS) so the client, still sending, gets to read
 *   the 413 instead of a reset connection; past either bound the connection is closed.
 * - A reader given a deadline (a WebRTC call's offer: small, and needed at once) answers a body
 *   still arriving when it passes with 408 `request_timeout` and closes the connection, so a client
 *   that trickles its body a byte at a time (slowloris) holds a socket for seconds, not minutes.
 * Decoding and validating the file is not done here (assets/asset-service.ts, off the event loop).
 * readMultipart and readBody, the readers under it, also take other bodies (a WebRTC call's offer).
 */
import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { AppError } from '../core/errors.js';
import { parseUploadQuery } from './api/requests.js';
import type { AppContext } from './context.js';
import { tooLarge } from './middleware.js';

export interface ReceivedFile {
  data: Buffer;
  contentType: string | null;
  filename: string | null;
  name: string | null;
  description: string | null;
}

/** The multipart part names the file may come under: `file`, then the aliases clients use. */
export const FILE_FIELDS: readonly string[] = ['file', 'image', 'face', 'audio', 'voice', 'driving', 'motion'];
const MAX_TEXT_FIELD_BYTES = 4096;
const MAX_TEXT_FIELDS = 10;
/** Multipart framing around the file (boundaries, part headers, the text fields) on top of the file itself. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;
/**
 * A refused body is read and discarded up to this much more, so a client still sending sees the
 * answer (HTTP clients read the response only once their write is done or fails). 64 MiB is a
 * few seconds on a fast link; a client that keeps going past it is cut off.
 */
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;
/** ...and for at most this long (a client that declared more than it sends would hold the socket). */
const DISCARD_TIMEOUT_MS = 10_000;

export async function receiveUpload(ctx: AppContext, maxBytes: number): Promise<ReceivedFile> {
  const type = ctx.get('content-type').toLowerCase();
  const multipart = type.startsWith('multipart/form-data');
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > maxBytes + (multipart ? MULTIPART_OVERHEAD_BYTES : 0)) {
    discardRest(ctx.req);
    throw tooLarge(maxBytes);
  }
  if (type.startsWith('application/x-www-form-urlencoded')) {
    discardRest(ctx.req);
    throw new AppError('unsupported_media_type', 'Send the file as multipart/form-data (field "file") or as the raw body.', {
      status: 415,
      param: 'file',
    });
  }
  if (multipart) return receiveMultipart(ctx, maxBytes);
  const data = await readBody(ctx.req, maxBytes);
  const query = parseUploadQuery(ctx.query);
  return { data, contentType: type || null, filename: query.filename ?? null, name: query.name ?? null, description: query.description ?? null };
}

/** The whole body, up to `maxBytes` (413 beyond, the rest discarded), within `deadlineMs` if given (408 past it). */
export function readBody(req: IncomingMessage, maxBytes: number, deadlineMs?: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const deadline = deadlineMs === undefined ? null : setTimeout(() => {
      stop();
      discardRest(req);
      reject(bodyTimedOut(deadlineMs));
    }, deadlineMs);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        stop();
        discardRest(req);
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks));
    };
    const onFail = () => {
      stop();
      reject(incompleteBody());
    };
    const stop = () => {
      if (deadline) clearTimeout(deadline);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onFail);
      req.off('aborted', onFail);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onFail);
    req.on('aborted', onFail);
  });
}

function receiveMultipart(ctx: AppContext, maxBytes: number): Promise<ReceivedFile> {
  return readMultipart(ctx.req, {
    fileFields: FILE_FIELDS,
    maxFiles: 1,
    maxFileBytes: maxBytes,
    maxFields: MAX_TEXT_FIELDS,
    maxFieldBytes: MAX_TEXT_FIELD_BYTES,
    refuseLongFields: false,
    param: 'file',
  }).then(({ fields, files }) => {
    const found = files.values().next().value;
    if (!found) throw new AppError('missing_file', 'No file in the form; send it in a part named "file".', { status: 400, param: 'file' });
    return { data: found.data, contentType: found.contentType || null, filename: found.filename || null, name: fields.name ?? null, description: fields.description ?? null };
  });
}

export interface MultipartOptions {
  /** Parts kept as files when sent with a filename (the first of each name); other file parts are skipped. */
  fileFields: readonly string[];
  maxFiles: number;
  /** Per file part (413 beyond). */
  maxFileBytes: number;
  maxFields: number;
  maxFieldBytes: number;
  /** A text field over maxFieldBytes: 413 (true), or kept cut to that size (false). */
  refuseLongFields: boolean;
  /** What a malformed form's error names. */
  param: string | null;
  /** The whole body must have arrived within this long (408 past it); none when undefined. */
  deadlineMs?: number;
}

export interface FilePart {
  data: Buffer;
  contentType: string;
  filename: string;
}

/**
 * A multipart/form-data body: its text fields and the file parts `fileFields` names, each part
 * bounded. Settles once; every failure (malformed or cut body, a limit passed, the client gone) is
 * an AppError, with the rest of the body discarded (see the module comment).
 */
export function readMultipart(req: IncomingMessage, options: MultipartOptions): Promise<{ fields: Record<string, string>; files: Map<string, FilePart> }> {
  const malformed = (detail: string) =>
    new AppError('invalid_multipart', `Malformed multipart request: ${detail}.`.replace(/\.\.$/, '.'), { status: 400, param: options.param });
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: { fileSize: options.maxFileBytes, files: options.maxFiles, fields: options.maxFields, fieldSize: options.maxFieldBytes },
      });
    } catch (err) {
      discardRest(req);
      reject(malformed((err as Error).message));
      return;
    }
    const fields: Record<string, string> = {};
    const files = new Map<string, FilePart>();
    /** File parts being read, by name: the first of each name counts, even before it has ended. */
    const taken = new Set<string>();
    let settled = false;
    /**
     * Ends reading: the parser is detached (not destroyed: busboy fails when destroyed from inside
     * its own callbacks; unfed, it is simply collected), the rest of the body discarded on failure.
     */
    const finish = (error: AppError | null) => {
      if (settled) return;
      settled = true;
      if (deadline) clearTimeout(deadline);
      req.unpipe(parser);
      req.off('error', onRequestError);
      req.off('aborted', onRequestError);
      if (error) {
        parser.removeAllListeners('close');
        parser.on('error', () => undefined); // errors after the answer was decided change nothing
        discardRest(req);
        reject(error);
      } else {
        resolve({ fields, files });
      }
    };
    const onRequestError = () => finish(incompleteBody());
    const deadlineMs = options.deadlineMs;
    const deadline = deadlineMs === undefined ? null : setTimeout(() => finish(bodyTimedOut(deadlineMs)), deadlineMs);

    parser.on('field', (name, value, info) => {
      if (info.valueTruncated && options.refuseLongFields) finish(tooLarge(options.maxFieldBytes));
      else fields[name] = value;
    });
    parser.on('file', (field, stream, info) => {
      // Every part stream gets an error listener, skipped ones too: a body cut inside any part
      // makes busboy emit 'error' on that part's stream.
      stream.on('error', (err: Error) => finish(malformed(err.message)));
      if (!options.fileFields.includes(field) || taken.has(field)) {
        stream.resume();
        return;
      }
      taken.add(field);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => finish(tooLarge(options.maxFileBytes)));
      stream.on('end', () => {
        if (!stream.truncated) files.set(field, { data: Buffer.concat(chunks), contentType: info.mimeType, filename: info.filename ?? '' });
      });
    });
    parser.on('error', (err: Error) => finish(malformed(err.message)));
    parser.on('close', () => finish(null));
    req.on('error', onRequestError);
    req.on('aborted', onRequestError);
    req.pipe(parser);
  });
}

/**
 * Reads and drops whatever the client still sends, bounded in bytes and time, so that the answer
 * already decided reaches it (see the module comment). The connection stays usable when the body
 * ends within the bounds.
 */
export function discardRest(req: IncomingMessage): void {
  if (req.readableEnded || req.destroyed) return;
  let discarded = 0;
  const timer = setTimeout(() => req.destroy(), DISCARD_TIMEOUT_MS);
  timer.unref();
  req.removeAllListeners('data');
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_LIMIT_BYTES) req.destroy();
  });
  req.on('error', () => undefined); // the client went away while we discarded: nothing to answer
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

/**
 * A body still arriving at its deadline: 408 with `Connection: close`, so the connection is closed
 * once the answer is sent (the rest of the body is not waited for: that is what the deadline is for).
 */
function bodyTimedOut(deadlineMs: number): AppError {
  return new AppError('request_timeout', `The request body did not arrive within ${deadlineMs / 1000} s.`, { status: 408, headers: { Connection: 'close' } });
}

function incompleteBody(): AppError {
  return new AppError('incomplete_body', 'The request body ended before it was complete (the connection was closed).', { status: 400 });
}
