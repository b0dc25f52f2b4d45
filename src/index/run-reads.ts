/**
 * Reads of runs (SPEC §11): the scheduler's work lists, each through a partial index that holds
 * only open rows, and the history and counts the API shows.
 */
import { COUNTED_RUN_STATES, type CountedRunState, type ReportEffect, type RunState } from '../core/runs.js';
import type { TriggerPayload } from '../core/trigger.js';
import type { Db, Sql } from './db.js';
import type { ReportSource, RunRef } from './runs.js';

interface RefRow {
  rollup_id: string;
  period_lo: number;
  generation: number;
  attempt: number;
}
const ref = (r: RefRow): RunRef => ({
  rollupId: r.rollup_id,
  lo: r.period_lo,
  generation: r.generation,
  attempt: r.attempt,
});

/** A target as the decision stored it (scheduler/targets/secrets.ts TargetJson). */
export interface TargetJson {
  readonly type: string;
}

export interface DueRun {
  readonly run: RunRef;
  readonly runId: string;
  readonly deliveries: number;
  readonly leaseToken: number;
  readonly target: TargetJson;
  /** The decision's payload (attempt 1's); see attemptPayload for attempt N. */
  readonly payload: TriggerPayload;
}

/**
 * Pending runs due for delivery, newest first: a fresh trigger is not queued behind a burst of
 * catch-up decisions or a backlog of retries. The outbox (SPEC §6) is this list.
 */
