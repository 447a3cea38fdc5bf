/**
 * The JS values a pickle maps to and from: PickleTuple, PickleFloat, PickleGlobal, the
 * PickleValue (reader output) and PickleWritable (writer input) unions, and helpers to check
 * dicts, turn them into records and describe values in error messages.
 *
 * Invariants: dicts are always Maps (insertion order, non-string keys, "__proto__" is just a
 * key); tuples are frozen; a PickleGlobal is only a name and is never resolved or called.
 * Nothing here reads or writes bytes.
 */

import { PickleError } from './errors.js';
import { NdArray, NpDtype, formatShape } from './ndarray.js';

/** A Python tuple. Items are read-only, like the Python tuple. */
export class PickleTuple<T = PickleValue> {
  readonly items: readonly T[];
  constructor(items: readonly T[]) {
    this.items = Object.freeze([...items]);
  }
  get length(): number {
    return this.items.length;
  }
}

/** Shorthand for `new PickleTuple([...])`. */
export function tuple<T>(...items: T[]): PickleTuple<T> {
  return new PickleTuple(items);
}

/** Forces a number to be written as a Python float (e.g. 25.0 rather than 25). */
export class PickleFloat {
  constructor(readonly value: number) {}
}

export function pyFloat(value: number): PickleFloat {
  return new PickleFloat(value);
}

/** A reference to a whitelisted Python global (a name only; nothing is ever called). */
export class PickleGlobal {
  constructor(
    readonly module: string,
    readonly name: string,
  ) {}
  get qualifiedName(): string {
    return `${this.module}.${this.name}`;
  }
}

/** Values usable as dict keys / set members (Python's hashable values). */
export type PickleKey = string | number | bigint | boolean | null | Uint8Array | PickleTuple;

export type PickleDict = Map<PickleKey, PickleValue>;

/** What `readPickle` returns. */
export type PickleValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PickleValue[]
  | PickleTuple
  | PickleDict
  | Set<PickleKey>
  | NdArray
  | NpDtype
  | PickleGlobal;

/** A string-keyed record for the writer; `undefined` members are skipped. */
export interface PickleRecord {
  readonly [key: string]: PickleWritable | undefined;
}

/** What `writePickle` accepts: everything `readPickle` returns plus float wrappers and records. */
export type PickleWritable =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PickleFloat
  | PickleTuple<PickleWritable>
  | readonly PickleWritable[]
  | ReadonlyMap<PickleKey, PickleWritable>
  | ReadonlySet<PickleKey>
  | NdArray
  | NpDtype
  | PickleGlobal
  | PickleRecord;

export function isPickleDict(value: unknown): value is PickleDict {
  return value instanceof Map;
}

/**
 * Turns a dict whose keys are all strings into a null-prototype record. Throws a PickleError
 * for anything else (`what` names the value in the message).
 */
export function dictToRecord(value: PickleValue, what = 'value'): Record<string, PickleValue> {
  if (!(value instanceof Map)) throw new PickleError(`${what} is a ${describePickleValue(value)}, not a dict`);
  const out: Record<string, PickleValue> = Object.create(null) as Record<string, PickleValue>;
  for (const [k, v] of value) {
    if (typeof k !== 'string') throw new PickleError(`${what} has a non-string key (${describePickleValue(k)})`);
    out[k] = v;
  }
  return out;
}

/** Short Python-flavoured description of a value for error messages, e.g. "ndarray f4 (1, 3)". */
export function describePickleValue(value: PickleValue | PickleWritable | undefined): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'None';
  switch (typeof value) {
    case 'boolean':
      return 'bool';
    case 'number':
      return Number.isInteger(value) ? 'int' : 'float';
    case 'bigint':
      return 'int';
    case 'string':
      return 'str';
  }
  if (value instanceof Uint8Array) return 'bytes';
  if (Array.isArray(value)) return 'list';
  if (value instanceof PickleTuple) return 'tuple';
  if (value instanceof Map) return 'dict';
  if (value instanceof Set) return 'set';
  if (value instanceof NdArray) return `ndarray ${value.dtype} ${formatShape(value.shape)}`;
  if (value instanceof NpDtype) return 'dtype';
  if (value instanceof PickleGlobal) return `global ${value.qualifiedName}`;
  if (value instanceof PickleFloat) return 'float';
  return 'object';
}
