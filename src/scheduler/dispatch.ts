import { DEFAULT_RUN_POLICY, type RunPolicy } from '../core/runs.js';
import { attemptPayload } from '../core/trigger.js';
import type { Sql } from '../index/db.js';
import { recordDelivery, recordDeliveryRetry } from '../index/run-delivery.js';
import { type DueRun, dueRuns } from '../index/run-work.js';
import { backoffMs } from '../index/transient.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Targets } from './targets/index.js';
import type { StoredTarget } from './targets/secrets.js';

const BATCH = 100;

/** How soon after a delivery a target that can be asked (queue, airflow) is first asked about the run. */
export const FIRST_CHECK_MS: Readonly<Record<string, number | null>> = {
  queue: 0,
  airflow: 5000,
  webhook: null,
};

export interface DispatchContext {
  readonly sql: Sql;
  readonly targets: Targets;
  readonly concurrency: number;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The run policy of a rollup by id (defaults for one no longer configured). */
  readonly policyOf: (rollupId: string) => RunPolicy;
  /** The configured target type of a rollup, for the run metrics' `target` label. */
  readonly targetTypeOf: (rollupId: string) => string | undefined;
}

/**
 * Delivers pending runs (the outbox, SPEC §6 and §11), at least once and always with the attempt's
 * own ids: a delivery that succeeded but was not yet recorded is simply repeated after a crash,
 * and the target dedupes it (jobId, Idempotency-Key, dag_run_id). A delivery the target accepts
 * starts the run; a transient failure backs off exponentially and stays pending; a final one (4xx)
 * fails the attempt, which the run policy may retry as a new attempt.
 */
export async function deliverDue(
  ctx: DispatchContext,
  signal: AbortSignal,
): Promise<{ delivered: number; more: boolean }> {
  const rows = await dueRuns(ctx.sql, BATCH);
  let delivered = 0;
  let next = 0;
  const worker = async () => {
    while (next < rows.length && !signal.aborted) {
      const row = rows[next++]!;
      if (await deliverOne(ctx, row)) delivered++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(ctx.concurrency, rows.length) }, worker));
  return { delivered, more: rows.length === BATCH };
}

async function deliverOne(ctx: DispatchContext, row: DueRun): Promise<boolean> {
  const { sql, log, metrics } = ctx;
  const target = row.target as StoredTarget;
  const type = target.type;
  const payload = attemptPayload(row.payload, row.run.attempt);
  const result = await ctx.targets.deliver(target, payload);
  // The decision's ids, so a delivery line traces back to its 'triggered' line.
  const context = {
    rollup: row.run.rollupId,
    period: payload.period.key,
    generation: row.run.generation,
    idempotency_key: payload.idempotency_key,
    run_id: row.runId,
    attempt: row.run.attempt,
    lease_token: row.leaseToken,
    target: type,
    delivery: row.deliveries + 1,
  };
  const policy = ctx.policyOf(row.run.rollupId);
  if (result.ok || !result.retry) {
    const outcome = result.ok ? { ok: true as const } : { ok: false as const, error: result.error };
    const recorded = await sql.begin((tx) =>
      recordDelivery(tx, row.run, outcome, policy, FIRST_CHECK_MS[type] ?? null),
    );
    metrics.runReported(type, recorded); // a delivery refused for good ends the attempt
    if (result.ok) {
      metrics.deliveries.inc({ target: type, result: 'delivered' });
      log.info(context, 'delivered');
      return true;
    }
    metrics.deliveries.inc({ target: type, result: 'failed' });
    log.error({ ...context, error: result.error }, 'delivery refused by the target; the attempt failed');
    return false;
  }
  const delay = Math.round(backoffMs(row.deliveries, 500, 60_000)) + 100;
  await recordDeliveryRetry(sql, row.run, result.error, delay);
  metrics.deliveries.inc({ target: type, result: 'retry' });
  log.warn({ ...context, error: result.error, retry_in_ms: delay }, 'delivery failed; will retry');
  return false;
}

/** The run policy of a configured rollup, or the defaults for runs of one no longer configured. */
export function policyLookup(policies: ReadonlyMap<string, RunPolicy>): (rollupId: string) => RunPolicy {
  return (id) => policies.get(id) ?? DEFAULT_RUN_POLICY;
}
