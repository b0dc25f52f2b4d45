import { formatPoint } from './bounds.js';
import { piecesOf, type ReplayRequiredPiece } from './coverage.js';
import { type FreshnessJson, freshnessOf } from './freshness.js';
import { intersect } from './intervals.js';
import type { Domain, Interval, Piece, PieceState, Segment } from './types.js';

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

/** Which end of the window a bounded list starts from. */
export type Order = 'oldest' | 'newest';

export interface ListOrders {
  /** `missing`, `known_gaps` and `replay_required`. */
  readonly ranges: Order;
  readonly batches: Order;
}

/** Without `order`, each list keeps the order it always had: ranges oldest first, batches newest first. */
export const DEFAULT_ORDERS: ListOrders = { ranges: 'oldest', batches: 'newest' };
export const DEFAULT_LIMIT = 200;
export const MAX_LIMIT = 1000;

/**
 * What the index reads for one window: exact totals over every segment overlapping it, and the
 * segments nearest one end. It relies on the index being maximally merged (adjacent segments
 * always differ in version or state, test/unit/segments.test.ts), so each stored segment is one
 * piece of the answer.
 */
export interface WindowScan {
  /** Segments overlapping the window. */
  readonly count: number;
  /** Pairs of segments overlapping the window that touch, with no gap between them. */
  readonly adjacent: number;
  readonly replayRequiredCount: number;
  /** Measure inside the window of all segments, and of the complete ones. */
  readonly present: number;
  readonly complete: number;
  /** Lowest start and highest end of the overlapping segments; null when none overlap. */
  readonly first: number | null;
  readonly last: number | null;
  /** The overlapping segments nearest the `ranges` end, in that order. */
  readonly edge: readonly Segment[];
  /** The replay_required segments nearest the `ranges` end, in that order (at least limit + 1 if there are). */
  readonly replayRequired: readonly Segment[];
  /** The overlapping segments nearest the `batches` end, in that order. */
  readonly batchEdge: readonly Segment[];
}

export interface BoundedCoverage {
  covered: boolean;
  ratio: number;
  missing: Interval[];
  missingCount: number;
  /** Measure of the missing parts, in points (µs for time). */
  missingTotal: number;
  knownGaps: Interval[];
  knownGapsCount: number;
  replayRequired: ReplayRequiredPiece[];
  replayRequiredCount: number;
  batches: Piece[];
  /** Some list holds fewer entries than it has. */
  truncated: boolean;
}

const mirror = (i: Interval): Interval => ({ start: -i.end, end: -i.start });
const mirrorPiece = (p: Piece): Piece => ({ ...p, start: -p.end, end: -p.start });

/**
 * The pieces of the window that `rows` (the segments nearest the `order` end, in that order)
 * determine, in that order. When rows are not all the overlapping segments, the pieces stop at
 * the farthest row, so no gap is made up beyond what was read.
 */
export function edgePieces(window: Interval, rows: readonly Segment[], all: boolean, order: Order): Piece[] {
  if (order === 'newest') {
    const mirrored = rows.map((s) => ({ ...s, ...mirror(s) }));
    return edgePieces(mirror(window), mirrored, all, 'oldest').map(mirrorPiece);
  }
  const last = rows[rows.length - 1];
  const end = all || last === undefined ? window.end : Math.min(last.end, window.end);
  return piecesOf({ start: window.start, end }, rows);
}

/** Whether `rows` reach far enough to give `limit` + 1 missing ranges, or are all there is. */
export function edgeSuffices(
  window: Interval,
  rows: readonly Segment[],
  count: number,
  order: Order,
  limit: number,
) {
  if (rows.length >= count) return true;
  return edgePieces(window, rows, false, order).filter((p) => p.state === 'gap').length > limit;
}

/** The scan of a window whose overlapping segments were all read: what the index would total. */
export function scanOfAll(
  window: Interval,
  segments: readonly Segment[],
  orders: ListOrders,
  limit: number,
): WindowScan {
  const rows = segments
    .filter((s) => s.start < window.end && window.start < s.end)
    .sort((a, b) => a.start - b.start);
  const inOrder = (o: Order) => (o === 'oldest' ? rows : [...rows].reverse());
  let adjacent = 0;
  let present = 0;
  let complete = 0;
  rows.forEach((s, i) => {
    if (i > 0 && rows[i - 1]!.end === s.start) adjacent++;
    const measure = Math.min(s.end, window.end) - Math.max(s.start, window.start);
    present += measure;
    if (s.state === 'complete') complete += measure;
  });
  const replayRequired = inOrder(orders.ranges).filter((s) => s.state === 'replay_required');
  return {
    count: rows.length,
    adjacent,
    replayRequiredCount: replayRequired.length,
    present,
    complete,
    first: rows[0]?.start ?? null,
    last: rows[rows.length - 1]?.end ?? null,
    edge: inOrder(orders.ranges),
    replayRequired: replayRequired.slice(0, limit + 1),
    batchEdge: inOrder(orders.batches),
  };
}

