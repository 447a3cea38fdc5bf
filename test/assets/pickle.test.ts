/**
 * Tests for the safe pickle reader/writer (src/assets/pickle.ts).
 *
 * The base64 fixtures are real CPython 3.11 + numpy 2.4 pickles, made in a throwaway venv:
 *   python3 -m venv /tmp/pkvenv && /tmp/pkvenv/bin/pip install numpy
 *   then `pickle.dumps(obj, protocol=p)` + base64 for the objects named by each fixture:
 *   OBJ_P*: OBJ_SOURCE below, protocols 0/2/4/5; F4_P2: np.arange(6, dtype='<f4').reshape(2, 3) / 4;
 *   F8_P4: np.array([0.1, -2.5, 1e300]); I8_P5: np.array([[1, -2], [2**40, -2**62]], '<i8');
 *   F4_FORTRAN_P4: np.asfortranarray(<F4_P2 array>); F4_FORTRAN_P5: Fortran-order
 *   np.arange(24, dtype='<f4').reshape(2, 3, 4); I4_BIG_P4: np.array([1, -2, 65536], '>i4');
 *   F8_BIG_P2: np.array([[1.25, -3.0]], '>f8'); F2_P4: np.array([1, -0.5, 65504, 6e-8], '<f2');
 *   SMALL_P4: dict of u1/b1/i1/u2/i2/u4/u8 arrays, a 0-d f4 array and an empty (0, 3) array;
 *   F4_P0: np.array([1.5, -2.0], '<f4') at protocol 0; SCALARS_P2/P4: [np.float32(1.5),
 *   np.int64(-3), np.bool_(True), np.float64(0.25)]; SHARED_P4: [a, a, {'again': a}] for one
 *   a = np.arange(3, dtype='<f4'); OBJECT_ARRAY_P4: np.array([1, 'a'], dtype=object);
 *   MATRIX_P4: np.matrix([[1.0]]); COMPLEX_P4: np.array([1j], '<c8').
 *
 * Manual check (done once by hand, not part of the test run) that the writer's output loads in
 * Python with numpy:
 *   npx tsx -e "import {writeFileSync} from 'node:fs'; import {writePickle, NdArray, tuple, pyFloat} \
 *     from './src/assets/pickle.ts'; writeFileSync('/tmp/w.pkl', writePickle({a: NdArray.fromNumbers('f4', \
 *     [2, 2], [1, 2, 3, 4]), b: [1, 2n ** 70n, pyFloat(25), tuple('x', null)], h: NdArray.fromNumbers('f2', [1], [0.1])}))"
 *   /tmp/pkvenv/bin/python -W error::DeprecationWarning -c "import pickle; print(pickle.load(open('/tmp/w.pkl', 'rb')))"
 *   → {'a': array([[1., 2.], [3., 4.]], dtype=float32), 'b': [1, 1180591620717411303424, 25.0, ('x', None)],
 *      'h': array([0.1], dtype=float16)}
 * (The same was done for every dtype, ints up to ±2^100, and 2,000 random halves, which matched
 * numpy's float16 rounding bit for bit.)
 */

import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  MAX_WRITE_DEPTH,
  NdArray,
  NpDtype,
  PickleError,
  PickleTuple,
  dictToRecord,
  pyFloat,
  readPickle,
  tuple,
  writePickle,
  type PickleValue,
  type PickleWritable,
} from '../../src/assets/pickle/index.js';

