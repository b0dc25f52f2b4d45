import {
  type BoundedCoverage,
  boundCoverage,
  DEFAULT_ORDERS,
  edgeSuffices,
  type ListOrders,
  type Order,
  type WindowScan,
} from '../core/coverage-answer.js';
import type { Interval, Segment } from '../core/types.js';
import type { AssetRow } from './assets.js';
import type { Db } from './db.js';

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

interface ScanRow {
  covered_lo: number | null;
  covered_hi: number | null;
  covered_until: number | null;
  last_event_at: Date | null;
  n: number;
  adjacent: number;
  replay_required: number;
  present: number;
  complete: number;
  first_lo: number | null;
  last_hi: number | null;
  edge: SegmentTuple[] | null;
  replay: SegmentTuple[] | null;
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
 * Coverage of one asset over a window, bounded (SPEC §10): its cost grows with the segments the
 * window overlaps and with `limit`, not with the holes it reports. One statement reads the
 * overlapping segments once, in `orders.ranges` order: it sums their measures, counts the ones
 * that touch their predecessor (what tells the number of holes), and returns only the segments
 * nearest that end. When the batches go the other way (the default), a second statement, run
 * at the same time on another connection, reads the `limit` + 1 segments nearest the other end.
 *
 * The extent and the freshness facts come from the same statement: the extent grows with every
 * commit, so it is never cached.
 */
export async function queryCoverage(
  sql: Db,
  asset: Pick<AssetRow, 'id'>,
  request: CoverageRequest,
): Promise<WindowCoverage> {
  const { window, limit } = request;
  const orders = request.orders ?? DEFAULT_ORDERS;
  // Usually enough to find limit + 1 holes; more only when many segments touch (versions change).
  let edgeSize = 2 * (limit + 1);
  for (;;) {
    const [row, batchEdge] = await Promise.all([
      scanWindow(sql, asset.id, window, orders.ranges, edgeSize, limit),
      orders.batches === orders.ranges
        ? []
        : segmentsNearest(sql, asset.id, window, orders.batches, limit + 1),
    ]);
    const scan: WindowScan = {
      count: row.n,
      adjacent: row.adjacent,
      replayRequiredCount: row.replay_required,
      present: row.present,
      complete: row.complete,
      first: row.first_lo,
      last: row.last_hi,
      edge: toSegments(row.edge),
      replayRequired: toSegments(row.replay),
      batchEdge,
    };
    if (!edgeSuffices(window, scan.edge, scan.count, orders.ranges, limit)) {
      edgeSize *= 4;
      continue;
    }
    const extent =
      row.covered_lo !== null && row.covered_hi !== null
        ? { start: row.covered_lo, end: row.covered_hi }
        : null;
    return {
      ...boundCoverage({ window, extent, limit, orders, scan }),
      coveredUntil: row.covered_until,
      lastEventAt: row.last_event_at === null ? null : row.last_event_at.getTime(),
    };
  }
}

/**
 * One sorted pass over the overlapping segments. `sign` flips the sort for newest first, and
 * `touches` compares each segment with its predecessor in that order. Sums clip every segment to
 * the window with least/greatest: range operators cost several times more per row.
 */
async function scanWindow(
  sql: Db,
  assetId: number,
  window: Interval,
  order: Order,
  edgeSize: number,
  limit: number,
): Promise<ScanRow> {
  const asc = order === 'oldest';
  const { start, end } = window;
  const [row] = await sql<ScanRow[]>`
    select a.covered_lo, a.covered_hi, ${coveredUntil(sql)} as covered_until,
      ${lastEventAt(sql)} as last_event_at, s.*
    from assets a, lateral (
      select count(*)::int8 as n,
        count(*) filter (where touches)::int8 as adjacent,
        count(*) filter (where state = 'replay_required')::int8 as replay_required,
        coalesce(sum(least(hi, ${end}) - greatest(lo, ${start})), 0)::int8 as present,
        coalesce(sum(least(hi, ${end}) - greatest(lo, ${start})) filter (where state = 'complete'), 0)::int8 as complete,
        min(lo) as first_lo, max(hi) as last_hi,
        json_agg(json_build_array(lo, hi, version, state, required_version) order by k)
          filter (where row_no <= ${edgeSize}) as edge,
        json_agg(json_build_array(lo, hi, version, state, required_version) order by k)
          filter (where state = 'replay_required' and replay_no <= ${limit + 1}) as replay
      from (
        select lo, hi, version, state, required_version, k,
          case when ${asc} then lag(hi) over w = lo else lag(lo) over w = hi end as touches,
          row_number() over w as row_no,
          count(*) filter (where state = 'replay_required') over w as replay_no
        from (
          select lower(span) as lo, upper(span) as hi, version, state, required_version,
            lower(span) * ${asc ? 1 : -1} as k
          from segments
          where asset_id = a.id and span && int8range(${start}, ${Math.max(start, end)})
        ) o
        window w as (order by k rows unbounded preceding)
      ) x
    ) s
    where a.id = ${assetId}`;
  if (!row) throw new Error(`asset ${assetId} vanished`);
  return row;
}

/** The `count` overlapping segments nearest one end of the window, in that order. */
async function segmentsNearest(
  sql: Db,
  assetId: number,
  window: Interval,
  order: Order,
  count: number,
): Promise<Segment[]> {
  const rows = await sql<{ edge: SegmentTuple[] | null }[]>`
    select json_agg(json_build_array(lo, hi, version, state, required_version) order by k) as edge
    from (
      select lower(span) as lo, upper(span) as hi, version, state, required_version,
        lower(span) * ${order === 'oldest' ? 1 : -1} as k
      from segments
      where asset_id = ${assetId} and span && int8range(${window.start}, ${Math.max(window.start, window.end)})
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
 * When the index accepted the asset's newest event: a primary-key probe of the event log. Should
 * retention have pruned that row, the asset row's updated_at (its last commit) stands in.
 */
export function lastEventAt(sql: Db, alias = 'a') {
  const a = sql(alias);
  return sql`case when ${a}.last_seq > 0 then coalesce(
    (select e.ingested_at from events e where e.asset_id = ${a}.id and e.seq = ${a}.last_seq),
    ${a}.updated_at) end`;
}
