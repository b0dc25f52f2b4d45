/**
 * Stored periods by their current run's state: the failed counts of `GET /v1/rollups`
 * and the periods a retry of a window picks, each an index range of periods_run_state.
 */
import { COUNTED_RUN_STATES, type CountedRunState } from '../../core/runs.js';
import type { Db } from '../pg/db.js';

/**
 * Stored periods per current run state (not succeeded), per rollup: an index-only range of
 * periods_run_state per rollup and state, so its cost is the open and unsuccessful runs, never history.
 */
export async function runCountsOf(
  db: Db,
  rollupIds: readonly string[],
): Promise<Map<string, Record<CountedRunState, number>>> {
  const rows = await db<{ rollup_id: string; run_state: CountedRunState; n: number }[]>`
    select rollup_id, run_state, count(*)::int8 as n from periods
    where rollup_id = any(${rollupIds as string[]}::text[])
      and run_state = any(${COUNTED_RUN_STATES as unknown as string[]}::text[])
    group by rollup_id, run_state`;
  const out = new Map<string, Record<CountedRunState, number>>();
  for (const id of rollupIds)
    out.set(id, Object.fromEntries(COUNTED_RUN_STATES.map((s) => [s, 0])) as Record<CountedRunState, number>);
  for (const r of rows) out.get(r.rollup_id)![r.run_state] = Number(r.n);
  return out;
}

/** Starts of the stored periods in [from, to) whose current run failed, timed out or was lost (an index range). */
export async function retryablePeriods(
  db: Db,
  rollupId: string,
  from: number,
  to: number,
  limit: number,
): Promise<number[]> {
  const rows = await db<{ lo: number }[]>`
    select lo from periods
    where rollup_id = ${rollupId} and run_state in ('failed', 'timed_out', 'lost') and lo >= ${from} and lo < ${to}
    order by lo limit ${limit}`;
  return rows.map((r) => r.lo);
}
