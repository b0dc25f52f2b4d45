/**
 * Every write to `periods`, one named verb per transition, each saying why its statement has its
 * shape: where a period's stored state changes. Only the lease holder's scheduler calls these,
 * except `requestManualRun` (the HTTP API). The rules they apply are pure, in core/periods/policy.ts
 * (`decide`, `rerunOwed`, `stateAfterMark`); the outbox rows that go with a trigger are
 * src/store/triggers.ts.
 */
import type { Period } from '../../core/periods/calendar.js';
import type { PeriodDecision } from '../../core/periods/decisions.js';
import type { StoredFacts } from '../../core/periods/periods.js';
import { PERIOD_STATES, type PeriodState, type Rerun, stateAfterMark } from '../../core/periods/policy.js';
import { wakeScheduler } from '../assets/commit.js';
import type { Sql, Tx } from '../pg/db.js';

/** A period claimed for evaluation, locked until its transaction ends. */
export interface ClaimedPeriod extends StoredFacts {
  rollupId: string;
  lo: number;
  hi: number;
  key: string;
}

/**
 * Locks the newest periods of these rollups that need an evaluation: marked (dirty or manually
 * requested), and separately those whose settle or deadline is due, `limit` of each, newest
 * first so a fresh period never waits behind history. A former holder paused mid-transaction may
 * still lock some: they are skipped (they stay due) rather than stall every rollup behind them.
 * `full`: a claim filled its limit, there may be more now.
 */
export async function claimPending(
  tx: Tx,
  rollupIds: readonly string[],
  limit: number,
  now: Date,
): Promise<{ rows: ClaimedPeriod[]; full: boolean }> {
  const ids = rollupIds as string[];
  // Pipelined (sent together, run in order): every round trip here delays the trigger.
  const claims = await Promise.all([
    tx<ClaimedPeriod[]>`
      select ${claimedColumns(tx)}
      from periods
      where (dirty or manual_requested) and rollup_id = any(${ids}::text[])
      order by lo desc limit ${limit}
      for update skip locked`,
    tx<ClaimedPeriod[]>`
      select ${claimedColumns(tx)}
      from periods
      where due_at <= ${now} and not (dirty or manual_requested) and rollup_id = any(${ids}::text[])
      order by lo desc limit ${limit}
      for update skip locked`,
  ]);
  return { rows: claims.flat(), full: claims.some((c) => c.length === limit) };
}

/** The columns of a claimed period, as ClaimedPeriod names them. */
const claimedColumns = (tx: Tx) => tx`
  rollup_id as "rollupId", lo, hi, key, state, generation, satisfied_since as "satisfiedSince",
  last_change_at as "lastChangeAt", rerun, manual_requested as "manualRequested"`;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/**
 * Writes the evaluation's decisions on the claimed periods in one statement: state, ratios, settle
 * and due times; a new generation (a trigger) clears the manual request and the owed rerun and
 * records what each upstream's log held. Guarded by the generation read at the claim, so a
 * decision made on a stale row fails the transaction instead of overwriting a newer trigger.
 */
export async function writeUpdates(
  tx: Tx,
  rollupId: string,
  updates: readonly PeriodDecision[],
  now: Date,
): Promise<void> {
  const written = await tx`
    update periods p set
      state = u.state,
      generation = u.generation,
      ratio = u.ratio,
      ratios = u.ratios::jsonb,
      satisfied_since = u.satisfied_since,
      due_at = u.due_at,
      dirty = false,
      manual_requested = case when u.generation > p.generation then false else p.manual_requested end,
      rerun = case when u.generation > p.generation then null else p.rerun end,
      reason = coalesce(u.reason, p.reason),
      triggered_at = case when u.generation > p.generation then ${now} else p.triggered_at end,
      trigger_seqs = coalesce(u.seqs::jsonb, p.trigger_seqs),
      updated_at = now()
    from unnest(
      ${updates.map((u) => u.lo)}::int8[], ${updates.map((u) => u.oldGeneration)}::int4[],
      ${updates.map((u) => u.generation)}::int4[], ${updates.map((u) => u.state)}::text[],
      ${updates.map((u) => u.reason)}::text[], ${updates.map((u) => u.ratio)}::float8[],
      ${updates.map((u) => JSON.stringify(u.ratios))}::text[], ${updates.map((u) => iso(u.satisfiedSince))}::timestamptz[],
      ${updates.map((u) => iso(u.dueAt))}::timestamptz[], ${updates.map((u) => (u.seqs ? JSON.stringify(u.seqs) : null))}::text[]
    ) as u(lo, old_generation, generation, state, reason, ratio, ratios, satisfied_since, due_at, seqs)
    where p.rollup_id = ${rollupId} and p.lo = u.lo and p.generation = u.old_generation`;
  if (written.count !== updates.length) {
    throw new Error(`period generations moved under evaluation of ${rollupId}; retrying`);
  }
}

/** A period's row as its first touching event gives it: the state it showed until then (derived). */
export interface TouchedRow {
  lo: number;
  hi: number;
  key: string;
  state: PeriodState;
}

/**
 * Gives periods their row when events first touch them, in the state they were derived to have
 * until then, so a stored row never contradicts what the listings showed. Rows that exist stay.
 */
export async function insertTouched(tx: Tx, rollupId: string, rows: readonly TouchedRow[]): Promise<void> {
  await tx`
    insert into periods (rollup_id, lo, hi, key, state)
    select ${rollupId}, * from unnest(
      ${rows.map((r) => r.lo)}::int8[], ${rows.map((r) => r.hi)}::int8[], ${rows.map((r) => r.key)}::text[],
      ${rows.map((r) => r.state)}::text[]
    )
    on conflict do nothing`;
}

