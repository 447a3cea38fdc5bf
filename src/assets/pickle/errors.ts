/**
 * The pickle module's error type and the helper that makes untrusted text safe to quote in an
 * error message.
 *
 * Invariants: every failure of the reader (malformed, truncated, unsafe or unsupported input)
 * and of the writer (unwritable values) is a PickleError; `offset` is the byte offset of the
 * opcode being decoded when known. This module depends on nothing else in the folder, so any
 * other module may import it. It does not decide what is an error; callers do.
 */

/** Thrown for malformed, truncated, unsafe or unsupported pickles (and unwritable values). */
export class PickleError extends Error {
  /** Byte offset of the opcode being decoded when the error occurred, when known. */
  readonly offset: number | undefined;
  constructor(message: string, offset?: number, opcode?: string) {
    const where = offset === undefined ? '' : opcode ? ` (at byte ${offset}, opcode ${opcode})` : ` (at byte ${offset})`;
    super(message + where);
    this.name = 'PickleError';
    this.offset = offset;
  }
}

/** Makes untrusted text safe and short for an error message. */
export function printable(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 120 ? `${clean.slice(0, 117)}...` : clean;
}