export interface BoundInput {
  readonly window: Interval;
  /** [min start, max end) of all the asset's segments; null when it has none. */
  readonly extent: Interval | null;
  readonly limit: number;
  readonly orders: ListOrders;
  readonly scan: WindowScan;
}

/** The bounded coverage answer: exact totals, and at most `limit` entries in every list. */
export function boundCoverage({ window, extent, limit, orders, scan }: BoundInput): BoundedCoverage {
  const width = window.end - window.start;
  const n = scan.count;
  const leading = n === 0 ? width > 0 : scan.first! > window.start;
  const trailing = n > 0 && scan.last! < window.end;
  const missingCount =
    n === 0 ? (width > 0 ? 1 : 0) : n - scan.adjacent - 1 + Number(leading) + Number(trailing);
  // Only the first and the last missing range can lie outside the asset's extent.
  let knownGapsCount = missingCount;
  if (extent === null) knownGapsCount = 0;
  else if (n === 0) knownGapsCount = intersect([window], [extent]).length;
  else {
    if (leading && extent.start >= scan.first!) knownGapsCount--;
    if (trailing && extent.end <= scan.last!) knownGapsCount--;
  }

  const pieces = edgePieces(window, scan.edge, scan.edge.length >= n, orders.ranges);
  const gaps = pieces.filter((p) => p.state === 'gap').map(({ start, end }) => ({ start, end }));
  const known = extent === null ? [] : gaps.flatMap((g) => intersect([g], [extent])).slice(0, limit + 1);
  const batchPieces =
    orders.batches === orders.ranges
      ? pieces
      : edgePieces(window, scan.batchEdge, scan.batchEdge.length >= n, orders.batches);
  const replayRequired = scan.replayRequired.slice(0, limit).map((s) => ({
    start: Math.max(s.start, window.start),
    end: Math.min(s.end, window.end),
    version: s.version,
    // The edge rejects versionless replay requirements (events.ts), so this means a corrupt index.
    requiredVersion: requiredOf(s),
  }));
  const out: BoundedCoverage = {
    covered: missingCount === 0 && scan.replayRequiredCount === 0,
    ratio: width > 0 ? scan.complete / width : 1,
    missing: gaps.slice(0, limit),
    missingCount,
    missingTotal: width - scan.present,
    knownGaps: known.slice(0, limit),
    knownGapsCount,
    replayRequired,
    replayRequiredCount: scan.replayRequiredCount,
    batches: batchPieces.slice(0, limit),
    truncated: false,
  };
  out.truncated =
    out.missing.length < missingCount ||
    out.knownGaps.length < knownGapsCount ||
    out.replayRequired.length < scan.replayRequiredCount ||
    out.batches.length < n + missingCount;
  return out;
}

function requiredOf(s: Segment): string {
  if (s.requiredVersion === null)
    throw new Error(`replay_required piece [${s.start}, ${s.end}) has no required version`);
  return s.requiredVersion;
}

/** The coverage answer; its field names are a public contract (docs/http-api.md). */
export interface CoverageAnswer extends FreshnessJson {
  asset: string;
  domain: Domain;
  start: string | number;
  end: string | number;
  covered: boolean;
  ratio: number;
  missing: SpanJson[];
  replay_required: ReplayRequiredJson[];
  known_gaps: SpanJson[];
  batches: Array<SpanJson & { state: PieceState; version: string | null }>;
  missing_count: number;
  /** Seconds for time assets, values for integer assets. */
  missing_total: number;
  known_gaps_count: number;
  replay_required_count: number;
  truncated: boolean;
  /**
   * Present only when a read replica answered: the instant (ISO 8601) of the primary's state the
   * answer reflects at least: it is the primary's answer at some instant between then and the read.
   */
  as_of?: string;
}

export interface AnswerInput {
  readonly asset: string;
  readonly domain: Domain;
  readonly window: Interval;
  readonly coverage: BoundedCoverage;
  readonly coveredUntil: number | null;
  readonly lastEventAt: number | null;
  readonly maxLagMs?: number | undefined;
  /** Epoch ms of the primary's state a replica's answer reflects; null or absent from the primary. */
  readonly asOf?: number | null | undefined;
}

export function toCoverageAnswer(input: AnswerInput, nowMs: number): CoverageAnswer {
  const { asset, domain, window, coverage } = input;
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
    // Literals rather than spreads: objects of one shape keep JSON.stringify on V8's fast path.
    batches: coverage.batches.map((b) => ({
      start: formatPoint(domain, b.start),
      end: formatPoint(domain, b.end),
      state: b.state,
      version: b.version,
    })),
    missing_count: coverage.missingCount,
    missing_total: domain === 'time' ? coverage.missingTotal / 1e6 : coverage.missingTotal,
    known_gaps_count: coverage.knownGapsCount,
    replay_required_count: coverage.replayRequiredCount,
    truncated: coverage.truncated,
    ...freshnessOf(input, nowMs),
    ...(input.asOf == null ? {} : { as_of: new Date(input.asOf).toISOString() }),
  };
}
