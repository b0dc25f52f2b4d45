/**
 * The scheduler's run work lists: pending runs to deliver, runs to ask their target
 * about, timeouts and due retries, each read through a partial index that holds only open rows.
 */
import type { RunState } from '../../core/runs/runs.js';
import type { RunIdentity, TriggerPayload } from '../../core/runs/trigger.js';
import type { StoredTarget } from '../../targets/secrets.js';
import type { Sql } from '../pg/db.js';
import { type RefRow, type RunRef, refOf } from './report.js';

export interface DueRun {
  readonly run: RunRef;
  readonly runId: string;
  readonly deliveries: number;
  /** Deliveries of this run begun before this one (see dueRuns): 0 for its first. */
  readonly earlierSends: number;
  readonly leaseToken: number;
  readonly target: StoredTarget;
  /** The decision's payload (attempt 1's); see attemptPayload for attempt N. */
  readonly payload: TriggerPayload;
}

/**
 * Pending runs due for delivery, newest first: a fresh trigger is not queued behind a burst of
 * catch-up decisions or a backlog of retries. The outbox is this list, for the rollups in the
 * catalog: a removed rollup's runs are never delivered (until it is added again).
 *
 * Taking them counts a send begun on each (`sends`), committed before this returns, so before
 * any of them goes out: a run taken with no earlier send was never handed to its target, and a
 * target may send it without looking for an earlier delivery first (its first delivery is then
 * one request shorter). A run taken but not sent (the pass ended) only makes the next delivery
 * look first, which is always safe.
 */
export async function dueRuns(sql: Sql, limit: number, rollupIds: readonly string[]): Promise<DueRun[]> {
  const rows = await sql<
    (RefRow & {
      run_id: string;
      deliveries: number;
      earlier_sends: number;
      lease_token: number;
      target: StoredTarget;
      payload: TriggerPayload;
    })[]
  >`
    with due as (
      select rollup_id, period_lo, generation, attempt from runs
      where state = 'pending' and due_at <= statement_timestamp()
        and rollup_id = any(${rollupIds as string[]}::text[])
      order by due_at desc limit ${limit}
    ), r as (
      update runs set sends = runs.sends + 1
      from due
      where runs.rollup_id = due.rollup_id and runs.period_lo = due.period_lo
        and runs.generation = due.generation and runs.attempt = due.attempt
      returning runs.rollup_id, runs.period_lo, runs.generation, runs.attempt, runs.run_id,
        runs.deliveries, runs.sends - 1 as earlier_sends, runs.due_at
    )
    select r.rollup_id, r.period_lo, r.generation, r.attempt, r.run_id, r.deliveries, r.earlier_sends,
      t.lease_token, t.target, t.payload
    from r cross join lateral (${triggerOf(sql)}) t
    order by r.due_at desc`;
  return rows.map((r) => ({
    run: refOf(r),
    runId: r.run_id,
    deliveries: r.deliveries,
    earlierSends: r.earlier_sends,
    leaseToken: r.lease_token,
    target: r.target,
    payload: r.payload,
  }));
}

export interface FollowedRun {
  readonly run: RunRef;
  readonly runId: string;
  readonly state: RunState;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  readonly target: StoredTarget;
  /** The decision's payload without its coverage figures (upstreams): a check needs only the ids. */
  readonly payload: RunIdentity;
  /** The run's check_at as this read saw it (µs since the epoch): see setNextChecks. */
  readonly checkSeen: string;
}

// The due reads compare with statement_timestamp(), not clock_timestamp(): a volatile function
// cannot bound an index scan, and without statistics the planner then scanned runs and sorted.
// They take their `limit` runs first and then look up each one's trigger by its key, so the join
// is that many key probes whatever the planner guesses of the due share (without statistics it
// guessed a third and hash-joined the whole triggers table).

/**
 * The trigger of run `r`, as a LATERAL the planner cannot flatten into a hash join (the LIMIT keeps
 * it a per-row probe of the primary key).
 */
function triggerOf(sql: Sql) {
  return sql`
    select lease_token, target, payload from triggers
    where rollup_id = r.rollup_id and period_lo = r.period_lo and generation = r.generation limit 1`;
}

/**
 * Runs whose target is due to be asked about them (open, or watched after finishing), longest-
 * waiting first; `aheadMs` takes those due soon as well, so checks spread over time are made in
 * a few passes rather than one pass each.
 */
export async function runsToCheck(sql: Sql, limit: number, aheadMs = 0): Promise<FollowedRun[]> {
  const rows = await sql<
    (RefRow & {
      run_id: string;
      state: RunState;
      started_at: Date | null;
      finished_at: Date | null;
      target: StoredTarget;
      payload: RunIdentity;
      check_seen: string;
    })[]
  >`
    select r.rollup_id, r.period_lo, r.generation, r.attempt, r.run_id, r.state, r.started_at, r.finished_at,
      t.target, t.payload - 'upstreams' as payload,
      (extract(epoch from r.check_at) * 1000000)::int8::text as check_seen
    from (
      select * from runs where check_at <= statement_timestamp() + make_interval(secs => ${aheadMs / 1000})
      order by check_at limit ${limit}
    ) r cross join lateral (${triggerOf(sql)}) t
    order by r.check_at`;
  return rows.map((r) => ({
    run: refOf(r),
    runId: r.run_id,
    state: r.state,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    target: r.target,
    payload: r.payload,
    checkSeen: r.check_seen,
  }));
}

/** Started or running runs past their timeout. */
export async function timedOutRuns(sql: Sql, limit: number): Promise<RunRef[]> {
  const rows = await sql<RefRow[]>`
    select rollup_id, period_lo, generation, attempt from runs
    where state in ('started', 'running') and timeout_at <= statement_timestamp()
    order by timeout_at limit ${limit}`;
  return rows.map(refOf);
}

/** Unsuccessful runs whose automatic retry is due. */
export async function retriesDue(sql: Sql, limit: number): Promise<RunRef[]> {
  const rows = await sql<RefRow[]>`
    select rollup_id, period_lo, generation, attempt from runs
    where next_retry_at <= statement_timestamp()
    order by next_retry_at limit ${limit}`;
  return rows.map(refOf);
}

/**
 * When the scheduler next has run work (a delivery to these rollups, a check, a timeout, a retry):
 * four index probes.
 */
export function nextRunWorkSql(sql: Sql, rollupIds: readonly string[]) {
  return sql`select least(
    (select min(due_at) from runs where state = 'pending' and rollup_id = any(${rollupIds as string[]}::text[])),
    (select min(check_at) from runs where check_at is not null),
    (select min(timeout_at) from runs where state in ('started', 'running')),
    (select min(next_retry_at) from runs where next_retry_at is not null))`;
}

/**
 * The current runs of these rollups that were delivered and wait for their outcome (started or
 * running): read from the periods' run columns through periods_run_state, a few index probes per
 * rollup whatever its history.
 */
export async function awaitingCurrentRuns(
  sql: Sql,
  rollupIds: readonly string[],
  limit: number,
): Promise<RunRef[]> {
  if (rollupIds.length === 0) return [];
  const rows = await sql<RefRow[]>`
    select rollup_id, lo as period_lo, generation, run_attempt as attempt from periods
    where rollup_id = any(${rollupIds}::text[]) and run_state in ('started', 'running')
    limit ${limit}`;
  return rows.map(refOf);
}