// OBJ_SOURCE = {'int': 7, 'neg': -5, 'i16': 300, 'i32': 70000, 'big': 2**70, 'negbig': -2**40,
//   'float': 1.5, 'inf': float('inf'), 'none': None, 't': True, 'f': False, 'str': 'h\u00e9llo \u2713\n',
//   'bytes': b'\x00\xff', 'list': [1, [2, 3]], 'tup': (1, 2, 3, 4), 'tup1': ('x',), 'set': {1, 2},
//   'frozen': frozenset({3}), 'ba': bytearray(b'xy'), 'od': collections.OrderedDict(x=1), 'empty': ()}
const FIXTURES = {
  OBJ_P0:
    'KGRwMApWaW50CnAxCkk3CnNWbmVnCnAyCkktNQpzVmkxNgpwMwpJMzAwCnNWaTMyCnA0Ckk3MDAwMApzVmJpZwpwNQpMMTE4' +
    'MDU5MTYyMDcxNzQxMTMwMzQyNEwKc1ZuZWdiaWcKcDYKTC0xMDk5NTExNjI3Nzc2TApzVmZsb2F0CnA3CkYxLjUKc1ZpbmYK' +
    'cDgKRmluZgpzVm5vbmUKcDkKTnNWdApwMTAKSTAxCnNWZgpwMTEKSTAwCnNWc3RyCnAxMgpWaOlsbG8gXHUyNzEzXHUwMDBh' +
    'CnAxMwpzVmJ5dGVzCnAxNApjX2NvZGVjcwplbmNvZGUKcDE1CihWXHUwMDAw/wpwMTYKVmxhdGluMQpwMTcKdHAxOApScDE5' +
    'CnNWbGlzdApwMjAKKGxwMjEKSTEKYShscDIyCkkyCmFJMwphYXNWdHVwCnAyMwooSTEKSTIKSTMKSTQKdHAyNApzVnR1cDEK' +
    'cDI1CihWeApwMjYKdHAyNwpzVnNldApwMjgKY19fYnVpbHRpbl9fCnNldApwMjkKKChscDMwCkkxCmFJMgphdHAzMQpScDMy' +
    'CnNWZnJvemVuCnAzMwpjX19idWlsdGluX18KZnJvemVuc2V0CnAzNAooKGxwMzUKSTMKYXRwMzYKUnAzNwpzVmJhCnAzOApj' +
    'X19idWlsdGluX18KYnl0ZWFycmF5CnAzOQooZzE1CihWeHkKcDQwCmcxNwp0cDQxClJwNDIKdHA0MwpScDQ0CnNWb2QKcDQ1' +
    'CmNjb2xsZWN0aW9ucwpPcmRlcmVkRGljdApwNDYKKHRScDQ3CmcyNgpJMQpzc1ZlbXB0eQpwNDgKKHRzLg==',
  OBJ_P2:
    'gAJ9cQAoWAMAAABpbnRxAUsHWAMAAABuZWdxAkr7////WAMAAABpMTZxA00sAVgDAAAAaTMycQRKcBEBAFgDAAAAYmlncQWK' +
    'CQAAAAAAAAAAQFgGAAAAbmVnYmlncQaKBgAAAAAA/1gFAAAAZmxvYXRxB0c/+AAAAAAAAFgDAAAAaW5mcQhHf/AAAAAAAABY' +
    'BAAAAG5vbmVxCU5YAQAAAHRxCohYAQAAAGZxC4lYAwAAAHN0cnEMWAsAAABow6lsbG8g4pyTCnENWAUAAABieXRlc3EOY19j' +
    'b2RlY3MKZW5jb2RlCnEPWAMAAAAAw79xEFgGAAAAbGF0aW4xcRGGcRJScRNYBAAAAGxpc3RxFF1xFShLAV1xFihLAksDZWVY' +
    'AwAAAHR1cHEXKEsBSwJLA0sEdHEYWAQAAAB0dXAxcRlYAQAAAHhxGoVxG1gDAAAAc2V0cRxjX19idWlsdGluX18Kc2V0CnEd' +
    'XXEeKEsBSwJlhXEfUnEgWAYAAABmcm96ZW5xIWNfX2J1aWx0aW5fXwpmcm96ZW5zZXQKcSJdcSNLA2GFcSRScSVYAgAAAGJh' +
    'cSZjX19idWlsdGluX18KYnl0ZWFycmF5CnEnaA9YAgAAAHh5cShoEYZxKVJxKoVxK1JxLFgCAAAAb2RxLWNjb2xsZWN0aW9u' +
    'cwpPcmRlcmVkRGljdApxLilScS9oGksBc1gFAAAAZW1wdHlxMCl1Lg==',
  OBJ_P4:
    'gASVSwEAAAAAAAB9lCiMA2ludJRLB4wDbmVnlEr7////jANpMTaUTSwBjANpMzKUSnARAQCMA2JpZ5SKCQAAAAAAAAAAQIwG' +
    'bmVnYmlnlIoGAAAAAAD/jAVmbG9hdJRHP/gAAAAAAACMA2luZpRHf/AAAAAAAACMBG5vbmWUTowBdJSIjAFmlImMA3N0cpSM' +
    'C2jDqWxsbyDinJMKlIwFYnl0ZXOUQwIA/5SMBGxpc3SUXZQoSwFdlChLAksDZWWMA3R1cJQoSwFLAksDSwR0lIwEdHVwMZSM' +
    'AXiUhZSMA3NldJSPlChLAUsCkIwGZnJvemVulChLA5GUjAJiYZSMCGJ1aWx0aW5zlIwJYnl0ZWFycmF5lJOUQwJ4eZSFlFKU' +
    'jAJvZJSMC2NvbGxlY3Rpb25zlIwLT3JkZXJlZERpY3SUk5QpUpRoFksBc4wFZW1wdHmUKXUu',
  OBJ_P5:
    'gAWVNQEAAAAAAAB9lCiMA2ludJRLB4wDbmVnlEr7////jANpMTaUTSwBjANpMzKUSnARAQCMA2JpZ5SKCQAAAAAAAAAAQIwG' +
    'bmVnYmlnlIoGAAAAAAD/jAVmbG9hdJRHP/gAAAAAAACMA2luZpRHf/AAAAAAAACMBG5vbmWUTowBdJSIjAFmlImMA3N0cpSM' +
    'C2jDqWxsbyDinJMKlIwFYnl0ZXOUQwIA/5SMBGxpc3SUXZQoSwFdlChLAksDZWWMA3R1cJQoSwFLAksDSwR0lIwEdHVwMZSM' +
    'AXiUhZSMA3NldJSPlChLAUsCkIwGZnJvemVulChLA5GUjAJiYZSWAgAAAAAAAAB4eZSMAm9klIwLY29sbGVjdGlvbnOUjAtP' +
    'cmRlcmVkRGljdJSTlClSlGgWSwFzjAVlbXB0eZQpdS4=',
  F4_P2:
    'gAJjbnVtcHkuX2NvcmUubXVsdGlhcnJheQpfcmVjb25zdHJ1Y3QKcQBjbnVtcHkKbmRhcnJheQpxAUsAhXECY19jb2RlY3MK' +
    'ZW5jb2RlCnEDWAEAAABicQRYBgAAAGxhdGluMXEFhnEGUnEHh3EIUnEJKEsBSwJLA4ZxCmNudW1weQpkdHlwZQpxC1gCAAAA' +
    'ZjRxDImIh3ENUnEOKEsDWAEAAAA8cQ9OTk5K/////0r/////SwB0cRBiiWgDWBsAAAAAAAAAAADCgD4AAAA/AABAPwAAwoA/' +
    'AADCoD9xEWgFhnESUnETdHEUYi4=',
  F8_P4:
    'gASVoQAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsDhZRoA4wFZHR5cGWUk5SMAmY4lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGKJQxia' +
    'mZmZmZm5PwAAAAAAAATAnHUAiDzkN36UdJRiLg==',
  I8_P5:
    'gAWVlgAAAAAAAACME251bXB5Ll9jb3JlLm51bWVyaWOUjAtfZnJvbWJ1ZmZlcpSTlCiWIAAAAAAAAAABAAAAAAAAAP7/////' +
    '////AAAAAAABAAAAAAAAAAAAwJSMBW51bXB5lIwFZHR5cGWUk5SMAmk4lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0' +
    'lGJLAksChpSMAUOUdJRSlC4=',
  F4_FORTRAN_P4:
    'gASVowAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsCSwOGlGgDjAVkdHlwZZSTlIwCZjSUiYiHlFKUKEsDjAE8lE5OTkr/////Sv////9LAHSUYohD' +
    'GAAAAAAAAEA/AACAPgAAgD8AAAA/AACgP5R0lGIu',
  F4_FORTRAN_P5:
    'gAWV2AAAAAAAAACME251bXB5Ll9jb3JlLm51bWVyaWOUjAtfZnJvbWJ1ZmZlcpSTlCiWYAAAAAAAAAAAAAAAAABAQQAAgEAA' +
    'AIBBAAAAQQAAoEEAAIA/AABQQQAAoEAAAIhBAAAQQQAAqEEAAABAAABgQQAAwEAAAJBBAAAgQQAAsEEAAEBAAABwQQAA4EAA' +
    'AJhBAAAwQQAAuEGUjAVudW1weZSMBWR0eXBllJOUjAJmNJSJiIeUUpQoSwOMATyUTk5OSv////9K/////0sAdJRiSwJLA0sE' +
    'h5SMAUaUdJRSlC4=',
  I4_BIG_P4:
    'gASVlQAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsDhZRoA4wFZHR5cGWUk5SMAmk0lImIh5RSlChLA4wBPpROTk5K/////0r/////SwB0lGKJQwwA' +
    'AAAB/////gABAACUdJRiLg==',
  F8_BIG_P2:
    'gAJjbnVtcHkuX2NvcmUubXVsdGlhcnJheQpfcmVjb25zdHJ1Y3QKcQBjbnVtcHkKbmRhcnJheQpxAUsAhXECY19jb2RlY3MK' +
    'ZW5jb2RlCnEDWAEAAABicQRYBgAAAGxhdGluMXEFhnEGUnEHh3EIUnEJKEsBSwFLAoZxCmNudW1weQpkdHlwZQpxC1gCAAAA' +
    'ZjhxDImIh3ENUnEOKEsDWAEAAAA+cQ9OTk5K/////0r/////SwB0cRBiiWgDWBIAAAA/w7QAAAAAAADDgAgAAAAAAABxEWgF' +
    'hnESUnETdHEUYi4=',
  F2_P4:
    'gASVkQAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsEhZRoA4wFZHR5cGWUk5SMAmYylImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGKJQwgA' +
    'PAC4/3sBAJR0lGIu',
  SMALL_P4:
    'gASVuwIAAAAAAAB9lCiMAnUxlIwWbnVtcHkuX2NvcmUubXVsdGlhcnJheZSMDF9yZWNvbnN0cnVjdJSTlIwFbnVtcHmUjAdu' +
    'ZGFycmF5lJOUSwCFlEMBYpSHlFKUKEsBSwKFlGgFjAVkdHlwZZSTlIwCdTGUiYiHlFKUKEsDjAF8lE5OTkr/////Sv////9L' +
    'AHSUYolDAgD/lHSUYowCYjGUaARoB0sAhZRoCYeUUpQoSwFLA4WUaA6MAmIxlImIh5RSlChLA2gSTk5OSv////9K/////0sA' +
    'dJRiiUMDAQABlHSUYowCaTGUaARoB0sAhZRoCYeUUpQoSwFLAoWUaA6MAmkxlImIh5RSlChLA2gSTk5OSv////9K/////0sA' +
    'dJRiiUMCgH+UdJRijAJ1MpRoBGgHSwCFlGgJh5RSlChLAUsBhZRoDowCdTKUiYiHlFKUKEsDjAE8lE5OTkr/////Sv////9L' +
    'AHSUYolDAv//lHSUYowCaTKUaARoB0sAhZRoCYeUUpQoSwFLAYWUaA6MAmkylImIh5RSlChLA2g0Tk5OSv////9K/////0sA' +
    'dJRiiUMC/v+UdJRijAJ1NJRoBGgHSwCFlGgJh5RSlChLAUsBhZRoDowCdTSUiYiHlFKUKEsDaDROTk5K/////0r/////SwB0' +
    'lGKJQwQAKGvulHSUYowCdTiUaARoB0sAhZRoCYeUUpQoSwFLAYWUaA6MAnU4lImIh5RSlChLA2g0Tk5OSv////9K/////0sA' +
    'dJRiiUMI//////////+UdJRijAZ6ZXJvX2SUaARoB0sAhZRoCYeUUpQoSwEpaA6MAmY0lImIh5RSlChLA2g0Tk5OSv////9K' +
    '/////0sAdJRiiUMEAAAgQJR0lGKMBWVtcHR5lGgEaAdLAIWUaAmHlFKUKEsBSwBLA4aUaF+JQwCUdJRidS4=',
  F4_P0:
    'Y251bXB5Ll9jb3JlLm11bHRpYXJyYXkKX3JlY29uc3RydWN0CnAwCihjbnVtcHkKbmRhcnJheQpwMQooSTAKdHAyCmNfY29k' +
    'ZWNzCmVuY29kZQpwMwooVmIKcDQKVmxhdGluMQpwNQp0cDYKUnA3CnRwOApScDkKKEkxCihJMgp0cDEwCmNudW1weQpkdHlw' +
    'ZQpwMTEKKFZmNApwMTIKSTAwCkkwMQp0cDEzClJwMTQKKEkzClY8CnAxNQpOTk5JLTEKSS0xCkkwCnRwMTYKYkkwMApnMwoo' +
    'Vlx1MDAwMFx1MDAwMMA/XHUwMDAwXHUwMDAwXHUwMDAwwApwMTcKZzUKdHAxOApScDE5CnRwMjAKYi4=',
  SCALARS_P2:
    'gAJdcQAoY251bXB5Ll9jb3JlLm11bHRpYXJyYXkKc2NhbGFyCnEBY251bXB5CmR0eXBlCnECWAIAAABmNHEDiYiHcQRScQUo' +
    'SwNYAQAAADxxBk5OTkr/////Sv////9LAHRxB2JjX2NvZGVjcwplbmNvZGUKcQhYBQAAAAAAw4A/cQlYBgAAAGxhdGluMXEK' +
    'hnELUnEMhnENUnEOaAFoAlgCAAAAaThxD4mIh3EQUnERKEsDaAZOTk5K/////0r/////SwB0cRJiaAhYEAAAAMO9w7/Dv8O/' +
    'w7/Dv8O/w79xE2gKhnEUUnEVhnEWUnEXaAFoAlgCAAAAYjFxGImIh3EZUnEaKEsDWAEAAAB8cRtOTk5K/////0r/////SwB0' +
    'cRxiaAhYAQAAAAFxHWgKhnEeUnEfhnEgUnEhaAFoAlgCAAAAZjhxIomIh3EjUnEkKEsDaAZOTk5K/////0r/////SwB0cSVi' +
    'aAhYCQAAAAAAAAAAAMOQP3EmaAqGcSdScSiGcSlScSplLg==',
  SCALARS_P4:
    'gASVBAEAAAAAAABdlCiMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAZzY2FsYXKUk5SMBW51bXB5lIwFZHR5cGWUk5SMAmY0' +
    'lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGJDBAAAwD+UhpRSlGgDaAaMAmk4lImIh5RSlChLA2gKTk5OSv////9K' +
    '/////0sAdJRiQwj9/////////5SGlFKUaANoBowCYjGUiYiHlFKUKEsDjAF8lE5OTkr/////Sv////9LAHSUYkMBAZSGlFKU' +
    'aANoBowCZjiUiYiHlFKUKEsDaApOTk5K/////0r/////SwB0lGJDCAAAAAAAANA/lIaUUpRlLg==',
  SHARED_P4:
    'gASVqAAAAAAAAABdlCiMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJh' +
    'eZSTlEsAhZRDAWKUh5RSlChLAUsDhZRoBIwFZHR5cGWUk5SMAmY0lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGKJ' +
    'QwwAAAAAAACAPwAAAECUdJRiaAp9lIwFYWdhaW6UaApzZS4=',
  OBJECT_ARRAY_P4:
    'gASVkAAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsChZRoA4wFZHR5cGWUk5SMAk84lImIh5RSlChLA4wBfJROTk5K/////0r/////Sz90lGKJXZQo' +
    'SwGMAWGUZXSUYi4=',
  MATRIX_P4:
    'gASVkgAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwGbWF0cml4lJOU' +
    'SwCFlEMBYpSHlFKUKEsBSwFLAYaUaAOMBWR0eXBllJOUjAJmOJSJiIeUUpQoSwOMATyUTk5OSv////9K/////0sAdJRiiUMI' +
    'AAAAAAAA8D+UdJRiLg==',
  COMPLEX_P4:
    'gASVkQAAAAAAAACMFm51bXB5Ll9jb3JlLm11bHRpYXJyYXmUjAxfcmVjb25zdHJ1Y3SUk5SMBW51bXB5lIwHbmRhcnJheZST' +
    'lEsAhZRDAWKUh5RSlChLAUsBhZRoA4wFZHR5cGWUk5SMAmM4lImIh5RSlChLA4wBPJROTk5K/////0r/////SwB0lGKJQwgA' +
    'AAAAAACAP5R0lGIu',
} as const;

