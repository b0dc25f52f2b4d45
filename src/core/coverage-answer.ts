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
  return { ...spanJson(domain, r), version: r.version, required_version: r.requiredVersion };
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
  return {
    asset,
    domain,
    ...span(window),
    covered: coverage.covered,
    ratio: coverage.ratio,
    missing: coverage.missing.map(span),
    replay_required: coverage.replayRequired.map((r) => replayRequiredJson(domain, r)),
    known_gaps: coverage.knownGaps.map(span),
    batches: coverage.batches.map((b) => ({ ...span(b), state: b.state, version: b.version })),
  };
}
