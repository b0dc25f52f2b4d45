import { normalize } from '../../core/intervals/intervals.js';
import type { Interval, Segment, SegmentState } from '../../core/types.js';
import type { Db } from '../pg/db.js';

export interface StoredSegment extends Segment {
  readonly id: number;
}

interface SegmentRow {
  id: number;
  lo: number;
  hi: number;
  version: string | null;
  state: SegmentState;
  required_version: string | null;
}

const toSegment = (r: SegmentRow): StoredSegment => ({
  id: r.id,
  start: r.lo,
  end: r.hi,
  version: r.version,
  state: r.state,
  requiredVersion: r.required_version,
});

/** Segments overlapping a window, through the GiST index of the exclusion constraint. */
export async function segmentsOverlapping(
  sql: Db,
  assetId: number,
  window: Interval,
): Promise<StoredSegment[]> {
  if (window.end <= window.start) return [];
  const rows = await sql<SegmentRow[]>`
    select id, lower(span) as lo, upper(span) as hi, version, state, required_version
    from segments
    where asset_id = ${assetId} and span && int8range(${window.start}, ${window.end})
    order by lower(span)`;
  return rows.map(toSegment);
}

/** What segmentsTouchingMany reads, per asset: the ranges its changes cover. */
export type TouchRequest = { readonly assetId: number; readonly ranges: readonly Interval[] };

/**
 * Segments that overlap or touch any of each asset's ranges, for several assets in one statement:
 * what applying changes there may rewrite. Keyed by asset id.
 */
export async function segmentsTouchingMany(
  tx: Db,
  requests: readonly TouchRequest[],
): Promise<Map<number, StoredSegment[]>> {
  const out = new Map<number, StoredSegment[]>();
  const statement = segmentsTouchingStatement(tx, requests);
  if (statement === null) return out;
  for (const r of await statement.execute()) {
    const list = out.get(r.asset_id) ?? [];
    out.set(r.asset_id, list);
    list.push(toSegment(r));
  }
  return out;
}

/**
 * The statement behind segmentsTouchingMany (null when there is nothing to read), exported so a
 * test can EXPLAIN exactly what production runs.
 *
 * Each asset's ranges travel as one multirange, and one probe of the exclusion constraint's GiST
 * index per asset finds every segment they touch: O(touched · log n), whatever the asset's
 * segment count. A join of one row per range to `segments` was planned as a hash join on
 * asset_id that compared every range with every segment of the asset (seconds per batch at
 * 100,000 segments). OFFSET 0 keeps the lateral subquery from being flattened into a join the
 * planner could plan that way again. docs/decisions.md has the measurements.
 */
export function segmentsTouchingStatement(tx: Db, requests: readonly TouchRequest[]) {
  const rangesOf = new Map<number, Interval[]>();
  for (const { assetId, ranges } of requests) {
    const list = rangesOf.get(assetId) ?? [];
    rangesOf.set(assetId, list);
    // Widen by one so adjacent segments (which may merge) are loaded too.
    for (const r of ranges) list.push({ start: r.start - 1, end: r.end + 1 });
  }
  const assetIds: number[] = [];
  const spans: string[] = [];
  for (const [assetId, ranges] of rangesOf) {
    const merged = normalize(ranges);
    if (merged.length === 0) continue;
    assetIds.push(assetId);
    spans.push(`{${merged.map((r) => `[${r.start},${r.end})`).join(',')}}`);
  }
  if (assetIds.length === 0) return null;
  return tx<(SegmentRow & { asset_id: number })[]>`
    select r.asset_id, s.id, s.lo, s.hi, s.version, s.state, s.required_version
    from unnest(${assetIds}::int8[], ${spans}::int8multirange[]) as r(asset_id, spans)
    cross join lateral (
      select id, lower(span) as lo, upper(span) as hi, version, state, required_version
      from segments
      where asset_id = r.asset_id and span && r.spans
      offset 0
    ) s`;
}

export async function removeSegments(tx: Db, ids: readonly number[]): Promise<void> {
  if (ids.length > 0) await tx`delete from segments where id = any(${ids}::int8[])`.execute();
}

/** Inserts segments of several assets in one statement (rows as one JSON document). */
export async function insertSegments(
  tx: Db,
  rows: ReadonlyArray<{ readonly assetId: number; readonly segment: Segment }>,
): Promise<void> {
  if (rows.length === 0) return;
  const doc = tx.json(
    rows.map(({ assetId, segment: s }) => ({
      a: assetId,
      l: s.start,
      h: s.end,
      v: s.version,
      s: s.state,
      r: s.requiredVersion,
    })) as never,
  );
  await tx`
    insert into segments (asset_id, span, version, state, required_version)
    select a, int8range(l, h), v, s, r
    from jsonb_to_recordset(${doc}) as t(a int8, l int8, h int8, v text, s text, r text)`.execute();
}

/** The segments of an asset overlapping a window (a request made by hand), at most `limit`. */
export async function assetSegmentsIn(
  db: Db,
  asset: string,
  window: Interval,
  limit: number,
): Promise<Segment[]> {
  const rows = await db<
    { lo: number; hi: number; state: SegmentState; version: string | null; rv: string | null }[]
  >`
    select lower(s.span) as lo, upper(s.span) as hi, s.state, s.version, s.required_version as rv
    from assets a join segments s on s.asset_id = a.id
    where a.name = ${asset} and s.span && int8range(${window.start}, ${window.end})
    order by lower(s.span) limit ${limit}`;
  return rows.map((r) => ({
    start: r.lo,
    end: r.hi,
    state: r.state,
    version: r.version,
    requiredVersion: r.rv,
  }));
}

/**
 * The spans of an asset's segments overlapping [from, below), newest first, at most `limit`: where
 * a rollup new to it starts (seeded newest first, a bounded number of periods per pass).
 */
export async function segmentSpansBelow(
  db: Db,
  assetId: number,
  from: number,
  below: number,
  limit: number,
): Promise<Interval[]> {
  const rows = await db<{ lo: number; hi: number }[]>`
    select lower(span) as lo, upper(span) as hi from segments
    where asset_id = ${assetId} and span && int8range(${from}, ${below})
    order by lower(span) desc limit ${limit}`;
  return rows.map((r) => ({ start: r.lo, end: r.hi }));
}