type FixtureName = keyof typeof FIXTURES;

function fixture(name: FixtureName): Uint8Array {
  return new Uint8Array(Buffer.from(FIXTURES[name], 'base64'));
}

function bytes(...parts: (string | number[])[]): Uint8Array {
  const out: number[] = [];
  for (const p of parts) {
    if (typeof p === 'string') for (const ch of p) out.push(ch.charCodeAt(0));
    else out.push(...p);
  }
  return Uint8Array.from(out);
}

function throwsPickleError(fn: () => unknown, pattern: RegExp): PickleError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, PickleError);
    assert.match((err as PickleError).message, pattern);
    return err as PickleError;
  }
  assert.unreachable(`expected a PickleError matching ${pattern}`);
  throw new Error('unreachable');
}

function expectArray(v: PickleValue | undefined, dtype: string, shape: number[], values: number[]): void {
  assert.instance(v, NdArray);
  const a = v as NdArray;
  assert.is(a.dtype, dtype);
  assert.equal([...a.shape], shape);
  assert.equal(a.toNumberArray(), values);
}

const EXPECTED_OBJ: PickleValue = new Map<string, PickleValue>([
  ['int', 7],
  ['neg', -5],
  ['i16', 300],
  ['i32', 70000],
  ['big', 2n ** 70n],
  ['negbig', -(2 ** 40)],
  ['float', 1.5],
  ['inf', Infinity],
  ['none', null],
  ['t', true],
  ['f', false],
  ['str', 'h\u00e9llo \u2713\n'],
  ['bytes', Uint8Array.of(0, 255)],
  ['list', [1, [2, 3]]],
  ['tup', tuple(1, 2, 3, 4)],
  ['tup1', tuple('x')],
  ['set', new Set([1, 2])],
  ['frozen', new Set([3])],
  ['ba', Uint8Array.of(0x78, 0x79)],
  ['od', new Map([['x', 1]])],
  ['empty', tuple()],
]);

