/**
 * `writePickle`: encodes a PickleWritable as a protocol-4 pickle (no framing), written the way
 * CPython + numpy 1.x write the same objects, so `pickle.load` in Python (numpy 1 or 2) reads
 * it back.
 *
 * Invariants: a safe-integer JS number becomes a Python int, any other number a float
 * (`pyFloat` forces a float); records skip `undefined` members; only whitelisted globals are
 * written; arrays are written little-endian in C order. Cyclic values and nesting deeper than
 * MAX_WRITE_DEPTH throw a PickleError. Shared sub-objects are written once per occurrence
 * (only numpy globals and dtypes are memoized).
 */

import { PickleError, printable } from './errors.js';
import { ALLOWED_GLOBALS, canonicalGlobal } from './globals.js';
import { DTYPES, NdArray, NpDtype, encodeArrayData, type NdDtype } from './ndarray.js';
import { MAX_WRITE_DEPTH, OP } from './opcodes.js';
import {
  PickleFloat,
  PickleGlobal,
  PickleTuple,
  type PickleKey,
  type PickleRecord,
  type PickleWritable,
} from './values.js';

const UTF8_ENCODER = new TextEncoder();

/** Encodes a value as a protocol-4 pickle. Throws PickleError for values it cannot represent. */
export function writePickle(value: PickleWritable): Uint8Array {
  const w = new Pickler();
  w.byte(OP.PROTO);
  w.byte(4);
  w.value(value, 0);
  w.byte(OP.STOP);
  return w.result();
}

class Pickler {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  private len = 0;
  private memoSize = 0;
  private readonly globalMemo = new Map<string, number>();
  private readonly dtypeMemo = new Map<string, number>();
  private readonly active = new Set<object>();

