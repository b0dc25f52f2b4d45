/**
 * What a delivery did to its run: accepted (started), refused for good (failed),
 * or a transient failure that leaves it pending, with the trigger's delivery columns for attempt 1.
 */

import type { RunPolicy, RunReport } from '../../core/runs.js';
import type { Sql, Tx } from '../pg/db.js';
import { compareRefs, type ReportResult, type RunRef, reportRun } from './report.js';

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
  const writes: Promise<unknown>[] = [
    tx`
      update runs set deliveries = deliveries + 1,
        check_at = case when state in ('started', 'running') then coalesce(check_at, ${checkAt}) end
      where ${where} and attempt = ${ref.attempt}`,
  ];
  if (ref.attempt === 1) {
    writes.push(
      outcome.ok
        ? tx`update triggers set delivered_at = ${result.now}, attempts = attempts + 1, last_error = null where ${where}`
        : tx`update triggers set failed_at = ${result.now}, attempts = attempts + 1, last_error = ${outcome.error} where ${where}`,
    );
  }
  await Promise.all(writes);
  return result;
}

/**
 * recordDelivery for a batch of deliveries in one transaction, pipelined, in (rollup, period)
 * order: the outbox records a hundred deliveries with one commit. Results in the order given.
 */
export async function recordDeliveries(
  tx: Tx,
  items: ReadonlyArray<{
    readonly ref: RunRef;
    readonly outcome: { readonly ok: true } | { readonly ok: false; readonly error: string };
    readonly policy: RunPolicy;
    readonly checkAfterMs: number | null;
  }>,
): Promise<Array<ReportResult | null>> {
  const results = new Array<ReportResult | null>(items.length);
  const order = items.map((item, i) => ({ item, i })).sort((a, b) => compareRefs(a.item.ref, b.item.ref));
  await Promise.all(
    order.map(async ({ item, i }) => {
      results[i] = await recordDelivery(tx, item.ref, item.outcome, item.policy, item.checkAfterMs);
    }),
  );
  return results;
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