// --- real CPython pickles ------------------------------------------------------------------

for (const name of ['OBJ_P0', 'OBJ_P2', 'OBJ_P4', 'OBJ_P5'] as const) {
  test(`reads plain Python objects (${name})`, () => {
    assert.equal(readPickle(fixture(name)), EXPECTED_OBJ);
  });
}

test('reads numpy arrays at protocols 0, 2, 4 and 5', () => {
  expectArray(readPickle(fixture('F4_P2')), 'f4', [2, 3], [0, 0.25, 0.5, 0.75, 1, 1.25]);
  expectArray(readPickle(fixture('F8_P4')), 'f8', [3], [0.1, -2.5, 1e300]);
  const i8 = readPickle(fixture('I8_P5')) as NdArray;
  assert.is(i8.dtype, 'i8');
  assert.equal([...i8.data], [1n, -2n, 2n ** 40n, -(2n ** 62n)]);
  expectArray(readPickle(fixture('F4_P0')), 'f4', [2], [1.5, -2]);
});

test('reorders Fortran-order arrays into C order', () => {
  expectArray(readPickle(fixture('F4_FORTRAN_P4')), 'f4', [2, 3], [0, 0.25, 0.5, 0.75, 1, 1.25]);
  const a = readPickle(fixture('F4_FORTRAN_P5')) as NdArray;
  expectArray(a, 'f4', [2, 3, 4], Array.from({ length: 24 }, (_, i) => i));
  assert.is(a.get(1, 2, 3), 23);
  assert.is(a.get(0, 1, 2), 6);
});

