import { formatPoint } from './bounds.js';
import type { Coverage, ReplayRequiredPiece } from './coverage.js';
import type { Domain, Interval } from './types.js';

/** A span in the asset's own form: ISO 8601 for time, JSON numbers for integers. */
export interface SpanJson {
  start: string | number;
  end: string | number;
}

export interface ReplayRequiredJson extends SpanJson {
  version: string | null;
  required_version: string;
}

export function spanJson(domain: Domain, i: Interval): SpanJson {
  return { start: formatPoint(domain, i.start), end: formatPoint(domain, i.end) };
}

export function replayRequiredJson(domain: Domain, r: ReplayRequiredPiece): ReplayRequiredJson {
  return {
    start: formatPoint(domain, r.start),
    end: formatPoint(domain, r.end),
    version: r.version,
    required_version: r.requiredVersion,
  };
}

/** The coverage answer of SPEC §8; field names are part of the contract. */
export interface CoverageAnswer {
  asset: string;
  domain: Domain;
  start: string | number;
  end: string | number;
  covered: boolean;
  ratio: number;
  missing: SpanJson[];
  replay_required: ReplayRequiredJson[];
  known_gaps: SpanJson[];
  batches: Array<SpanJson & { state: string; version: string | null }>;
}

export function toCoverageAnswer(
  asset: string,
  domain: Domain,
  window: Interval,
  coverage: Coverage,
): CoverageAnswer {
  const span = (i: Interval) => spanJson(domain, i);
  const missing = coverage.missing.map(span);
  return {
    asset,
    domain,
    ...span(window),
    covered: coverage.covered,
    ratio: coverage.ratio,
    missing,
    replay_required: coverage.replayRequired.map((r) => replayRequiredJson(domain, r)),
    known_gaps: knownGapsJson(coverage, missing, span),
    // Literals rather than spreads: objects of one shape keep JSON.stringify on V8's fast path.
    batches: coverage.batches.map((b) => ({
      start: formatPoint(domain, b.start),
      end: formatPoint(domain, b.end),
      state: b.state,
      version: b.version,
    })),
  };
}

/**
 * Known gaps are the missing ranges inside the asset's extent, in order, only the outermost ones
 * clipped: reuse the missing ranges' JSON rather than format every bound a second time.
 */
function knownGapsJson(coverage: Coverage, missing: SpanJson[], span: (i: Interval) => SpanJson): SpanJson[] {
  let j = 0;
  return coverage.knownGaps.map((gap) => {
    while (j < coverage.missing.length && coverage.missing[j]!.end <= gap.start) j++;
    const m = coverage.missing[j];
    return m !== undefined && m.start === gap.start && m.end === gap.end ? missing[j]! : span(gap);
  });
}
