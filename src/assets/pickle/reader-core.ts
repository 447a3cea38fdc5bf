/**
 * State and primitives of the pickle VM behind `readPickle`: the input cursor with
 * bounds-checked operand reads, the value stack with MARK fences, the memo, and parsing of
 * protocol-0 text operands (decimal ints, floats, quoted strings, raw-unicode-escape).
 *
 * Invariants: every read is checked against the bytes that remain, so truncated input fails
 * with the offset and name of the opcode being decoded; the stack never pops below the
 * innermost MARK; a numpy value still waiting for its BUILD (Pending) never gets into a
 * container, tuple or dict key. It does not dispatch opcodes or resolve globals (see
 * reader.ts).
 */

import { PickleError, printable } from './errors.js';
import type { NdDtype } from './ndarray.js';
import { MAX_INT_DIGITS, MAX_LONG_BYTES } from './opcodes.js';
import { PickleTuple, describePickleValue, type PickleKey, type PickleValue } from './values.js';

/** An ndarray or dtype between its REDUCE and its BUILD; never escapes the VM. */
export class Pending {
  readonly memoSlots: number[] = [];
  constructor(
    readonly kind: 'ndarray' | 'dtype',
    readonly dtypeCode: NdDtype | undefined,
    readonly byteOrder: '<' | '>' | '|',
  ) {}
}

export type StackItem = PickleValue | Pending;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

export abstract class UnpicklerCore {
  protected readonly bytes: Uint8Array;
  protected readonly view: DataView;
  protected pos = 0;
  protected opStart = 0;
  protected opName = '';
  protected readonly stack: StackItem[] = [];
  protected readonly marks: number[] = [];
  protected readonly memo = new Map<number, StackItem>();

