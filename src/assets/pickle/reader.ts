/**
 * `readPickle`: decodes a pickle (protocols 0–5) into PickleValues without ever calling
 * arbitrary code. The VM loop dispatches each opcode; GLOBAL/STACK_GLOBAL resolve only the
 * whitelist in globals.ts, and REDUCE/NEWOBJ "call" only those globals, by building the
 * equivalent JS value (numpy arrays, dtypes and scalars, sets, bytes, OrderedDicts).
 *
 * Invariants: the loop is iterative, so deep nesting cannot overflow the JS stack; every
 * failure is a PickleError with the offset and name of the bad opcode; the result is a single
 * fully built value (no pending numpy object escapes). Rejected: persistent IDs, the extension
 * registry, INST/OBJ, BUILD on anything but numpy arrays/dtypes, out-of-band buffers, protocols
 * above 5.
 */

import { PickleError, printable } from './errors.js';
import { ALLOWED_GLOBALS, canonicalGlobal } from './globals.js';
import { DTYPES, NdArray, NpDtype, decodeArray, parseDtypeCode, type NdDtype } from './ndarray.js';
import { MAX_PROTOCOL, OP, OP_NAMES } from './opcodes.js';
import { Pending, UnpicklerCore, describeItem, latin1Decode, type StackItem } from './reader-core.js';
import {
  PickleGlobal,
  PickleTuple,
  describePickleValue,
  type PickleDict,
  type PickleKey,
  type PickleValue,
} from './values.js';

const UTF8_ENCODER = new TextEncoder();

/** Decodes a pickle. Throws PickleError for anything malformed, truncated, unsafe or unsupported. */
export function readPickle(buf: Uint8Array): PickleValue {
  if (!(buf instanceof Uint8Array)) throw new PickleError('pickle input must be a Uint8Array');
  return new Unpickler(buf).run();
}

class Unpickler extends UnpicklerCore {
  // -- main loop --------------------------------------------------------------------------

  run(): PickleValue {
    const b = this.bytes;
    if (b.length === 0) throw new PickleError('empty input is not a pickle', 0);
    for (;;) {
      if (this.pos >= b.length) {
        this.opName = '';
        this.opStart = this.pos;
        this.fail('truncated pickle: input ended before STOP');
      }
      this.opStart = this.pos;
      const op = b[this.pos++] as number;
      this.opName = OP_NAMES.get(op) ?? '';
      if (op === OP.STOP) return this.stop();
      this.step(op);
    }
  }

  private stop(): PickleValue {
    if (this.marks.length > 0) this.fail('malformed pickle: unclosed MARK at STOP');
    if (this.stack.length !== 1) {
      this.fail(`malformed pickle: ${this.stack.length} values on the stack at STOP (expected 1)`);
    }
    return this.settled(this.stack[0] as StackItem);
  }

