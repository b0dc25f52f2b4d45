/**
 * Following repair requests: which active requests need a look, and the changes a
 * look decided (core/repair.ts `followRequest`), applied in the caller's fenced transaction.
 */

import type { RepairRange, RepairState } from '../../core/repair.js';
import type { RepairPayload } from '../../core/repair-payload.js';
import type { Segment, SegmentState } from '../../core/types.js';
import type { Db, Tx } from '../pg/db.js';
import { insertAttempts } from './attempts.js';
import { toStored } from './ranges.js';
import { type RawRequestColumns, type RequestColumns, requestColumns } from './request-columns.js';

/** An active request as following it needs it. */
export interface FollowedRequest extends RequestColumns {
  readonly everyMs: number;
  readonly nextAt: Date;
  readonly lastSeq: number;
  readonly waiters: Array<{ rollupId: string; lo: number; state: string | null }>;
  readonly segments: Segment[];
}

/**
 * Which active requests a follow looks at: `all` (a new lease, a reconnect, a periodic check) or
 * those a pass learnt about: due now, on assets with new events, waited on by decided periods.
 */
export type FollowFocus =
  | { readonly kind: 'all' }
  | {
      readonly kind: 'some';
      /** Requests whose next attempt (or abandonment) is due. */
      readonly due: boolean;
      /** Assets named by commit notifications since the last follow. */
      readonly assets: readonly string[];
      /** Periods an evaluation decided (triggered or missed) since the last follow. */
      readonly periods: ReadonlyArray<{ readonly rollupId: string; readonly lo: number }>;
    };

/**
 * The ids a focused follow looks at, each part an index probe (repair_requests_due,
 * repair_requests_active, repair_waiters_period): never a scan of every open request.
 */
function focusedIds(db: Db, focus: Extract<FollowFocus, { kind: 'some' }>, now: Date, limit: number) {
  const parts = [];
  if (focus.due)
    parts.push(db`(select id from repair_requests where state in ('open', 'partial') and next_at <= ${now}
      order by next_at limit ${limit})`);
  if (focus.assets.length > 0)
    parts.push(db`(select r.id from repair_requests r join assets a on a.name = r.asset
      where r.asset = any(${[...focus.assets]}::text[]) and r.state in ('open', 'partial')
        and a.last_seq > r.seen_seq)`);
  if (focus.periods.length > 0)
    parts.push(db`(select w.request_id from unnest(${focus.periods.map((p) => p.rollupId)}::text[],
        ${focus.periods.map((p) => p.lo)}::int8[]) as d(rollup_id, lo)
      join repair_waiters w on w.rollup_id = d.rollup_id and w.period_lo = d.lo)`);
  return parts.reduce((all, part) => db`${all} union ${part}`);
}

/**
 * Active requests that need a look now, newest first, at most `limit`: their next attempt is due,
 * their asset has newer events than they saw, or a period waiting on one was decided. Each comes
 * with its waiters' stored states and the segments overlapping what it asked for. With focus
 * `all`, every active request is considered (a scan of them: every 5 minutes, not every pass).
 */
