import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyChanges } from '../../src/core/segments.js';
import type { Change, Segment } from '../../src/core/types.js';
import { modelAt } from '../helpers/coverage-model.js';

// Brute-force model: the coverage-state rule evaluated per point over the whole history.
const SIZE = 40;
type Attrs = Pick<Segment, 'version' | 'state' | 'requiredVersion'> | null;

function modelAttrs(history: readonly Change[], p: number): Attrs {
  const { state, version, requiredVersion } = modelAt(history, p);
  return state === 'gap' ? null : { version, state, requiredVersion };
}

function storedAt(segments: readonly Segment[], p: number): Attrs {
  const hits = segments.filter((s) => s.start <= p && p < s.end);
  expect(hits.length).toBeLessThanOrEqual(1);
  const s = hits[0];
  return s === undefined ? null : { version: s.version, state: s.state, requiredVersion: s.requiredVersion };
}

const sameAttrs = (a: Segment, b: Segment): boolean =>
  a.version === b.version && a.state === b.state && a.requiredVersion === b.requiredVersion;

/** Sorted copy; fails unless the segments are non-empty, disjoint and maximally merged. */
function checkIndex(segments: readonly Segment[]): Segment[] {
  const sorted = [...segments].sort((a, b) => a.start - b.start);
  sorted.forEach((s, i) => {
    expect(s.end).toBeGreaterThan(s.start);
    const prev = sorted[i - 1];
    if (prev === undefined) return;
    expect(s.start).toBeGreaterThanOrEqual(prev.end);
    if (s.start === prev.end) expect(sameAttrs(prev, s)).toBe(false);
  });
  return sorted.map(({ start, end, version, state, requiredVersion }) => ({
    start,
    end,
    version,
    state,
    requiredVersion,
  }));
}

const touches = (s: Segment, changes: readonly Change[]): boolean =>
  changes.some((c) => s.start <= c.end && c.start <= s.end);

type Stored = Segment & { id: number };

/** Applies one batch the way the index does: feed touching rows, delete `remove` by id, add `insert`. */
function applyBatch(
  stored: Stored[],
  batch: readonly Change[],
  feedAll: boolean,
  nextId: { n: number },
): Stored[] {
  const fed = (feedAll ? stored : stored.filter((s) => touches(s, batch))).slice().reverse();
  const { remove, insert } = applyChanges(fed, batch);
  for (const r of remove) expect(fed).toContain(r);
  for (const r of remove)
    expect(insert.some((i) => i.start === r.start && i.end === r.end && sameAttrs(i, r))).toBe(false);
  const gone = new Set(remove.map((r) => r.id));
  return [...stored.filter((s) => !gone.has(s.id)), ...insert.map((s) => ({ ...s, id: nextId.n++ }))];
}

const version = fc.constantFrom('v1', 'v2', 'v3', null);
const change: fc.Arbitrary<Change> = fc
  .record({
    kind: fc.constantFrom<Change['kind']>('completion', 'completion', 'replay_requirement'),
    a: fc.integer({ min: 0, max: SIZE }),
    b: fc.integer({ min: 0, max: SIZE }),
    version,
  })
  .map(({ kind, a, b, version }) => ({ kind, start: Math.min(a, b), end: Math.max(a, b), version }));
const history = fc.array(change, { maxLength: 25 });

describe('applyChanges against the per-point model', () => {
  it('folding a whole history from empty matches the coverage-state rule at every point', () => {
    fc.assert(
      fc.property(history, (h) => {
        const { remove, insert } = applyChanges([], h);
        expect(remove).toEqual([]);
        const index = checkIndex(insert);
        for (let p = -1; p <= SIZE; p++) expect(storedAt(index, p)).toEqual(modelAttrs(h, p));
      }),
      { numRuns: 1000 },
    );
  });

  it('any batch split gives the same index as one batch, and matches the model', () => {
    const split = history.chain((h) =>
      fc.tuple(
        fc.constant(h),
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: h.length, maxLength: h.length }),
        fc.boolean(),
      ),
    );
    fc.assert(
      fc.property(split, ([h, sizes, feedAll]) => {
        const whole = checkIndex(applyChanges([], h).insert);
        let stored: Stored[] = [];
        const nextId = { n: 0 };
        for (let i = 0, k = 0; i < h.length; i += sizes[k++]!) {
          stored = applyBatch(stored, h.slice(i, i + sizes[k]!), feedAll, nextId);
          const prefix = h.slice(0, i + sizes[k]!);
          const index = checkIndex(stored);
          for (let p = -1; p <= SIZE; p++) expect(storedAt(index, p)).toEqual(modelAttrs(prefix, p));
        }
        expect(checkIndex(stored)).toEqual(whole);
      }),
      { numRuns: 500 },
    );
  });

  it('a no-op batch touches no stored segment', () => {
    fc.assert(
      fc.property(history, (h) => {
        const stored = applyChanges([], h).insert;
        // Re-applying the newest completion at each stored piece changes nothing unless a requirement is pending.
        const again = stored
          .filter((s) => s.state === 'complete')
          .map((s): Change => ({ kind: 'completion', start: s.start, end: s.end, version: s.version }));
        const fed = stored.filter((s) => touches(s, again));
        expect(applyChanges(fed, again)).toEqual({ remove: [], insert: [] });
      }),
      { numRuns: 300 },
    );
  });
});

const FIVE_MIN = 5 * 60 * 1_000_000;
const T0 = Date.UTC(2025, 5, 1, 10) * 1000;
const completion = (start: number, end: number, v: string | null): Change => ({
  kind: 'completion',
  start,
  end,
  version: v,
});
const requirement = (start: number, end: number, v: string | null): Change => ({
  kind: 'replay_requirement',
  start,
  end,
  version: v,
});
const slices = (n: number, v: string): Change[] =>
  Array.from({ length: n }, (_, i) => completion(T0 + i * FIVE_MIN, T0 + (i + 1) * FIVE_MIN, v));

