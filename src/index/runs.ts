/**
 * Every statement that writes `runs` and `run_reports` (SPEC §11), and the run columns of `periods`
 * (its current attempt and state). Each verb says why it is shaped as it is. The moves themselves
 * are decided by src/core/runs.ts; here they are loaded and stored.
 */
import {
  applyReport,
  manualRetryRefusal,
  type ReportEffect,
  type RunFacts,
  type RunPolicy,
  type RunReport,
  type RunState,
  runId,
  UNSUCCESSFUL_STATES,
} from '../core/runs.js';
import type { Db, Sql, Tx } from './db.js';

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
const isCurrent = (ref: RunRef, period: { generation: number; run_attempt: number | null } | undefined) =>
  period !== undefined && period.generation === ref.generation && period.run_attempt === ref.attempt;

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
  opts: { readonly record: 'all' | 'changes' },
): Promise<ReportResult | null> {
  const [period] = await tx<{ generation: number; run_attempt: number | null; now: Date }[]>`
    select generation, run_attempt, clock_timestamp() as now from periods
    where rollup_id = ${ref.rollupId} and lo = ${ref.lo} for update`;
  const [row] = await tx<RunRow[]>`
    select state, error, version, started_at, finished_at, timeout_at, next_retry_at from runs
    where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
      and attempt = ${ref.attempt}
    for update`;
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
  if (moved) {
    await tx`
      update runs set state = ${after.state}, error = ${after.error}, version = ${after.version},
        started_at = ${date(after.startedAt)}, finished_at = ${date(after.finishedAt)},
        timeout_at = ${date(after.timeoutAt)}, next_retry_at = ${date(after.nextRetryAt)},
        due_at = case when ${after.state} = 'pending' then due_at end
      where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
        and attempt = ${ref.attempt}`;
  }
  if (effect === 'applied') {
    await tx`update periods set run_state = ${after.state} where rollup_id = ${ref.rollupId} and lo = ${ref.lo}`;
  }
  // Polls record what changed a run; callbacks and the scheduler's own moves record everything.
  if (opts.record === 'all' || moved) {
    const state = report.kind === 'target' ? report.state : moved ? after.state : report.kind;
    const error = report.kind === 'target' ? (report.error ?? null) : moved ? after.error : null;
    const version = report.kind === 'target' ? (report.version ?? null) : null;
    await insertReport(tx, ref, source, state, error, version, effect, now);
  }
  return { effect, current, before, after, now };
}

/** One history line; every path that records a report goes through here. */
async function insertReport(
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

/**
 * A delivery's outcome: the report (started, or failed when refused) plus the delivery count and,
 * for attempt 1, the trigger's delivery columns (delivered_at, failed_at, attempts, last_error),
 * which keep their meaning for every reader of the decision record. `checkAfterMs`: when to ask a
 * target that can be asked (queue, airflow) about the run; null for one that reports (webhook).
 */
export async function recordDelivery(
  tx: Tx,
  ref: RunRef,
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: string },
  policy: RunPolicy,
  checkAfterMs: number | null,
): Promise<ReportResult | null> {
  const report: RunReport = outcome.ok ? { kind: 'delivered' } : { kind: 'refused', error: outcome.error };
  const result = await reportRun(tx, ref, report, 'scheduler', policy, { record: 'all' });
  if (!result) return null;
  const where = tx`rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}`;
  const checkAt = checkAfterMs === null ? null : new Date(result.now.getTime() + checkAfterMs);
  // A callback may have moved the run before this delivery was recorded: it is still followed.
  await tx`
    update runs set deliveries = deliveries + 1,
      check_at = case when state in ('started', 'running') then coalesce(check_at, ${checkAt}) end
    where ${where} and attempt = ${ref.attempt}`;
  if (ref.attempt === 1) {
    await (outcome.ok
      ? tx`update triggers set delivered_at = ${result.now}, attempts = attempts + 1, last_error = null where ${where}`
      : tx`update triggers set failed_at = ${result.now}, attempts = attempts + 1, last_error = ${outcome.error} where ${where}`);
  }
  return result;
}

/** A transient delivery failure: the run stays pending, due again after `delayMs`. */
export async function recordDeliveryRetry(
  sql: Sql,
  ref: RunRef,
  error: string,
  delayMs: number,
): Promise<void> {
  const where = sql`rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}`;
  await sql.begin(async (tx) => {
    await tx`
      update runs set deliveries = deliveries + 1, error = ${error},
        due_at = clock_timestamp() + make_interval(secs => ${delayMs / 1000})
      where ${where} and attempt = ${ref.attempt} and state = 'pending'`;
    // Attempt 1 mirrors its delivery tries onto the decision record, as before runs existed.
    if (ref.attempt === 1)
      await tx`update triggers set attempts = attempts + 1, last_error = ${error} where ${where}`;
  });
}

