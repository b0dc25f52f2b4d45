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

export interface RetryOptions {
  /** Tries at most this many times in all (default: no limit but withinMs). */
  readonly attempts?: number;
  /** No new try once this long has passed since the first failure (default: no limit but attempts). */
  readonly withinMs?: number;
  /** Which failures are tried again (default: isTransient); any other is thrown at once. */
  readonly retryable?: (error: unknown) => boolean;
  /** Told of each failure about to be tried again. */
  readonly onRetry?: (error: unknown, attempt: number) => void;
  /** Waits between tries (default: a timer); a loop that is woken early passes its own. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** True once the caller stops (shutting down): the failure is thrown as it is. */
  readonly stopped?: () => boolean;
}

/**
 * Runs `run` again while it fails transiently, after backoffMs, until a try succeeds or the
 * attempts or the time are used up (the last failure is thrown then). Every caller that retries a
 * statement on a lost connection uses this one loop: ingest's direct commits, the batch consumer's
 * settlements, the HTTP reads. A retry runs on whatever connection the pool gives next, and
 * src/store/pg/stale-connections.ts gives up stranded ones within the stall bound, so tries
 * spread over that bound end on a fresh one.
 */
export async function retryTransient<T>(run: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const {
    attempts = Number.POSITIVE_INFINITY,
    withinMs = Number.POSITIVE_INFINITY,
    retryable = isTransient,
    onRetry,
    sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    stopped,
  } = options;
  let firstFailure: number | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      firstFailure ??= Date.now();
      const left = firstFailure + withinMs - Date.now();
      if (!retryable(error) || attempt + 1 >= attempts || left <= 0 || stopped?.()) throw error;
      onRetry?.(error, attempt);
      await sleep(Math.min(backoffMs(attempt), left));
    }
  }
}
