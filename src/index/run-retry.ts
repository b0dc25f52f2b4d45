/**
 * Retries (SPEC §11): attempt N + 1 of a period's unsuccessful run, automatic (the scheduler, at
 * its next_retry_at) or by hand.
 */
import { manualRetryRefusal, type RunState, runId } from '../core/runs.js';
import { EVENTS_CHANNEL } from './commit.js';
import type { Sql, Tx } from './db.js';
import { insertReport, isCurrent, type RunRef } from './runs.js';

/**
 * A manual retry (SPEC §11: `POST /v1/rollups/{id}/periods/{key}/retry`, `coverage-rollup retry`):
 * attempt N + 1 of a period's failed, timed-out or lost run, committed with a notification that
 * wakes the lease holder to deliver it at once. Any instance may do it: the run's key makes a
 * second attempt N + 1 impossible, and the period lock orders it with the scheduler.
 */
export async function retryPeriodRun(sql: Sql, rollupId: string, lo: number): Promise<RetryResult> {
  return sql.begin(async (tx) => {
    const result = await startRetry(tx, rollupId, lo, 'manual', null);
    if (result.ok) await tx`select pg_notify(${EVENTS_CHANNEL}, '')`;
    return result;
  });
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
