/**
 * The whitelist of Python globals a pickle may name, shared by the reader (which refuses any
 * other global) and the writer (which refuses to emit any other global).
 *
 * Invariants: names are compared after mapping Python 2 / numpy 2 module names to their
 * canonical form (`canonicalGlobal`), so `__builtin__.set` and `builtins.set` are the same
 * entry. Resolving a global only yields its name; nothing is ever imported or called here.
 */

// ---------------------------------------------------------------------------------------------
// Whitelisted globals

/** Python 2 module names that protocol ≤ 2 pickles use, mapped to their Python 3 names. */
export const MODULE_ALIASES: ReadonlyMap<string, string> = new Map([
  ['__builtin__', 'builtins'],
  ['copy_reg', 'copyreg'],
  ['numpy._core.multiarray', 'numpy.core.multiarray'],
  ['numpy._core.numeric', 'numpy.core.numeric'],
]);

export const ALLOWED_GLOBALS: ReadonlySet<string> = new Set([
  'numpy.core.multiarray._reconstruct',
  'numpy.core.multiarray.scalar',
  'numpy.core.numeric._frombuffer',
  'numpy.ndarray',
  'numpy.dtype',
  'builtins.set',
  'builtins.frozenset',
  'builtins.bytearray',
  'builtins.bytes',
  '_codecs.encode',
  'collections.OrderedDict',
]);

export function canonicalGlobal(module: string, name: string): string {
  return `${MODULE_ALIASES.get(module) ?? module}.${name}`;
}
