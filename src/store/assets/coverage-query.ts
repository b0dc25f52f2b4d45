import {
  type BoundedCoverage,
  boundCoverage,
  DEFAULT_ORDERS,
  edgeSuffices,
  type ListOrders,
  type Order,
  scanOfAll,
  type WindowScan,
} from '../../core/coverage-answer.js';
import type { Interval, Segment } from '../../core/types.js';
import type { Db } from '../pg/db.js';
import type { AssetRow } from './assets.js';

/** What never changes about an asset once it exists: enough to parse a window and find its rows. */
export type AssetFacts = Pick<AssetRow, 'id' | 'name' | 'domain' | 'zone'>;

export interface CoverageRequest {
  readonly window: Interval;
  /** Most entries in each list. */
  readonly limit: number;
  readonly orders?: ListOrders | undefined;
}

/** The bounded answer plus the asset's freshness facts, read in the same snapshot. */
export interface WindowCoverage extends BoundedCoverage {
  readonly coveredUntil: number | null;
  /** Epoch ms. */
  readonly lastEventAt: number | null;
}

type SegmentTuple = [number, number, string | null, Segment['state'], string | null];

interface TotalsRow {
  n: number;
  adjacent: number;
  replay_required: number;
  present: number;
  complete: number;
  first_lo: number | null;
  last_hi: number | null;
}

/**
 * Coverage of one asset over a window, bounded: its cost grows with the segments the
 * window overlaps and with `limit`, not with the holes it reports. The first statement reads the
 * asset's extent and freshness facts (the extent grows with every commit, so it is never cached)
 * and, when the window overlaps at most SMALL_WINDOW segments, all of them: one round trip, as
 * most answers need. A larger window is totalled in SQL (windowTotals); the lists come from the
 * few segments nearest the asked end, read through the index from a part of the window at that
 * end (the replay_required ones from the whole window, only when there are some).
 */
export async function queryCoverage(
  sql: Db,
  asset: Pick<AssetRow, 'id'>,
  request: CoverageRequest,
): Promise<WindowCoverage> {
  const { window, limit } = request;
  const orders = request.orders ?? DEFAULT_ORDERS;
  const head = await windowHead(sql, asset.id, window);
  const rows = headSegments(head);
  const scan =
    rows.length <= SMALL_WINDOW
      ? scanOfAll(window, rows, orders, limit)
      : await scanLargeWindow(sql, asset.id, window, orders, limit, rows[0]!);
  const { covered_lo: lo, covered_hi: hi } = head;
  return {
    ...boundCoverage({
      window,
      extent: lo !== null && hi !== null ? { start: lo, end: hi } : null,
      limit,
      orders,
      scan,
    }),
    coveredUntil: head.covered_until,
    lastEventAt: head.last_event_at === null ? null : head.last_event_at.getTime(),
  };
}

/** Up to this many overlapping segments, the first read returns them all and Node totals them. */
const SMALL_WINDOW = 1000;

/** The overlapping segments come back as one JSON array per column: parsing a row each cost more. */
interface HeadRow {
  covered_lo: number | null;
  covered_hi: number | null;
  covered_until: number | null;
  last_event_at: Date | null;
  lo: number[] | null;
  hi: number[] | null;
  version: (string | null)[] | null;
  state: Segment['state'][] | null;
  required_version: (string | null)[] | null;
}

function headSegments(row: HeadRow): Segment[] {
  const out: Segment[] = [];
  const n = row.lo?.length ?? 0;
  for (let i = 0; i < n; i++) {
    out.push({
      start: row.lo![i]!,
      end: row.hi![i]!,
      version: row.version![i]!,
      state: row.state![i]!,
      requiredVersion: row.required_version![i]!,
    });
  }
  return out;
}

/**
 * The asset's extent and freshness facts, and the overlapping segments if there are at most
 * SMALL_WINDOW of them (the scan stops after one more, so a large window costs little here).
 */
