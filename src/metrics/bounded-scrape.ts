import type { Logger } from '../support/log.js';

/** A scrape waits this long for a count; then it serves the last one. */
export const SCRAPE_WAIT_MS = 2000;

/**
 * A count read when /metrics is scraped, on any instance: one read at a time (a scrape arriving
 * while one is under way waits for it), and a scrape never waits on PostgreSQL longer than
 * SCRAPE_WAIT_MS. The answer is null when the read failed or came late, and the caller keeps its
 * last values, so /metrics still answers at once when PostgreSQL does not.
 *
 * Stale gauges look like healthy ones on a dashboard, so the first scrape served stale warns and
 * the first one served fresh again says so; the scrapes in between log at debug only, as the lease
 * logs repeated acquisition failures: a scrape every 15 s must not flood the log in an outage.
 */
export function boundedScrape<T>(read: () => Promise<T>, log: Logger, what: string): () => Promise<T | null> {
  let inFlight: Promise<{ value: T } | { error: unknown }> | undefined;
  /** Answers served stale (null) since the last fresh one. */
  let stale = 0;
  return async () => {
    inFlight ??= read()
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      )
      .finally(() => {
        inFlight = undefined;
      });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), SCRAPE_WAIT_MS);
    });
    const outcome = await Promise.race([inFlight, late]).finally(() => clearTimeout(timer));
    if (outcome !== null && 'value' in outcome) {
      if (stale > 0) log.info({ stale_answers: stale }, `${what} refreshed again`);
      stale = 0;
      return outcome.value;
    }
    const facts = outcome === null ? { waited_ms: SCRAPE_WAIT_MS } : { err: outcome.error };
    if (stale++ > 0) log.debug(facts, `${what} still not refreshed`);
    else log.warn(facts, `${what} not refreshed: /metrics serves their last values until a read succeeds`);
    return null;
  };
}