  constructor(buf: Uint8Array) {
    // A plain view (not a Node Buffer, whose slice() aliases memory).
    this.bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  protected fail(message: string): never {
    throw new PickleError(message, this.opStart, this.opName || undefined);
  }

  // -- raw input --------------------------------------------------------------------------

  protected need(n: number, what: string): void {
    const remaining = this.bytes.length - this.pos;
    if (n > remaining) {
      this.fail(`truncated pickle: ${what} needs ${n} bytes but only ${remaining} remain`);
    }
  }

  protected u8(): number {
    this.need(1, 'argument');
    return this.bytes[this.pos++] as number;
  }

  protected u16(): number {
    this.need(2, 'argument');
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }

  protected i32(): number {
    this.need(4, 'argument');
    const v = this.view.getInt32(this.pos, true);
    this.pos += 4;
    return v;
  }

  protected u32(): number {
    this.need(4, 'argument');
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** An unsigned 64-bit length; anything past the input is reported as truncation. */
  protected u64(): number {
    this.need(8, 'argument');
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    const remaining = BigInt(this.bytes.length - this.pos);
    if (v > remaining) this.fail(`truncated pickle: declared length ${v} exceeds the ${remaining} bytes that remain`);
    return Number(v);
  }

  protected take(n: number, what: string): Uint8Array {
    if (n < 0) this.fail(`negative length ${n}`);
    this.need(n, what);
    const out = this.bytes.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** A protocol-0 text argument up to (not including) the next newline. */
  protected line(): Uint8Array {
    const end = this.bytes.indexOf(0x0a, this.pos);
    if (end < 0) this.fail('truncated pickle: missing newline after text argument');
    const out = this.bytes.slice(this.pos, end);
    this.pos = end + 1;
    return out;
  }

  protected lineText(): string {
    return latin1Decode(this.line());
  }

  protected utf8(bytes: Uint8Array): string {
    try {
      return UTF8.decode(bytes);
    } catch {
      return this.fail('string is not valid UTF-8');
    }
  }

  // -- stack ------------------------------------------------------------------------------

  protected fence(): number {
    return this.marks.length > 0 ? (this.marks[this.marks.length - 1] as number) : 0;
  }

  protected push(v: StackItem): void {
    this.stack.push(v);
  }

  protected pop(): StackItem {
    if (this.stack.length <= this.fence()) this.fail('malformed pickle: stack underflow');
    return this.stack.pop() as StackItem;
  }

  protected top(): StackItem {
    if (this.stack.length <= this.fence()) this.fail('malformed pickle: stack underflow');
    return this.stack[this.stack.length - 1] as StackItem;
  }

  protected popMark(): StackItem[] {
    const mark = this.marks.pop();
    if (mark === undefined) this.fail('malformed pickle: no MARK on the stack');
    return this.stack.splice(mark);
  }

  /** A value about to be stored in a container or tuple must be complete. */
  protected settled(v: StackItem): PickleValue {
    if (v instanceof Pending) this.fail(`malformed pickle: numpy ${v.kind} used before its state was set`);
    return v;
  }

  protected settledAll(items: StackItem[]): PickleValue[] {
    return items.map((v) => this.settled(v));
  }

  protected key(v: StackItem): PickleKey {
    const s = this.settled(v);
    if (
      s === null ||
      typeof s === 'string' ||
      typeof s === 'number' ||
      typeof s === 'bigint' ||
      typeof s === 'boolean' ||
      s instanceof Uint8Array ||
      s instanceof PickleTuple
    ) {
      return s;
    }
    return this.fail(`unhashable ${describePickleValue(s)} used as a dict key or set member`);
  }

  protected pushInt(v: bigint): void {
    this.push(v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);
  }

  protected memoPut(index: number): void {
    const v = this.top();
    const old = this.memo.get(index);
    if (old instanceof Pending) {
      const i = old.memoSlots.indexOf(index);
      if (i >= 0) old.memoSlots.splice(i, 1);
    }
    this.memo.set(index, v);
    if (v instanceof Pending) v.memoSlots.push(index);
  }

  protected memoGet(index: number): void {
    if (!this.memo.has(index)) this.fail(`malformed pickle: memo entry ${index} is missing`);
    this.push(this.memo.get(index) as StackItem);
  }

  protected decimalIndex(): number {
    const text = this.lineText();
    if (!/^[0-9]{1,10}$/.test(text)) this.fail(`invalid memo index '${printable(text)}'`);
    return Number(text);
  }


  // -- numbers and text -------------------------------------------------------------------

  protected parseDecimal(text: string): bigint {
    if (!/^[+-]?[0-9]+$/.test(text)) this.fail(`invalid integer literal '${printable(text)}'`);
    if (text.length > MAX_INT_DIGITS) this.fail(`integer literal with ${text.length} digits is too large`);
    return BigInt(text);
  }

  protected longBytes(n: number): bigint {
    if (n > MAX_LONG_BYTES) this.fail(`integer of ${n} bytes is too large`);
    const bytes = this.take(n, 'LONG');
    if (n === 0) return 0n;
    let hex = '';
    for (let i = n - 1; i >= 0; i--) hex += (bytes[i] as number).toString(16).padStart(2, '0');
    let v = BigInt(`0x${hex}`);
    if (((bytes[n - 1] as number) & 0x80) !== 0) v -= 1n << BigInt(8 * n);
    return v;
  }

  protected parseFloatText(text: string): number {
    const t = text.trim().toLowerCase();
    if (t === 'inf' || t === '+inf' || t === 'infinity' || t === '+infinity') return Infinity;
    if (t === '-inf' || t === '-infinity') return -Infinity;
    if (t === 'nan' || t === '+nan' || t === '-nan') return NaN;
    if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?$/.test(t)) this.fail(`invalid float literal '${printable(text)}'`);
    return Number(t);
  }

  /** Python 2 `repr(str)` in a STRING opcode → raw bytes. */
  protected unquoteString(text: string): Uint8Array {
    const q = text[0];
    if (text.length < 2 || (q !== "'" && q !== '"') || text[text.length - 1] !== q) {
      this.fail('STRING argument is not a quoted string');
    }
    const body = text.slice(1, -1);
    const out: number[] = [];
    for (let i = 0; i < body.length; i++) {
      const c = body.charCodeAt(i);
      if (c !== 0x5c || i === body.length - 1) {
        out.push(c & 0xff);
        continue;
      }
      const e = body[++i] as string;
      const simple: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, f: 12, v: 11, '\\': 92, "'": 39, '"': 34 };
      if (e in simple) out.push(simple[e] as number);
      else if (e === '\n') continue;
      else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(body.slice(i + 1, i + 3))) {
        out.push(parseInt(body.slice(i + 1, i + 3), 16));
        i += 2;
      } else if (/[0-7]/.test(e)) {
        let digits = e;
        while (digits.length < 3 && /[0-7]/.test(body[i + 1] ?? '')) digits += body[++i];
        out.push(parseInt(digits, 8) & 0xff);
      } else {
        out.push(0x5c, e.charCodeAt(0) & 0xff);
      }
    }
    return Uint8Array.from(out);
  }

  /** Python's raw-unicode-escape codec (UNICODE opcode): latin-1 with \uXXXX and \UXXXXXXXX. */
  protected rawUnicodeEscape(text: string): string {
    return text.replace(/\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})/g, (_m, u4: string | undefined, u8: string | undefined) => {
      const cp = parseInt((u4 ?? u8) as string, 16);
      if (cp > 0x10ffff) this.fail('invalid code point in UNICODE argument');
      return String.fromCodePoint(cp);
    });
  }
}

export function describeItem(v: StackItem): string {
  return v instanceof Pending ? `numpy ${v.kind}` : describePickleValue(v);
}

export function latin1Decode(bytes: Uint8Array): string {
  let s = '';
  const CHUNK = 8192;
  for (let i = 0; i < bytes.length; i += CHUNK) {
    s += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  }
  return s;
}
