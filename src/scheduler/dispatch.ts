import type { Rollup } from '../core/rollups/rollup.js';
import type { RunPolicy } from '../core/runs/runs.js';
import { attemptPayload } from '../core/runs/trigger.js';
import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import { backoffMs } from '../store/pg/transient.js';
import { recordDeliveries, recordDeliveryRetry } from '../store/runs/delivery.js';
import type { ReportResult } from '../store/runs/report.js';
import { type DueRun, dueRuns } from '../store/runs/work.js';
import type { Logger } from '../support/log.js';
import { followRules } from '../targets/registry.js';
import type { DeliveryResult, Targets } from '../targets/targets.js';

const BATCH = 100;

/** How soon after a delivery the run's target is first asked about it; null for a type with nothing to follow. */
export function firstCheckMs(type: string): number | null {
  return followRules(type)?.firstCheckMs ?? null;
}

export interface DispatchContext {
  readonly sql: Sql;
  readonly targets: Targets;
  readonly concurrency: number;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The run policy of a rollup by id (defaults for one no longer configured). */
  readonly policyOf: (rollupId: string) => RunPolicy;
  /** The configured rollup, whose output a success covers; undefined once it is no longer configured. */
  readonly rollupOf: (rollupId: string) => Rollup | undefined;
  /** The configured target type of a rollup, for the run metrics' `target` label. */
  readonly targetTypeOf: (rollupId: string) => string | undefined;
  /** The rollups in the catalog now: only their runs are delivered. */
  readonly rollupIds: () => readonly string[];
}

/**
 * Delivers pending runs (the outbox), at least once and always with the attempt's
 * own ids: a delivery that succeeded but was not yet recorded is simply repeated after a crash,
 * and the target dedupes it (jobId, Idempotency-Key, dag_run_id). A delivery the target accepts
 * starts the run, or ends it as succeeded when the rollup's run.outcome is delivery (the run
 * policy carries it to the runs core); a transient failure backs off exponentially and stays pending; a final one (4xx)
 * fails the attempt, which the run policy may retry as a new attempt.
 */
export async function deliverDue(
  ctx: DispatchContext,
  signal: AbortSignal,
): Promise<{ delivered: number; more: boolean }> {
  const rows = await dueRuns(ctx.sql, BATCH, ctx.rollupIds());
  const results: Array<{ row: DueRun; result: DeliveryResult }> = [];
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < rows.length && !signal.aborted && !failure) {
      const row = rows[next++]!;
      const payload = attemptPayload(row.payload, row.run.attempt);
      try {
        results.push({
          row,
          result: await ctx.targets.deliver(row.target, payload, { first: row.earlierSends === 0 }),
        });
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(ctx.concurrency, rows.length) }, worker));
  // Thrown only once no delivery is in flight: a failed pass whose deliveries ran on would race the
  // next pass, which reads the same runs still pending and delivers them a second time. (The
  // record below comes after every delivery of the batch, so its failure leaves none in flight.)
  if (failure) throw failure.error;
  // Every outcome of the batch in one transaction (one commit, not one per run); a crash before it
  // commits only repeats deliveries, which the target dedupes.
  const final = results.filter(({ result }) => result.ok || !result.retry);
  const recorded = await ctx.sql.begin((tx) =>
    recordDeliveries(
      tx,
      final.map(({ row, result }) => ({
        ref: row.run,
        outcome: result.ok ? { ok: true as const } : { ok: false as const, error: result.error },
        policy: ctx.policyOf(row.run.rollupId),
        checkAfterMs: firstCheckMs(row.target.type),
        rollup: ctx.rollupOf(row.run.rollupId) ?? null,
      })),
    ),
  );
  let delivered = 0;
  for (const [i, { row, result }] of final.entries()) {
    logDelivery(ctx, row, result, recorded[i] ?? null);
    if (result.ok) delivered++;
  }
  for (const { row, result } of results) {
    if (result.ok || !result.retry) continue;
    const delay = Math.round(backoffMs(row.deliveries, 500, 60_000)) + 100;
    await recordDeliveryRetry(ctx.sql, row.run, result.error, delay);
    ctx.metrics.deliveries.inc({ target: row.target.type, result: 'retry' });
    ctx.log.warn(
      { ...logContext(row), error: result.error, retry_in_ms: delay },
      'delivery failed; will retry',
    );
  }
  return { delivered, more: rows.length === BATCH };
}

/** The decision's ids, so a delivery line traces back to its 'triggered' line. */
function logContext(row: DueRun) {
  return {
    rollup: row.run.rollupId,
    period: row.payload.period.key,
    generation: row.run.generation,
    idempotency_key: row.payload.idempotency_key,
    run_id: row.runId,
    attempt: row.run.attempt,
    lease_token: row.leaseToken,
    target: row.target.type,
    delivery: row.deliveries + 1,
  };
}

/** Metrics and the log line of a delivery the target accepted or refused for good, once recorded. */
function logDelivery(
  ctx: DispatchContext,
  row: DueRun,
  result: DeliveryResult,
  recorded: ReportResult | null,
): void {
  const type = row.target.type;
  ctx.metrics.runReported(type, recorded); // a delivery refused for good ends the attempt
  if (result.ok) {
    ctx.metrics.deliveries.inc({ target: type, result: 'delivered' });
    // succeeded: the rollup's runs end on delivery; started: its outcome is to come.
    ctx.log.info({ ...logContext(row), state: recorded?.after.state }, 'delivered');
    return;
  }
  ctx.metrics.deliveries.inc({ target: type, result: 'failed' });
  ctx.log.error(
    { ...logContext(row), error: result.error },
    'delivery refused by the target; the attempt failed',
  );
}
