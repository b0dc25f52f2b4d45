/** Per-rollup run facts the graph shows (SPEC §11 "Graph"), read from counts kept by triggers. */
import type { Db } from './db.js';

/** Run states that count as a failed run on the graph: the run ended without success. */
const FAILED = ['failed', 'timed_out', 'lost'];

/**
 * Periods whose current run failed, timed out or was lost, per rollup: one index probe per rollup
 * on period_run_counts (kept by a statement trigger on periods), whatever the history.
 */
export async function failedRunCounts(db: Db, rollupIds: readonly string[]): Promise<Map<string, number>> {
  if (rollupIds.length === 0) return new Map();
  const rows = await db<{ rollup_id: string; n: number }[]>`
    select rollup_id, sum(n)::int8 as n from period_run_counts
    where rollup_id = any(${[...rollupIds]}::text[]) and run_state = any(${FAILED}::text[])
    group by rollup_id`;
  return new Map(rows.map((r) => [r.rollup_id, r.n]));
}
