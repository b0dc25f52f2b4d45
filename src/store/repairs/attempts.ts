/** Repair attempts: stored with their payload, then delivered and recorded. */

import type { RepairPayload } from '../../core/repair-payload.js';
import type { Db, Tx } from '../pg/db.js';

/** Stores new attempts, due at once, and stops delivering the older attempts they supersede. */
export async function insertAttempts(
  tx: Tx,
  attempts: ReadonlyArray<{ id: number; attempt: number; payload: RepairPayload; leaseToken: number | null }>,
  now: Date,
): Promise<void> {
  if (attempts.length === 0) return;
  await tx`
    insert into repair_attempts (request_id, attempt, idempotency_key, payload, lease_token, created_at, due_at)
    select u.id, u.attempt, u.payload->>'idempotency_key', u.payload, u.lease_token, ${now}, ${now}
    from jsonb_to_recordset(${tx.json(
      attempts.map((a) => ({
        id: a.id,
        attempt: a.attempt,
        payload: a.payload,
        lease_token: a.leaseToken,
      })) as never,
    )}) as u(id int8, attempt int, payload jsonb, lease_token int8)
    on conflict do nothing`;
  // A new attempt supersedes its request's older ones: it carries what is still missing, so an
  // older one still failing to reach its target is not retried beside it (a webhook that is down
  // would otherwise be sent every attempt so far, each with its own backoff).
  await tx`
    update repair_attempts a set due_at = null
    from unnest(${attempts.map((a) => a.id)}::int8[], ${attempts.map((a) => a.attempt)}::int[]) as u(id, attempt)
    where a.request_id = u.id and a.attempt < u.attempt and a.due_at is not null`;
}

/** An attempt whose delivery is due. */
export interface DueAttempt {
  readonly requestId: number;
  readonly attempt: number;
  readonly payload: RepairPayload;
  readonly target: unknown;
  readonly deliveries: number;
}

export async function dueAttempts(db: Db, now: Date, limit: number): Promise<DueAttempt[]> {
  const rows = await db<
    { request_id: number; attempt: number; payload: RepairPayload; target: unknown; deliveries: number }[]
  >`
    select a.request_id, a.attempt, a.payload, r.target, a.deliveries
    from repair_attempts a join repair_requests r on r.id = a.request_id
    where a.due_at is not null and a.due_at <= ${now}
    order by a.due_at, a.request_id desc
    limit ${limit}`;
  return rows.map((r) => ({
    requestId: r.request_id,
    attempt: r.attempt,
    payload: r.payload,
    target: r.target,
    deliveries: r.deliveries,
  }));
}

/**
 * Whether any request is open or partial, when an attempt's delivery is next due, and when a
 * request's next attempt (or abandonment) is: one probe of three partial indexes, so a pass pays
 * one round trip for them however many requests are open.
 */
export async function repairWork(
  db: Db,
): Promise<{ active: boolean; deliveryAt: Date | null; nextAt: Date | null }> {
  const [row] = await db<{ active: boolean; delivery_at: Date | null; next_at: Date | null }[]>`
    select exists (select 1 from repair_requests where state in ('open', 'partial')) as active,
      (select min(due_at) from repair_attempts where due_at is not null) as delivery_at,
      (select min(next_at) from repair_requests where state in ('open', 'partial')) as next_at`;
  return { active: row?.active ?? false, deliveryAt: row?.delivery_at ?? null, nextAt: row?.next_at ?? null };
}

/** A delivery's outcome: accepted, refused for good, or to be tried again after `retryMs`. */
export async function recordAttemptDelivery(
  db: Db,
  ref: { requestId: number; attempt: number },
  outcome: { ok: true } | { ok: false; error: string; retryMs: number | null },
  now: Date,
): Promise<void> {
  if (outcome.ok) {
    await db`
      update repair_attempts set delivered_at = ${now}, due_at = null, deliveries = deliveries + 1, error = null
      where request_id = ${ref.requestId} and attempt = ${ref.attempt} and due_at is not null`;
    return;
  }
  const due = outcome.retryMs === null ? null : new Date(now.getTime() + outcome.retryMs);
  await db`
    update repair_attempts set due_at = ${due}, deliveries = deliveries + 1, error = ${outcome.error}
    where request_id = ${ref.requestId} and attempt = ${ref.attempt} and due_at is not null`;
}