test('reads big-endian arrays', () => {
  expectArray(readPickle(fixture('I4_BIG_P4')), 'i4', [3], [1, -2, 65536]);
  expectArray(readPickle(fixture('F8_BIG_P2')), 'f8', [1, 2], [1.25, -3]);
});

test('decodes float16 and the small integer / bool dtypes', () => {
  expectArray(readPickle(fixture('F2_P4')), 'f2', [4], [1, -0.5, 65504, 2 ** -24]);
  const d = dictToRecord(readPickle(fixture('SMALL_P4')));
  expectArray(d['u1'], 'u1', [2], [0, 255]);
  expectArray(d['b1'], 'b1', [3], [1, 0, 1]);
  expectArray(d['i1'], 'i1', [2], [-128, 127]);
  expectArray(d['u2'], 'u2', [1], [65535]);
  expectArray(d['i2'], 'i2', [1], [-2]);
  expectArray(d['u4'], 'u4', [1], [4000000000]);
  assert.equal([...(d['u8'] as NdArray).data], [2n ** 64n - 1n]);
  expectArray(d['zero_d'], 'f4', [], [2.5]);
  expectArray(d['empty'], 'f4', [0, 3], []);
});

test('numpy scalars become plain values', () => {
  assert.equal(readPickle(fixture('SCALARS_P2')), [1.5, -3, true, 0.25]);
  assert.equal(readPickle(fixture('SCALARS_P4')), [1.5, -3, true, 0.25]);
});

