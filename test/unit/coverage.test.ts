import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { piecesOf, projectCoverage } from '../../src/core/coverage.js';
import { applyChanges } from '../../src/core/segments.js';
import type { Change, Interval, Segment } from '../../src/core/types.js';
import { modelAt } from '../helpers/coverage-model.js';

// Brute-force model: the coverage-state rule evaluated per point over the whole history, then the answer read off the points.
const SIZE = 40;
/** Maximal runs of equal state over [from, to), where `at` gives each point's state. */
function runs<T extends object>(from: number, to: number, at: (p: number) => T | null): Array<Interval & T> {
  const out: Array<Interval & T> = [];
  for (let p = from; p < to; p++) {
    const s = at(p);
    if (s === null) continue;
    const prev = out[out.length - 1];
    const { start: _s, end: _e, ...prevState } = prev ?? { start: 0, end: 0 };
    if (prev !== undefined && prev.end === p && JSON.stringify(prevState) === JSON.stringify(s))
      out[out.length - 1] = { ...prev, end: p + 1 };
    else out.push({ start: p, end: p + 1, ...s });
  }
  return out;
}

const version = fc.constantFrom('v1', 'v2', 'v3', null);
const change: fc.Arbitrary<Change> = fc
  .record({
    kind: fc.constantFrom<Change['kind']>('completion', 'completion', 'replay_requirement'),
    a: fc.integer({ min: 0, max: SIZE }),
    b: fc.integer({ min: 0, max: SIZE }),
    version,
  })
  // The edge rejects versionless replay requirements, so only completions may carry null here.
  .map(({ kind, a, b, version }) => ({
    kind,
    start: Math.min(a, b),
    end: Math.max(a, b),
    version: kind === 'replay_requirement' ? (version ?? 'v1') : version,
  }));
const history = fc.array(change, { maxLength: 25 });
const window = fc
  .tuple(fc.integer({ min: -4, max: SIZE + 4 }), fc.integer({ min: -4, max: SIZE + 4 }))
  .map(([a, b]) => ({ start: Math.min(a, b), end: Math.max(a, b) }));

function extentOf(segments: readonly Segment[]): Interval | null {
  if (segments.length === 0) return null;
  return {
    start: Math.min(...segments.map((s) => s.start)),
    end: Math.max(...segments.map((s) => s.end)),
  };
}

describe('projectCoverage against the per-point model', () => {
  it('every field agrees with the coverage-state rule evaluated point by point', () => {
    fc.assert(
      fc.property(history, window, fc.integer({ min: 0, max: 12 }), fc.boolean(), (h, w, limit, reversed) => {
        const all = applyChanges([], h).insert;
        const overlapping = all.filter((s) => s.start < w.end && w.start < s.end);
        if (reversed) overlapping.reverse();
        const got = projectCoverage({ window: w, segments: overlapping, extent: extentOf(all), limit });

        const at = (p: number) => modelAt(h, p);
        const width = w.end - w.start;
        const points = Array.from({ length: width }, (_, i) => at(w.start + i));
        const completeCount = points.filter((s) => s.state === 'complete').length;
        const covered = Array.from({ length: SIZE + 10 }, (_, p) => p).filter((p) => at(p).state !== 'gap');
        const lo = covered.length > 0 ? Math.min(...covered) : 0;
        const hi = covered.length > 0 ? Math.max(...covered) + 1 : 0;
        const pieces = runs(w.start, w.end, at);

        expect(piecesOf(w, overlapping)).toEqual(pieces);
        expect(got.covered).toBe(points.every((s) => s.state === 'complete'));
        expect(got.complete).toBe(completeCount);
        expect(got.ratio).toBe(width > 0 ? completeCount / width : 1);
        expect(got.missing).toEqual(runs(w.start, w.end, (p) => (at(p).state === 'gap' ? {} : null)));
        expect(got.replayRequired).toEqual(
          runs(w.start, w.end, (p) => {
            const s = at(p);
            return s.state === 'replay_required'
              ? { version: s.version, requiredVersion: s.requiredVersion }
              : null;
          }),
        );
        expect(got.knownGaps).toEqual(
          runs(w.start, w.end, (p) => (at(p).state === 'gap' && lo <= p && p < hi ? {} : null)),
        );
        expect(got.batches).toEqual(pieces.slice(Math.max(0, pieces.length - limit)).reverse());
        const versions = new Set(
          points.filter((s) => s.state !== 'gap' && s.version !== null).map((s) => s.version),
        );
        expect(got.versions).toEqual([...versions].sort());
      }),
      { numRuns: 1000 },
    );
  });
});

