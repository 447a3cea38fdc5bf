/**
 * Structured JSON logging: one JSON object per line on stdout (stderr for warn and error), with a
 * static `msg` and context in fields. Child loggers carry a `module` and any bound fields.
 * Prompts and transcripts are only ever logged under a `pii.` field prefix.
 *
 * A log stream that fails never stops the process (its reader went away: `npm start | head`, a log
 * shipper restarting; the write fails with EPIPE). The standard streams get an 'error' listener
 * once, before the first line (guardStdStreams); a stream that errored is never written again, and
 * that is said once, on the other stream if it still works. Without this the failed write is an
 * unhandled stream error, the process safety net logs it to the same broken stream, and that fails
 * again, for ever: the process spins and stops serving.
 *
 * Errors in fields are written with name, message, code and stack; an AppError of status 503 (a
 * dependency outage: an expected condition, not a bug) without the stack, which would say nothing,
 * and with its cause's message and code instead.
 */
import { AppError } from './errors.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const LEVEL_RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export type LogFields = Record<string, unknown>;

export interface LogSink {
  write(line: string, level: LogLevel): void;
}

/** Standard streams that failed; nothing is written to them again. */
const brokenStreams = new Set<NodeJS.WriteStream>();
let stdGuarded = false;

/**
 * Attaches an 'error' listener to process.stdout and process.stderr, once per process: a failed
 * write (EPIPE, the stream destroyed) marks the stream broken instead of being an unhandled error,
 * and the first failure of each stream is reported once on the other one if that still works.
 */
export function guardStdStreams(): void {
  if (stdGuarded) return;
  stdGuarded = true;
  const pairs: Array<[NodeJS.WriteStream, NodeJS.WriteStream, string]> = [
    [process.stdout, process.stderr, 'stdout'],
    [process.stderr, process.stdout, 'stderr'],
  ];
  for (const [stream, other, name] of pairs) {
    stream.on('error', (err: Error & { code?: unknown }) => {
      if (brokenStreams.has(stream)) return;
      brokenStreams.add(stream);
      const record = { time: new Date().toISOString(), level: 'error', msg: 'log stream failed; nothing more is written to it', stream: name, error: err.message, code: err.code };
      writeStd(other, JSON.stringify(record));
    });
  }
}

/** Whether a standard stream failed (and is no longer written). */
export function stdStreamBroken(stream: 'stdout' | 'stderr'): boolean {
  return brokenStreams.has(stream === 'stdout' ? process.stdout : process.stderr);
}

function writeStd(stream: NodeJS.WriteStream, line: string): void {
  if (brokenStreams.has(stream)) return;
  if (stream.destroyed || stream.writableEnded) {
    brokenStreams.add(stream);
    return;
  }
  try {
    stream.write(line + '\n');
  } catch {
    brokenStreams.add(stream); // a synchronous failure: same as an 'error' event
  }
}

const stdSink: LogSink = {
  write(line, level) {
    guardStdStreams();
    writeStd(level === 'warn' || level === 'error' ? process.stderr : process.stdout, line);
  },
};

export class Logger {
  constructor(
    private readonly level: LogLevel,
    private readonly fields: LogFields = {},
    private readonly sink: LogSink = stdSink,
  ) {}

  child(fields: LogFields): Logger {
    return new Logger(this.level, { ...this.fields, ...fields }, this.sink);
  }

  debug(msg: string, fields?: LogFields): void {
    this.emit('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.emit('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.emit('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.emit('error', msg, fields);
  }

  private emit(level: LogLevel, msg: string, fields?: LogFields): void {
    if (LEVEL_RANK[level] < LEVEL_RANK[this.level]) return;
    const record: LogFields = { time: new Date().toISOString(), level, msg, ...this.fields, ...fields };
    this.sink.write(JSON.stringify(record, errorReplacer), level);
  }
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof AppError && value.status === 503) {
    const out: LogFields = { name: value.name, message: value.message, code: value.code };
    const cause = value.cause as { message?: unknown; code?: unknown } | undefined;
    if (cause !== undefined && cause !== null) out.cause = { message: String(cause.message ?? cause), code: cause.code };
    return out;
  }
  if (value instanceof Error) {
    const out: LogFields = { name: value.name, message: value.message, stack: value.stack };
    const code = (value as { code?: unknown }).code;
    if (code !== undefined) out.code = code;
    return out;
  }
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** A logger that keeps records in memory, for tests that assert on what was logged. */
export function memoryLogger(level: LogLevel = 'debug'): { logger: Logger; records: LogFields[] } {
  const records: LogFields[] = [];
  const sink: LogSink = { write: (line) => records.push(JSON.parse(line) as LogFields) };
  return { logger: new Logger(level, {}, sink), records };
}
