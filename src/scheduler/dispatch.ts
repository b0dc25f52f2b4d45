import type { TriggerPayload } from '../core/trigger.js';
import type { Sql } from '../index/db.js';
import { backoffMs } from '../index/transient.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Targets } from './targets/index.js';
import type { StoredTarget } from './targets/secrets.js';

interface OutboxRow {
  rollup_id: string;
  period_lo: number;
  generation: number;
  idempotency_key: string;
  lease_token: number;
  attempts: number;
  target: StoredTarget;
  payload: TriggerPayload;
}

const BATCH = 100;

/**
 * Delivers decided triggers from the outbox, at least once and always with the same idempotency
 * key: a delivery that succeeded but was not yet recorded is simply repeated after a crash.
 * Transient failures back off exponentially; final ones (4xx) are recorded and not retried.
 * Due rows go newest decision first: a fresh trigger is not queued behind a burst of catch-up
 * decisions or a backlog of retries.
 */
export async function deliverDue(
  sql: Sql,
  targets: Targets,
  concurrency: number,
  log: Logger,
  metrics: Metrics,
  signal: AbortSignal,
): Promise<{ delivered: number; more: boolean }> {
  const rows = await sql<OutboxRow[]>`
    select rollup_id, period_lo, generation, idempotency_key, lease_token, attempts, target, payload
    from triggers
    where delivered_at is null and failed_at is null and next_attempt_at <= now()
    order by decided_at desc limit ${BATCH}`;
  let delivered = 0;
  let next = 0;
  const worker = async () => {
    while (next < rows.length && !signal.aborted) {
      const row = rows[next++]!;
      if (await deliverOne(sql, targets, row, log, metrics)) delivered++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, rows.length) }, worker));
  return { delivered, more: rows.length === BATCH };
}

async function deliverOne(
  sql: Sql,
  targets: Targets,
  row: OutboxRow,
  log: Logger,
  metrics: Metrics,
): Promise<boolean> {
  const type = row.target.type;
  const result = await targets.deliver(row.target, row.payload);
  const where = sql`rollup_id = ${row.rollup_id} and period_lo = ${row.period_lo} and generation = ${row.generation}`;
  // The decision's ids, so a delivery line traces back to its 'triggered' line.
  const context = {
    rollup: row.rollup_id,
    period: row.payload.period.key,
    generation: row.generation,
    idempotency_key: row.idempotency_key,
    lease_token: row.lease_token,
    target: type,
    attempt: row.attempts + 1,
  };
  if (result.ok) {
    await sql`update triggers set delivered_at = now(), attempts = attempts + 1, last_error = null where ${where}`;
    metrics.deliveries.inc({ target: type, result: 'delivered' });
    log.info(context, 'delivered');
    return true;
  }
  if (result.retry) {
    const delay = Math.round(backoffMs(row.attempts, 500, 60_000)) + 100;
    await sql`
      update triggers set attempts = attempts + 1, last_error = ${result.error},
        next_attempt_at = now() + make_interval(secs => ${delay / 1000})
      where ${where}`;
    metrics.deliveries.inc({ target: type, result: 'retry' });
    log.warn({ ...context, error: result.error, retry_in_ms: delay }, 'delivery failed; will retry');
    return false;
  }
  await sql`update triggers set attempts = attempts + 1, last_error = ${result.error}, failed_at = now() where ${where}`;
  metrics.deliveries.inc({ target: type, result: 'failed' });
  log.error({ ...context, error: result.error }, 'delivery refused by the target; giving up');
  return false;
}

/** When the next undelivered trigger is due, as a subquery for the scheduler's timer. */
export function nextDeliverySql(sql: Sql) {
  return sql`select min(next_attempt_at) from triggers where delivered_at is null and failed_at is null`;
}
