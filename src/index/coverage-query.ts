import { type Coverage, projectCoverage } from '../core/coverage.js';
import type { Interval } from '../core/types.js';
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