test('an array referenced twice through the memo is the same finished array', () => {
  const v = readPickle(fixture('SHARED_P4')) as PickleValue[];
  expectArray(v[0], 'f4', [3], [0, 1, 2]);
  assert.ok(v[0] === v[1]);
  assert.ok((v[2] as Map<string, PickleValue>).get('again') === v[0]);
});

test('unsupported numpy content is rejected by name', () => {
  throwsPickleError(() => readPickle(fixture('OBJECT_ARRAY_P4')), /unsupported numpy dtype 'O8'/);
  throwsPickleError(() => readPickle(fixture('COMPLEX_P4')), /unsupported numpy dtype 'c8'/);
  throwsPickleError(() => readPickle(fixture('MATRIX_P4')), /unsupported global 'numpy\.matrix'/);
});

// --- safety --------------------------------------------------------------------------------

test('rejects os.system via GLOBAL + REDUCE, naming the global', () => {
  const evil = bytes("cos\nsystem\n(S'echo pwned'\ntR.");
  const err = throwsPickleError(() => readPickle(evil), /unsupported global 'os\.system'/);
  assert.is(err.offset, 0);
});

test('rejects dangerous globals via STACK_GLOBAL and INST', () => {
  const stackGlobal = (module: string, name: string): Uint8Array =>
    bytes([0x80, 4, 0x8c, module.length], module, [0x8c, name.length], name, [0x93], ')R.');
  throwsPickleError(() => readPickle(stackGlobal('builtins', 'eval')), /unsupported global 'builtins\.eval'/);
  throwsPickleError(() => readPickle(stackGlobal('subprocess', 'Popen')), /unsupported global 'subprocess\.Popen'/);
  throwsPickleError(() => readPickle(stackGlobal('__builtin__', 'getattr')), /unsupported global '__builtin__\.getattr'/);
  throwsPickleError(() => readPickle(bytes('(S\'ls\'\nios\nsystem\n.')), /unsupported global 'os\.system'/);
});

test('whitelisted callables cannot be abused', () => {
  // _reconstruct with a class other than numpy.ndarray
  const reconstructSet = bytes(
    [0x80, 4],
    'cnumpy.core.multiarray\n_reconstruct\n',
    'c__builtin__\nset\n',
    [0x4b, 0, 0x85, 0x43, 1],
    'b',
    [0x87],
    'R.',
  );
  throwsPickleError(() => readPickle(reconstructSet), /only supported for numpy\.ndarray/);
  // calling numpy.ndarray directly
  throwsPickleError(() => readPickle(bytes('cnumpy\nndarray\n)R.')), /cannot be called/);
  // persistent ids, extension codes and out-of-band buffers
  throwsPickleError(() => readPickle(bytes([0x80, 4], 'NQ.')), /persistent IDs/);
  throwsPickleError(() => readPickle(bytes([0x80, 2, 0x82, 1], '.')), /extension registry/);
  throwsPickleError(() => readPickle(bytes([0x80, 5, 0x97], '.')), /out-of-band/);
});

test('every truncation of a real pickle is a PickleError', () => {
  for (const name of ['OBJ_P0', 'OBJ_P4', 'F4_P2', 'I8_P5'] as const) {
    const full = fixture(name);
    for (let n = 0; n < full.length; n++) {
      try {
        readPickle(full.subarray(0, n));
        assert.unreachable(`${name} truncated to ${n} bytes was accepted`);
      } catch (err) {
        assert.instance(err, PickleError, `${name}[0:${n}] threw ${String(err)}`);
      }
    }
  }
});

test('declared lengths beyond the input are rejected with the offset', () => {
  const err = throwsPickleError(() => readPickle(bytes([0x80, 4, 0x58, 0xff, 0xff, 0xff, 0x7f], 'abc.')), /truncated pickle/);
  assert.is(err.offset, 2);
  assert.match(err.message, /at byte 2, opcode BINUNICODE/);
  throwsPickleError(() => readPickle(bytes([0x80, 4, 0x8e, 0, 0, 0, 0, 0, 0, 0, 0x10], '.')), /exceeds/);
  throwsPickleError(() => readPickle(bytes([0x80, 4, 0x95, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], 'N.')), /exceeds/);
  throwsPickleError(() => readPickle(bytes([0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0x7f], '.')), /too large/);
  throwsPickleError(() => readPickle(bytes('I' + '9'.repeat(5000) + '\n.')), /too large/);
});