  result(): Uint8Array {
    return this.buf.slice(0, this.len);
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(b: number): void {
    this.reserve(1);
    this.buf[this.len++] = b;
  }

  private bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  private u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.len, v, true);
    this.len += 4;
  }

  private u64(v: number): void {
    this.reserve(8);
    this.view.setBigUint64(this.len, BigInt(v), true);
    this.len += 8;
  }

  private memoize(): number {
    this.byte(OP.MEMOIZE);
    return this.memoSize++;
  }

  private get(index: number): void {
    if (index < 256) {
      this.byte(OP.BINGET);
      this.byte(index);
    } else {
      this.byte(OP.LONG_BINGET);
      this.u32(index);
    }
  }

  value(v: PickleWritable, depth: number): void {
    if (depth > MAX_WRITE_DEPTH) throw new PickleError(`value nests deeper than ${MAX_WRITE_DEPTH} levels`);
    if (v === null) return this.byte(OP.NONE);
    switch (typeof v) {
      case 'boolean':
        return this.byte(v ? OP.NEWTRUE : OP.NEWFALSE);
      case 'number':
        return Number.isSafeInteger(v) ? this.int(BigInt(v)) : this.float(v);
      case 'bigint':
        return this.int(v);
      case 'string':
        return this.string(v);
      case 'undefined':
        throw new PickleError('cannot pickle undefined');
      case 'object':
        break;
      default:
        throw new PickleError(`cannot pickle a ${typeof v}`);
    }
    if (v instanceof PickleFloat) return this.float(v.value);
    if (v instanceof Uint8Array) return this.binBytes(v);
    if (v instanceof NdArray) return this.ndarray(v);
    if (v instanceof NpDtype) return this.dtype(v.code, v.byteOrder);
    if (v instanceof PickleGlobal) {
      if (!ALLOWED_GLOBALS.has(canonicalGlobal(v.module, v.name))) {
        throw new PickleError(`refusing to write unsupported global '${printable(v.qualifiedName)}'`);
      }
      return this.global(v.module, v.name);
    }
    if (this.active.has(v)) throw new PickleError('cannot pickle a cyclic structure');
    this.active.add(v);
    try {
      if (v instanceof PickleTuple) this.tuple(v.items, depth);
      else if (Array.isArray(v)) this.list(v as readonly PickleWritable[], depth);
      else if (v instanceof Map) this.dict([...(v as ReadonlyMap<PickleKey, PickleWritable>)], depth);
      else if (v instanceof Set) this.set([...(v as ReadonlySet<PickleKey>)], depth);
      else if (isPlainObject(v)) {
        const entries: [PickleKey, PickleWritable][] = [];
        for (const [k, x] of Object.entries(v as PickleRecord)) if (x !== undefined) entries.push([k, x]);
        this.dict(entries, depth);
      } else {
        throw new PickleError(`cannot pickle a ${(v as object).constructor?.name ?? 'object'}`);
      }
    } finally {
      this.active.delete(v);
    }
  }

  private int(v: bigint): void {
    if (v >= 0n && v < 256n) {
      this.byte(OP.BININT1);
      this.byte(Number(v));
    } else if (v >= 0n && v < 65536n) {
      this.byte(OP.BININT2);
      this.byte(Number(v) & 0xff);
      this.byte(Number(v) >> 8);
    } else if (v >= -(2n ** 31n) && v < 2n ** 31n) {
      this.byte(OP.BININT);
      this.reserve(4);
      this.view.setInt32(this.len, Number(v), true);
      this.len += 4;
    } else {
      const bytes: number[] = [];
      let x = v;
      for (;;) {
        const b = Number(x & 0xffn);
        bytes.push(b);
        x >>= 8n;
        if ((x === 0n && (b & 0x80) === 0) || (x === -1n && (b & 0x80) !== 0)) break;
      }
      if (bytes.length < 256) {
        this.byte(OP.LONG1);
        this.byte(bytes.length);
      } else {
        this.byte(OP.LONG4);
        this.u32(bytes.length);
      }
      this.bytes(Uint8Array.from(bytes));
    }
  }

  private float(v: number): void {
    this.byte(OP.BINFLOAT);
    this.reserve(8);
    this.view.setFloat64(this.len, v, false);
    this.len += 8;
  }

  private string(s: string): void {
    const b = UTF8_ENCODER.encode(s);
    if (b.length < 256) {
      this.byte(OP.SHORT_BINUNICODE);
      this.byte(b.length);
    } else if (b.length <= 0xffffffff) {
      this.byte(OP.BINUNICODE);
      this.u32(b.length);
    } else {
      this.byte(OP.BINUNICODE8);
      this.u64(b.length);
    }
    this.bytes(b);
  }

  private binBytes(b: Uint8Array): void {
    if (b.length < 256) {
      this.byte(OP.SHORT_BINBYTES);
      this.byte(b.length);
    } else if (b.length <= 0xffffffff) {
      this.byte(OP.BINBYTES);
      this.u32(b.length);
    } else {
      this.byte(OP.BINBYTES8);
      this.u64(b.length);
    }
    this.bytes(b);
  }

  private tuple(items: readonly PickleWritable[], depth: number): void {
    if (items.length === 0) return this.byte(OP.EMPTY_TUPLE);
    if (items.length <= 3) {
      for (const x of items) this.value(x, depth + 1);
      return this.byte(OP.TUPLE1 + items.length - 1);
    }
    this.byte(OP.MARK);
    for (const x of items) this.value(x, depth + 1);
    this.byte(OP.TUPLE);
  }

  private list(items: readonly PickleWritable[], depth: number): void {
    this.byte(OP.EMPTY_LIST);
    this.batched(items.length, (i) => this.value(items[i] as PickleWritable, depth + 1), OP.APPENDS);
  }

  private dict(entries: readonly [PickleKey, PickleWritable][], depth: number): void {
    this.byte(OP.EMPTY_DICT);
    this.batched(
      entries.length,
      (i) => {
        const [k, x] = entries[i] as [PickleKey, PickleWritable];
        this.value(k, depth + 1);
        this.value(x, depth + 1);
      },
      OP.SETITEMS,
    );
  }

  private set(items: readonly PickleKey[], depth: number): void {
    this.byte(OP.EMPTY_SET);
    this.batched(items.length, (i) => this.value(items[i] as PickleKey, depth + 1), OP.ADDITEMS);
  }

  /** MARK … op in batches of 1000, as CPython does. */
  private batched(n: number, each: (i: number) => void, op: number): void {
    const BATCH_SIZE = 1000;
    for (let start = 0; start < n; start += BATCH_SIZE) {
      this.byte(OP.MARK);
      for (let i = start; i < Math.min(n, start + BATCH_SIZE); i++) each(i);
      this.byte(op);
    }
  }

  private global(module: string, name: string): void {
    const key = `${module}\n${name}`;
    const hit = this.globalMemo.get(key);
    if (hit !== undefined) return this.get(hit);
    this.string(module);
    this.string(name);
    this.byte(OP.STACK_GLOBAL);
    this.globalMemo.set(key, this.memoize());
  }

  /** `numpy.dtype('f4', False, True)` + BUILD `(3, '<', None, None, None, -1, -1, 0)`, memoized. */
  private dtype(code: NdDtype, byteOrder: '<' | '>' | '|'): void {
    const order = DTYPES[code].itemBytes === 1 ? '|' : byteOrder;
    const key = order + code;
    const hit = this.dtypeMemo.get(key);
    if (hit !== undefined) return this.get(hit);
    this.global('numpy', 'dtype');
    this.string(code);
    this.byte(OP.NEWFALSE);
    this.byte(OP.NEWTRUE);
    this.byte(OP.TUPLE3);
    this.byte(OP.REDUCE);
    this.dtypeMemo.set(key, this.memoize());
    this.byte(OP.MARK);
    this.int(3n);
    this.string(order);
    this.byte(OP.NONE);
    this.byte(OP.NONE);
    this.byte(OP.NONE);
    this.int(-1n);
    this.int(-1n);
    this.int(0n);
    this.byte(OP.TUPLE);
    this.byte(OP.BUILD);
  }

  /**
   * As numpy's `ndarray.__reduce__`: `_reconstruct(ndarray, (0,), b'b')` then BUILD with
   * `(1, shape, dtype, False, raw little-endian bytes)`.
   */
  private ndarray(a: NdArray): void {
    this.global('numpy.core.multiarray', '_reconstruct');
    this.global('numpy', 'ndarray');
    this.int(0n);
    this.byte(OP.TUPLE1);
    this.binBytes(Uint8Array.of(0x62)); // b'b'
    this.byte(OP.TUPLE3);
    this.byte(OP.REDUCE);
    this.byte(OP.MARK);
    this.int(1n);
    this.tuple(a.shape, 0);
    this.dtype(a.dtype, '<');
    this.byte(OP.NEWFALSE);
    this.binBytes(encodeArrayData(a));
    this.byte(OP.TUPLE);
    this.byte(OP.BUILD);
  }
}

function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
