import { normalize } from '../core/intervals.js';
import type { Interval, Segment, SegmentState } from '../core/types.js';
import type { Db, Tx } from './db.js';

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

/** Segments that overlap or touch any of the ranges: what applying changes there may rewrite. */
export async function segmentsTouching(
  tx: Tx,
  assetId: number,
  ranges: readonly Interval[],
): Promise<StoredSegment[]> {
  // Widen by one so adjacent segments (which may merge) are loaded too.
  const merged = normalize(ranges.map((r) => ({ start: r.start - 1, end: r.end + 1 })));
  if (merged.length === 0) return [];
  const rows = await tx<SegmentRow[]>`
    select distinct s.id, lower(s.span) as lo, upper(s.span) as hi, s.version, s.state, s.required_version
    from unnest(${merged.map((r) => r.start)}::int8[], ${merged.map((r) => r.end)}::int8[]) as r(lo, hi)
    join segments s on s.asset_id = ${assetId} and s.span && int8range(r.lo, r.hi)`;
  return rows.map(toSegment);
}

export async function replaceSegments(
  tx: Tx,
  assetId: number,
  remove: readonly StoredSegment[],
  insert: readonly Segment[],
): Promise<void> {
  if (remove.length > 0) {
    await tx`delete from segments where id = any(${remove.map((s) => s.id)}::int8[])`;
  }
  if (insert.length > 0) {
    await tx`
      insert into segments (asset_id, span, version, state, required_version)
      select ${assetId}, int8range(lo, hi), version, state, required_version
      from unnest(
        ${insert.map((s) => s.start)}::int8[], ${insert.map((s) => s.end)}::int8[],
        ${insert.map((s) => s.version)}::text[], ${insert.map((s) => s.state)}::text[],
        ${insert.map((s) => s.requiredVersion)}::text[]
      ) as t(lo, hi, version, state, required_version)`;
  }
}
