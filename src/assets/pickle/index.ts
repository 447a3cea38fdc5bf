/**
 * Safe, dependency-free reader and writer for Python pickles (protocols 0–5), enough for
 * numpy-based data files such as LivePortrait motion templates.
 *
 * Reader (`readPickle`): an iterative pickle VM that never calls arbitrary code. GLOBAL and
 * STACK_GLOBAL resolve only a fixed whitelist (numpy ndarray/dtype/scalar reconstruction,
 * `builtins` set/frozenset/bytearray/bytes, `_codecs.encode`, `collections.OrderedDict`); any
 * other global throws a PickleError naming it. Persistent IDs, the extension registry, INST/OBJ
 * and out-of-band buffers are rejected. Every declared length is checked against the bytes that
 * remain, so truncated or oversized input fails fast with the byte offset of the bad opcode.
 * Nested values are built without recursion, so deep input cannot overflow the JS stack.
 *
 * Value mapping (Python → JS):
 *   None → null; bool → boolean; int → number (bigint beyond ±2^53); float → number;
 *   str → string (Python 2 byte strings decode as latin-1); bytes/bytearray → Uint8Array;
 *   list → array; tuple → PickleTuple; dict/OrderedDict → Map (always a Map, even when all keys
 *   are strings: it keeps insertion order and non-string keys, and "__proto__" is just a key —
 *   use `dictToRecord` for a string-keyed record); set/frozenset → Set; numpy.ndarray →
 *   NdArray (always C order, see below); numpy scalars → number (boolean for bool, bigint for
 *   64-bit ints beyond ±2^53); numpy.dtype → NpDtype; a bare whitelisted global → PickleGlobal.
 *   Tuples, bytes and other non-primitive dict keys are compared by reference in the Map.
 *
 * Writer (`writePickle`): protocol 4, no framing, written the way CPython + numpy 1.x write the
 * same objects, so `pickle.load` in Python (numpy 1 or 2) reads it back. A JS number that is a
 * safe integer becomes a Python int, any other number a float; wrap with `pyFloat` to force a
 * float (e.g. 25.0). Records skip `undefined` members. Cyclic values and nesting deeper than
 * MAX_WRITE_DEPTH are rejected. Shared sub-objects are written once per occurrence (no memo
 * except for numpy globals and dtypes).
 *
 * Not supported: object/structured/string/datetime/complex numpy dtypes, numpy subclasses
 * (matrix, masked arrays), arbitrary class instances, and pickle protocols above 5.
 *
 * Layout (this file only re-exports the public API): errors.ts (PickleError), opcodes.ts (opcode
 * table, limits), globals.ts (global whitelist), values.ts (value types and helpers), ndarray.ts
 * (NdArray, NpDtype, dtype and half-float coding), reader-core.ts + reader.ts (the VM),
 * writer.ts (the writer).
 */

export { PickleError } from './errors.js';
export { MAX_WRITE_DEPTH } from './opcodes.js';
export { NdArray, NpDtype, type NdData, type NdDtype } from './ndarray.js';
export {
  PickleFloat,
  PickleGlobal,
  PickleTuple,
  describePickleValue,
  dictToRecord,
  isPickleDict,
  pyFloat,
  tuple,
  type PickleDict,
  type PickleKey,
  type PickleRecord,
  type PickleValue,
  type PickleWritable,
} from './values.js';
export { readPickle } from './reader.js';
export { writePickle } from './writer.js';
