/**
 * What a delivery did to its run: accepted (started, or succeeded when the rollup's runs end on
 * delivery), refused for good (failed), or a transient failure that leaves it pending, with the
 * trigger's delivery columns for attempt 1.
 */

import type { Rollup } from '../../core/rollups/rollup.js';
import type { RunPolicy, RunReport } from '../../core/runs/runs.js';
import type { Sql, Tx } from '../pg/db.js';
import { type ReportResult, type RunRef, reportRuns } from './report.js';

/** A delivery the target accepted, or refused for good. */
export type DeliveryOutcome = { readonly ok: true } | { readonly ok: false; readonly error: string };

/**
 * Records a batch of deliveries in one transaction, pipelined, in (rollup, period) order, so the
 * outbox records a hundred deliveries with one commit: each one's report (started or succeeded as
 * the rollup's run.outcome says, failed when refused; reportRuns, which locks every period before
 * the outputs its successes cover) plus its delivery count and, for attempt 1, the trigger's
 * delivery columns (delivered_at, failed_at, attempts, last_error), which keep their meaning for
 * every reader of the decision record. `checkAfterMs`: when to ask a target that can be asked
 * (queue, airflow) about the run; null for one that cannot (webhook). `rollup`: whose output a
 * success covers (null for a rollup no longer configured). Results in the order given.
 */
export async function recordDeliveries(
  tx: Tx,
  items: ReadonlyArray<{
    readonly ref: RunRef;
    readonly outcome: DeliveryOutcome;
    readonly policy: RunPolicy;
    readonly checkAfterMs: number | null;
    readonly rollup: Rollup | null;
  }>,
): Promise<Array<ReportResult | null>> {
  const results = await reportRuns(
    tx,
    items.map((item) => ({
      ref: item.ref,
      report: reportOf(item.outcome),
      policy: item.policy,
      rollup: item.rollup,
    })),
    'scheduler',
    'all',
  );
  const writes = items.flatMap((item, i) => {
    const result = results[i];
    return result ? deliveryWrites(tx, item.ref, item.outcome, item.checkAfterMs, result.now) : [];
  });
  // Pipelined: one round trip for the batch's writes.
  await Promise.all(writes);
  return results;
}

const reportOf = (outcome: DeliveryOutcome): RunReport =>
  outcome.ok ? { kind: 'delivered' } : { kind: 'refused', error: outcome.error };

function deliveryWrites(
  tx: Tx,
  ref: RunRef,
  outcome: DeliveryOutcome,
  checkAfterMs: number | null,
  now: Date,
): Promise<unknown>[] {
  const where = tx`rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}`;
  const checkAt = checkAfterMs === null ? null : new Date(now.getTime() + checkAfterMs);
  // A callback may have moved the run before this delivery was recorded: it is still followed.
  const writes: Promise<unknown>[] = [
    tx`
      update runs set deliveries = deliveries + 1,
        check_at = case when state in ('started', 'running') then coalesce(check_at, ${checkAt}) end
      where ${where} and attempt = ${ref.attempt}`,
  ];
  if (ref.attempt === 1) {
    writes.push(
      outcome.ok
        ? tx`update triggers set delivered_at = ${now}, attempts = attempts + 1, last_error = null where ${where}`
        : tx`update triggers set failed_at = ${now}, attempts = attempts + 1, last_error = ${outcome.error} where ${where}`,
    );
  }
  return writes;
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
