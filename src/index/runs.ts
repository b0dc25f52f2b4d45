/**
 * Every statement that writes `runs` and `run_reports` (SPEC §11), and the run columns of `periods`
 * (its current attempt and state), with run-deliveries.ts (the outbox's records and checks) and
 * run-retry.ts (attempt N + 1). Each verb says why it is shaped as it is. The moves themselves
 * are decided by src/core/runs.ts; here they are loaded and stored.
 */

import type { NormalizedEvent } from '../core/events.js';
import type { Rollup } from '../core/rollup.js';
import {
  applyReport,
  type ReportEffect,
  type RunFacts,
  type RunPolicy,
  type RunReport,
  type RunState,
  UNSUCCESSFUL_STATES,
} from '../core/runs.js';
import type { Tx } from './db.js';
import { outputOf, recordOutputs } from './outputs.js';

/** One attempt of one trigger: the primary key of `runs`. */
export interface RunRef {
  readonly rollupId: string;
  readonly lo: number;
  readonly generation: number;
  readonly attempt: number;
}

export type ReportSource = 'scheduler' | 'queue' | 'airflow' | 'callback' | 'manual';

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
export const isCurrent = (
  ref: RunRef,
  period: { generation: number; run_attempt: number | null } | undefined,
) => period !== undefined && period.generation === ref.generation && period.run_attempt === ref.attempt;

/**
 * Attempt 1 of each new trigger, pending and due now, in the decision's transaction (after the
 * trigger rows and the period updates): a decision and the run it starts commit together, and the
 * period's current run becomes it.
 */
export async function insertFirstRuns(
  tx: Tx,
  rollupId: string,
  triggers: ReadonlyArray<{ readonly lo: number; readonly generation: number; readonly key: string }>,
  token: number,
  now: Date,
): Promise<void> {
  if (triggers.length === 0) return;
  const los = triggers.map((t) => t.lo);
  const generations = triggers.map((t) => t.generation);
  await tx`
    insert into runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, lease_token, created_at, due_at)
    select ${rollupId}, t.lo, t.generation, 1, t.key, 'pending', 'trigger', ${token}, ${now}, ${now}
    from unnest(${los}::int8[], ${generations}::int4[], ${triggers.map((t) => t.key)}::text[]) as t(lo, generation, key)`;
  await tx`
    update periods p set run_attempt = 1, run_state = 'pending'
    from unnest(${los}::int8[], ${generations}::int4[]) as t(lo, generation)
    where p.rollup_id = ${rollupId} and p.lo = t.lo and p.generation = t.generation`;
}

export interface ReportResult {
  readonly effect: ReportEffect;
  /** The run is its period's current one (so the effect reached the period). */
  readonly current: boolean;
  readonly before: RunFacts;
  readonly after: RunFacts;
  /** Database time of the report. */
  readonly now: Date;
}

/** What a report needs besides the run: the rollup's policy, and for a target report its rollup. */
export interface ReportOptions {
  readonly record: 'all' | 'changes';
  /**
   * Needed for target reports: a success commits the rollup's output (SPEC §11) with it. Null
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
 * successes cover committed at the end in one commit. What a run costs is then a share of a few
 * round trips and of one commit, not a transaction of its own: the difference between a cascade
 * over thousands of runs keeping up with an instant worker or not. Runs are taken in (rollup,
 * period) order, and periods are locked before the output assets, as every other writer does.
 * Results in the order given.
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
  const outputs: NormalizedEvent[] = [];
  const results = new Array<ReportResult | null>(items.length);
  await Promise.all(
    order.map(async ({ item, i }) => {
      results[i] = await moveRun(
        tx,
        item.ref,
        item.report,
        source,
        item.policy,
        {
          record,
          ...(item.rollup === undefined ? {} : { rollup: item.rollup }),
        },
        outputs,
      );
    }),
  );
  await recordOutputs(tx, outputs);
  return results;
}

export const compareRefs = (a: RunRef, b: RunRef) =>
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

/** The unsuccessful states, for statements that pick retryable runs. */
export const RETRYABLE_STATES: readonly RunState[] = UNSUCCESSFUL_STATES;
