import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { projectCoverage } from '../../../../src/core/intervals/coverage.js';
import {
  boundCoverage,
  edgeSuffices,
  type ListOrders,
  type Order,
  toCoverageAnswer,
  type WindowScan,
} from '../../../../src/core/intervals/coverage-answer.js';
import { applyChanges } from '../../../../src/core/intervals/segments.js';
import type { Change, Interval, Segment } from '../../../../src/core/types.js';

// The bounded answer (what the index's one-pass scan allows) against the full projection, cut.
const SIZE = 60;
const change: fc.Arbitrary<Change> = fc
  .record({
    kind: fc.constantFrom<Change['kind']>('completion', 'completion', 'completion', 'replay_requirement'),
    a: fc.integer({ min: 0, max: SIZE }),
    len: fc.integer({ min: 0, max: 8 }),
    version: fc.constantFrom('v1', 'v2', 'v3'),
  })
  .map(({ kind, a, len, version }) => ({ kind, start: a, end: a + len, version }));
const window = fc
  .tuple(fc.integer({ min: -4, max: SIZE + 12 }), fc.integer({ min: -4, max: SIZE + 12 }))
  .map(([a, b]) => ({ start: Math.min(a, b), end: Math.max(a, b) }));
const order = fc.constantFrom<Order>('oldest', 'newest');

// As `span && int8range(start, end)`: an empty window overlaps nothing.
const overlaps = (s: Interval, w: Interval) => w.start < w.end && s.start < w.end && w.start < s.end;
const clip = (s: Interval, w: Interval) => Math.min(s.end, w.end) - Math.max(s.start, w.start);

/** What scanWindow's SQL computes, by brute force over the overlapping segments. */
function scanOf(
  all: readonly Segment[],
  w: Interval,
  orders: ListOrders,
  edgeSize: number,
  limit: number,
): WindowScan {
  const rows = all.filter((s) => overlaps(s, w)).sort((a, b) => a.start - b.start);
  const inOrder = (o: Order) => (o === 'oldest' ? rows : [...rows].reverse());
  let adjacent = 0;
  for (let i = 1; i < rows.length; i++) if (rows[i - 1]!.end === rows[i]!.start) adjacent++;
  const rr = inOrder(orders.ranges).filter((s) => s.state === 'replay_required');
  return {
    count: rows.length,
    adjacent,
    replayRequiredCount: rr.length,
    present: rows.reduce((sum, s) => sum + clip(s, w), 0),
    complete: rows.filter((s) => s.state === 'complete').reduce((sum, s) => sum + clip(s, w), 0),
    first: rows[0]?.start ?? null,
    last: rows[rows.length - 1]?.end ?? null,
    edge: inOrder(orders.ranges).slice(0, edgeSize),
    replayRequired: rr.slice(0, limit + 1),
    batchEdge: inOrder(orders.batches).slice(0, limit + 1),
  };
}

function extentOf(segments: readonly Segment[]): Interval | null {
  if (segments.length === 0) return null;
  return { start: Math.min(...segments.map((s) => s.start)), end: Math.max(...segments.map((s) => s.end)) };
}

const cut = <T>(list: readonly T[], o: Order, limit: number) =>
  (o === 'oldest' ? list : [...list].reverse()).slice(0, limit);

