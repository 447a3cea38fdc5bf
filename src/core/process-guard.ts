/**
 * The process's last line of defence. An exception nobody caught, or a promise rejection nobody
 * handled, is a bug: every request path handles its own errors (HTTP error middleware, realtime
 * error events, stream 'error' listeners). When one still escapes, Node's default is to end the
 * process, and with it every live conversation on this machine. Instead it is logged at error
 * level with its stack, counted (`avatar_process_escaped_errors_total` in /metrics, by kind), and
 * the process goes on serving.
 *
 * Not hidden: the log line says it is a bug, the counter is what an alert watches, and the fuzz
 * suites assert it stays at zero. Going on after an uncaught exception can leave the one request or
 * session it came from in a broken state; ending every other session with it is worse.
 *
 * The net never feeds itself: the standard streams it logs to are guarded first (a failed write to
 * a closed log pipe is noticed once and the stream is no longer written: log.ts guardStdStreams),
 * so a broken log stream is not an escaped error whose logging breaks again, for ever.
 */
import { guardStdStreams, type Logger } from './log.js';

export type EscapeKind = 'uncaught_exception' | 'unhandled_rejection';

const counts: Record<EscapeKind, number> = { uncaught_exception: 0, unhandled_rejection: 0 };
let installed: Logger | null = null;

/** Errors that escaped every handler since the process started, by kind. */
export function escapedErrors(): Readonly<Record<EscapeKind, number>> {
  return { ...counts };
}

/** Installs the handlers once per process (later calls only swap the logger). */
export function installProcessSafetyNet(log: Logger): void {
  const first = installed === null;
  installed = log;
  if (!first) return;
  guardStdStreams();
  process.on('uncaughtException', (err, origin) => {
    counts.uncaught_exception++;
    installed?.error('uncaught exception (a bug: the server goes on)', { err, origin, escapedErrors: escapedErrors() });
  });
  process.on('unhandledRejection', (reason) => {
    counts.unhandled_rejection++;
    installed?.error('unhandled promise rejection (a bug: the server goes on)', { err: reason, escapedErrors: escapedErrors() });
  });
}
