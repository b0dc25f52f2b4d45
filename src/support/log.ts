import { createRequire } from 'node:module';
import { type Logger, pino } from 'pino';

export type { Logger };

/** Paths whose values never reach a log line, wherever they appear in a logged object. */
const REDACT = [
  'token',
  'tokens',
  'password',
  'client_secret',
  'access_token',
  'authorization',
  '*.token',
  '*.password',
  '*.client_secret',
  '*.access_token',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
  'api_tokens',
  'read_tokens',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'coverage-rollup', pid: process.pid },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/** postgres://user:secret@host/db -> postgres://user:***@host/db, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '[unparsable url]';
  }
}

/** Write errors that mean standard output is gone for good: a hung-up terminal, a closed pipe. */
const OUTPUT_GONE = new Set(['EIO', 'EPIPE', 'ENXIO', 'EBADF']);

/**
 * The daemon's standard output as a log destination that outlives it. After a terminal or SSH
 * session closes, every write to it fails with EIO: pino's own destination only tolerates EPIPE, so
 * the error would end the daemon without its drain, and the flush pino runs at exit retries such a
 * write forever (the process hangs). Once a write says the output is gone, logging becomes a no-op
 * and the shutdown goes on unlogged (there is nobody left to read it).
 */
export function daemonStdout({ sync = false }: { sync?: boolean } = {}): pino.DestinationStream {
  const stream = pino.destination({ dest: 1, minLength: 0, sync });
  const noop = () => {};
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (!OUTPUT_GONE.has(error.code ?? '')) throw error;
    stream.write = () => true;
    stream.flush = noop;
    stream.flushSync = noop;
    stream.end = noop;
  });
  return stream;
}

/**
 * An error logger that says each distinct message once per `everyMs`: a connection that is down
 * fails the same way several times a second, and a line per failure buries what is wrong.
 */
export function throttledErrors(log: Logger, everyMs = 60_000) {
  const last = new Map<string, number>();
  return (fields: Record<string, unknown>, error: Error, msg: string): void => {
    const key = `${msg}\u0000${error.message}`;
    const now = Date.now();
    const at = last.get(key);
    if (at !== undefined && now - at < everyMs) return;
    if (last.size >= 100) last.clear();
    last.set(key, now);
    log.error({ ...fields, err: error }, `${msg} (said once a minute while it repeats)`);
  };
}

export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * The daemon's log destination in `format` (log_format, LOG_FORMAT), by default readable lines at a
 * terminal and JSON anywhere else (a pipe, a file, journald, a container's log driver): people
 * read the first, machines the second. Pretty lines are pino-pretty's, formatted synchronously
 * here (its transport would pipe them through streams, and a line logged just before an exit could
 * be lost); the JSON path is pino's own, with nothing loaded or added.
 */
export function daemonDestination(format: LogFormat | undefined): pino.DestinationStream {
  const chosen = format ?? (process.stdout.isTTY ? 'pretty' : 'json');
  if (chosen === 'json') return daemonStdout();
  const out = daemonStdout({ sync: true });
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const pretty = prettyFactory({
    colorize: process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    singleLine: true,
  });
  return { write: (line: string) => out.write(pretty(line)) };
}