  private step(op: number): void {
    switch (op) {
      case OP.PROTO: {
        const version = this.u8();
        if (version > MAX_PROTOCOL) this.fail(`unsupported pickle protocol ${version}`);
        return;
      }
      case OP.FRAME:
        this.u64(); // frame length: a read-ahead hint only; validated against the input
        return;
      case OP.MARK:
        this.marks.push(this.stack.length);
        return;
      case OP.POP:
        if (this.marks.length > 0 && this.fence() === this.stack.length) this.marks.pop();
        else this.pop();
        return;
      case OP.POP_MARK:
        this.popMark();
        return;
      case OP.DUP:
        this.push(this.top());
        return;

      // constants and numbers
      case OP.NONE:
        return this.push(null);
      case OP.NEWTRUE:
        return this.push(true);
      case OP.NEWFALSE:
        return this.push(false);
      case OP.BININT:
        return this.push(this.i32());
      case OP.BININT1:
        return this.push(this.u8());
      case OP.BININT2:
        return this.push(this.u16());
      case OP.INT: {
        const text = this.lineText();
        if (text === '00') return this.push(false);
        if (text === '01') return this.push(true);
        return this.pushInt(this.parseDecimal(text));
      }
      case OP.LONG: {
        const text = this.lineText();
        return this.pushInt(this.parseDecimal(text.endsWith('L') ? text.slice(0, -1) : text));
      }
      case OP.LONG1:
        return this.pushInt(this.longBytes(this.u8()));
      case OP.LONG4: {
        const n = this.i32();
        if (n < 0) this.fail('negative LONG4 length');
        return this.pushInt(this.longBytes(n));
      }
      case OP.BINFLOAT: {
        this.need(8, 'argument');
        const v = this.view.getFloat64(this.pos, false);
        this.pos += 8;
        return this.push(v);
      }
      case OP.FLOAT:
        return this.push(this.parseFloatText(this.lineText()));

      // strings and bytes
      case OP.STRING:
        return this.push(latin1Decode(this.unquoteString(this.lineText())));
      case OP.BINSTRING: {
        const n = this.i32();
        return this.push(latin1Decode(this.take(n, 'BINSTRING')));
      }
      case OP.SHORT_BINSTRING:
        return this.push(latin1Decode(this.take(this.u8(), 'SHORT_BINSTRING')));
      case OP.UNICODE:
        return this.push(this.rawUnicodeEscape(this.lineText()));
      case OP.BINUNICODE:
        return this.push(this.utf8(this.take(this.u32(), 'BINUNICODE')));
      case OP.SHORT_BINUNICODE:
        return this.push(this.utf8(this.take(this.u8(), 'SHORT_BINUNICODE')));
      case OP.BINUNICODE8:
        return this.push(this.utf8(this.take(this.u64(), 'BINUNICODE8')));
      case OP.BINBYTES:
        return this.push(this.take(this.u32(), 'BINBYTES'));
      case OP.SHORT_BINBYTES:
        return this.push(this.take(this.u8(), 'SHORT_BINBYTES'));
      case OP.BINBYTES8:
        return this.push(this.take(this.u64(), 'BINBYTES8'));
      case OP.BYTEARRAY8:
        return this.push(this.take(this.u64(), 'BYTEARRAY8'));
      case OP.READONLY_BUFFER:
        if (!(this.top() instanceof Uint8Array)) this.fail('READONLY_BUFFER on a non-buffer');
        return;
      case OP.NEXT_BUFFER:
        return this.fail('out-of-band buffers are not supported');

      // containers
      case OP.EMPTY_LIST:
        return this.push([]);
      case OP.EMPTY_DICT:
        return this.push(new Map());
      case OP.EMPTY_TUPLE:
        return this.push(new PickleTuple([]));
      case OP.EMPTY_SET:
        return this.push(new Set());
      case OP.LIST:
        return this.push(this.settledAll(this.popMark()));
      case OP.TUPLE:
        return this.push(new PickleTuple(this.settledAll(this.popMark())));
      case OP.TUPLE1:
      case OP.TUPLE2:
      case OP.TUPLE3: {
        const n = op - OP.TUPLE1 + 1;
        const items: PickleValue[] = [];
        for (let i = 0; i < n; i++) items.unshift(this.settled(this.pop()));
        return this.push(new PickleTuple(items));
      }
      case OP.DICT: {
        const d: PickleDict = new Map();
        this.setItems(d, this.popMark());
        return this.push(d);
      }
      case OP.FROZENSET: {
        const s = new Set<PickleKey>();
        for (const v of this.popMark()) s.add(this.key(v));
        return this.push(s);
      }
      case OP.APPEND: {
        const v = this.settled(this.pop());
        this.listTarget().push(v);
        return;
      }
      case OP.APPENDS: {
        const items = this.settledAll(this.popMark());
        const list = this.listTarget();
        for (const v of items) list.push(v);
        return;
      }
      case OP.SETITEM: {
        const v = this.pop();
        const k = this.pop();
        this.setItems(this.dictTarget(), [k, v]);
        return;
      }
      case OP.SETITEMS: {
        const items = this.popMark();
        this.setItems(this.dictTarget(), items);
        return;
      }
      case OP.ADDITEMS: {
        const items = this.popMark();
        const s = this.top();
        if (!(s instanceof Set)) this.fail(`ADDITEMS on a ${describeItem(s)}, expected a set`);
        for (const v of items) s.add(this.key(v));
        return;
      }

      // memo
      case OP.PUT:
        return this.memoPut(this.decimalIndex());
      case OP.BINPUT:
        return this.memoPut(this.u8());
      case OP.LONG_BINPUT:
        return this.memoPut(this.u32());
      case OP.MEMOIZE:
        return this.memoPut(this.memo.size);
      case OP.GET:
        return this.memoGet(this.decimalIndex());
      case OP.BINGET:
        return this.memoGet(this.u8());
      case OP.LONG_BINGET:
        return this.memoGet(this.u32());

      // globals and object construction
      case OP.GLOBAL: {
        const module = this.utf8(this.line());
        const name = this.utf8(this.line());
        return this.push(this.resolveGlobal(module, name));
      }
      case OP.STACK_GLOBAL: {
        const name = this.settled(this.pop());
        const module = this.settled(this.pop());
        if (typeof module !== 'string' || typeof name !== 'string') this.fail('STACK_GLOBAL needs two strings');
        return this.push(this.resolveGlobal(module, name));
      }
      case OP.REDUCE: {
        const args = this.settled(this.pop());
        const callable = this.settled(this.pop());
        return this.push(this.call(callable, args));
      }
      case OP.NEWOBJ: {
        const args = this.settled(this.pop());
        const cls = this.settled(this.pop());
        return this.push(this.call(cls, args));
      }
      case OP.NEWOBJ_EX: {
        const kwargs = this.settled(this.pop());
        const args = this.settled(this.pop());
        const cls = this.settled(this.pop());
        if (!(kwargs instanceof Map) || kwargs.size > 0) this.fail('keyword arguments to constructors are not supported');
        return this.push(this.call(cls, args));
      }
      case OP.BUILD: {
        const state = this.settled(this.pop());
        const target = this.top();
        if (!(target instanceof Pending)) this.fail(`BUILD (setting object state) is not supported on a ${describeItem(target)}`);
        const built = target.kind === 'ndarray' ? this.buildArray(state) : this.buildDtype(target, state);
        this.stack[this.stack.length - 1] = built;
        for (const slot of target.memoSlots) if (this.memo.get(slot) === target) this.memo.set(slot, built);
        return;
      }
      case OP.INST: {
        const module = this.utf8(this.line());
        const name = this.utf8(this.line());
        this.resolveGlobal(module, name);
        return this.fail('INST (old-style class instantiation) is not supported');
      }
      case OP.OBJ:
        return this.fail('OBJ (class instantiation) is not supported');
      case OP.PERSID:
      case OP.BINPERSID:
        return this.fail('persistent IDs are not supported');
      case OP.EXT1:
      case OP.EXT2:
      case OP.EXT4:
        return this.fail('extension registry codes are not supported');
      default:
        return this.fail(`unknown opcode 0x${op.toString(16).padStart(2, '0')}`);
    }
  }