test('array data must match the declared shape', () => {
  // Rewrite the shape (2, 3) of F4_P2 into (2, 4): BININT1 2, BININT1 3, TUPLE2
  const buf = fixture('F4_P2');
  const at = buf.findIndex((_, i) => buf[i] === 0x4b && buf[i + 1] === 2 && buf[i + 2] === 0x4b && buf[i + 3] === 3);
  assert.ok(at > 0);
  buf[at + 3] = 4;
  throwsPickleError(() => readPickle(buf), /array data has 24 bytes but shape \(2, 4\) of f4 needs 32/);
  buf[at + 3] = 255;
  buf[at + 1] = 255;
  throwsPickleError(() => readPickle(buf), /needs 260100/);
});

test('malformed streams give clear errors', () => {
  throwsPickleError(() => readPickle(new Uint8Array(0)), /empty input/);
  throwsPickleError(() => readPickle(bytes([0x80, 6], 'N.')), /unsupported pickle protocol 6/);
  throwsPickleError(() => readPickle(bytes('NN.')), /2 values on the stack/);
  throwsPickleError(() => readPickle(bytes('.')), /stack underflow|0 values/);
  throwsPickleError(() => readPickle(bytes('h\x05.')), /memo entry 5 is missing/);
  throwsPickleError(() => readPickle(bytes('\xff.')), /unknown opcode 0xff/);
  throwsPickleError(() => readPickle(bytes('N')), /ended before STOP/);
  throwsPickleError(() => readPickle(bytes('a.')), /stack underflow/);
  throwsPickleError(() => readPickle(bytes('NNa.')), /APPEND on a None/);
  throwsPickleError(() => readPickle(bytes(']]s.')), /odd|stack underflow|unhashable/);
  throwsPickleError(() => readPickle(bytes('}]Ns.')), /unhashable list/);
  throwsPickleError(() => readPickle(bytes([0x8c, 2, 0xc3, 0x28], '.')), /not valid UTF-8/);
  // an ndarray placed in a container before its BUILD state
  const early = bytes(
    ']cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n',
    [0x4b, 0, 0x85, 0x43, 1],
    'b',
    [0x87],
    'Ra.',
  );
  throwsPickleError(() => readPickle(early), /used before its state was set/);
});

test('deep nesting is read without recursion; the writer refuses it cleanly', () => {
  const N = 100_000;
  const deep = new Uint8Array(N * 2 + 1);
  deep.fill(0x5d, 0, N); // N × EMPTY_LIST
  deep.fill(0x61, N, 2 * N - 1); // N-1 × APPEND
  deep[2 * N - 1] = 0x2e;
  let v = readPickle(deep.subarray(0, 2 * N)) as PickleValue[];
  let depth = 0;
  while (v.length > 0) {
    v = v[0] as PickleValue[];
    depth++;
  }
  assert.is(depth, N - 1);
  throwsPickleError(() => writePickle(readPickle(deep.subarray(0, 2 * N))), new RegExp(`deeper than ${MAX_WRITE_DEPTH}`));
});

test('the writer refuses cycles', () => {
  const selfRef = readPickle(bytes([0x80, 4], ']', [0x94, 0x68, 0], 'a.')) as PickleValue[];
  assert.ok(selfRef[0] === selfRef);
  throwsPickleError(() => writePickle(selfRef), /cyclic/);
});

// --- writer and round trips ---------------------------------------------------------------

test('round-trips plain values', () => {
  const value: PickleWritable = {
    ints: [0, 255, 256, 65535, 65536, -1, 2 ** 31, -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER, 2n ** 100n, -(2n ** 64n)],
    floats: [0.5, -1e300, Infinity, -Infinity],
    text: ['', 'x'.repeat(300), 'ünï ✓ 😀'],
    raw: [new Uint8Array(0), new Uint8Array(300).fill(7)],
    tuples: [tuple(), tuple(1), tuple(1, 2), tuple(1, 2, 3), tuple(1, 2, 3, 4, 5)],
    set: new Set<string | number>([1, 'a']),
    map: new Map<string | number, PickleWritable>([[1, 'one'], ['two', null]]),
    flags: [true, false, null],
    long: Array.from({ length: 2500 }, (_, i) => i),
  };
  const back = dictToRecord(readPickle(writePickle(value)));
  assert.equal(back['ints'], [0, 255, 256, 65535, 65536, -1, 2 ** 31, -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER, 2n ** 100n, -(2n ** 64n)]);
  assert.equal(back['floats'], [0.5, -1e300, Infinity, -Infinity]);
  assert.equal(back['text'], value['text']);
  assert.equal(back['raw'], value['raw']);
  assert.equal(back['tuples'], value['tuples']);
  assert.equal(back['set'], value['set']);
  assert.equal(back['map'], value['map']);
  assert.equal(back['flags'], [true, false, null]);
  assert.equal(back['long'], value['long']);
  assert.ok(Number.isNaN(readPickle(writePickle(NaN))));
});

