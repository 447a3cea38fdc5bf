/**
 * numpy arrays and dtypes: NdArray (dense, C order), NpDtype, the supported dtype table, dtype
 * code parsing, raw element bytes ↔ typed arrays (either byte order on input, little-endian on
 * output), IEEE half-precision conversion and Fortran → C reordering.
 *
 * Invariants: an NdArray's `data` is always the typed array its dtype calls for (see DTYPES)
 * and holds exactly product(shape) elements, in C order; shapes are capped at
 * MAX_ARRAY_ELEMENTS. Half floats round to nearest even, like numpy. Not supported here:
 * object/structured/string/datetime/complex dtypes and numpy subclasses. Nothing here knows
 * about pickle opcodes.
 */

import { PickleError } from './errors.js';
import { MAX_ARRAY_ELEMENTS } from './opcodes.js';

/** numpy dtype codes understood here, without the byte-order prefix (numpy's `dtype.str[1:]`). */
export type NdDtype = 'b1' | 'i1' | 'u1' | 'i2' | 'u2' | 'f2' | 'i4' | 'u4' | 'f4' | 'i8' | 'u8' | 'f8';

/** Storage for NdArray elements; see NdArray for which dtype uses which array. */
export type NdData =
  | Uint8Array
  | Int8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

type NdDataCtor = { new (length: number): NdData; readonly name: string };

interface DtypeInfo {
  readonly itemBytes: number;
  readonly ctor: NdDataCtor;
}

export const DTYPES: Readonly<Record<NdDtype, DtypeInfo>> = {
  b1: { itemBytes: 1, ctor: Uint8Array },
  i1: { itemBytes: 1, ctor: Int8Array },
  u1: { itemBytes: 1, ctor: Uint8Array },
  i2: { itemBytes: 2, ctor: Int16Array },
  u2: { itemBytes: 2, ctor: Uint16Array },
  f2: { itemBytes: 2, ctor: Float32Array },
  i4: { itemBytes: 4, ctor: Int32Array },
  u4: { itemBytes: 4, ctor: Uint32Array },
  f4: { itemBytes: 4, ctor: Float32Array },
  i8: { itemBytes: 8, ctor: BigInt64Array },
  u8: { itemBytes: 8, ctor: BigUint64Array },
  f8: { itemBytes: 8, ctor: Float64Array },
};

export function isNdDtype(code: string): code is NdDtype {
  return Object.prototype.hasOwnProperty.call(DTYPES, code);
}

/**
 * A dense numpy array in C (row-major) order. `data` holds the decoded elements in host
 * representation: f4 → Float32Array, f8 → Float64Array, f2 → Float32Array (halves decoded; the
 * writer re-encodes them as halves), i1/i2/i4 → Int8/16/32Array, u1/u2/u4 → Uint8/16/32Array,
 * i8/u8 → BigInt64Array/BigUint64Array, b1 → Uint8Array of 0/1.
 */
export class NdArray {
  readonly dtype: NdDtype;
  readonly shape: readonly number[];
  readonly data: NdData;

  constructor(dtype: NdDtype, shape: readonly number[], data: NdData) {
    const info = DTYPES[dtype];
    if (!info) throw new PickleError(`unsupported ndarray dtype '${String(dtype)}'`);
    if (!(data instanceof info.ctor)) {
      throw new PickleError(`ndarray of dtype ${dtype} needs a ${info.ctor.name}, got ${data.constructor.name}`);
    }
    const size = shapeSize(shape);
    if (size === undefined || size !== data.length) {
      throw new PickleError(`ndarray shape ${formatShape(shape)} does not match ${data.length} elements`);
    }
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.data = data;
  }