describe('boundCoverage against the full projection', () => {
  it('totals are exact and each list is the full one cut to limit from the asked end', () => {
    fc.assert(
      fc.property(
        fc.array(change, { maxLength: 30 }),
        window,
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 0, max: 6 }),
        fc.option(order, { nil: undefined }),
        (h, w, limit, edgeStart, asked) => {
          const all = applyChanges([], h).insert;
          const extent = extentOf(all);
          const orders: ListOrders = asked
            ? { ranges: asked, batches: asked }
            : { ranges: 'oldest', batches: 'newest' };
          // As queryCoverage does: widen the edge until it tells limit + 1 holes, or is everything.
          let edgeSize = edgeStart;
          let scan = scanOf(all, w, orders, edgeSize, limit);
          while (!edgeSuffices(w, scan.edge, scan.count, orders.ranges, limit)) {
            edgeSize = edgeSize * 4 + 1;
            scan = scanOf(all, w, orders, edgeSize, limit);
          }
          const got = boundCoverage({ window: w, extent, limit, orders, scan });
          const full = projectCoverage({
            window: w,
            segments: all.filter((s) => overlaps(s, w)),
            extent,
            limit: 1e9,
          });
          const pieces = [...full.batches].reverse(); // oldest first

          expect(got.covered).toBe(full.covered);
          expect(got.ratio).toBe(full.ratio);
          expect(got.missingCount).toBe(full.missing.length);
          expect(got.missingTotal).toBe(full.missing.reduce((sum, m) => sum + m.end - m.start, 0));
          expect(got.knownGapsCount).toBe(full.knownGaps.length);
          expect(got.replayRequiredCount).toBe(full.replayRequired.length);
          expect(got.missing).toEqual(cut(full.missing, orders.ranges, limit));
          expect(got.knownGaps).toEqual(cut(full.knownGaps, orders.ranges, limit));
          expect(got.replayRequired).toEqual(cut(full.replayRequired, orders.ranges, limit));
          expect(got.batches).toEqual(cut(pieces, orders.batches, limit));
          expect(got.truncated).toBe(
            full.missing.length > limit || full.replayRequired.length > limit || pieces.length > limit,
          );
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('toCoverageAnswer', () => {
  const seg = (start: number, end: number, version: string): Segment => ({
    start,
    end,
    version,
    state: 'complete',
    requiredVersion: null,
  });
  const segments = [seg(10, 20, 'v1'), seg(30, 40, 'v1'), seg(50, 60, 'v2')];
  const w = { start: 0, end: 100 };
  const orders: ListOrders = { ranges: 'oldest', batches: 'newest' };
  const coverage = boundCoverage({
    window: w,
    extent: { start: 10, end: 60 },
    limit: 1,
    orders,
    scan: scanOf(segments, w, orders, 10, 1),
  });

  it('adds exact totals in the asset unit and a truncated flag to the bounded lists', () => {
    const answer = toCoverageAnswer(
      { asset: 'a', domain: 'integer', window: w, coverage, coveredUntil: 60, lastEventAt: null },
      0,
    );
    expect(answer).toMatchObject({
      missing: [{ start: 0, end: 10 }],
      known_gaps: [{ start: 20, end: 30 }],
      batches: [{ start: 60, end: 100, state: 'gap', version: null }],
      missing_count: 4,
      missing_total: 70,
      known_gaps_count: 2,
      replay_required_count: 0,
      truncated: true,
      covered_until: 60,
      lag_seconds: null,
    });
  });

  it('gives missing_total in seconds for time assets', () => {
    const answer = toCoverageAnswer(
      { asset: 't', domain: 'time', window: w, coverage, coveredUntil: 60, lastEventAt: null },
      0,
    );
    expect(answer.missing_total).toBe(70 / 1e6);
    expect(answer.known_gaps).toEqual([
      { start: '1970-01-01T00:00:00.00002Z', end: '1970-01-01T00:00:00.00003Z' },
    ]);
  });

  it('says as_of only for an answer read from a replica', () => {
    const input = {
      asset: 't',
      domain: 'time' as const,
      window: w,
      coverage,
      coveredUntil: 60,
      lastEventAt: null,
    };
    expect(toCoverageAnswer({ ...input, asOf: Date.UTC(2025, 5, 1, 10) }, 0).as_of).toBe(
      '2025-06-01T10:00:00.000Z',
    );
    expect(toCoverageAnswer({ ...input, asOf: null }, 0)).not.toHaveProperty('as_of');
    expect(toCoverageAnswer(input, 0)).not.toHaveProperty('as_of');
  });
});
