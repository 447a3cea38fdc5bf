/**
 * Wall-clock time for records (sessions, keys, usage), in integer microseconds since the Unix
 * epoch, and its wire format. The REST interface shows timestamps as ISO 8601 without a zone and
 * with microseconds ("2024-01-01T00:00:00.000000"), always UTC. Tests inject a ManualClock.
 */

export interface Clock {
  /** Microseconds since the Unix epoch. */
  nowUs(): number;
}

export const systemClock: Clock = {
  nowUs: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private us: number = Date.UTC(2026, 0, 1) * 1000) {}
  nowUs(): number {
    return this.us;
  }
  advanceMs(ms: number): void {
    this.us += Math.round(ms * 1000);
  }
}

const US_PER_MS = 1000;
const US_PER_S = 1_000_000;

/** 1767225600123456 -> "2026-01-01T00:00:00.123456" */
export function formatTimestamp(us: number): string {
  const ms = Math.floor(us / US_PER_MS);
  const micros = us - ms * US_PER_MS;
  const iso = new Date(ms).toISOString(); // 2026-01-01T00:00:00.123Z
  return iso.slice(0, 23) + String(micros).padStart(3, '0');
}

export function formatNullableTimestamp(us: number | null): string | null {
  return us === null ? null : formatTimestamp(us);
}

/**
 * Reads a timestamp given by a client: ISO 8601 (a missing zone means UTC, up to microseconds) or
 * Unix seconds. Returns microseconds, or null when the text is neither.
 */
export function parseTimestamp(text: string): number | null {
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * US_PER_S);
  const m = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(text);
  if (!m) return null;
  const [, date, time = '00:00:00', frac = '', zone = 'Z'] = m;
  const ms = Date.parse(`${date}T${time.length === 5 ? time + ':00' : time}${zone}`);
  if (Number.isNaN(ms)) return null;
  return ms * US_PER_MS + Number(frac.padEnd(6, '0'));
}

export function secondsBetween(startUs: number, endUs: number): number {
  return Math.round(endUs - startUs) / US_PER_S;
}

export function unixSeconds(us: number): number {
  return Math.floor(us / US_PER_S);
}