/** What new events did to one period: its newest change (null for none, e.g. a seed) and any rerun owed. */
export interface Mark {
  lo: number;
  changedAt: Date | null;
  rerun: Rerun | null;
}

/**
 * The state each state becomes when a rerun is owed, as data: the statement applies the core rule
 * (`stateAfterMark`) to the row's state at write time, under its row lock, not to a state read
 * before, so a decision committed in between is never overwritten. Sent with `tx.json`: a string
 * cast `::jsonb` is serialized once more by postgres.js (a JSON string, whose `->>` is null), and
 * the period stayed `triggered` with its output condemned until the next evaluation.
 */
const AFTER_RERUN: Record<string, string> = Object.fromEntries(
  PERIOD_STATES.map((s) => [s, stateAfterMark(s, 'replay')]),
);

/**
 * Marks touched periods for evaluation: dirty, their newest change time (which restarts settle)
 * and the rerun owed, the first reason kept until a trigger clears it; a triggered period owed a
 * rerun becomes `rerun_pending` (stateAfterMark). One statement for the whole batch. A period
 * the marks would leave as it is (already dirty, no newer change, no new rerun) is not written:
 * every write leaves a dead row version and, when `dirty` flips, new index entries.
 */
export async function markTouched(tx: Tx, rollupId: string, marks: readonly Mark[]): Promise<void> {
  await tx`
    update periods p set
      dirty = true,
      last_change_at = greatest(p.last_change_at, u.changed_at),
      rerun = coalesce(p.rerun, u.rerun),
      state = case when u.rerun is null then p.state else coalesce(${tx.json(AFTER_RERUN)} ->> p.state, p.state) end,
      updated_at = now()
    from unnest(
      ${marks.map((m) => m.lo)}::int8[], ${marks.map((m) => m.changedAt?.toISOString() ?? null)}::timestamptz[],
      ${marks.map((m) => m.rerun)}::text[]
    ) as u(lo, changed_at, rerun)
    where p.rollup_id = ${rollupId} and p.lo = u.lo
      and (not p.dirty or u.changed_at > p.last_change_at or (u.changed_at is not null and p.last_change_at is null)
        or (u.rerun is not null and (p.rerun is null or p.state is distinct from ${tx.json(AFTER_RERUN)} ->> p.state)))`;
}

/**
 * Gives periods owed a deadline trigger (and nothing else happened to) their dirty row, every
 * rollup's in one statement; existing rows stay: the evaluation decides them like any other.
 */
export async function insertOwed(
  sql: Sql,
  owed: ReadonlyArray<{ rollupId: string; period: Period }>,
): Promise<void> {
  if (owed.length === 0) return;
  await sql`
    insert into periods (rollup_id, lo, hi, key)
    select * from unnest(
      ${owed.map((o) => o.rollupId)}::text[], ${owed.map((o) => o.period.start)}::int8[],
      ${owed.map((o) => o.period.end)}::int8[], ${owed.map((o) => o.period.key)}::text[]
    )
    on conflict do nothing`;
}

/**
 * A manual run of one period (HTTP API): gives it a row if it has none, flags it, and wakes the
 * lease holder, all in one transaction so the notification never arrives before the flag. The
 * scheduler triggers it on its next pass, fenced as any decision.
 */
/** `also` runs in the same transaction (the audit's entry: it commits with the request or not at all). */
export async function requestManualRun(
  sql: Sql,
  rollupId: string,
  period: Period,
  also?: (tx: Tx) => Promise<void>,
): Promise<void> {
  await sql
    .begin(async (tx) => {
      await tx`
        insert into periods (rollup_id, lo, hi, key) values (${rollupId}, ${period.start}, ${period.end}, ${period.key})
        on conflict do nothing`;
      await tx`update periods set manual_requested = true, dirty = true where rollup_id = ${rollupId} and lo = ${period.start}`;
      await wakeScheduler(tx);
      await also?.(tx);
    })
    .catch((error: unknown) => {
      const pg = error as { code?: string; constraint_name?: string };
      if (pg.code === '23503' && pg.constraint_name === 'periods_rollup_id_fkey')
        throw new RollupNotRecorded(rollupId);
      throw error;
    });
}

/**
 * A rollup the lease holder has not recorded yet (its `rollups` row is written by the scheduler's
 * first pass over it: at start, or within a pass of a reload or a PUT): its periods cannot be
 * written before. A moment later they can.
 */
export class RollupNotRecorded extends Error {
  override readonly name = 'RollupNotRecorded';
  constructor(readonly rollupId: string) {
    super(
      `the scheduler has not taken up rollup ${rollupId} yet (it does within one pass of the instance holding the lease): ask again in a moment`,
    );
  }
}

/**
 * A changed calendar: drops the untriggered periods (they are rebuilt on the new grid from the
 * merged index); triggered history is kept. Returns how many were dropped.
 */
export async function dropUntriggered(tx: Tx, rollupId: string): Promise<number> {
  const dropped = await tx`delete from periods where rollup_id = ${rollupId} and generation = 0`;
  return dropped.count;
}

/** A changed policy on the same calendar: the untriggered periods are evaluated again. Returns how many. */
export async function dirtyUntriggered(tx: Tx, rollupId: string): Promise<number> {
  const marked = await tx`update periods set dirty = true where rollup_id = ${rollupId} and generation = 0`;
  return marked.count;
}