test('pyFloat forces a Python float', () => {
  const asInt = writePickle(25);
  const asFloat = writePickle(pyFloat(25));
  assert.equal([...asInt.slice(2, 4)], [0x4b, 25]); // BININT1 25
  assert.is(asFloat[2], 0x47); // BINFLOAT
  assert.is(readPickle(asFloat), 25);
  assert.ok(Object.is(readPickle(writePickle(pyFloat(-0))), -0));
});

test('round-trips arrays of every dtype', () => {
  const arrays: Record<string, NdArray> = {
    f2: NdArray.fromNumbers('f2', [3], [0.1, -65504, 2 ** -24]),
    f4: NdArray.fromNumbers('f4', [2, 2], [1.5, -2, 3.25, 0.001]),
    f8: NdArray.fromNumbers('f8', [1], [Math.PI]),
    i1: NdArray.fromNumbers('i1', [2], [-128, 127]),
    i2: NdArray.fromNumbers('i2', [2], [-32768, 32767]),
    i4: NdArray.fromNumbers('i4', [2], [-(2 ** 31), 2 ** 31 - 1]),
    i8: new NdArray('i8', [2], BigInt64Array.from([-(2n ** 63n), 2n ** 62n])),
    u1: NdArray.fromNumbers('u1', [1], [255]),
    u2: NdArray.fromNumbers('u2', [1], [65535]),
    u4: NdArray.fromNumbers('u4', [1], [2 ** 32 - 1]),
    u8: new NdArray('u8', [1], BigUint64Array.from([2n ** 64n - 1n])),
    b1: NdArray.fromNumbers('b1', [3], [1, 0, 1]),
    zero_d: NdArray.fromNumbers('f4', [], [2.5]),
    empty: NdArray.fromNumbers('f4', [0, 3], []),
  };
  const back = dictToRecord(readPickle(writePickle(arrays)));
  for (const [k, a] of Object.entries(arrays)) assert.equal(back[k], a, k);
  assert.equal((back['f2'] as NdArray).toNumberArray(), [0.0999755859375, -65504, 2 ** -24]);
});

test('arrays are written the way numpy pickles them', () => {
  const out = writePickle([NdArray.fromNumbers('f4', [1, 1], [1.5]), NdArray.fromNumbers('f4', [3], [1, 2, 3])]);
  const text = Buffer.from(out).toString('latin1');
  // globals by STACK_GLOBAL, memoized after the first use
  assert.is(text.split('\x8c\x15numpy.core.multiarray\x8c\x0c_reconstruct\x93\x94').length, 2);
  assert.is(text.split('\x8c\x05numpy\x8c\x07ndarray\x93\x94').length, 2);
  assert.ok(text.includes('K\x00\x85C\x01b\x87R(K\x01K\x01K\x01\x86')); // (ndarray, (0,), b'b') REDUCE, state (1, (1, 1), …
  // dtype('f4', False, True) + BUILD (3, '<', None, None, None, -1, -1, 0), emitted once and memoized
  const dtypeState = '\x8c\x02f4\x89\x88\x87R\x94(K\x03\x8c\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb';
  assert.is(text.split(dtypeState).length, 2);
  assert.ok(text.includes('\x89C\x04\x00\x00\xc0?tb')); // is_fortran False, raw bytes of 1.5f, BUILD
  assert.equal(readPickle(out), [NdArray.fromNumbers('f4', [1, 1], [1.5]), NdArray.fromNumbers('f4', [3], [1, 2, 3])]);
});

test('re-writes a real numpy pickle to an equal value', () => {
  for (const name of ['OBJ_P4', 'SMALL_P4', 'F4_FORTRAN_P5', 'I4_BIG_P4'] as const) {
    const v = readPickle(fixture(name));
    assert.equal(readPickle(writePickle(v)), v, name);
  }
});

test('NpDtype values round-trip; dictToRecord and NdArray validate their input', () => {
  const dt = new NpDtype('f8', '<');
  assert.equal(readPickle(writePickle(dt)), dt);
  assert.throws(() => dictToRecord([1, 2]), /not a dict/);
  assert.throws(() => dictToRecord(new Map([[1, 2]])), /non-string key/);
  const rec = dictToRecord(new Map([['__proto__', 1]]));
  assert.is(rec['__proto__'], 1);
  assert.throws(() => new NdArray('f4', [2, 2], new Float32Array(3)), /does not match/);
  assert.throws(() => new NdArray('f4', [1], new Float64Array(1)), /needs a Float32Array/);
  assert.throws(() => NdArray.fromNumbers('f4', [2], [1, 2]).get(2), /out of range/);
  assert.instance(tuple(1), PickleTuple);
});

test.run();
