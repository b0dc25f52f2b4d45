/**
 * A manual retry (`POST /v1/rollups/{id}/periods/{key}/retry`, `coverage-rollup retry`):
 * attempt N + 1 of a period's failed, timed-out or lost run, committed with a notification that
 * wakes the lease holder to deliver it at once. Any instance may do it: the run's key makes a
 * second attempt N + 1 impossible, and the period lock orders it with the scheduler.
 */
import { wakeScheduler } from '../assets/commit.js';
import type { Sql, Tx } from '../pg/db.js';
import { type RetryResult, startRetry } from './attempts.js';

/** `also` runs in the same transaction once the retry is made (the audit's entry). */
export async function retryPeriodRun(
  sql: Sql,
  rollupId: string,
  lo: number,
  also?: (tx: Tx, made: Extract<RetryResult, { ok: true }>) => Promise<void>,
): Promise<RetryResult> {
  return sql.begin(async (tx) => {
    const result = await startRetry(tx, rollupId, lo, 'manual', null);
    if (result.ok) await wakeScheduler(tx);
    if (result.ok) await also?.(tx, result);
    return result;
  });
}
