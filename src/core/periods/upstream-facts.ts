/**
 * What the policy decides on, per period, from what its upstreams hold (src/store/assets/upstreams.ts
 * reads it): each upstream's coverage of the period and the facts `decide()` takes. Pure.
 */
import { type Coverage, projectCoverage } from '../intervals/coverage.js';
import type { Rollup } from '../rollups/rollup.js';
import type { Domain, Segment } from '../types.js';
import type { UpstreamFacts } from './policy.js';

/** One upstream as read for some periods: its newest seq, covered extent and overlapping segments. */
export interface Upstream {
  domain: Domain;
  lastSeq: number;
  extent: { start: number; end: number } | null;
  segments: Segment[];
}

/** The policy's facts about one period, and each upstream's coverage of it (null: never seen). */
export function upstreamFacts(
  rollup: Rollup,
  period: { readonly lo: number; readonly hi: number },
  upstreams: ReadonlyMap<string, Upstream>,
): { facts: UpstreamFacts[]; coverages: Map<string, { domain: Domain; coverage: Coverage | null }> } {
  const coverages = new Map<string, { domain: Domain; coverage: Coverage | null }>();
  const facts: UpstreamFacts[] = rollup.upstream.map((name) => {
    const u = upstreams.get(name);
    const width = period.hi - period.lo;
    if (!u) {
      coverages.set(name, { domain: rollup.domain, coverage: null });
      return { ratio: 0, notComplete: width, replayRequired: 0 };
    }
    const window = { start: period.lo, end: period.hi };
    const segments = u.segments.filter((s) => s.end > period.lo && s.start < period.hi);
    const coverage = projectCoverage({ window, segments, extent: u.extent, limit: 0 });
    coverages.set(name, { domain: u.domain, coverage });
    return {
      ratio: coverage.ratio,
      notComplete: width - coverage.complete,
      replayRequired: coverage.replayRequired.reduce((sum, r) => sum + (r.end - r.start), 0),
    };
  });
  return { facts, coverages };
}