const seg = (
  start: number,
  end: number,
  version: string | null,
  state: Segment['state'] = 'complete',
  requiredVersion: string | null = null,
): Segment => ({ start, end, version, state, requiredVersion });

describe('projectCoverage examples', () => {
  const segments = [seg(10, 20, 'v1'), seg(20, 30, 'v2'), seg(35, 40, 'v1', 'replay_required', 'v3')];
  const extent = { start: 10, end: 40 };

  it('reports gaps, known gaps and replay requirements of a window', () => {
    const got = projectCoverage({ window: { start: 0, end: 50 }, segments, extent, limit: 200 });
    expect(got.covered).toBe(false);
    expect(got.complete).toBe(20);
    expect(got.ratio).toBe(0.4);
    expect(got.missing).toEqual([
      { start: 0, end: 10 },
      { start: 30, end: 35 },
      { start: 40, end: 50 },
    ]);
    expect(got.knownGaps).toEqual([{ start: 30, end: 35 }]);
    expect(got.replayRequired).toEqual([{ start: 35, end: 40, version: 'v1', requiredVersion: 'v3' }]);
    expect(got.versions).toEqual(['v1', 'v2']);
  });

  it('answers known gaps clipped by an extent that ends inside a gap', () => {
    // The stored extent is only ever segment bounds, but the answer must not rely on that.
    const got = projectCoverage({
      window: { start: 0, end: 50 },
      segments,
      extent: { start: 5, end: 32 },
      limit: 0,
    });
    expect(got.knownGaps).toEqual([
      { start: 5, end: 10 },
      { start: 30, end: 32 },
    ]);
  });

  it('lists batches latest first, adjacent versions apart, up to the limit', () => {
    const got = projectCoverage({ window: { start: 15, end: 45 }, segments, extent, limit: 3 });
    expect(got.batches).toEqual([
      { start: 40, end: 45, state: 'gap', version: null, requiredVersion: null },
      { start: 35, end: 40, state: 'replay_required', version: 'v1', requiredVersion: 'v3' },
      { start: 30, end: 35, state: 'gap', version: null, requiredVersion: null },
    ]);
    const all = projectCoverage({ window: { start: 15, end: 45 }, segments, extent, limit: 1000 });
    expect(all.batches.map((b) => [b.start, b.end])).toEqual([
      [40, 45],
      [35, 40],
      [30, 35],
      [20, 30],
      [15, 20],
    ]);
    expect(projectCoverage({ window: { start: 15, end: 45 }, segments, extent, limit: 0 }).batches).toEqual(
      [],
    );
  });

  it('piecesOf merges equal adjacent segments even if the caller passes them unmerged', () => {
    const unmerged = [seg(5, 8, 'v1'), seg(0, 5, 'v1'), seg(8, 9, 'v2')];
    expect(piecesOf({ start: 0, end: 10 }, unmerged)).toEqual([
      { start: 0, end: 8, state: 'complete', version: 'v1', requiredVersion: null },
      { start: 8, end: 9, state: 'complete', version: 'v2', requiredVersion: null },
      { start: 9, end: 10, state: 'gap', version: null, requiredVersion: null },
    ]);
  });

  it('a window inside one complete segment is covered', () => {
    const got = projectCoverage({ window: { start: 12, end: 18 }, segments, extent, limit: 10 });
    expect(got).toMatchObject({ covered: true, ratio: 1, missing: [], knownGaps: [], versions: ['v1'] });
  });

  it('a zero-width window is covered with ratio 1', () => {
    const got = projectCoverage({ window: { start: 32, end: 32 }, segments: [], extent, limit: 10 });
    expect(got).toMatchObject({ covered: true, ratio: 1, complete: 0, missing: [], batches: [] });
  });

  it('refuses a replay_required segment without a required version', () => {
    const bad = [seg(0, 10, 'v1', 'replay_required', null)];
    expect(() =>
      projectCoverage({ window: { start: 0, end: 10 }, segments: bad, extent: null, limit: 1 }),
    ).toThrow(/no required version/);
  });

  it('an asset with no segments is all missing and has no known gaps', () => {
    const got = projectCoverage({ window: { start: 0, end: 10 }, segments: [], extent: null, limit: 10 });
    expect(got).toMatchObject({ covered: false, ratio: 0, missing: [{ start: 0, end: 10 }], knownGaps: [] });
  });
});
