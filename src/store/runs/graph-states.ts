/** Per-rollup run facts the graph shows, read through the current run on periods. */
import type { Db } from '../pg/db.js';

/**
 * Periods whose current run failed, timed out or was lost, per rollup: an index-only range of
 * periods_run_state per rollup and state, so its cost is the unsuccessful runs, never history.
 */
export async function failedRunCounts(db: Db, rollupIds: readonly string[]): Promise<Map<string, number>> {
  if (rollupIds.length === 0) return new Map();
  const rows = await db<{ rollup_id: string; n: number }[]>`
    select rollup_id, count(*)::int8 as n from periods
    where rollup_id = any(${[...rollupIds]}::text[]) and run_state in ('failed', 'timed_out', 'lost')
    group by rollup_id`;
  return new Map(rows.map((r) => [r.rollup_id, Number(r.n)]));
}
