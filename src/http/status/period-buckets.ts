/** Period strips too dense to draw one by one, counted per pixel column in the database. */
import type { Interval } from '../../core/types.js';
import type { Db } from '../../index/db.js';
import { PERIOD_STATES, type PeriodDetail, type PeriodState } from './model.js';
import type { DrawPiece } from './pixels.js';
import { PLOT_WIDTH } from './timeline.js';

export const periodSeverity = (state: string) => PERIOD_STATES.indexOf(state as never);

/**
 * Many periods (a minute rollup over a year): count them per pixel column and state in the
 * database, and draw each column in its most severe state.
 */
export async function periodBuckets(
  sql: Db,
  rollupId: string,
  window: Interval,
  counts: Record<PeriodState, number>,
): Promise<DrawPiece<PeriodDetail>[]> {
  const rows = await sql<{ px: number; state: PeriodState; n: number; lo: number; hi: number }[]>`
    select floor((greatest(lo, ${window.start}::int8) - ${window.start}::int8)::float8 * ${PLOT_WIDTH}
                 / (${window.end}::int8 - ${window.start}::int8))::int as px,
           state, count(*)::int as n, min(lo) as lo, max(hi) as hi
    from periods
    where rollup_id = ${rollupId} and hi > ${window.start} and lo < ${window.end}
    group by 1, 2 order by 1`;
  const columns: Array<{
    px: number;
    start: number;
    end: number;
    state: PeriodState;
    count: number;
    weights: Record<string, number>;
  }> = [];
  for (const r of rows) {
    counts[r.state] += r.n;
    const column = columns[columns.length - 1];
    if (column === undefined || column.px !== r.px) {
      columns.push({
        px: r.px,
        start: r.lo,
        end: r.hi,
        state: r.state,
        count: r.n,
        weights: { [r.state]: r.n },
      });
      continue;
    }
    column.start = Math.min(column.start, r.lo);
    column.end = Math.max(column.end, r.hi);
    column.count += r.n;
    column.weights[r.state] = r.n;
    if (periodSeverity(r.state) > periodSeverity(column.state)) column.state = r.state;
  }
  // Periods are grouped by where they start; clip each column at the next so none overlap.
  return columns.map((c, i) => ({
    start: c.start,
    end: Math.min(c.end, columns[i + 1]?.start ?? c.end),
    state: c.state,
    count: c.count,
    weights: c.weights,
  }));
}
