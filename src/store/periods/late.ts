/**
 * Periods whose deadline has passed and that nothing has decided yet (a deadline either
 * triggers or misses a period), for `coverage_rollup_periods_past_deadline`. A lease holder making
 * passes keeps this at 0 but for a catch-up backlog; it grows while no one acts on deadlines.
 */
import { countStarts } from '../../core/period-count.js';
import { missedBefore, passedBefore } from '../../core/periods.js';
import type { Rollup } from '../../core/rollup.js';
import type { Db } from '../pg/db.js';

/**
 * Due and marked periods read at most, in index order (due_at; lo newest first, as the scheduler
 * claims marks): the ordered, limited reads keep the partial indexes' plans without statistics,
 * where a bare range on due_at was planned as a scan of periods. A backlog of more than this is
 * counted in part.
 */
const DUE_READ = 1000;
const MARKED_READ = 1000;

/**
 * Per rollup with a deadline: its stored periods past their deadline still waiting or settling,
 * plus, under `on_deadline: trigger`, the periods without a row whose deadline trigger is owed
 * (within catch_up) but not made. Two statements whatever the number of rollups: the stored
 * ones are found through the due and pending partial indexes (a waiting or settling row is due
 * at its deadline at the latest, or marked); the rows in an owed range are counted in it (the
 * catch_up window), or without catch_up as period_counts less the rows after it.
 */

export async function periodsPastDeadline(
  db: Db,
  rollups: readonly Rollup[],
  nowMs: number,
): Promise<Map<string, number>> {
  const timed = rollups.filter((r) => r.domain === 'time' && r.policy.deadlineMs !== undefined);
  const out = new Map(timed.map((r) => [r.id, 0]));
  if (timed.length === 0) return out;
  const passed = timed.map((r) => passedBefore(r, nowMs, r.policy.deadlineMs!));
  const owing = timed.flatMap((r, i) => {
    if (r.policy.onDeadline !== 'trigger') return [];
    // Rows before missedBefore are missed if untouched; between it and `passed` a trigger is owed.
    const from = Math.max(missedBefore(r, nowMs) ?? r.begin, r.begin);
    return from < passed[i]! ? [{ rollup: r, from, to: passed[i]! }] : [];
  });
  const ids = timed.map((r) => r.id);
  const [undecided, rows] = await Promise.all([
    db<{ rollup_id: string; n: number }[]>`
      select l.rollup_id, count(*)::int8 as n
      from (
        select rollup_id, lo from (
          select rollup_id, lo, state from periods
          where due_at <= ${new Date(nowMs)} order by due_at limit ${DUE_READ}
        ) d where state in ('waiting', 'settling') and rollup_id = any(${ids}::text[])
        union
        select rollup_id, lo from (
          select rollup_id, lo, state from periods
          where (dirty or manual_requested) and rollup_id = any(${ids}::text[])
          order by lo desc limit ${MARKED_READ}
        ) m where state in ('waiting', 'settling')
      ) l
      join unnest(${ids}::text[], ${passed}::int8[]) as u(id, passed) on u.id = l.rollup_id and l.lo < u.passed
      group by l.rollup_id`,
    // Rows in [from, to); from begin (null here) that is every row but the recent ones.
    owing.length === 0
      ? []
      : db<{ rollup_id: string; n: number }[]>`
          select u.id as rollup_id, case when u.lo is null
            then (select coalesce(sum(c.n), 0) from period_counts c where c.rollup_id = u.id)
              - (select count(*) from periods p where p.rollup_id = u.id and p.lo >= u.hi)
            else (select count(*) from periods p where p.rollup_id = u.id and p.lo >= u.lo and p.lo < u.hi)
          end::int8 as n
          from unnest(${owing.map((o) => o.rollup.id)}::text[],
            ${owing.map((o) => (o.from === o.rollup.begin ? null : o.from))}::int8[],
            ${owing.map((o) => o.to)}::int8[]) as u(id, lo, hi)`,
  ]);
  for (const r of undecided) out.set(r.rollup_id, Number(r.n));
  const stored = new Map(rows.map((r) => [r.rollup_id, Number(r.n)]));
  for (const { rollup, from, to } of owing) {
    const untouched = countStarts(rollup.calendar, from, to) - (stored.get(rollup.id) ?? 0);
    out.set(rollup.id, out.get(rollup.id)! + untouched);
  }
  return out;
}
