/**
 * Reads of stored periods for the listings, the period detail, the status page, the gauges and the
 * scheduler. Stored rows are only the periods something happened to; src/core/periods/periods.ts
 * derives the others. Every read here is an index range on (rollup_id, lo) or the small
 * period_counts table (kept by a database trigger, migrations/), except the scheduler's wake-up
 * read (`schedulerWake`), which reads through the partial indexes on due and marked periods.
 */

import { groupBy } from '../../core/group-by.js';
import {
  combineCounts,
  missedBefore,
  type PeriodView,
  periodsEnd,
  type StateCounts,
  type StoredState,
} from '../../core/periods/periods.js';
import { PERIOD_STATES, type PeriodState, type Rerun } from '../../core/periods/policy.js';
import type { Rollup } from '../../core/rollups/rollup.js';
import type { Db, Sql, Tx } from '../pg/db.js';
import { nextRunWorkSql } from '../runs/work.js';

interface Row {
  lo: number;
  hi: number;
  key: string;
  state: PeriodState;
  ratio: number;
  ratios: Record<string, number>;
  generation: number;
  reason: string | null;
  triggered_at: Date | null;
}

const view = (r: Row): PeriodView => ({
  start: r.lo,
  end: r.hi,
  key: r.key,
  state: r.state,
  ratio: r.ratio,
  ratios: r.ratios,
  generation: r.generation,
  reason: r.reason,
  triggeredAt: r.triggered_at,
});

/**
 * Stored periods starting in [from, to), optionally of one state and of one current run state,
 * `limit` of them from one end. With `runState` it is a range of the partial index
 * periods_run_state; the filters are fragments, not `(param is null or ...)`, so each shape keeps
 * its own index-driven plan.
 */
export async function storedPeriods(
  db: Db,
  rollupId: string,
  from: number,
  to: number,
  opts: {
    readonly state?: PeriodState | undefined;
    readonly runState?: string | undefined;
    readonly order: 'asc' | 'desc';
    readonly limit: number;
  },
): Promise<PeriodView[]> {
  const state = opts.state ?? null;
  const rows = await db<Row[]>`
    select lo, hi, key, state, ratio, ratios, generation, reason, triggered_at from periods
    where rollup_id = ${rollupId} ${opts.runState ? db`and run_state = ${opts.runState}` : db``}
      and lo >= ${from} and lo < ${to} and (${state}::text is null or state = ${state}::text)
    order by lo ${opts.order === 'desc' ? db`desc` : db``} limit ${opts.limit}`;
  return rows.map(view);
}

/** The stored states of some periods of a rollup, by start. */
export async function storedPeriodStates(
  db: Db,
  rollupId: string,
  los: readonly number[],
): Promise<Map<number, string>> {
  if (los.length === 0) return new Map();
  const rows = await db<{ lo: number; state: string }[]>`
    select lo, state from periods where rollup_id = ${rollupId} and lo = any(${[...los]}::int8[])`;
  return new Map(rows.map((r) => [r.lo, r.state]));
}

/** The states of the stored periods starting in [from, to), ascending: the summary's input. */
export async function storedStates(
  db: Db,
  rollupId: string,
  from: number,
  to: number,
): Promise<StoredState[]> {
  const rows = await db<{ lo: number; hi: number; state: PeriodState }[]>`
    select lo, hi, state from periods where rollup_id = ${rollupId} and lo >= ${from} and lo < ${to}
    order by lo`;
  return rows.map((r) => ({ start: r.lo, end: r.hi, state: r.state }));
}

export interface StoredCounts {
  readonly counts: Partial<StateCounts>;
  /** Stored periods starting before the rollup's `missedBefore` point. */
  readonly beforeMissed: number;
}

/**
 * Whole-rollup counts of stored periods, from period_counts, and how many of them start before each
 * rollup's `missedBefore` point (counted from the recent end, so the read is the periods after it).
 */
