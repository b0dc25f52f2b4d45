import type { Gauge } from 'prom-client';
import type { Db } from '../index/db.js';
import { rollupCounts } from '../index/periods.js';
import type { RollupRuntime } from './rollups.js';

/**
 * Periods per rollup and state, stored and derived, for `coverage_rollup_periods`: computed when
 * scraped, from a few rows per rollup, on any instance (not only the lease holder).
 */
export async function periodGauges(
  db: Db,
  rollups: readonly RollupRuntime[],
  nowMs: number,
  gauge: Gauge<'rollup' | 'state'>,
): Promise<void> {
  const counts = await rollupCounts(
    db,
    rollups.map((r) => r.rollup),
    nowMs,
  );
  gauge.reset();
  for (const [rollup, byState] of counts)
    for (const [state, n] of Object.entries(byState)) gauge.set({ rollup, state }, n);
}