async function windowHead(sql: Db, assetId: number, window: Interval): Promise<HeadRow> {
  const [row] = await sql<HeadRow[]>`
    select a.covered_lo, a.covered_hi, ${coveredUntil(sql)} as covered_until,
      ${lastEventAt(sql)} as last_event_at,
      s.*
    from assets a, lateral (
      select json_agg(lo) as lo, json_agg(hi) as hi, json_agg(version) as version,
        json_agg(state) as state, json_agg(required_version) as required_version
      from (
        select lower(span) as lo, upper(span) as hi, version, state, required_version
        from segments
        where asset_id = a.id and span && int8range(${window.start}, ${Math.max(window.start, window.end)})
        limit ${SMALL_WINDOW + 1}
      ) r
    ) s
    where a.id = ${assetId}`;
  if (!row) throw new Error(`asset ${assetId} vanished`);
  return row;
}

/** Totals from SQL, lists from the segments nearest the asked end. */
async function scanLargeWindow(
  sql: Db,
  assetId: number,
  window: Interval,
  orders: ListOrders,
  limit: number,
  sample: Segment,
): Promise<WindowScan> {
  const totals = await windowTotals(sql, assetId, window, sample);
  // Usually enough to find limit + 1 holes; more only when many segments touch (versions change).
  let edgeSize = 2 * (limit + 1);
  const [firstEdge, batchEdge, replayRequired] = await Promise.all([
    nearest(sql, assetId, window, totals, orders.ranges, edgeSize),
    orders.batches === orders.ranges ? [] : nearest(sql, assetId, window, totals, orders.batches, limit + 1),
    // Most windows hold nothing replay_required: then this scan is skipped.
    totals.replay_required > 0
      ? segmentsNearest(sql, assetId, window, orders.ranges, limit + 1, 'replay_required')
      : [],
  ]);
  let edge = firstEdge;
  while (!edgeSuffices(window, edge, totals.n, orders.ranges, limit)) {
    edgeSize *= 4;
    edge = await nearest(sql, assetId, window, totals, orders.ranges, edgeSize);
  }
  return {
    count: totals.n,
    adjacent: totals.adjacent,
    replayRequiredCount: totals.replay_required,
    present: totals.present,
    complete: totals.complete,
    first: totals.first_lo,
    last: totals.last_hi,
    edge,
    replayRequired,
    batchEdge: orders.batches === orders.ranges ? edge : batchEdge,
  };
}

const toSegments = (rows: SegmentTuple[] | null): Segment[] =>
  (rows ?? []).map(([start, end, version, state, requiredVersion]) => ({
    start,
    end,
    version,
    state,
    requiredVersion,
  }));

/**
 * Exact totals over the segments overlapping the window, in one pass without sorting: sums
 * clipped with least/greatest (cheaper per row than range operators). Only the count of segments
 * that touch their predecessor needs order, and the index is maximally merged: segments that
 * touch differ in version or state. So when every overlapping segment has the same version and
 * state (a stream at one version, the usual case), none touch; otherwise a second statement
 * counts them in one sorted pass over two narrow columns. Every segment is compared with `sample`,
 * one the first read already returned: a subquery for "any one overlapping segment" (LIMIT 1) was
 * re-run per row, or read by a scan of the whole table, by a planner without statistics.
 */
async function windowTotals(sql: Db, assetId: number, window: Interval, sample: Segment): Promise<TotalsRow> {
  const { start, end } = window;
  const range = sql`int8range(${start}, ${Math.max(start, end)})`;
  const [row] = await sql<(Omit<TotalsRow, 'adjacent'> & { uniform: boolean | null })[]>`
    select count(*)::int8 as n,
      count(*) filter (where state = 'replay_required')::int8 as replay_required,
      coalesce(sum(least(hi, ${end}) - greatest(lo, ${start})), 0)::int8 as present,
      coalesce(sum(least(hi, ${end}) - greatest(lo, ${start})) filter (where state = 'complete'), 0)::int8 as complete,
      min(lo) as first_lo, max(hi) as last_hi,
      bool_and(version is not distinct from ${sample.version}::text and state = ${sample.state}::text
        and required_version is not distinct from ${sample.requiredVersion}::text) as uniform
    from (
      select lower(span) as lo, upper(span) as hi, version, state, required_version
      from segments
      where asset_id = ${assetId} and span && ${range}
    ) o`;
  const { uniform, ...totals } = row!;
  if (uniform !== false || totals.n < 2) return { ...totals, adjacent: 0 };
  const [touching] = await sql<{ adjacent: number }[]>`
    select count(*) filter (where prev_hi = lo)::int8 as adjacent
    from (
      select lo, lag(hi) over (order by lo) as prev_hi
      from (select lower(span) as lo, upper(span) as hi from segments where asset_id = ${assetId} and span && ${range}) o
    ) x`;
  return { ...totals, adjacent: touching!.adjacent };
}

