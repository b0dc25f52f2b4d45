/**
 * Which database failures are worth retrying: the connection went away, the server is shutting
 * down or overloaded, a deadlock or serialisation conflict, a timeout. Classified by code
 * (SQLSTATE or Node/postgres.js error code), never by message text.
 */
const TRANSIENT_SQLSTATE_CLASSES = ['08', '53', '57P'];
// 25P03: the server ended a session left idle in a transaction (its client paused or cut off).
const TRANSIENT_SQLSTATES = new Set(['40001', '40P01', '57014', '55P03', '58000', '58030', '25P03']);
const TRANSIENT_CLIENT_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

export function isTransient(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    TRANSIENT_CLIENT_CODES.has(code) ||
    TRANSIENT_SQLSTATES.has(code) ||
    TRANSIENT_SQLSTATE_CLASSES.some((c) => code.startsWith(c))
  );
}

/** Full-jitter exponential backoff: attempt 0 waits up to base, doubling up to max. */
export function backoffMs(attempt: number, baseMs = 100, maxMs = 5000): number {
  return Math.random() * Math.min(maxMs, baseMs * 2 ** attempt);
}
