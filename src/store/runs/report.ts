/**
 * How a run moves: reportRun applies one report to one run and records it in
 * run_reports, with the run columns of `periods` (its current attempt and state). The moves
 * themselves are decided by src/core/runs.ts; here they are loaded and stored. Attempts are made
 * in run-attempts.ts, deliveries recorded in run-delivery.ts, the next target checks set in
 * run-next-checks.ts.
 */

import type { NormalizedEvent } from '../../core/events.js';
import type { Rollup } from '../../core/rollup.js';
import {
  applyReport,
  type ReportEffect,
  type RunFacts,
  type RunPolicy,
  type RunReport,
  type RunState,
} from '../../core/runs.js';
import { outputOf, recordOutputs } from '../assets/outputs.js';
import type { Tx } from '../pg/db.js';

/** One attempt of one trigger: the primary key of `runs`. */
export interface RunRef {
  readonly rollupId: string;
  readonly lo: number;
  readonly generation: number;
  readonly attempt: number;
}

export type ReportSource = 'scheduler' | 'queue' | 'airflow' | 'dagster' | 'callback' | 'manual';

/** A run's key as statements return it. */
export interface RefRow {
  rollup_id: string;
  period_lo: number;
  generation: number;
  attempt: number;
}
export const refOf = (r: RefRow): RunRef => ({
  rollupId: r.rollup_id,
  lo: r.period_lo,
  generation: r.generation,
  attempt: r.attempt,
});

interface RunRow {
  state: RunState;
  error: string | null;
  version: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  timeout_at: Date | null;
  next_retry_at: Date | null;
}

const ms = (d: Date | null) => d?.getTime() ?? null;
const date = (t: number | null) => (t === null ? null : new Date(t));

/** The run is its period's current one: the period's generation, and that generation's newest attempt. */
export const isCurrent = (
  ref: RunRef,
  period: { generation: number; run_attempt: number | null } | undefined,
) => period !== undefined && period.generation === ref.generation && period.run_attempt === ref.attempt;

export interface ReportResult {
  readonly effect: ReportEffect;
  /** The run is its period's current one (so the effect reached the period). */
  readonly current: boolean;
  readonly before: RunFacts;
  readonly after: RunFacts;
  /** Database time of the report. */
  readonly now: Date;
}

/** What a report needs besides the run and its policy. */
export interface ReportOptions {
  readonly record: 'all' | 'changes';
  /**
   * Needed for target reports: a success commits the rollup's output with it. Null
   * for a rollup no longer configured (nothing to write).
   */
  readonly rollup?: Rollup | null;
}

/**
 * Applies one report to one run inside the caller's transaction and records it in run_reports.
 * The period row is locked first (the order every writer of runs uses), so the run's currency
 * cannot change under the report. The ONE place a run's state moves: a caller that must commit
 * more with a success (an output asset) does it in the same transaction. Returns null for a run
 * that does not exist.
 */
export async function reportRun(
  tx: Tx,
  ref: RunRef,
  report: RunReport,
  source: ReportSource,
  policy: RunPolicy,
  opts: ReportOptions,
): Promise<ReportResult | null> {
  const outputs: NormalizedEvent[] = [];
  const result = await moveRun(tx, ref, report, source, policy, opts, outputs);
  await recordOutputs(tx, outputs);
  return result;
}

/**
 * reportRun for many runs in one transaction: their statements pipelined, every output their
 * successes cover committed at the end in one commit (one savepoint: two interleaved in one
 * pipelined transaction could roll back each other's statements). A run then costs a share of a
 * few round trips and of one commit, which is what lets a cascade over thousands of runs keep up
 * with an instant worker. Runs are taken in (rollup, period) order, periods locked before the
 * output assets, as every other writer does. Results in the order given.
 */
export async function reportRuns(
  tx: Tx,
  items: ReadonlyArray<{
    readonly ref: RunRef;
    readonly report: RunReport;
    readonly policy: RunPolicy;
    readonly rollup?: Rollup | null;
  }>,
  source: ReportSource,
  record: ReportOptions['record'],
): Promise<Array<ReportResult | null>> {
  const order = items.map((item, i) => ({ item, i })).sort((a, b) => compareRefs(a.item.ref, b.item.ref));
  await lockPeriodsOf(
    tx,
    order.map(({ item }) => item.ref),
  );
  const outputs: NormalizedEvent[] = [];
  const results = new Array<ReportResult | null>(items.length);
  await Promise.all(
    order.map(async ({ item, i }) => {
      const opts = item.rollup === undefined ? { record } : { record, rollup: item.rollup };
      results[i] = await moveRun(tx, item.ref, item.report, source, item.policy, opts, outputs);
    }),
  );
  await recordOutputs(tx, outputs);
  return results;
}

