/**
 * Every statement on repair_requests, repair_waiters and repair_attempts (SPEC §15), as named
 * verbs: the rules are core/repair.ts; these only load and store. Writes that decide (a request
 * made, an attempt made, a state changed) run in the caller's transaction, which the scheduler
 * fences by its lease token.
 */

import type { RepairKind, RepairRange, RepairState } from '../../core/repair.js';
import type { RepairPayload } from '../../core/repair-payload.js';
import type { Domain, Interval, Segment, SegmentState } from '../../core/types.js';
import type { Db, Sql, Tx } from '../pg/db.js';

/** Ranges as stored in `ranges` (jsonb). */
export interface StoredRange {
  lo: number;
  hi: number;
  kind: RepairKind;
  required_version: string | null;
}

const toStored = (r: RepairRange): StoredRange => ({
  lo: r.start,
  hi: r.end,
  kind: r.kind,
  required_version: r.requiredVersion,
});
export const fromStored = (r: StoredRange): RepairRange => ({
  start: r.lo,
  end: r.hi,
  kind: r.kind,
  requiredVersion: r.required_version,
});

/** An int8multirange literal of normalized intervals. */
function multirange(set: readonly Interval[]): string {
  return `{${set.map((r) => `[${r.start},${r.end})`).join(',')}}`;
}

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

async function insertAttempts(
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

/** An active request as following it needs it. */
export interface FollowedRequest {
  readonly id: number;
  readonly asset: string;
  readonly domain: Domain;
  readonly rollupId: string | null;
  readonly period: RepairPayload['period'];
  readonly state: RepairState;
  readonly ranges: RepairRange[];
  readonly rangesTotal: number;
  readonly missingTotal: number;
  readonly attempt: number;
  readonly attempts: number;
  readonly everyMs: number;
  readonly requestedAt: Date;
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
    {
      id: number;
      asset: string;
      domain: Domain;
      rollup_id: string | null;
      period: RepairPayload['period'];
      state: RepairState;
      ranges: StoredRange[];
      ranges_total: number;
      missing_total: number;
      attempt: number;
      attempts: number;
      every_ms: number;
      requested_at: Date;
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
    }[]
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
    id: r.id,
    asset: r.asset,
    domain: r.domain,
    rollupId: r.rollup_id,
    period: r.period,
    state: r.state,
    ranges: r.ranges.map(fromStored),
    rangesTotal: r.ranges_total,
    missingTotal: r.missing_total,
    attempt: r.attempt,
    attempts: r.attempts,
    everyMs: r.every_ms,
    requestedAt: r.requested_at,
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

/** Wakes the lease holder (a request made by hand is delivered by it at once). */
export async function wakeScheduler(db: Db, channel: string): Promise<void> {
  await db`select pg_notify(${channel}, '')`;
}

/** Decided repair requests deleted past history retention, with their waiters and attempts. */
export interface RepairsPruned {
  readonly requests: number;
  readonly waiters: number;
  readonly attempts: number;
}

/** Requests deleted per transaction, so no statement holds many row locks for long. */
const PRUNE_BATCH = 1000;

/**
 * History retention of repair requests (SPEC §10 `retention.history`, §15): a request decided
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