  /** Builds an array from plain numbers (converted and rounded as the dtype requires). */
  static fromNumbers(dtype: NdDtype, shape: readonly number[], values: ArrayLike<number>): NdArray {
    const info = DTYPES[dtype];
    if (!info) throw new PickleError(`unsupported ndarray dtype '${String(dtype)}'`);
    const data = new info.ctor(values.length);
    for (let i = 0; i < values.length; i++) {
      const v = values[i] as number;
      if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
        if (!Number.isInteger(v)) throw new PickleError(`value ${v} is not an integer (dtype ${dtype})`);
        data[i] = BigInt(v);
      } else if (dtype === 'b1') {
        data[i] = v ? 1 : 0;
      } else if (dtype === 'f2') {
        data[i] = halfToFloat(floatToHalf(v));
      } else {
        data[i] = v;
      }
    }
    return new NdArray(dtype, shape, data);
  }

  /** Number of elements (product of the shape). */
  get size(): number {
    return this.data.length;
  }

  /** Elements as plain numbers, flattened in C order (64-bit integers may lose precision). */
  toNumberArray(): number[] {
    const out = new Array<number>(this.data.length);
    for (let i = 0; i < this.data.length; i++) out[i] = Number(this.data[i]);
    return out;
  }

  /** One element by its multi-index, e.g. `a.get(0, 2, 1)`. */
  get(...index: number[]): number {
    if (index.length !== this.shape.length) {
      throw new RangeError(`index has ${index.length} dimensions, array has ${this.shape.length}`);
    }
    let flat = 0;
    for (let k = 0; k < index.length; k++) {
      const i = index[k] as number;
      const n = this.shape[k] as number;
      if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`index ${i} out of range for axis ${k} of size ${n}`);
      flat = flat * n + i;
    }
    return Number(this.data[flat]);
  }
}

/** A numpy dtype object that appeared as a value of its own (not inside an array). */
export class NpDtype {
  constructor(
    readonly code: NdDtype,
    readonly byteOrder: '<' | '>' | '|',
  ) {}
}

export function formatShape(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

/** Product of a shape, or undefined when a dimension is invalid or the product is absurd. */
export function shapeSize(shape: readonly number[]): number | undefined {
  let size = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) return undefined;
    size *= d;
    if (size > MAX_ARRAY_ELEMENTS) return undefined;
  }
  return size;
}

/** numpy type codes ('f4', '<i8', 'b1', …) → NdDtype, or undefined when unsupported. */
export function parseDtypeCode(code: string): { code: NdDtype; byteOrder: '<' | '>' | '|' } | undefined {
  const m = /^([<>|=])?([a-z])(\d+)$/.exec(code);
  if (!m) return undefined;
  const c = `${m[2] as string}${m[3] as string}`;
  if (!isNdDtype(c)) return undefined;
  const byteOrder = DTYPES[c].itemBytes === 1 ? '|' : m[1] === '>' ? '>' : '<';
  return { code: c, byteOrder };
}

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Raw element bytes → NdArray in C order. `fail` reports problems (with the caller's offset). */
export function decodeArray(
  dtype: NdDtype,
  byteOrder: '<' | '>' | '|',
  shape: readonly number[],
  raw: Uint8Array,
  fortran: boolean,
  fail: (message: string) => never,
): NdArray {
  const info = DTYPES[dtype];
  const size = shapeSize(shape);
  if (size === undefined) return fail(`array shape ${formatShape(shape)} is too large`);
  if (size * info.itemBytes !== raw.length) {
    return fail(
      `array data has ${raw.length} bytes but shape ${formatShape(shape)} of ${dtype} needs ${size * info.itemBytes}`,
    );
  }
  const little = byteOrder !== '>';
  let data: NdData;
  if (dtype === 'b1') {
    data = new Uint8Array(size);
    for (let i = 0; i < size; i++) data[i] = raw[i] ? 1 : 0;
  } else if (dtype === 'f2') {
    const out = new Float32Array(size);
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < size; i++) out[i] = halfToFloat(dv.getUint16(i * 2, little));
    data = out;
  } else if (info.itemBytes === 1 || little === HOST_LITTLE_ENDIAN) {
    const copy = raw.slice(); // aligned, owned buffer
    data = new (info.ctor as unknown as new (b: ArrayBuffer) => NdData)(copy.buffer);
  } else {
    const copy = raw.slice();
    for (let i = 0; i < copy.length; i += info.itemBytes) copy.subarray(i, i + info.itemBytes).reverse();
    data = new (info.ctor as unknown as new (b: ArrayBuffer) => NdData)(copy.buffer);
  }
  if (fortran && shape.length > 1) data = fortranToC(data, shape);
  return new NdArray(dtype, shape, data);
}