export async function storedCountsOf(
  db: Db,
  rollups: ReadonlyArray<{ readonly id: string; readonly missedAt: number | null }>,
): Promise<Map<string, StoredCounts>> {
  const ids = rollups.map((r) => r.id);
  const withMiss = rollups.filter((r) => r.missedAt !== null);
  const [counts, after] = await Promise.all([
    db<{ rollup_id: string; state: PeriodState; n: number }[]>`
      select rollup_id, state, n::int8 as n from period_counts where rollup_id = any(${ids}::text[]) and n > 0`,
    withMiss.length === 0
      ? []
      : db<{ rollup_id: string; n: number }[]>`
          select u.id as rollup_id, (select count(*) from periods p where p.rollup_id = u.id and p.lo >= u.at)::int8 as n
          from unnest(${withMiss.map((r) => r.id)}::text[], ${withMiss.map((r) => r.missedAt!)}::int8[]) as u(id, at)`,
  ]);
  const countsOf = groupBy(counts, (c) => c.rollup_id);
  const recentOf = new Map(after.map((a) => [a.rollup_id, Number(a.n)]));
  const out = new Map<string, StoredCounts>();
  for (const id of ids) {
    const mine = countsOf.get(id) ?? [];
    const total = mine.reduce((sum, c) => sum + Number(c.n), 0);
    const recent = recentOf.get(id) ?? total;
    out.set(id, {
      counts: Object.fromEntries(mine.map((c) => [c.state, Number(c.n)])),
      beforeMissed: total - recent,
    });
  }
  return out;
}

/** Counts of stored periods starting in [from, to), and how many start before `missedAt`. */
export async function storedCountsIn(
  db: Db,
  rollupId: string,
  from: number,
  to: number,
  missedAt: number | null,
): Promise<StoredCounts> {
  const rows = await db<{ state: PeriodState; n: number; before: number }[]>`
    select state, count(*)::int8 as n, count(*) filter (where lo < ${missedAt ?? from})::int8 as before
    from periods where rollup_id = ${rollupId} and lo >= ${from} and lo < ${to}
    group by state`;
  const counts: Partial<StateCounts> = {};
  let beforeMissed = 0;
  for (const r of rows) {
    if (!PERIOD_STATES.includes(r.state)) continue;
    counts[r.state] = Number(r.n);
    beforeMissed += Number(r.before);
  }
  return { counts, beforeMissed };
}

/** Integer rollups' periods run up to what their upstreams cover: the largest covered end. */
export async function coveredHiOf(db: Db, rollups: readonly Rollup[]): Promise<Map<string, number | null>> {
  const integer = rollups.filter((r) => r.domain === 'integer');
  const out = new Map<string, number | null>();
  if (integer.length === 0) return out;
  const names = [...new Set(integer.flatMap((r) => r.upstream))];
  const rows = await db<{ name: string; hi: number | null }[]>`
    select name, covered_hi as hi from assets where name = any(${names}::text[])`;
  const hiOf = new Map(rows.map((r) => [r.name, r.hi]));
  for (const r of integer) {
    const his = r.upstream.map((u) => hiOf.get(u) ?? null).filter((h): h is number => h !== null);
    out.set(r.id, his.length === 0 ? null : Math.max(...his));
  }
  return out;
}

/** Every period's state counted per rollup, stored and derived: a few rows per rollup. */
export async function rollupCounts(
  db: Db,
  rollups: readonly Rollup[],
  nowMs: number,
): Promise<Map<string, StateCounts>> {
  const missed = rollups.map((r) => ({ id: r.id, missedAt: missedBefore(r, nowMs) }));
  const [stored, covered] = await Promise.all([storedCountsOf(db, missed), coveredHiOf(db, rollups)]);
  return new Map(
    rollups.map((r, i) => {
      const end = periodsEnd(r, nowMs, covered.get(r.id) ?? null);
      const counts = combineCounts(r, r.begin, end, missed[i]!.missedAt, stored.get(r.id)!);
      return [r.id, counts];
    }),
  );
}

