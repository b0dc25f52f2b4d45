/**
 * Where the attempts of a run are made: attempt 1 with the decision that triggers it,
 * attempt N + 1 when attempt N finished without success (an automatic or a manual retry).
 */

import { manualRetryRefusal, type RunState, runId } from '../../core/runs.js';
import type { Tx } from '../pg/db.js';
import { insertReport, isCurrent, type RunRef } from './report.js';

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