/** (rollup, period, generation, attempt) order: the order batches lock their periods in. */
export const compareRefs = (a: RunRef, b: RunRef): number =>
  (a.rollupId < b.rollupId ? -1 : a.rollupId > b.rollupId ? 1 : 0) ||
  a.lo - b.lo ||
  a.generation - b.generation ||
  a.attempt - b.attempt;

/** reportRun's body: the output a success covers goes to `outputs`, for the caller to commit. */
async function moveRun(
  tx: Tx,
  ref: RunRef,
  report: RunReport,
  source: ReportSource,
  policy: RunPolicy,
  opts: ReportOptions,
  outputs: NormalizedEvent[],
): Promise<ReportResult | null> {
  if (report.kind === 'target' && opts.rollup === undefined)
    throw new Error('reportRun: a target report needs its rollup, whose output a success covers');
  // Pipelined, in this order: the period's lock is taken before the run's.
  const [[period], [row]] = await Promise.all([
    tx<{ generation: number; run_attempt: number | null; now: Date }[]>`
      select generation, run_attempt, clock_timestamp() as now from periods
      where rollup_id = ${ref.rollupId} and lo = ${ref.lo} for update`,
    tx<RunRow[]>`
      select state, error, version, started_at, finished_at, timeout_at, next_retry_at from runs
      where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
        and attempt = ${ref.attempt}
      for update`,
  ]);
  if (!row || !period) return null;
  const before: RunFacts = {
    attempt: ref.attempt,
    state: row.state,
    error: row.error,
    version: row.version,
    startedAt: ms(row.started_at),
    finishedAt: ms(row.finished_at),
    timeoutAt: ms(row.timeout_at),
    nextRetryAt: ms(row.next_retry_at),
  };
  const current = isCurrent(ref, period);
  const now = period.now;
  const { effect, run: after } = applyReport(before, report, { current, policy, now: now.getTime() });
  const moved = effect === 'applied' || effect === 'stale';
  const writes: Promise<unknown>[] = [];
  if (moved) {
    writes.push(tx`
      update runs set state = ${after.state}, error = ${after.error}, version = ${after.version},
        started_at = ${date(after.startedAt)}, finished_at = ${date(after.finishedAt)},
        timeout_at = ${date(after.timeoutAt)}, next_retry_at = ${date(after.nextRetryAt)},
        due_at = case when ${after.state} = 'pending' then due_at end
      where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
        and attempt = ${ref.attempt}`);
  }
  if (effect === 'applied') {
    writes.push(
      tx`update periods set run_state = ${after.state} where rollup_id = ${ref.rollupId} and lo = ${ref.lo}`,
    );
  }
  // Polls record what changed a run; callbacks and the scheduler's own moves record everything.
  if (opts.record === 'all' || moved) {
    const state = report.kind === 'target' ? report.state : moved ? after.state : report.kind;
    const error = report.kind === 'target' ? (report.error ?? null) : moved ? after.error : null;
    const version = report.kind === 'target' ? (report.version ?? null) : null;
    writes.push(insertReport(tx, ref, source, state, error, version, effect, now));
  }
  // Pipelined too: one round trip for the writes.
  await Promise.all(writes);
  // A success of the period's current run covers the rollup's output, in this transaction.
  if (effect === 'applied' && after.state === 'succeeded' && opts.rollup) {
    const output = await outputOf(tx, opts.rollup, ref, after.version);
    if (output !== null) outputs.push(output);
  }
  return { effect, current, before, after, now };
}

/**
 * Locks the periods of several runs, in (rollup, period) order, before reports move them in one
 * transaction: every period lock is then taken before any asset lock a success takes (an output),
 * as a single-run writer (a callback: period, then asset) does, so the two wait for each other
 * rather than deadlock.
 */
export async function lockPeriodsOf(tx: Tx, refs: readonly RunRef[]): Promise<void> {
  if (refs.length === 0) return;
  await tx`
    select 1 from periods p
    join unnest(${refs.map((r) => r.rollupId)}::text[], ${refs.map((r) => r.lo)}::int8[]) as k(rollup_id, lo)
      on p.rollup_id = k.rollup_id and p.lo = k.lo
    order by p.rollup_id, p.lo
    for update of p`;
}

/** One history line; every path that records a report goes through here. */
export async function insertReport(
  tx: Tx,
  ref: RunRef,
  source: ReportSource,
  state: string,
  error: string | null,
  version: string | null,
  effect: ReportEffect,
  at: Date,
): Promise<void> {
  await tx`
    insert into run_reports (rollup_id, period_lo, generation, attempt, source, state, error, version, effect, at)
    values (${ref.rollupId}, ${ref.lo}, ${ref.generation}, ${ref.attempt}, ${source}, ${state}, ${error},
      ${version}, ${effect}, ${at})`;
}
