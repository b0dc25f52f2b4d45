/**
 * What the upstreams of a rollup hold for some periods: each upstream's newest seq, extent and
 * segments, read in one statement (the facts per period are core/periods/upstream-facts.ts). Shared by
 * the evaluation and the period detail.
 */
import { normalize } from '../../core/intervals/intervals.js';
import type { Upstream } from '../../core/periods/upstream-facts.js';
import type { Rollup } from '../../core/rollups/rollup.js';
import type { Domain, Interval, SegmentState } from '../../core/types.js';
import type { Db } from '../pg/db.js';

interface UpstreamRow {
  name: string;
  domain: Domain;
  last_seq: number;
  covered_lo: number | null;
  covered_hi: number | null;
  lo: number | null;
  hi: number | null;
  version: string | null;
  state: SegmentState | null;
  required_version: string | null;
}

/** Each upstream's newest seq, extent and the segments overlapping the periods, in one snapshot. */
export async function loadUpstreams(
  tx: Db,
  rollup: Rollup,
  periods: readonly Interval[],
): Promise<Map<string, Upstream>> {
  // The periods as one multirange: one GiST probe per upstream, whatever its segment count and
  // however scattered the periods (see segmentsTouchingStatement; OFFSET 0 keeps it a probe).
  const ranges = normalize(periods);
  const spans = `{${ranges.map((r) => `[${r.start},${r.end})`).join(',')}}`;
  const rows = await tx<UpstreamRow[]>`
    select a.name, a.domain, a.last_seq, a.covered_lo, a.covered_hi, s.lo, s.hi, s.version, s.state, s.required_version
    from assets a
    left join lateral (
      select lower(seg.span) as lo, upper(seg.span) as hi, seg.version, seg.state, seg.required_version
      from segments seg where seg.asset_id = a.id and seg.span && ${spans}::int8multirange
      offset 0
    ) s on true
    where a.name = any(${rollup.upstream as string[]}::text[])`;
  const upstreams = new Map<string, Upstream>();
  for (const r of rows) {
    let u = upstreams.get(r.name);
    if (!u) {
      const extent =
        r.covered_lo !== null && r.covered_hi !== null ? { start: r.covered_lo, end: r.covered_hi } : null;
      u = { domain: r.domain, lastSeq: r.last_seq, extent, segments: [] };
      upstreams.set(r.name, u);
    }
    if (r.lo !== null && r.hi !== null && r.state !== null) {
      u.segments.push({
        start: r.lo,
        end: r.hi,
        version: r.version,
        state: r.state,
        requiredVersion: r.required_version,
      });
    }
  }
  return upstreams;
}