/**
 * After asking the target: when to ask again (ms from now), or null to stop following the run.
 * One statement for the whole batch, so a pass's checks cost one write.
 */
export async function setNextChecks(
  db: Db,
  checks: ReadonlyArray<{ readonly run: RunRef; readonly afterMs: number | null }>,
): Promise<void> {
  if (checks.length === 0) return;
  const refs = checks.map((c) => c.run);
  await db`
    update runs r set check_at = clock_timestamp() + make_interval(secs => u.after_ms / 1000.0)
    from unnest(${refs.map((r) => r.rollupId)}::text[], ${refs.map((r) => r.lo)}::int8[],
      ${refs.map((r) => r.generation)}::int4[], ${refs.map((r) => r.attempt)}::int4[],
      ${checks.map((c) => c.afterMs)}::float8[]) as u(rollup_id, lo, generation, attempt, after_ms)
    where r.rollup_id = u.rollup_id and r.period_lo = u.lo and r.generation = u.generation
      and r.attempt = u.attempt`;
}

/** Ask about these runs now: a wake-up (a job finished) makes their next check immediate. */
export async function checkSoon(db: Db, runIds: readonly string[]): Promise<void> {
  if (runIds.length === 0) return;
  await db`
    update runs set check_at = clock_timestamp()
    where run_id = any(${runIds as string[]}::text[]) and check_at is not null`;
}

export type RetryResult =
  | { readonly ok: true; readonly run: RunRef; readonly runId: string }
  | { readonly ok: false; readonly reason: string };

/**
 * Attempt N + 1 of the period's current run, pending and due now, when attempt N finished without
 * success: automatically at its next_retry_at (`cause: 'retry'`) or by hand (`'manual'`). The
 * period row is locked and the run must still be current and unsuccessful, and (rollup, period,
 * generation, attempt) is the key: two callers can never make the same attempt twice.
 */
export async function startRetry(
  tx: Tx,
  rollupId: string,
  lo: number,
  cause: 'retry' | 'manual',
  token: number | null,
  expected?: RunRef,
): Promise<RetryResult> {
  const [period] = await tx<
    { generation: number; run_attempt: number | null; run_state: RunState | null; key: string; now: Date }[]
  >`
    select p.generation, p.run_attempt, p.run_state, t.idempotency_key as key, clock_timestamp() as now
    from periods p left join triggers t on t.rollup_id = p.rollup_id and t.period_lo = p.lo and t.generation = p.generation
    where p.rollup_id = ${rollupId} and p.lo = ${lo} for update of p`;
  const refusal =
    period?.run_attempt == null || period.key == null
      ? manualRetryRefusal(null)
      : manualRetryRefusal(period.run_state);
  const stale = expected !== undefined && !isCurrent(expected, period);
  if (expected && (stale || refusal !== null)) {
    // Superseded since it was scheduled, or moved (a reopen): nothing to retry any more.
    await clearRetry(tx, expected);
    return { ok: false, reason: refusal ?? 'superseded' };
  }
  if (refusal !== null || !period) return { ok: false, reason: refusal ?? 'no run' };
  const previous: RunRef = { rollupId, lo, generation: period.generation, attempt: period.run_attempt! };
  const attempt = previous.attempt + 1;
  const id = runId(period.key, attempt);
  await clearRetry(tx, previous);
  await tx`
    insert into runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, lease_token, created_at, due_at)
    values (${rollupId}, ${lo}, ${period.generation}, ${attempt}, ${id}, 'pending', ${cause}, ${token},
      ${period.now}, ${period.now})`;
  await tx`update periods set run_attempt = ${attempt}, run_state = 'pending' where rollup_id = ${rollupId} and lo = ${lo}`;
  const run: RunRef = { ...previous, attempt };
  await insertReport(
    tx,
    run,
    cause === 'manual' ? 'manual' : 'scheduler',
    'pending',
    null,
    null,
    'applied',
    period.now,
  );
  return { ok: true, run, runId: id };
}

/** A scheduled retry that is no longer owed (superseded, reopened, retried by hand) is dropped. */
async function clearRetry(tx: Tx, ref: RunRef): Promise<void> {
  await tx`
    update runs set next_retry_at = null
    where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
      and attempt = ${ref.attempt} and next_retry_at is not null`;
}

/** The unsuccessful states, for statements that pick retryable runs. */
export const RETRYABLE_STATES: readonly RunState[] = UNSUCCESSFUL_STATES;