export async function requestsToFollow(
  db: Db,
  now: Date,
  limit: number,
  focus: FollowFocus = { kind: 'all' },
): Promise<FollowedRequest[]> {
  if (focus.kind === 'some' && !focus.due && focus.assets.length === 0 && focus.periods.length === 0)
    return [];
  const which =
    focus.kind === 'some'
      ? db`r.id in (${focusedIds(db, focus, now, limit)})`
      : db`(r.next_at <= ${now}
      or coalesce(a.last_seq, 0) > r.seen_seq
      or exists (
        select 1 from repair_waiters w join periods p on p.rollup_id = w.rollup_id and p.lo = w.period_lo
        where w.request_id = r.id and p.state in ('triggered', 'missed'))
      or (r.rollup_id is not null and not exists (select 1 from repair_waiters w where w.request_id = r.id)))`;
  const rows = await db<
    (RawRequestColumns & {
      every_ms: number;
      next_at: Date;
      last_seq: number;
      waiters: Array<{ rollup_id: string; lo: number; state: string | null }> | null;
      segments: Array<{
        lo: number;
        hi: number;
        state: SegmentState;
        version: string | null;
        rv: string | null;
      }> | null;
    })[]
  >`
    select r.id, r.asset, r.domain, r.rollup_id, r.period, r.state, r.ranges, r.ranges_total, r.missing_total,
      r.attempt, r.attempts, r.every_ms, r.requested_at, r.next_at, coalesce(a.last_seq, 0) as last_seq,
      (select json_agg(json_build_object('rollup_id', w.rollup_id, 'lo', w.period_lo, 'state', p.state))
        from repair_waiters w left join periods p on p.rollup_id = w.rollup_id and p.lo = w.period_lo
        where w.request_id = r.id) as waiters,
      (select json_agg(json_build_object('lo', lower(s.span), 'hi', upper(s.span), 'state', s.state,
          'version', s.version, 'rv', s.required_version))
        from segments s where s.asset_id = a.id and s.span && r.span) as segments
    from repair_requests r left join assets a on a.name = r.asset
    where r.state in ('open', 'partial') and ${which}
    order by r.id desc
    limit ${limit}`;
  return rows.map((r) => ({
    ...requestColumns(r),
    everyMs: r.every_ms,
    nextAt: r.next_at,
    lastSeq: r.last_seq,
    waiters: (r.waiters ?? []).map((w) => ({ rollupId: w.rollup_id, lo: Number(w.lo), state: w.state })),
    segments: (r.segments ?? []).map((s) => ({
      start: Number(s.lo),
      end: Number(s.hi),
      state: s.state,
      version: s.version,
      requiredVersion: s.rv,
    })),
  }));
}

/** What following a request decided, to store in the caller's (fenced) transaction. */
export interface FollowChange {
  readonly id: number;
  readonly state: RepairState;
  readonly seenSeq: number;
  /** Periods that no longer wait on it (decided otherwise). */
  readonly leftWaiters: ReadonlyArray<{ rollupId: string; lo: number }>;
  /** A new attempt: its number, ranges and payload; the request is due again at `nextAt`. */
  readonly resend: { attempt: number; ranges: readonly RepairRange[]; payload: RepairPayload } | null;
  readonly nextAt: Date | null;
  readonly leaseToken: number;
}

export async function applyFollow(tx: Tx, changes: readonly FollowChange[], now: Date): Promise<void> {
  if (changes.length === 0) return;
  const left = changes.flatMap((c) => c.leftWaiters.map((w) => ({ id: c.id, ...w })));
  const writes: Promise<unknown>[] = [
    tx`
      update repair_requests r set
        state = u.state,
        seen_seq = greatest(r.seen_seq, u.seen_seq),
        next_at = u.next_at,
        attempt = coalesce(u.attempt, r.attempt),
        ranges = coalesce(u.ranges, r.ranges),
        lease_token = u.lease_token,
        finished_at = case when u.state in ('open', 'partial') then null else ${now}::timestamptz end
      from jsonb_to_recordset(${tx.json(
        changes.map((c) => ({
          id: c.id,
          state: c.state,
          seen_seq: c.seenSeq,
          next_at: c.nextAt?.toISOString() ?? null,
          attempt: c.resend?.attempt ?? null,
          ranges: c.resend ? c.resend.ranges.map(toStored) : null,
          lease_token: c.leaseToken,
        })) as never,
      )}) as u(id int8, state text, seen_seq int8, next_at timestamptz, attempt int, ranges jsonb, lease_token int8)
      where r.id = u.id and r.state in ('open', 'partial')`,
  ];
  if (left.length > 0) {
    writes.push(tx`
      delete from repair_waiters w using unnest(${left.map((l) => l.id)}::int8[], ${left.map((l) => l.rollupId)}::text[],
        ${left.map((l) => l.lo)}::int8[]) as u(id, rollup_id, lo)
      where w.request_id = u.id and w.rollup_id = u.rollup_id and w.period_lo = u.lo`);
  }
  // A request that stops being followed leaves nothing to deliver: an attempt not yet delivered is dropped.
  const finished = changes.filter((c) => c.state !== 'open' && c.state !== 'partial').map((c) => c.id);
  if (finished.length > 0)
    writes.push(
      tx`update repair_attempts set due_at = null where request_id = any(${finished}::int8[]) and due_at is not null`,
    );
  await Promise.all(writes);
  await insertAttempts(
    tx,
    changes.flatMap((c) =>
      c.resend
        ? [{ id: c.id, attempt: c.resend.attempt, payload: c.resend.payload, leaseToken: c.leaseToken }]
        : [],
    ),
    now,
  );
}
