import { type Coverage, projectCoverage } from '../core/coverage.js';
import type { Interval, Segment } from '../core/types.js';
import type { AssetRow } from './assets.js';
import type { Db } from './db.js';

/** What never changes about an asset once it exists: enough to parse a window and find its rows. */
export type AssetFacts = Pick<AssetRow, 'id' | 'name' | 'domain' | 'zone'>;

/** The overlapping segments as one JSON array per column (null when none overlap). */
interface ColumnsRow {
  covered_lo: number | null;
  covered_hi: number | null;
  lo: number[] | null;
  hi: number[] | null;
  version: (string | null)[] | null;
  state: Segment['state'][] | null;
  required_version: (string | null)[] | null;
}

/**
 * Coverage of one asset over a window in one round trip: the extent (which grows with every
 * commit, so is never cached) and the segments overlapping the window, found through the GiST
 * index of the exclusion constraint.
 *
 * The segments come back as one row of per-column JSON arrays rather than a row each: for a
 * year-long window over hundreds of segments, parsing rows cost more than the query itself
 * (docs/benchmarks.md). All aggregates of one scan see the rows in the same order, so the arrays
 * line up; projectCoverage sorts, so the order itself does not matter.
 */
export async function queryCoverage(
  sql: Db,
  asset: Pick<AssetRow, 'id'>,
  window: Interval,
  limit: number,
): Promise<Coverage> {
  const [row] = await sql<ColumnsRow[]>`
    select a.covered_lo, a.covered_hi, s.*
    from assets a, lateral (
      select json_agg(lower(span)) as lo, json_agg(upper(span)) as hi, json_agg(version) as version,
        json_agg(state) as state, json_agg(required_version) as required_version
      from segments
      where asset_id = a.id and span && int8range(${window.start}, ${Math.max(window.start, window.end)})
    ) s
    where a.id = ${asset.id}`;
  const extent =
    row && row.covered_lo !== null && row.covered_hi !== null
      ? { start: row.covered_lo, end: row.covered_hi }
      : null;
  const segments: Segment[] = [];
  const n = row?.lo?.length ?? 0;
  for (let i = 0; i < n; i++) {
    segments.push({
      start: row!.lo![i]!,
      end: row!.hi![i]!,
      version: row!.version![i]!,
      state: row!.state![i]!,
      requiredVersion: row!.required_version![i]!,
    });
  }
  return projectCoverage({ window, segments, extent, limit });
}
