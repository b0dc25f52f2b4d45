/**
 * Facts about an asset's whole history that no window changes, for the status page's headlines:
 * its freshness facts and how many holes and replay_required ranges it has since its first event.
 */
import type { FreshnessFacts } from '../../core/intervals/freshness.js';
import type { Domain } from '../../core/types.js';
import type { Db } from '../pg/db.js';
import { coveredUntil, lastEventAt } from './coverage-query.js';

/** Assets with more segments than this have their holes counted per window only. */
export const HISTORY_MAX_SEGMENTS = 10_000;

export interface AssetHistory extends FreshnessFacts {
  /**
   * Holes between the asset's segments (gaps inside its covered extent), and segments waiting to
   * be rebuilt at a required version; null when the asset has more than HISTORY_MAX_SEGMENTS.
   */
  readonly gaps: number | null;
  readonly replayRequired: number | null;
}

interface HistoryRow {
  id: number;
  domain: Domain;
  covered_until: number | null;
  last_event_at: Date | null;
  gaps: number | null;
  replay_required: number | null;
}

/**
 * The histories of a few assets (a page's worth) in one statement. Each costs one sorted pass over
 * its segments (segments never overlap, so a hole is a segment that does not start where the one
 * before it ends), so assets with more than HISTORY_MAX_SEGMENTS are skipped: a page refreshed
 * every minute must not sort millions of rows.
 */
export async function assetHistories(sql: Db, ids: readonly number[]): Promise<Map<number, AssetHistory>> {
  if (ids.length === 0) return new Map();
  const rows = await sql<HistoryRow[]>`
    select a.id, a.domain, ${coveredUntil(sql)} as covered_until, ${lastEventAt(sql)} as last_event_at,
      h.gaps, h.replay_required
    from assets a left join lateral (
      select count(*) filter (where prev_hi is not null and prev_hi <> lo)::int8 as gaps,
        count(*) filter (where state = 'replay_required')::int8 as replay_required
      from (
        select lower(span) as lo, state, lag(upper(span)) over (order by lower(span)) as prev_hi
        from segments where asset_id = a.id
      ) s
    ) h on a.segment_count <= ${HISTORY_MAX_SEGMENTS}
    where a.id = any(${ids as number[]}::int8[])`;
  return new Map(
    rows.map((r) => [
      r.id,
      {
        domain: r.domain,
        coveredUntil: r.covered_until,
        lastEventAt: r.last_event_at?.getTime() ?? null,
        gaps: r.gaps,
        replayRequired: r.replay_required,
      },
    ]),
  );
}
