/**
 * Seeded randomness for the fuzz suites: a small PRNG (mulberry32, so a failing case is replayed by
 * its seed), pickers, and generators of hostile JSON values and strings. The seed comes from
 * FUZZ_SEED when set, else from the clock; suites print it so a failure can be reproduced with
 * `FUZZ_SEED=<seed> node --import tsx test/...`.
 */

export class Rng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)] as T;
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = Math.floor(this.next() * 256);
    return out;
  }
}

/** The suite's seed: FUZZ_SEED, or a fresh one. */
export function fuzzSeed(): number {
  const fromEnv = Number(process.env.FUZZ_SEED);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : (Date.now() % 2_147_483_647) + 1;
}

const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'null',
  'undefined',
  'NaN',
  '-1',
  '1e309',
  '0x10',
  '../../etc/passwd',
  '%00',
  '%2e%2e%2f',
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  '\ud800',
  '😀'.repeat(10),
  'é\u0301',
  '\r\nX-Injected: 1',
  'default',
  'alice',
  'h264',
  'vp8',
  'realtime',
  '00000000-0000-4000-8000-000000000000',
];

/** A hostile string: odd characters, boundaries, lengths from 0 to `maxLength`. */
export function oddString(rng: Rng, maxLength = 5000): string {
  switch (rng.int(0, 4)) {
    case 0:
      return rng.pick(ODD_STRINGS);
    case 1:
      return 'x'.repeat(rng.int(0, maxLength));
    case 2: {
      let s = '';
      const n = rng.int(1, 64);
      for (let i = 0; i < n; i++) s += String.fromCharCode(rng.int(0, 0xffff));
      return s;
    }
    case 3:
      return rng.bytes(rng.int(1, 32)).toString('base64');
    default:
      return rng.pick(ODD_STRINGS) + 'x'.repeat(rng.int(0, 300));
  }
}

/**
 * JSON text nested `depth` levels deep, built as text: deeper than JSON.stringify itself can
 * write (it recurses; a few thousand levels overflow the stack), for the parsers under test.
 */
export function deepJsonText(depth: number, rng: Rng): string {
  return rng.chance(0.5) ? '['.repeat(depth) + '0' + ']'.repeat(depth) : '{"a":'.repeat(depth) + '0' + '}'.repeat(depth);
}

/** A nested array `depth` levels deep: [[[...]]] (values built in memory stay JSON.stringify-able: use up to ~2000). */
export function deepArray(depth: number): unknown {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** A nested object `depth` levels deep: {"a":{"a":...}}. */
export function deepObject(depth: number): unknown {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

/** Any JSON value, mostly small, sometimes huge, deep or odd. */
export function oddJson(rng: Rng, depth = 0): unknown {
  switch (rng.int(0, 13)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -1, 1, 0.5, -0.0, 1e308, -1e308, 2 ** 53, 2 ** 31, 4096, 4097, 60, 61]);
    case 3:
    case 4:
      return oddString(rng);
    case 5:
      return depth > 3 ? [] : Array.from({ length: rng.int(0, 5) }, () => oddJson(rng, depth + 1));
    case 6:
      return depth > 3 ? {} : Object.fromEntries(Array.from({ length: rng.int(0, 5) }, () => [oddString(rng, 20), oddJson(rng, depth + 1)]));
    case 7:
      return deepArray(rng.pick([10, 100, 1000, 2000]));
    case 8:
      return deepObject(rng.pick([10, 100, 1000, 2000]));
    case 9:
      return Array.from({ length: rng.int(1000, 20_000) }, (_, i) => i);
    case 10:
      return { type: 'realtime' };
    case 11:
      return rng.int(-1e6, 1e6);
    case 12:
      return 'y'.repeat(rng.int(10_000, 200_000));
    default:
      return {};
  }
}

/** `base` with one field replaced, removed or added (a valid body turned slightly wrong). */
export function mutateObject(rng: Rng, base: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  const keys = Object.keys(out);
  const action = rng.int(0, 3);
  if (action === 0 && keys.length > 0) delete out[rng.pick(keys)];
  else if (action === 1 || keys.length === 0) out[oddString(rng, 30)] = oddJson(rng);
  else out[rng.pick(keys)] = oddJson(rng);
  return out;
}

/** An event a fuzz suite saw: its type and, for errors, the error. */
interface SeenEvent {
  type: string;
  error?: { type?: unknown; code?: unknown; message?: unknown; event_id?: unknown };
}

/**
 * Checks the errors one fuzz case caused: none is a server_error, each is well formed, and each
 * names the case's event (`eventId`) when it had one, or an event whose id starts with
 * `otherIdPrefix` (earlier cases' events whose work is still going on); failures are appended.
 */
export function checkCaseErrors(events: readonly SeenEvent[], built: { eventId: string | null; describe: string }, n: number, failures: string[], otherIdPrefix: string | null = null): void {
  for (const e of events) {
    if (e.type !== 'error') continue;
    const err = e.error ?? {};
    const what = `case ${n} (${built.describe}): ${JSON.stringify(err).slice(0, 300)}`;
    if (err.type === 'server_error' || err.code === 'server_error') failures.push(`server_error from ${what}`);
    if (typeof err.code !== 'string' || typeof err.message !== 'string' || err.message === '') failures.push(`malformed error from ${what}`);
    const id = err.event_id ?? null;
    if (id !== null && id !== built.eventId && !(otherIdPrefix !== null && String(id).startsWith(otherIdPrefix))) failures.push(`error names an event that was not sent, ${what}`);
    if (id === null && built.eventId !== null) failures.push(`error does not name its event ${built.eventId}, ${what}`);
  }
}