describe('applyChanges examples', () => {
  const hour = { start: T0, end: T0 + 12 * FIVE_MIN };
  const seg = (
    version: string | null,
    state: Segment['state'] = 'complete',
    requiredVersion: string | null = null,
  ) => ({
    ...hour,
    version,
    state,
    requiredVersion,
  });

  it('twelve contiguous 5-minute completions become one segment', () => {
    expect(applyChanges([], slices(12, 'v1')).insert).toEqual([seg('v1')]);
  });

  it('contiguous batches ingested one at a time also stay one segment', () => {
    let stored: Stored[] = [];
    const nextId = { n: 0 };
    for (const c of slices(12, 'v1')) stored = applyBatch(stored, [c], false, nextId);
    expect(checkIndex(stored)).toEqual([seg('v1')]);
  });

  it('a reprocessed hour at v2 replaces twelve 5-minute v1 pieces with one v2 segment', () => {
    const [v1] = applyChanges([], slices(12, 'v1')).insert;
    const existing = [{ ...v1!, id: 7 }];
    const { remove, insert } = applyChanges(existing, [completion(hour.start, hour.end, 'v2')]);
    expect(remove).toEqual(existing);
    expect(remove[0]).toBe(existing[0]);
    expect(insert).toEqual([seg('v2')]);
  });

  it('a replay requirement is ended by a completion at the required version', () => {
    const h = [...slices(12, 'v1'), requirement(hour.start, hour.end, 'v2')];
    expect(applyChanges([], h).insert).toEqual([seg('v1', 'replay_required', 'v2')]);
    expect(applyChanges([], [...h, completion(hour.start, hour.end, 'v2')]).insert).toEqual([seg('v2')]);
  });

  it('a completion at a third version also ends the requirement', () => {
    const h = [
      ...slices(12, 'v1'),
      requirement(hour.start, hour.end, 'v2'),
      completion(hour.start, hour.end, 'v3'),
    ];
    expect(applyChanges([], h).insert).toEqual([seg('v3')]);
  });

  it('a partial completion ends the requirement only where it lands', () => {
    const mid = T0 + 6 * FIVE_MIN;
    const h = [
      ...slices(12, 'v1'),
      requirement(hour.start, hour.end, 'v2'),
      completion(hour.start, mid, 'v2'),
    ];
    expect(applyChanges([], h).insert).toEqual([
      { start: hour.start, end: mid, version: 'v2', state: 'complete', requiredVersion: null },
      { start: mid, end: hour.end, version: 'v1', state: 'replay_required', requiredVersion: 'v2' },
    ]);
  });

  it('a second requirement supersedes the first', () => {
    const h = [
      ...slices(12, 'v1'),
      requirement(hour.start, hour.end, 'v2'),
      requirement(hour.start, hour.end, 'v3'),
    ];
    expect(applyChanges([], h).insert).toEqual([seg('v1', 'replay_required', 'v3')]);
    // Requiring the version already there clears the earlier requirement.
    const back = [...h, requirement(hour.start, hour.end, 'v1')];
    expect(applyChanges([], back).insert).toEqual([seg('v1')]);
  });

  it('a requirement over a gap stores nothing, and zero-width changes do nothing', () => {
    expect(applyChanges([], [requirement(0, 10, 'v2'), completion(5, 5, 'v1')])).toEqual({
      remove: [],
      insert: [],
    });
  });

  it('null is a version distinct from every string', () => {
    const h = [completion(0, 10, null), requirement(0, 5, 'v1'), requirement(5, 10, null)];
    expect(applyChanges([], h).insert).toEqual([
      { start: 0, end: 5, version: null, state: 'replay_required', requiredVersion: 'v1' },
      { start: 5, end: 10, version: null, state: 'complete', requiredVersion: null },
    ]);
  });

  it('a requirement applies to stored segments that predate the batch', () => {
    const existing = [
      { start: 0, end: 10, version: 'v1', state: 'complete' as const, requiredVersion: null },
    ];
    const { remove, insert } = applyChanges(existing, [requirement(5, 20, 'v2')]);
    expect(remove).toEqual(existing);
    expect(insert).toEqual([
      { start: 0, end: 5, version: 'v1', state: 'complete', requiredVersion: null },
      { start: 5, end: 10, version: 'v1', state: 'replay_required', requiredVersion: 'v2' },
    ]);
  });

  it('a large contiguous batch is one fast sweep', () => {
    const n = 100_000;
    const started = performance.now();
    const { insert } = applyChanges([], slices(n, 'v1'));
    expect(insert).toEqual([
      { start: T0, end: T0 + n * FIVE_MIN, version: 'v1', state: 'complete', requiredVersion: null },
    ]);
    // Quadratic splitting would take minutes here; the sweep takes well under a second.
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it('one wide change over many stored segments is fast', () => {
    const n = 50_000;
    const existing = Array.from({ length: n }, (_, i) => ({
      start: 2 * i,
      end: 2 * i + 1,
      version: i % 2 === 0 ? 'v1' : 'v2',
      state: 'complete' as const,
      requiredVersion: null,
    }));
    const started = performance.now();
    const { remove, insert } = applyChanges(existing, [requirement(0, 2 * n, 'v1')]);
    expect(remove.length).toBe(n / 2);
    expect(insert.length).toBe(n / 2);
    expect(performance.now() - started).toBeLessThan(3000);
  });
});
