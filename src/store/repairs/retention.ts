/** History retention of repair requests. */

import type { Db, Sql } from '../pg/db.js';

/** Decided repair requests deleted past history retention, with their waiters and attempts. */
export interface RepairsPruned {
  readonly requests: number;
  readonly waiters: number;
  readonly attempts: number;
}

/** Requests deleted per transaction, so no statement holds many row locks for long. */
const PRUNE_BATCH = 1000;

/**
 * History retention of repair requests (`retention.history`): a request decided
 * (repaired, abandoned or cancelled) before `before` is deleted with its waiters and attempts; an
 * open or partial one never is. Dry: counts what would go.
 */
export async function pruneRepairs(sql: Sql, before: Date, dryRun: boolean): Promise<RepairsPruned> {
  const decided = (db: Db) => db`
    from repair_requests r
    where r.state in ('repaired', 'abandoned', 'cancelled') and r.finished_at < ${before}`;
  if (dryRun) {
    const [row] = await sql<[RepairsPruned]>`
      select count(*)::int as requests,
        coalesce(sum((select count(*) from repair_waiters w where w.request_id = r.id)), 0)::int as waiters,
        coalesce(sum((select count(*) from repair_attempts t where t.request_id = r.id)), 0)::int as attempts
      ${decided(sql)}`;
    return row;
  }
  let requests = 0;
  let waiters = 0;
  let attempts = 0;
  for (;;) {
    const done = await sql.begin(async (tx) => {
      // Skip locked: a request the scheduler is moving right now waits for the next round.
      const ids = (
        await tx<{ id: number }[]>`
        select r.id ${decided(tx)} order by r.id limit ${PRUNE_BATCH} for update of r skip locked`
      ).map((r) => r.id);
      if (ids.length === 0) return 0;
      // Waiters and attempts first, to count them (the foreign keys would cascade them silently).
      const [w, t] = await Promise.all([
        tx`delete from repair_waiters where request_id = any(${ids}::int8[])`,
        tx`delete from repair_attempts where request_id = any(${ids}::int8[])`,
      ]);
      await tx`delete from repair_requests where id = any(${ids}::int8[])`;
      waiters += w.count;
      attempts += t.count;
      return ids.length;
    });
    requests += done;
    if (done < PRUNE_BATCH) return { requests, waiters, attempts };
  }
}
