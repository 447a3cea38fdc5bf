/**
 * Verification records: a model file that has been hashed and matched its manifest entry gets a
 * record beside it (`<file>.verified`: the sha256 with the file's size and mtime), so later runs
 * and modelPath() only stat two files instead of re-hashing hundreds of megabytes. A record no
 * longer matches when the file is replaced, truncated or touched, or when the manifest's hash
 * changes; `npm run setup:models -- --check` re-hashes everything on request.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';

const RECORD_SUFFIX = '.verified';

interface VerificationRecord {
  sha256: string;
  bytes: number;
  mtimeMs: number;
}

/** True when the file's size and mtime are those its record holds for the expected hash. */
export function isVerified(file: string, sha256: string, bytes: number): boolean {
  try {
    const st = fs.statSync(file);
    const record = JSON.parse(fs.readFileSync(file + RECORD_SUFFIX, 'utf8')) as VerificationRecord;
    return record.sha256 === sha256 && record.bytes === bytes && st.size === bytes && record.mtimeMs === st.mtimeMs;
  } catch {
    return false; // no file or no (readable) record: not verified
  }
}

/** Records that `file`, as it is now, has `sha256` (the caller has just checked it). */
export function recordVerified(file: string, sha256: string): void {
  const st = fs.statSync(file);
  const record: VerificationRecord = { sha256, bytes: st.size, mtimeMs: st.mtimeMs };
  fs.writeFileSync(file + RECORD_SUFFIX, JSON.stringify(record) + '\n');
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
