/**
 * Reads an asset upload from a request, in either form:
 *   multipart/form-data   the file in a part named `file` (or the kind: `image`, `face`, `audio`,
 *                         `voice`, `driving`), optional text fields `name` and `description`
 *   raw body              the file bytes with their own Content-Type; `name`, `description` and
 *                         `filename` from the query string
 * Both stop reading at MAX_UPLOAD_BYTES and answer 413.
 */
import busboy from 'busboy';
import { AppError } from '../core/errors.js';
import type { AppContext } from './context.js';
import { tooLarge } from './middleware.js';

export interface ReceivedFile {
  data: Buffer;
  contentType: string | null;
  filename: string | null;
  name: string | null;
  description: string | null;
}

const FILE_FIELDS = ['file', 'image', 'face', 'audio', 'voice', 'driving', 'motion'];
const MAX_TEXT_FIELD_BYTES = 4096;

export async function receiveUpload(ctx: AppContext, maxBytes: number): Promise<ReceivedFile> {
  const declaredLength = Number(ctx.get('content-length') || 0);
  if (declaredLength > maxBytes + 64 * 1024) throw tooLarge(maxBytes);
  const type = ctx.get('content-type').toLowerCase();
  if (type.startsWith('multipart/form-data')) return receiveMultipart(ctx, maxBytes);
  if (type.startsWith('application/x-www-form-urlencoded')) {
    throw new AppError('unsupported_media_type', 'Send the file as multipart/form-data (field "file") or as the raw body.', {
      status: 415,
      param: 'file',
    });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk as Buffer);
  }
  const query = (key: string): string | null => (typeof ctx.query[key] === 'string' ? (ctx.query[key] as string) : null);
  return {
    data: Buffer.concat(chunks),
    contentType: type || null,
    filename: query('filename'),
    name: query('name'),
    description: query('description'),
  };
}

function receiveMultipart(ctx: AppContext, maxBytes: number): Promise<ReceivedFile> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: ctx.req.headers,
        limits: { fileSize: maxBytes, files: 1, fields: 10, fieldSize: MAX_TEXT_FIELD_BYTES },
      });
    } catch (err) {
      reject(new AppError('invalid_multipart', `Malformed multipart request: ${(err as Error).message}`, { status: 400 }));
      return;
    }
    const fields: Record<string, string> = {};
    let file: { data: Buffer; contentType: string; filename: string } | null = null;
    let failure: AppError | null = null;

    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (field, stream, info) => {
      if (!FILE_FIELDS.includes(field) || file) {
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => {
        failure = tooLarge(maxBytes);
      });
      stream.on('end', () => {
        file = { data: Buffer.concat(chunks), contentType: info.mimeType, filename: info.filename ?? "" };
      });
    });
    parser.on('error', (err: Error) => {
      reject(new AppError('invalid_multipart', `Malformed multipart request: ${err.message}`, { status: 400 }));
    });
    parser.on('close', () => {
      if (failure) return reject(failure);
      if (!file) {
        return reject(
          new AppError('missing_file', `No file in the form; send it in a part named "file".`, { status: 400, param: 'file' }),
        );
      }
      const found: { data: Buffer; contentType: string; filename: string } = file;
      resolve({
        data: found.data,
        contentType: found.contentType || null,
        filename: found.filename || null,
        name: fields.name ?? null,
        description: fields.description ?? null,
      });
    });
    ctx.req.pipe(parser);
  });
}
