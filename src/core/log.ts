/**
 * Structured JSON logging: one JSON object per line on stdout (stderr for warn and error), with a
 * static `msg` and context in fields. Child loggers carry a `module` and any bound fields.
 * Prompts and transcripts are only ever logged under a `pii.` field prefix.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const LEVEL_RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export type LogFields = Record<string, unknown>;

export interface LogSink {
  write(line: string, level: LogLevel): void;
}

const stdSink: LogSink = {
  write(line, level) {
    (level === 'warn' || level === 'error' ? process.stderr : process.stdout).write(line + '\n');
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
