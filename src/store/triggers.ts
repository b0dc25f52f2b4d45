/**
 * Statements on `triggers`, the record of trigger decisions: one named verb each, saying
 * why it is shaped as it is. The evaluation inserts (in its fenced transaction); the API, the
 * status page and the CLI read. Deliveries are recorded with their run (src/store/runs/report.ts), and
 * compaction of old rows is retention's (src/store/upkeep/retention.ts).
 */
import type { Db, Tx } from './pg/db.js';

/** One trigger decision, as the evaluation makes it. */
export interface TriggerRow {
  lo: number;
  generation: number;
  key: string;
  reason: string;
  payload: unknown;
}

/**
 * Records trigger decisions in the evaluation's transaction, with the lease token that made them
 * and the target as it was then (secrets redacted): one statement for the batch. Delivery comes
 * after the commit, so a decision is never delivered and then rolled back.
 */
export async function writeTriggers(
  tx: Tx,
  rollupId: string,
  triggers: readonly TriggerRow[],
  target: unknown,
  token: number,
  now: Date,
): Promise<void> {
  if (triggers.length === 0) return;
  await tx`
    insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, decided_at)
    select ${rollupId}, t.lo, t.generation, t.key, t.reason, ${token}, ${tx.json(target as never)}, t.payload::jsonb, ${now}
    from unnest(
      ${triggers.map((t) => t.lo)}::int8[], ${triggers.map((t) => t.generation)}::int4[],
      ${triggers.map((t) => t.key)}::text[], ${triggers.map((t) => t.reason)}::text[],
      ${triggers.map((t) => JSON.stringify(t.payload))}::text[]
    ) as t(lo, generation, key, reason, payload)`;
}

/** Every decision made for one period, oldest first, with its delivery: the period detail's list. */
export interface PeriodTrigger {
  generation: number;
  reason: string;
  idempotency_key: string;
  lease_token: number;
  decided_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  attempts: number;
  last_error: string | null;
}

/** The decisions made for the period starting at `lo`: an index range on the primary key. */
export async function triggersOfPeriod(db: Db, rollupId: string, lo: number): Promise<PeriodTrigger[]> {
  return db<PeriodTrigger[]>`
    select generation, reason, idempotency_key, lease_token, decided_at, delivered_at, failed_at, attempts, last_error
    from triggers where rollup_id = ${rollupId} and period_lo = ${lo} order by generation`;
}

/** A rollup's newest decision, with the key of its period (the status page's "last trigger"). */
export interface LatestTrigger extends Omit<PeriodTrigger, 'idempotency_key' | 'lease_token'> {
  key: string;
}

/** The rollup's newest decision (of one instant, the latest period's), or undefined before its first. */
export async function latestTrigger(db: Db, rollupId: string): Promise<LatestTrigger | undefined> {
  const [latest] = await db<LatestTrigger[]>`
    select p.key, t.generation, t.reason, t.decided_at, t.delivered_at, t.failed_at, t.attempts, t.last_error
    from triggers t join periods p on p.rollup_id = t.rollup_id and p.lo = t.period_lo
    where t.rollup_id = ${rollupId}
    order by t.decided_at desc, t.period_lo desc, t.generation desc limit 1`;
  return latest;
}

/** Per rollup: the idempotency key of its newest decision and how many are still undelivered (CLI status). */
export async function outboxSummary(
  db: Db,
  rollupIds: readonly string[],
): Promise<Array<{ id: string; last_trigger: string | null; undelivered: number }>> {
  return db<{ id: string; last_trigger: string | null; undelivered: number }[]>`
    select r.id,
      -- A pass decides many periods at one instant (a first start's deadline catch-up): the latest
      -- period of the latest generation among them, not whichever row the index gives first.
      (select idempotency_key from triggers where rollup_id = r.id
        order by decided_at desc, period_lo desc, generation desc limit 1) as last_trigger,
      (select count(*)::int from triggers where rollup_id = r.id and delivered_at is null and failed_at is null) as undelivered
    from unnest(${rollupIds as string[]}::text[]) as r(id)`;
}