/** Reorders column-major (Fortran) elements into row-major (C) order. */
function fortranToC(src: NdData, shape: readonly number[]): NdData {
  const nd = shape.length;
  const fStride: number[] = [];
  let stride = 1;
  for (let k = 0; k < nd; k++) {
    fStride.push(stride);
    stride *= shape[k] as number;
  }
  const out = new (src.constructor as NdDataCtor)(src.length);
  const s = src as unknown as { [i: number]: number | bigint };
  const o = out as unknown as { [i: number]: number | bigint };
  const idx = new Array<number>(nd).fill(0);
  let off = 0;
  for (let i = 0; i < src.length; i++) {
    o[i] = s[off] as number | bigint;
    for (let k = nd - 1; k >= 0; k--) {
      const n = shape[k] as number;
      const f = fStride[k] as number;
      idx[k] = (idx[k] as number) + 1;
      off += f;
      if ((idx[k] as number) < n) break;
      off -= f * n;
      idx[k] = 0;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// IEEE half precision

export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** float → IEEE binary16 bits, round to nearest even (like numpy). */
export function floatToHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const a = Math.abs(value);
  if (a === Infinity) return sign | 0x7c00;
  if (a === 0) return sign;
  // Round to a multiple of the half-precision ulp at this magnitude.
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1; // guard log2 rounding
  if (2 ** (e + 1) <= a) e += 1;
  const ulpExp = Math.max(e, -14) - 10;
  const m = roundHalfEven(a / 2 ** ulpExp); // integer significand in units of ulp
  const q = m * 2 ** ulpExp; // rounded magnitude
  if (q > 65504) return sign | 0x7c00;
  if (q < 2 ** -14) return sign | Math.round(q / 2 ** -24); // subnormal
  let qe = Math.floor(Math.log2(q));
  if (2 ** qe > q) qe -= 1;
  if (2 ** (qe + 1) <= q) qe += 1;
  const frac = Math.round((q / 2 ** qe - 1) * 1024);
  return sign | ((qe + 15) << 10) | frac;
}

function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Element bytes of an NdArray in little-endian order. */
export function encodeArrayData(a: NdArray): Uint8Array {
  const info = DTYPES[a.dtype];
  const out = new Uint8Array(a.size * info.itemBytes);
  const dv = new DataView(out.buffer);
  const d = a.data;
  for (let i = 0; i < d.length; i++) {
    const x = d[i] as number | bigint;
    const at = i * info.itemBytes;
    switch (a.dtype) {
      case 'b1':
        out[i] = x ? 1 : 0;
        break;
      case 'i1':
        dv.setInt8(at, x as number);
        break;
      case 'u1':
        dv.setUint8(at, x as number);
        break;
      case 'i2':
        dv.setInt16(at, x as number, true);
        break;
      case 'u2':
        dv.setUint16(at, x as number, true);
        break;
      case 'f2':
        dv.setUint16(at, floatToHalf(x as number), true);
        break;
      case 'i4':
        dv.setInt32(at, x as number, true);
        break;
      case 'u4':
        dv.setUint32(at, x as number, true);
        break;
      case 'f4':
        dv.setFloat32(at, x as number, true);
        break;
      case 'i8':
        dv.setBigInt64(at, x as bigint, true);
        break;
      case 'u8':
        dv.setBigUint64(at, x as bigint, true);
        break;
      case 'f8':
        dv.setFloat64(at, x as number, true);
        break;
    }
  }
  return out;
}
