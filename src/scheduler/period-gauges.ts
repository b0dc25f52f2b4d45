import type { Gauge } from 'prom-client';
import type { RollupRuntime } from '../config/rollups.js';
import type { StateCounts } from '../core/periods.js';
import type { Db } from '../index/db.js';
import { rollupCounts } from '../index/periods/reads.js';
import type { Logger } from '../log.js';
import type { PeriodGaugeSource } from '../metrics.js';

/** A scrape waits this long for the counts; then it serves the last ones. */
const SCRAPE_WAIT_MS = 2000;

/**
 * Periods per rollup and state, stored and derived, for `coverage_rollup_periods`: computed when
 * scraped, from a few rows per rollup, on any instance (not only the lease holder). One count runs
 * at a time, and a scrape never waits on PostgreSQL longer than SCRAPE_WAIT_MS: cut off from it,
 * /metrics still answers at once with the last counts.
 */
export function periodGaugeSource(db: Db, rollups: readonly RollupRuntime[], log: Logger): PeriodGaugeSource {
  let inFlight: Promise<Map<string, StateCounts> | null> | undefined;
  return async (gauge: Gauge<'rollup' | 'state'>) => {
    inFlight ??= rollupCounts(
      db,
      rollups.map((r) => r.rollup),
      Date.now(),
    )
      .catch((err) => {
        log.debug({ err }, 'period gauges not refreshed');
        return null;
      })
      .finally(() => {
        inFlight = undefined;
      });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), SCRAPE_WAIT_MS);
    });
    const counts = await Promise.race([inFlight, late]).finally(() => clearTimeout(timer));
    if (counts === null) return;
    gauge.reset();
    for (const [rollup, byState] of counts)
      for (const [state, n] of Object.entries(byState)) gauge.set({ rollup, state }, n);
  };
}
