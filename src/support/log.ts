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
export function daemonStdout(): pino.DestinationStream {
  const stream = pino.destination({ dest: 1, minLength: 0, sync: false });
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
