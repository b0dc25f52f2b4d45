import type { Gauge } from 'prom-client';
import type { RollupRuntime } from '../config/rollups.js';
import type { Db } from '../index/db.js';
import { rollupCounts } from '../index/periods/reads.js';
import type { Logger } from '../log.js';
import type { PeriodGaugeSource } from '../metrics.js';
import { boundedScrape } from './bounded-scrape.js';

/**
 * Periods per rollup and state, stored and derived, for `coverage_rollup_periods`: computed when
 * scraped, from a few rows per rollup, on any instance (not only the lease holder), through
 * boundedScrape: cut off from PostgreSQL, /metrics still answers at once with the last counts.
 */
export function periodGaugeSource(db: Db, rollups: readonly RollupRuntime[], log: Logger): PeriodGaugeSource {
  const read = boundedScrape(
    () =>
      rollupCounts(
        db,
        rollups.map((r) => r.rollup),
        Date.now(),
      ),
    log,
    'period gauges',
  );
  return async (gauge: Gauge<'rollup' | 'state'>) => {
    const counts = await read();
    if (counts === null) return;
    gauge.reset();
    for (const [rollup, byState] of counts)
      for (const [state, n] of Object.entries(byState)) gauge.set({ rollup, state }, n);
  };
}
