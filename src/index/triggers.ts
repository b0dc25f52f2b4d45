/**
 * Every statement on `triggers`, the outbox of trigger decisions (SPEC §7): one named verb each,
 * saying why it is shaped as it is. The evaluation inserts (in its fenced transaction), the
 * dispatcher reads what is due and records each attempt, the API, status page and CLI read.
 * Compaction of old rows is retention's (src/index/retention.ts).
 */
import type { TriggerPayload } from '../core/trigger.js';
import type { Db, Sql, Tx } from './db.js';

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

/** An undelivered trigger, as the dispatcher reads it; `Target` is the stored (redacted) target. */
export interface OutboxRow<Target = unknown> {
  rollup_id: string;
  period_lo: number;
  generation: number;
  idempotency_key: string;
  lease_token: number;
  attempts: number;
  target: Target;
  payload: TriggerPayload;
}

/** Which trigger an attempt is recorded on. */
export type TriggerId = Pick<OutboxRow, 'rollup_id' | 'period_lo' | 'generation'>;

/**
 * Up to `limit` undelivered triggers due now, newest decision first: a fresh trigger is not
 * queued behind a burst of catch-up decisions or a backlog of retries.
 */
export async function dueTriggers<Target>(sql: Sql, limit: number): Promise<OutboxRow<Target>[]> {
  return sql<OutboxRow<Target>[]>`
    select rollup_id, period_lo, generation, idempotency_key, lease_token, attempts, target, payload
    from triggers
    where delivered_at is null and failed_at is null and next_attempt_at <= now()
    order by decided_at desc limit ${limit}`;
}

const where = (sql: Sql, t: TriggerId) =>
  sql`rollup_id = ${t.rollup_id} and period_lo = ${t.period_lo} and generation = ${t.generation}`;

/** A delivery the target accepted: never attempted again. */
export async function recordDelivered(sql: Sql, t: TriggerId): Promise<void> {
  await sql`update triggers set delivered_at = now(), attempts = attempts + 1, last_error = null where ${where(sql, t)}`;
}

/** A transient failure: attempted again after `delayMs` (database time, as `dueTriggers` compares). */
export async function recordRetry(sql: Sql, t: TriggerId, error: string, delayMs: number): Promise<void> {
  await sql`
    update triggers set attempts = attempts + 1, last_error = ${error},
      next_attempt_at = now() + make_interval(secs => ${delayMs / 1000})
    where ${where(sql, t)}`;
}

/** A final refusal (4xx): recorded and not retried. */
export async function recordFailed(sql: Sql, t: TriggerId, error: string): Promise<void> {
  await sql`update triggers set attempts = attempts + 1, last_error = ${error}, failed_at = now() where ${where(sql, t)}`;
}

/** When the next undelivered trigger is due, as a subquery for the scheduler's timer. */
export function nextDeliverySql(sql: Sql) {
  return sql`select min(next_attempt_at) from triggers where delivered_at is null and failed_at is null`;
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

/** The rollup's newest decision, or undefined before its first. */
export async function latestTrigger(db: Db, rollupId: string): Promise<LatestTrigger | undefined> {
  const [latest] = await db<LatestTrigger[]>`
    select p.key, t.generation, t.reason, t.decided_at, t.delivered_at, t.failed_at, t.attempts, t.last_error
    from triggers t join periods p on p.rollup_id = t.rollup_id and p.lo = t.period_lo
    where t.rollup_id = ${rollupId}
    order by t.decided_at desc limit 1`;
  return latest;
}

/** Per rollup: the idempotency key of its newest decision and how many are still undelivered (CLI status). */
export async function outboxSummary(
  db: Db,
  rollupIds: readonly string[],
): Promise<Array<{ id: string; last_trigger: string | null; undelivered: number }>> {
  return db<{ id: string; last_trigger: string | null; undelivered: number }[]>`
    select r.id,
      (select idempotency_key from triggers where rollup_id = r.id order by decided_at desc limit 1) as last_trigger,
      (select count(*)::int from triggers where rollup_id = r.id and delivered_at is null and failed_at is null) as undelivered
    from unnest(${rollupIds as string[]}::text[]) as r(id)`;
}