  private listTarget(): PickleValue[] {
    const t = this.top();
    if (!Array.isArray(t)) this.fail(`APPEND on a ${describeItem(t)}, expected a list`);
    return t;
  }

  private dictTarget(): PickleDict {
    const t = this.top();
    if (!(t instanceof Map)) this.fail(`SETITEM on a ${describeItem(t)}, expected a dict`);
    return t;
  }

  private setItems(d: PickleDict, items: StackItem[]): void {
    if (items.length % 2 !== 0) this.fail('malformed pickle: odd number of items for a dict');
    for (let i = 0; i < items.length; i += 2) {
      d.set(this.key(items[i] as StackItem), this.settled(items[i + 1] as StackItem));
    }
  }

  // -- globals ----------------------------------------------------------------------------

  private resolveGlobal(module: string, name: string): PickleGlobal {
    const key = canonicalGlobal(module, name);
    if (!ALLOWED_GLOBALS.has(key)) {
      this.fail(`pickle references unsupported global '${printable(`${module}.${name}`)}'`);
    }
    return new PickleGlobal(module, name);
  }

  private call(callable: PickleValue, args: PickleValue): StackItem {
    if (!(callable instanceof PickleGlobal)) this.fail(`cannot call a ${describePickleValue(callable)}`);
    if (!(args instanceof PickleTuple)) this.fail(`arguments must be a tuple, got ${describePickleValue(args)}`);
    const a = args.items;
    const key = canonicalGlobal(callable.module, callable.name);
    switch (key) {
      case 'numpy.core.multiarray._reconstruct': {
        const [cls, , typecode] = a;
        if (a.length !== 3 || !(cls instanceof PickleGlobal) || canonicalGlobal(cls.module, cls.name) !== 'numpy.ndarray') {
          this.fail('_reconstruct is only supported for numpy.ndarray');
        }
        if (!(typecode instanceof Uint8Array || typeof typecode === 'string')) this.fail('_reconstruct typecode must be bytes');
        return new Pending('ndarray', undefined, '<');
      }
      case 'numpy.dtype': {
        const code = a[0];
        if (typeof code !== 'string') this.fail('numpy.dtype needs a type code string');
        const parsed = parseDtypeCode(code);
        if (!parsed) {
          this.fail(
            `unsupported numpy dtype '${printable(code)}' (supported: bool, int8–int64, uint8–uint64, float16/32/64)`,
          );
        }
        return new Pending('dtype', parsed.code, parsed.byteOrder);
      }
      case 'numpy.core.multiarray.scalar': {
        const [dtype, raw] = a;
        if (a.length !== 2 || !(dtype instanceof NpDtype)) this.fail('numpy scalar needs (dtype, bytes)');
        const bytes = this.rawData(raw);
        const arr = decodeArray(dtype.code, dtype.byteOrder, [], bytes, false, (m) => this.fail(`numpy scalar: ${m}`));
        const v = arr.data[0] as number | bigint;
        if (dtype.code === 'b1') return v !== 0;
        if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
        return v;
      }
      case 'numpy.core.numeric._frombuffer': {
        const [buffer, dtype, shape, order] = a;
        if (a.length !== 4 || !(dtype instanceof NpDtype)) this.fail('_frombuffer needs (buffer, dtype, shape, order)');
        if (order !== 'C' && order !== 'F') this.fail(`_frombuffer order must be 'C' or 'F'`);
        return decodeArray(dtype.code, dtype.byteOrder, this.shape(shape), this.rawData(buffer), order === 'F', (m) =>
          this.fail(m),
        );
      }
      case 'builtins.set':
      case 'builtins.frozenset': {
        const s = new Set<PickleKey>();
        if (a.length > 1) this.fail(`${key} takes at most one argument`);
        const src = a[0];
        if (src !== undefined) {
          const items = Array.isArray(src) ? src : src instanceof PickleTuple ? src.items : src instanceof Set ? [...src] : undefined;
          if (!items) this.fail(`${key} argument must be a list, tuple or set`);
          for (const v of items) s.add(this.key(v));
        }
        return s;
      }
      case 'builtins.bytearray':
      case 'builtins.bytes': {
        if (a.length === 0) return new Uint8Array(0);
        const [src, encoding] = a;
        if (src instanceof Uint8Array && a.length === 1) return src.slice();
        if (typeof src === 'string' && typeof encoding === 'string') return this.encode(src, encoding);
        return this.fail(`unsupported arguments to ${key}`);
      }
      case '_codecs.encode': {
        const [text, encoding] = a;
        if (typeof text !== 'string' || (encoding !== undefined && typeof encoding !== 'string')) {
          this.fail('_codecs.encode needs (str, encoding)');
        }
        return this.encode(text, encoding ?? 'utf-8');
      }
      case 'collections.OrderedDict': {
        const d: PickleDict = new Map();
        const src = a[0];
        if (a.length > 1) this.fail('OrderedDict takes at most one argument');
        if (src !== undefined) {
          const pairs = Array.isArray(src) ? src : src instanceof PickleTuple ? src.items : undefined;
          if (!pairs) this.fail('OrderedDict argument must be a list of pairs');
          for (const p of pairs) {
            const kv = Array.isArray(p) ? p : p instanceof PickleTuple ? p.items : undefined;
            if (!kv || kv.length !== 2) this.fail('OrderedDict argument must be a list of pairs');
            d.set(this.key(kv[0] as PickleValue), kv[1] as PickleValue);
          }
        }
        return d;
      }
      default:
        return this.fail(`global '${callable.qualifiedName}' cannot be called`);
    }
  }

