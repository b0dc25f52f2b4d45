import { formatPoint } from './bounds.js';
import type { Coverage } from './coverage.js';
import type { Domain, Interval } from './types.js';

/** The coverage answer of SPEC §8; field names are part of the contract. */
export interface CoverageAnswer {
  asset: string;
  domain: Domain;
  start: string | number;
  end: string | number;
  covered: boolean;
  ratio: number;
  missing: Array<{ start: string | number; end: string | number }>;
  replay_required: Array<{
    start: string | number;
    end: string | number;
    version: string | null;
    required_version: string;
  }>;
  known_gaps: Array<{ start: string | number; end: string | number }>;
  batches: Array<{ start: string | number; end: string | number; state: string; version: string | null }>;
}

export function toCoverageAnswer(
  asset: string,
  domain: Domain,
  window: Interval,
  coverage: Coverage,
): CoverageAnswer {
  const point = (v: number) => formatPoint(domain, v);
  const span = (i: Interval) => ({ start: point(i.start), end: point(i.end) });
  return {
    asset,
    domain,
    ...span(window),
    covered: coverage.covered,
    ratio: coverage.ratio,
    missing: coverage.missing.map(span),
    replay_required: coverage.replayRequired.map((r) => ({
      ...span(r),
      version: r.version,
      required_version: r.requiredVersion,
    })),
    known_gaps: coverage.knownGaps.map(span),
    batches: coverage.batches.map((b) => ({ ...span(b), state: b.state, version: b.version })),
  };
}
