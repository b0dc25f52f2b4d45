/**
 * Open runs for `coverage_rollup_runs_open`, counted when /metrics is scraped, on any instance.
 * Like the period gauges: one count at a time, and a scrape never waits on PostgreSQL longer than
 * SCRAPE_WAIT_MS (it keeps the last counts), so /metrics answers at once when PostgreSQL does not.
 */
import type { Db } from '../index/db.js';
import { openRunCounts } from '../index/open-runs.js';
import type { Logger } from '../log.js';
import {
  OPEN_RUN_STATES,
  type OpenRunSource,
  RUN_TARGET_TYPES,
  type RunTargetType,
} from '../metrics-runs.js';

const SCRAPE_WAIT_MS = 2000;

export function openRunGaugeSource(db: Db, log: Logger): OpenRunSource {
  let inFlight: ReturnType<OpenRunSource> | undefined;
  return async () => {
    inFlight ??= openRunCounts(db)
      .then((rows) =>
        rows.flatMap((r) =>
          (RUN_TARGET_TYPES as readonly string[]).includes(r.target) &&
          (OPEN_RUN_STATES as readonly string[]).includes(r.state)
            ? [
                {
                  target: r.target as RunTargetType,
                  state: r.state as (typeof OPEN_RUN_STATES)[number],
                  count: r.count,
                },
              ]
            : [],
        ),
      )
      .catch((err) => {
        log.debug({ err }, 'open run gauges not refreshed');
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