/**
 * The `count` segments nearest one end of the window, read from a part of the window at that end
 * sized from the totals' density (twice what a uniform spread needs), so the GiST index hands over
 * a few hundred rows instead of every overlapping one; the part grows until it holds `count`.
 */
async function nearest(
  sql: Db,
  assetId: number,
  window: Interval,
  totals: TotalsRow,
  order: Order,
  count: number,
): Promise<Segment[]> {
  if (totals.n === 0 || count === 0) return [];
  const first = Math.max(window.start, totals.first_lo!);
  const last = Math.min(window.end, totals.last_hi!);
  let span =
    totals.n <= count ? Number.POSITIVE_INFINITY : Math.ceil(((last - first) * 2 * count) / totals.n);
  for (;;) {
    const whole = span >= last - first;
    const part = whole
      ? window
      : order === 'oldest'
        ? { start: window.start, end: first + span }
        : { start: last - span, end: window.end };
    const rows = await segmentsNearest(sql, assetId, part, order, count);
    if (rows.length >= count || whole) return rows;
    span *= 4;
  }
}

/** The `count` overlapping segments (of one state, if given) nearest one end of the window, in that order. */
async function segmentsNearest(
  sql: Db,
  assetId: number,
  window: Interval,
  order: Order,
  count: number,
  state?: Segment['state'],
): Promise<Segment[]> {
  if (count === 0) return [];
  const rows = await sql<{ edge: SegmentTuple[] | null }[]>`
    select json_agg(json_build_array(lo, hi, version, state, required_version) order by k) as edge
    from (
      select lower(span) as lo, upper(span) as hi, version, state, required_version,
        lower(span) * ${order === 'oldest' ? 1 : -1} as k
      from segments
      where asset_id = ${assetId} and span && int8range(${window.start}, ${Math.max(window.start, window.end)})
        ${state === undefined ? sql`` : sql`and state = ${state}`}
      order by k
      limit ${count}
    ) e`;
  return toSegments(rows[0]?.edge ?? null);
}

/**
 * The end of the newest complete segment: the top segment when it is complete (one probe of the
 * GiST index), else the highest complete one below it (a scan of that asset's segments, only
 * while its newest data is replay_required). COALESCE evaluates the scan only when needed.
 */
export function coveredUntil(sql: Db, alias = 'a') {
  const a = sql(alias);
  return sql`case when ${a}.covered_hi is not null then coalesce(
    (select upper(t.span) from segments t
      where t.asset_id = ${a}.id and t.span && int8range(${a}.covered_hi - 1, ${a}.covered_hi) and t.state = 'complete'),
    (select max(upper(t.span)) from segments t where t.asset_id = ${a}.id and t.state = 'complete')) end`;
}

/**
 * When the index accepted the asset's newest event: a probe of the event log's seq index, which
 * keys buckets of 8 (seq >> 3, migration 0013): it reads the rows of the newest seq's bucket up to
 * it, 1-8. Should retention have pruned that row, the asset row's updated_at (its last commit)
 * stands in.
 */
export function lastEventAt(sql: Db, alias = 'a') {
  const a = sql(alias);
  return sql`case when ${a}.last_seq > 0 then coalesce(
    (select e.ingested_at from events e
      where e.asset_id = ${a}.id and e.seq >> 3 = ${a}.last_seq >> 3 and e.seq = ${a}.last_seq),
    ${a}.updated_at) end`;
}
