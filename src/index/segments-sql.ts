import { normalize } from '../core/intervals.js';
import type { Interval, Segment, SegmentState } from '../core/types.js';
import type { Db } from './db.js';

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

/**
 * Segments that overlap or touch any of each asset's ranges, for several assets in one statement:
 * what applying changes there may rewrite. Keyed by asset id.
 */
export async function segmentsTouchingMany(
  tx: Db,
  requests: ReadonlyArray<{ readonly assetId: number; readonly ranges: readonly Interval[] }>,
): Promise<Map<number, StoredSegment[]>> {
  const assetIds: number[] = [];
  const los: number[] = [];
  const his: number[] = [];
  for (const { assetId, ranges } of requests) {
    // Widen by one so adjacent segments (which may merge) are loaded too.
    for (const r of normalize(ranges.map((x) => ({ start: x.start - 1, end: x.end + 1 })))) {
      assetIds.push(assetId);
      los.push(r.start);
      his.push(r.end);
    }
  }
  const out = new Map<number, StoredSegment[]>();
  if (assetIds.length === 0) return out;
  const rows = await tx<(SegmentRow & { asset_id: number })[]>`
    select distinct s.asset_id, s.id, lower(s.span) as lo, upper(s.span) as hi, s.version, s.state, s.required_version
    from unnest(${assetIds}::int8[], ${los}::int8[], ${his}::int8[]) as r(asset_id, lo, hi)
    join segments s on s.asset_id = r.asset_id and s.span && int8range(r.lo, r.hi)`.execute();
  for (const r of rows) {
    const list = out.get(r.asset_id) ?? [];
    out.set(r.asset_id, list);
    list.push(toSegment(r));
  }
  return out;
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
