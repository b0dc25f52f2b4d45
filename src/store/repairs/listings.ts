/**
 * The reads of repair requests the API and the metrics show (GET /v1/repairs, the period detail,
 * coverage_rollup_repairs): no writes. The scheduler's verbs are in requests.ts, attempts.ts and follow.ts.
 */

import type { RepairRange, RepairState } from '../../core/repairs/repair.js';
import type { Domain } from '../../core/types.js';
import type { Db } from '../pg/db.js';
import { fromStored, type StoredRange } from './ranges.js';
import { type RawRequestColumns, type RequestColumns, requestColumns } from './request-columns.js';

/** A request as the API shows it. */
export interface RepairRow extends RequestColumns {
  readonly nextAt: Date | null;
  readonly finishedAt: Date | null;
  readonly targetType: string;
  readonly delivery: { deliveredAt: Date | null; deliveries: number; error: string | null } | null;
  readonly waiting: Array<{ rollup: string; period: string }>;
}

type RawRepairRow = RawRequestColumns & {
  next_at: Date | null;
  finished_at: Date | null;
  target_type: string;
  delivered_at: Date | null;
  deliveries: number | null;
  error: string | null;
  waiting: Array<{ rollup: string; period: string }> | null;
};

const rowOf = (r: RawRepairRow): RepairRow => ({
  ...requestColumns(r),
  nextAt: r.next_at,
  finishedAt: r.finished_at,
  targetType: r.target_type,
  delivery:
    r.deliveries === null ? null : { deliveredAt: r.delivered_at, deliveries: r.deliveries, error: r.error },
  waiting: r.waiting ?? [],
});

interface RepairFilter {
  readonly id?: number | undefined;
  readonly state?: RepairState | undefined;
  readonly asset?: string | undefined;
  /** Only ids below this one (the listing's cursor). */
  readonly before?: number | null | undefined;
  /** Requests a period made or waits on. */
  readonly period?: { readonly rollupId: string; readonly lo: number } | undefined;
}

function selectRepairs(db: Db, f: RepairFilter, limit: number) {
  return db<RawRepairRow[]>`
    select r.id, r.asset, r.domain, r.rollup_id, r.period, r.state, r.ranges, r.ranges_total, r.missing_total,
      r.attempt, r.attempts, r.requested_at, r.next_at, r.finished_at, r.target->>'type' as target_type,
      t.delivered_at, t.deliveries, t.error,
      (select json_agg(json_build_object('rollup', w.rollup_id, 'period', w.period_key) order by w.rollup_id, w.period_lo)
        from repair_waiters w where w.request_id = r.id) as waiting
    from repair_requests r
    left join repair_attempts t on t.request_id = r.id and t.attempt = r.attempt
    where true
      ${f.id === undefined ? db`` : db`and r.id = ${f.id}`}
      ${f.state === undefined ? db`` : db`and r.state = ${f.state}`}
      ${f.asset === undefined ? db`` : db`and r.asset = ${f.asset}`}
      ${f.before === undefined || f.before === null ? db`` : db`and r.id < ${f.before}`}
      ${
        f.period === undefined
          ? db``
          : db`and ((r.rollup_id = ${f.period.rollupId} and r.period_lo = ${f.period.lo})
              or r.id in (select request_id from repair_waiters where rollup_id = ${f.period.rollupId} and period_lo = ${f.period.lo}))`
      }
    order by r.id desc
    limit ${limit}`;
}

/** Requests newest first, filtered by state and asset, after the id `before` (the cursor). */
export async function listRepairs(
  db: Db,
  filter: {
    state?: RepairState | undefined;
    asset?: string | undefined;
    before: number | null;
    limit: number;
  },
): Promise<RepairRow[]> {
  return (await selectRepairs(db, filter, filter.limit)).map(rowOf);
}

/** Requests counted by state, for the listing and the metrics. */
export async function countRepairs(
  db: Db,
  filter: { asset?: string | undefined } = {},
): Promise<Record<RepairState, number>> {
  const rows = await db<{ state: RepairState; n: number }[]>`
    select state, count(*)::int8 as n from repair_requests
    ${filter.asset === undefined ? db`` : db`where asset = ${filter.asset}`}
    group by state`;
  const out = { open: 0, partial: 0, repaired: 0, abandoned: 0, cancelled: 0 };
  for (const r of rows) out[r.state] = r.n;
  return out;
}

/** Requests a period made or waits on, newest first (the period detail). */
export async function repairsOfPeriod(
  db: Db,
  rollupId: string,
  lo: number,
  limit = 50,
): Promise<RepairRow[]> {
  return (await selectRepairs(db, { period: { rollupId, lo } }, limit)).map(rowOf);
}

/** One asset's open and partial requests, as the status page lists them. */
export interface OpenRepairsOfAsset {
  readonly asset: string;
  readonly domain: Domain;
  readonly open: number;
  readonly partial: number;
  /** When the oldest of them was requested. */
  readonly oldest: Date;
  /** The ranges their current attempts ask for, and their measure (µs for time, values for integers). */
  readonly ranges: number;
  readonly missing: number;
  /** The first ranges of the oldest request, ascending. */
  readonly first: RepairRange[];
}

/**
 * Open and partial requests per asset, the asset with the oldest request first, at most `limit`
 * assets; `assets` is how many assets have any and `requests` how many there are. `names` keeps
 * only those assets, `q` those whose name contains it (case-insensitive). Reads the partial index
 * of active requests only: the repaired, abandoned and cancelled history is never read.
 */
export async function openRepairsByAsset(
  db: Db,
  filter: { names?: readonly string[] | undefined; q?: string | undefined },
  limit: number,
): Promise<{ rows: OpenRepairsOfAsset[]; assets: number; requests: number }> {
  const rows = await db<
    {
      asset: string;
      domain: Domain;
      open: number;
      partial: number;
      oldest: Date;
      ranges: number;
      missing: number;
      first: StoredRange[];
      assets: number;
      requests: number;
    }[]
  >`
    select asset, min(domain) as domain, count(*) filter (where state = 'open')::int as open,
      count(*) filter (where state = 'partial')::int as partial, min(requested_at) as oldest,
      sum(jsonb_array_length(ranges))::int as ranges,
      sum((select sum((x->>'hi')::int8 - (x->>'lo')::int8) from jsonb_array_elements(ranges) x))::int8 as missing,
      (array_agg(ranges order by requested_at, id))[1] as first,
      count(*) over ()::int as assets, (sum(count(*)) over ())::int as requests
    from repair_requests
    where state in ('open', 'partial')
      ${filter.names === undefined ? db`` : db`and asset = any(${[...filter.names]}::text[])`}
      ${filter.q === undefined ? db`` : db`and strpos(lower(asset), ${filter.q.toLowerCase()}) > 0`}
    group by asset
    order by min(requested_at), asset
    limit ${limit}`;
  return {
    rows: rows.map((r) => ({
      asset: r.asset,
      domain: r.domain,
      open: r.open,
      partial: r.partial,
      oldest: r.oldest,
      ranges: r.ranges,
      missing: Number(r.missing),
      first: r.first.map(fromStored),
    })),
    assets: rows[0]?.assets ?? 0,
    requests: rows[0]?.requests ?? 0,
  };
}