  private encode(text: string, encoding: string): Uint8Array {
    const enc = encoding.toLowerCase().replace(/_/g, '-');
    if (enc === 'latin1' || enc === 'latin-1' || enc === 'iso-8859-1' || enc === 'iso8859-1') {
      const out = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c > 0xff) this.fail('character outside latin-1 in encoded bytes');
        out[i] = c;
      }
      return out;
    }
    if (enc === 'utf-8' || enc === 'utf8') return UTF8_ENCODER.encode(text);
    return this.fail(`unsupported text encoding '${printable(encoding)}'`);
  }

  private rawData(raw: PickleValue | undefined): Uint8Array {
    if (raw instanceof Uint8Array) return raw;
    if (typeof raw === 'string') return this.encode(raw, 'latin1'); // Python 2 str payload
    return this.fail(`array data must be bytes, got ${describePickleValue(raw)} (object arrays are not supported)`);
  }

  private shape(value: PickleValue | undefined): number[] {
    const dims = value instanceof PickleTuple ? value.items : Array.isArray(value) ? value : undefined;
    if (!dims) this.fail(`array shape must be a tuple, got ${describePickleValue(value)}`);
    return dims.map((d) => {
      if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) this.fail(`invalid array dimension ${describePickleValue(d)}`);
      return d;
    });
  }

  private buildArray(state: PickleValue): NdArray {
    if (!(state instanceof PickleTuple) || (state.length !== 5 && state.length !== 4)) {
      this.fail('ndarray state must be a 4- or 5-tuple');
    }
    const s = state.length === 5 ? state.items.slice(1) : state.items;
    if (state.length === 5 && state.items[0] !== 1) this.fail(`unsupported ndarray state version ${describePickleValue(state.items[0])}`);
    const [shape, dtype, fortran, raw] = s;
    if (!(dtype instanceof NpDtype)) this.fail(`ndarray state needs a dtype, got ${describePickleValue(dtype)}`);
    if (typeof fortran !== 'boolean' && fortran !== 0 && fortran !== 1) this.fail('ndarray fortran flag must be a bool');
    return decodeArray(dtype.code, dtype.byteOrder, this.shape(shape), this.rawData(raw), Boolean(fortran), (m) => this.fail(m));
  }

  private buildDtype(target: Pending, state: PickleValue): NpDtype {
    if (!(state instanceof PickleTuple) || state.length < 8) this.fail('dtype state must be a tuple of at least 8 items');
    const [, order, subarray, names, fields] = state.items;
    if (subarray !== null || names !== null || fields !== null) this.fail('structured or sub-array dtypes are not supported');
    if (order !== '<' && order !== '>' && order !== '|' && order !== '=') this.fail('invalid dtype byte order');
    const code = target.dtypeCode as NdDtype;
    // '=' is "native to the writer"; numpy writes it only for such machines, which are little-endian in practice.
    const byteOrder = DTYPES[code].itemBytes === 1 ? '|' : order === '>' ? '>' : '<';
    return new NpDtype(code, byteOrder);
  }
}
