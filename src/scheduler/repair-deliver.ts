/**
 * The delivery phase of the repair step: attempts not yet delivered (the repair_attempts
 * outbox) go to their target, at least once under their own key; a failure is tried again with
 * backoff, a refusal for good is recorded.
 */

import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import { backoffMs } from '../store/pg/transient.js';
import { dueAttempts, recordAttemptDelivery } from '../store/repairs/attempts.js';
import type { Logger } from '../support/log.js';
import type { RepairTargets } from '../targets/repair-targets.js';
import type { StoredTarget } from '../targets/secrets.js';

const DELIVERY_BATCH = 100;
const DELIVERY_CONCURRENCY = 8;

export interface DeliverContext {
  readonly sql: Sql;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly targets: RepairTargets;
}

/** Delivers the attempts due at `now`; `more` when the batch was full. */
export async function deliverAttempts(
  ctx: DeliverContext,
  signal: AbortSignal,
  now: Date,
): Promise<{ delivered: number; tried: number; more: boolean }> {
  const { sql, log, metrics, targets } = ctx;
  const rows = await dueAttempts(sql, now, DELIVERY_BATCH);
  let next = 0;
  let delivered = 0;
  const worker = async () => {
    while (next < rows.length && !signal.aborted) {
      const row = rows[next++]!;
      const target = row.target as StoredTarget;
      const result = await targets.deliver(target, row.payload);
      const ref = { requestId: row.requestId, attempt: row.attempt };
      const at = {
        repair_id: row.requestId,
        attempt: row.attempt,
        idempotency_key: row.payload.idempotency_key,
        asset: row.payload.asset,
        target: target.type,
      };
      if (result.ok) {
        await recordAttemptDelivery(sql, ref, { ok: true }, new Date());
        metrics.repairAttempts.inc({ target: target.type, result: 'delivered' });
        log.info(at, 'repair request delivered');
        delivered++;
      } else if (result.retry) {
        const retryMs = Math.round(backoffMs(row.deliveries, 500, 60_000)) + 100;
        await recordAttemptDelivery(sql, ref, { ok: false, error: result.error, retryMs }, new Date());
        log.warn(
          { ...at, error: result.error, retry_in_ms: retryMs },
          'repair request delivery failed; will retry',
        );
      } else {
        await recordAttemptDelivery(sql, ref, { ok: false, error: result.error, retryMs: null }, new Date());
        metrics.repairAttempts.inc({ target: target.type, result: 'refused' });
        log.error({ ...at, error: result.error }, 'repair request refused by the target');
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, rows.length) }, worker));
  return { delivered, tried: rows.length, more: rows.length === DELIVERY_BATCH };
}
