import { type Coverage, projectCoverage } from '../core/coverage.js';
import type { Interval, Segment } from '../core/types.js';
import type { AssetRow } from './assets.js';
import type { Db } from './db.js';
import { segmentsOverlapping } from './segments-sql.js';

/** Coverage of one asset over a window, reading only the segments that overlap it. */
export async function queryCoverage(
  sql: Db,
  asset: AssetRow,
  window: Interval,
  limit: number,
): Promise<Coverage> {
  const segments = await segmentsOverlapping(sql, asset.id, window);
  const extent =
    asset.covered_lo !== null && asset.covered_hi !== null
      ? { start: asset.covered_lo, end: asset.covered_hi }
      : null;
  return projectCoverage({ window, segments, extent, limit });
}

/** What never changes about an asset once it exists: enough to parse a window and find its rows. */
export interface AssetFacts {
  readonly id: number;
  readonly name: string;
  readonly domain: AssetRow['domain'];
  readonly zone: string;
}

/**
 * queryCoverage in one round trip: the extent (which grows with every commit, so is never cached)
 * and the overlapping segments come from one statement.
 */
export async function queryCoverageOf(
  sql: Db,
  asset: AssetFacts,
  window: Interval,
  limit: number,
): Promise<Coverage> {
  const rows = await sql<
    {
      covered_lo: number | null;
      covered_hi: number | null;
      id: number | null;
      lo: number;
      hi: number;
      version: string | null;
      state: Segment['state'];
      required_version: string | null;
    }[]
  >`
    select a.covered_lo, a.covered_hi, s.id, s.lo, s.hi, s.version, s.state, s.required_version
    from assets a
    left join lateral (
      select id, lower(span) as lo, upper(span) as hi, version, state, required_version
      from segments
      where asset_id = a.id and span && int8range(${window.start}, ${Math.max(window.start, window.end)})
    ) s on true
    where a.id = ${asset.id}
    order by s.lo`;
  const first = rows[0];
  const extent =
    first && first.covered_lo !== null && first.covered_hi !== null
      ? { start: first.covered_lo, end: first.covered_hi }
      : null;
  const segments: Segment[] = [];
  for (const r of rows) {
    if (r.id === null) continue;
    segments.push({
      start: r.lo,
      end: r.hi,
      version: r.version,
      state: r.state,
      requiredVersion: r.required_version,
    });
  }
  return projectCoverage({ window, segments, extent, limit });
}