export async function dueRuns(sql: Sql, limit: number): Promise<DueRun[]> {
  const rows = await sql<
    (RefRow & {
      run_id: string;
      deliveries: number;
      lease_token: number;
      target: TargetJson;
      payload: TriggerPayload;
    })[]
  >`
    select r.rollup_id, r.period_lo, r.generation, r.attempt, r.run_id, r.deliveries, t.lease_token, t.target, t.payload
    from (
      select * from runs where state = 'pending' and due_at <= statement_timestamp()
      order by due_at desc limit ${limit}
    ) r cross join lateral (${triggerOf(sql)}) t
    order by r.due_at desc`;
  return rows.map((r) => ({
    run: ref(r),
    runId: r.run_id,
    deliveries: r.deliveries,
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
  readonly target: TargetJson;
  readonly payload: TriggerPayload;
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
      target: TargetJson;
      payload: TriggerPayload;
    })[]
  >`
    select r.rollup_id, r.period_lo, r.generation, r.attempt, r.run_id, r.state, r.started_at, r.finished_at,
      t.target, t.payload
    from (
      select * from runs where check_at <= statement_timestamp() + make_interval(secs => ${aheadMs / 1000})
      order by check_at limit ${limit}
    ) r cross join lateral (${triggerOf(sql)}) t
    order by r.check_at`;
  return rows.map((r) => ({
    run: ref(r),
    runId: r.run_id,
    state: r.state,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    target: r.target,
    payload: r.payload,
  }));
}

/** Started or running runs past their timeout. */
export async function timedOutRuns(sql: Sql, limit: number): Promise<RunRef[]> {
  const rows = await sql<RefRow[]>`
    select rollup_id, period_lo, generation, attempt from runs
    where state in ('started', 'running') and timeout_at <= statement_timestamp()
    order by timeout_at limit ${limit}`;
  return rows.map(ref);
}

/** Unsuccessful runs whose automatic retry is due. */
export async function retriesDue(sql: Sql, limit: number): Promise<RunRef[]> {
  const rows = await sql<RefRow[]>`
    select rollup_id, period_lo, generation, attempt from runs
    where next_retry_at <= statement_timestamp()
    order by next_retry_at limit ${limit}`;
  return rows.map(ref);
}

/** When the scheduler next has run work (a delivery, a check, a timeout, a retry): four index probes. */
export function nextRunWorkSql(sql: Sql) {
  return sql`select least(
    (select min(due_at) from runs where state = 'pending'),
    (select min(check_at) from runs where check_at is not null),
    (select min(timeout_at) from runs where state in ('started', 'running')),
    (select min(next_retry_at) from runs where next_retry_at is not null))`;
}

/** The run a callback names: by the trigger's idempotency key and the attempt. */
export async function runByKey(db: Db, idempotencyKey: string, attempt: number): Promise<RunRef | null> {
  const [row] = await db<RefRow[]>`
    select r.rollup_id, r.period_lo, r.generation, r.attempt
    from triggers t join runs r using (rollup_id, period_lo, generation)
    where t.idempotency_key = ${idempotencyKey} and r.attempt = ${attempt}`;
  return row ? ref(row) : null;
}

/** A run as the API shows it (SPEC §11 field names). */
export interface RunView {
  readonly generation: number;
  readonly attempt: number;
  readonly run_id: string;
  readonly state: RunState;
  readonly cause: 'trigger' | 'retry' | 'manual';
  readonly error: string | null;
  readonly version: string | null;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly next_retry_at: string | null;
  readonly timeout_at: string | null;
  readonly deliveries: number;
}

interface RunRow {
  generation: number;
  attempt: number;
  run_id: string;
  state: RunState;
  cause: 'trigger' | 'retry' | 'manual';
  error: string | null;
  version: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  next_retry_at: Date | null;
  timeout_at: Date | null;
  deliveries: number;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;
export const runView = (r: RunRow): RunView => ({
  generation: r.generation,
  attempt: r.attempt,
  run_id: r.run_id,
  state: r.state,
  cause: r.cause,
  error: r.error,
  version: r.version,
  created_at: r.created_at.toISOString(),
  started_at: iso(r.started_at),
  finished_at: iso(r.finished_at),
  next_retry_at: iso(r.next_retry_at),
  timeout_at: iso(r.timeout_at),
  deliveries: r.deliveries,
});

/** The current run of each of these stored periods (their generation's newest attempt), by start. */
export async function currentRuns(
  db: Db,
  rollupId: string,
  los: readonly number[],
): Promise<Map<number, RunView>> {
  if (los.length === 0) return new Map();
  const rows = await db<(RunRow & { lo: number })[]>`
    select r.period_lo as lo, r.generation, r.attempt, r.run_id, r.state, r.cause, r.error, r.version,
      r.created_at, r.started_at, r.finished_at, r.next_retry_at, r.timeout_at, r.deliveries
    from periods p join runs r on r.rollup_id = p.rollup_id and r.period_lo = p.lo
      and r.generation = p.generation and r.attempt = p.run_attempt
    where p.rollup_id = ${rollupId} and p.lo = any(${los as number[]}::int8[])`;
  return new Map(rows.map((r) => [r.lo, runView(r)]));
}

export interface RunReportView {
  readonly at: string;
  readonly source: ReportSource;
  readonly state: string;
  readonly effect: ReportEffect;
  readonly error: string | null;
  readonly version: string | null;
}

/** A period's runs, newest first (at most `limit`), each with its reports in order (at most 50). */
export async function periodRuns(
  db: Db,
  rollupId: string,
  lo: number,
  limit: number,
): Promise<Array<RunView & { reports: RunReportView[] }>> {
  const runs = await db<RunRow[]>`
    select generation, attempt, run_id, state, cause, error, version, created_at, started_at, finished_at,
      next_retry_at, timeout_at, deliveries
    from runs where rollup_id = ${rollupId} and period_lo = ${lo}
    order by generation desc, attempt desc limit ${limit}`;
  if (runs.length === 0) return [];
  const reports = await db<
    {
      generation: number;
      attempt: number;
      at: Date;
      source: ReportSource;
      state: string;
      effect: ReportEffect;
      error: string | null;
      version: string | null;
    }[]
  >`
    select generation, attempt, at, source, state, effect, error, version from (
      select *, row_number() over (partition by generation, attempt order by id desc) as n
      from run_reports where rollup_id = ${rollupId} and period_lo = ${lo}
        and (generation, attempt) >= (${runs.at(-1)!.generation}, ${runs.at(-1)!.attempt})
    ) r where n <= 50 order by id`;
  return runs.map((r) => ({
    ...runView(r),
    reports: reports
      .filter((p) => p.generation === r.generation && p.attempt === r.attempt)
      .map((p) => ({
        at: p.at.toISOString(),
        source: p.source,
        state: p.state,
        effect: p.effect,
        error: p.error,
        version: p.version,
      })),
  }));
}

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

/** One run by its key. */
export async function runAt(db: Db, ref: RunRef): Promise<RunView | null> {
  const [row] = await db<RunRow[]>`
    select generation, attempt, run_id, state, cause, error, version, created_at, started_at, finished_at,
      next_retry_at, timeout_at, deliveries
    from runs where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
      and attempt = ${ref.attempt}`;
  return row ? runView(row) : null;
}
