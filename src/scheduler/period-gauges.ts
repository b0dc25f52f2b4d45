import type { Sql } from '../index/db.js';
import { rollupCounts } from '../index/periods.js';
import type { Metrics } from '../metrics.js';
import type { RollupRuntime } from './rollups.js';

/** Periods per rollup and state, stored and derived, for `coverage_rollup_periods`. */
export async function periodGauges(
  sql: Sql,
  rollups: readonly RollupRuntime[],
  nowMs: number,
  metrics: Metrics,
): Promise<void> {
  const counts = await rollupCounts(
    sql,
    rollups.map((r) => r.rollup),
    nowMs,
  );
  metrics.periods.reset();
  for (const [rollup, byState] of counts)
    for (const [state, n] of Object.entries(byState)) metrics.periods.set({ rollup, state }, n);
}