/** A stored period with everything the policy and the period detail read from it. */
export interface StoredPeriod extends PeriodView {
  readonly satisfiedSince: Date | null;
  readonly lastChangeAt: Date | null;
  readonly rerun: Rerun | null;
  readonly manualRequested: boolean;
  readonly dueAt: Date | null;
}

/** The stored row of the period starting at `lo`, or null when nothing happened to it. */
export async function storedPeriod(db: Db, rollupId: string, lo: number): Promise<StoredPeriod | null> {
  const [row] = await db<
    (Row & {
      satisfied_since: Date | null;
      last_change_at: Date | null;
      rerun: Rerun | null;
      manual_requested: boolean;
      due_at: Date | null;
    })[]
  >`
    select lo, hi, key, state, ratio, ratios, generation, reason, triggered_at,
      satisfied_since, last_change_at, rerun, manual_requested, due_at
    from periods where rollup_id = ${rollupId} and lo = ${lo}`;
  if (row === undefined) return null;
  return {
    ...view(row),
    satisfiedSince: row.satisfied_since,
    lastChangeAt: row.last_change_at,
    rerun: row.rerun,
    manualRequested: row.manual_requested,
    dueAt: row.due_at,
  };
}

/** Which of these period starts have a stored row (the deadline sweep counts the others missed). */
export async function storedStarts(db: Db, rollupId: string, los: readonly number[]): Promise<Set<number>> {
  const rows = await db<{ lo: number }[]>`
    select lo from periods where rollup_id = ${rollupId} and lo = any(${los as number[]}::int8[])`;
  return new Set(rows.map((r) => r.lo));
}

/**
 * For the triggered periods among `los`: the log position of `asset` their last trigger saw (0
 * when it recorded none), with their state and generation. A period absent from the answer was
 * never triggered: no rerun is owed. Locked (for update) until the marking commits: whether the
 * mark turns `triggered` into `rerun_pending`, and so condemns the rollup's output, is
 * decided on these rows, and a run's success on the same period waits for it (or it for the success).
 */
export async function seenByTriggers(
  tx: Tx,
  rollupId: string,
  asset: string,
  los: readonly number[],
): Promise<Map<number, { seen: number; state: PeriodState; generation: number }>> {
  const rows = await tx<{ lo: number; seen: number | null; state: PeriodState; generation: number }[]>`
    select lo, (trigger_seqs ->> ${asset})::int8 as seen, state, generation from periods
    where rollup_id = ${rollupId} and lo = any(${los as number[]}::int8[]) and generation > 0
    for update`;
  return new Map(rows.map((r) => [r.lo, { seen: r.seen ?? 0, state: r.state, generation: r.generation }]));
}

/**
 * When the scheduler has work again without new events: the earliest due period (settle or
 * deadline), the earliest run work (store/runs/work.ts), and whether some marked period is still pending
 * (locked by someone else and skipped). One round trip, whatever the number of rollups.
 */
export async function schedulerWake(
  sql: Sql,
  rollupIds: readonly string[],
): Promise<{ at: Date | null; delivery: Date | null; skipped: boolean } | undefined> {
  const ids = rollupIds as string[];
  const [due] = await sql<{ at: Date | null; delivery: Date | null; skipped: boolean }[]>`
    select (select min(due_at) from periods where due_at is not null and rollup_id = any(${ids}::text[])) as at,
      (${nextRunWorkSql(sql, ids)}) as delivery,
      -- The newest pending period, in periods_pending's order, rather than exists(): PostgreSQL
      -- drops an EXISTS' order and limit, and without statistics then scans the table instead.
      (select lo from periods where (dirty or manual_requested) and rollup_id = any(${ids}::text[])
        order by lo desc limit 1) is not null as skipped`;
  return due;
}
