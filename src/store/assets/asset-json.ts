import { formatPoint } from '../../core/intervals/bounds.js';
import { type FreshnessFacts, freshnessOf } from '../../core/intervals/freshness.js';
import type { AssetRow } from './assets.js';

/** One asset as `/v1/assets` and `status --json` both show it: one shape, one set of names. */
export function assetJson(
  a: AssetRow,
  facts: Omit<FreshnessFacts, 'domain' | 'maxLagMs'>,
  maxLagMs: number | undefined,
  nowMs: number,
) {
  return {
    asset: a.name,
    domain: a.domain,
    zone: a.zone,
    event_count: a.event_count,
    segment_count: a.segment_count,
    covered_extent:
      a.covered_lo === null || a.covered_hi === null
        ? null
        : { start: formatPoint(a.domain, a.covered_lo), end: formatPoint(a.domain, a.covered_hi) },
    updated_at: a.updated_at.toISOString(),
    ...freshnessOf({ ...facts, domain: a.domain, maxLagMs }, nowMs),
  };
}
