import type { Logger } from '../log.js';

/** A scrape waits this long for a count; then it serves the last one. */
export const SCRAPE_WAIT_MS = 2000;

/**
 * A count read when /metrics is scraped, on any instance: one read at a time (a scrape arriving
 * while one is under way waits for it), and a scrape never waits on PostgreSQL longer than
 * SCRAPE_WAIT_MS. The answer is null when the read failed or came late, and the caller keeps its
 * last values, so /metrics still answers at once when PostgreSQL does not.
 */
export function boundedScrape<T>(read: () => Promise<T>, log: Logger, what: string): () => Promise<T | null> {
  let inFlight: Promise<T | null> | undefined;
  return async () => {
    inFlight ??= read()
      .catch((err) => {
        log.debug({ err }, `${what} not refreshed`);
        return null;
      })
      .finally(() => {
        inFlight = undefined;
      });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), SCRAPE_WAIT_MS);
    });
    return Promise.race([inFlight, late]).finally(() => clearTimeout(timer));
  };
}
