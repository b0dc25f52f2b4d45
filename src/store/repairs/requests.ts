/**
 * Making repair requests: the lock that serialises them per asset, the requests already
 * held, new requests with their first attempts and waiters, and the wake-up of the lease holder.
 * Writes run in the caller's transaction, which the scheduler fences by its lease token; the
 * rules are core/repair.ts.
 */

import type { RepairRange, RepairState } from '../../core/repair.js';
import type { RepairPayload } from '../../core/repair-payload.js';
import type { Domain, Interval } from '../../core/types.js';
import type { Db, Tx } from '../pg/db.js';
import { insertAttempts } from './attempts.js';
import { multirange, toStored } from './ranges.js';

/**
 * Serialises requests on these assets until the transaction ends (the scheduler's plan and a
 * request made by hand), in one order so two callers never wait on each other crosswise.
 */
export async function lockRepairAssets(tx: Tx, assets: readonly string[]): Promise<void> {
  const sorted = [...new Set(assets)].sort();
  if (sorted.length === 0) return;
  await tx`
    select pg_advisory_xact_lock(hashtext('coverage-rollup.repair'), hashtext(a))
    from unnest(${sorted}::text[]) with ordinality as u(a, i) order by i`;
}

/** Open, partial and abandoned requests on these assets whose span meets `within`. */
export async function heldRequests(
  db: Db,
  assets: readonly string[],
  within: readonly Interval[],
): Promise<Array<{ id: number; asset: string; span: Interval[]; active: boolean }>> {
  if (assets.length === 0 || within.length === 0) return [];
  const rows = await db<{ id: number; asset: string; state: RepairState; span: Array<[number, number]> }[]>`
    select id, asset, state,
      (select json_agg(json_build_array(lower(r), upper(r)) order by lower(r)) from unnest(span) r) as span
    from repair_requests
    where state in ('open', 'partial', 'abandoned') and asset = any(${[...assets]}::text[])
      and span && ${multirange(within)}::int8multirange`;
  return rows.map((r) => ({
    id: r.id,
    asset: r.asset,
    span: (r.span ?? []).map(([start, end]) => ({ start, end })),
    active: r.state !== 'abandoned',
  }));
}

export interface MadeRequest {
  readonly asset: string;
  readonly domain: Domain;
  readonly rollupId: string | null;
  readonly periodLo: number | null;
  readonly period: RepairPayload['period'];
  readonly ranges: readonly RepairRange[];
  readonly rangesTotal: number;
  readonly missingTotal: number;
  readonly attempts: number;
  readonly everyMs: number;
  readonly target: unknown;
  readonly leaseToken: number | null;
  /**
   * assets.last_seq of the coverage its ranges were read from: it is followed once its asset has
   * newer events. Left out (0), the first follow looks at it whatever happened since.
   */
  readonly seenSeq?: number;
}

/**
 * Makes requests (and their first attempts, through `payloadOf` once each id is known) in the
 * caller's transaction; returns their ids in order.
 */
export async function makeRequests(
  tx: Tx,
  made: readonly MadeRequest[],
  now: Date,
  payloadOf: (request: MadeRequest, id: number) => RepairPayload,
): Promise<number[]> {
  if (made.length === 0) return [];
  const rows = await tx<{ id: number; ord: number }[]>`
    insert into repair_requests (asset, domain, rollup_id, period_lo, period, span, ranges, ranges_total,
      missing_total, attempts, every_ms, target, lease_token, requested_at, next_at, seen_seq)
    select u.asset, u.domain, u.rollup_id, u.period_lo, u.period, u.span::int8multirange, u.ranges,
      u.ranges_total, u.missing_total, u.attempts, u.every_ms, u.target, u.lease_token, ${now},
      ${now}::timestamptz + make_interval(secs => u.every_ms / 1000.0), u.seen_seq
    from jsonb_to_recordset(${tx.json(
      made.map((m, ord) => ({
        ord,
        asset: m.asset,
        domain: m.domain,
        rollup_id: m.rollupId,
        period_lo: m.periodLo,
        period: m.period,
        span: multirange(m.ranges),
        ranges: m.ranges.map(toStored),
        ranges_total: m.rangesTotal,
        missing_total: m.missingTotal,
        attempts: m.attempts,
        every_ms: m.everyMs,
        target: m.target,
        lease_token: m.leaseToken,
        seen_seq: m.seenSeq ?? 0,
      })) as never,
    )}) as u(ord int, asset text, domain text, rollup_id text, period_lo int8, period jsonb, span text,
      ranges jsonb, ranges_total int, missing_total int8, attempts int, every_ms int8, target jsonb, lease_token int8,
      seen_seq int8)
    order by u.ord
    returning id`;
  // Ids of a multi-row insert follow the order of its select (one bigserial, one statement).
  const ids = rows.map((r) => r.id);
  await insertAttempts(
    tx,
    made.map((m, i) => ({
      id: ids[i]!,
      attempt: 1,
      payload: payloadOf(m, ids[i]!),
      leaseToken: m.leaseToken,
    })),
    now,
  );
  return ids;
}

/** Periods waiting on requests; a period already waiting stays as it is. */
export async function addWaiters(
  tx: Tx,
  waiters: ReadonlyArray<{ id: number; rollupId: string; lo: number; key: string }>,
): Promise<void> {
  if (waiters.length === 0) return;
  await tx`
    insert into repair_waiters (request_id, rollup_id, period_lo, period_key)
    select * from unnest(${waiters.map((w) => w.id)}::int8[], ${waiters.map((w) => w.rollupId)}::text[],
      ${waiters.map((w) => w.lo)}::int8[], ${waiters.map((w) => w.key)}::text[])
    on conflict do nothing`;
}

/** Wakes the lease holder (a request made by hand is delivered by it at once). */
export async function wakeScheduler(db: Db, channel: string): Promise<void> {
  await db`select pg_notify(${channel}, '')`;
}
