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
