import type { Sql } from '../index/db.js';
import { backoffMs } from '../index/transient.js';
import {
  dueTriggers,
  type OutboxRow,
  recordDelivered,
  recordFailed,
  recordRetry,
} from '../index/triggers.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Targets } from './targets/index.js';
import type { StoredTarget } from './targets/secrets.js';

type Row = OutboxRow<StoredTarget>;

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
  const rows = await dueTriggers<StoredTarget>(sql, BATCH);
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
  row: Row,
  log: Logger,
  metrics: Metrics,
): Promise<boolean> {
  const type = row.target.type;
  const result = await targets.deliver(row.target, row.payload);
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
    await recordDelivered(sql, row);
    metrics.deliveries.inc({ target: type, result: 'delivered' });
    log.info(context, 'delivered');
    return true;
  }
  if (result.retry) {
    const delay = Math.round(backoffMs(row.attempts, 500, 60_000)) + 100;
    await recordRetry(sql, row, result.error, delay);
    metrics.deliveries.inc({ target: type, result: 'retry' });
    log.warn({ ...context, error: result.error, retry_in_ms: delay }, 'delivery failed; will retry');
    return false;
  }
  await recordFailed(sql, row, result.error);
  metrics.deliveries.inc({ target: type, result: 'failed' });
  log.error({ ...context, error: result.error }, 'delivery refused by the target; giving up');
  return false;
}
