import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  clip,
  complement,
  difference,
  intersect,
  measure,
  normalize,
  ratio,
  union,
} from '../../../../src/core/intervals/intervals.js';
import type { Interval } from '../../../../src/core/types.js';

// Brute-force model: a set of intervals over the universe 0..63 is a bitmap.
const SIZE = 64;
type Bits = boolean[];

function toBits(set: readonly Interval[]): Bits {
  const bits: Bits = Array.from({ length: SIZE }, () => false);
  for (const { start, end } of set)
    for (let p = Math.max(0, start); p < Math.min(SIZE, end); p++) bits[p] = true;
  return bits;
}

/** Maximal runs: the unique normalized form of a bitmap. */
function fromBits(bits: Bits): Interval[] {
  const out: Interval[] = [];
  let start = -1;
  for (let p = 0; p <= SIZE; p++) {
    const on = p < SIZE && bits[p] === true;
    if (on && start < 0) start = p;
    if (!on && start >= 0) {
      out.push({ start, end: p });
      start = -1;
    }
  }
  return out;
}

const count = (bits: Bits): number => bits.filter(Boolean).length;

// Bounds in 0..64 in either order, so empty and inverted intervals occur too.
const interval = fc.record({
  start: fc.integer({ min: 0, max: SIZE }),
  end: fc.integer({ min: 0, max: SIZE }),
});
const set = fc.array(interval, { maxLength: 12 });
const runs = { numRuns: 500 };

describe('interval algebra against a bitmap model', () => {
  it('normalize keeps the points and yields the canonical form', () => {
    fc.assert(
      fc.property(set, (a) => {
        expect(normalize(a)).toEqual(fromBits(toBits(a)));
      }),
      runs,
    );
  });

  it('union is bitwise or', () => {
    fc.assert(
      fc.property(set, set, (a, b) => {
        const ba = toBits(a);
        const bb = toBits(b);
        expect(union(a, b)).toEqual(fromBits(ba.map((x, p) => x || bb[p]!)));
      }),
      runs,
    );
  });

  it('intersect is bitwise and', () => {
    fc.assert(
      fc.property(set, set, (a, b) => {
        const ba = toBits(a);
        const bb = toBits(b);
        expect(intersect(a, b)).toEqual(fromBits(ba.map((x, p) => x && bb[p]!)));
      }),
      runs,
    );
  });

  it('difference is a and not b', () => {
    fc.assert(
      fc.property(set, set, (a, b) => {
        const ba = toBits(a);
        const bb = toBits(b);
        expect(difference(a, b)).toEqual(fromBits(ba.map((x, p) => x && !bb[p]!)));
      }),
      runs,
    );
  });

  it('complement is the window minus the set', () => {
    fc.assert(
      fc.property(interval, set, (w, a) => {
        const bw = toBits([w]);
        const ba = toBits(a);
        expect(complement(w, a)).toEqual(fromBits(bw.map((x, p) => x && !ba[p]!)));
      }),
      runs,
    );
  });

  it('clip is the set within the window', () => {
    fc.assert(
      fc.property(set, interval, (a, w) => {
        const bw = toBits([w]);
        const ba = toBits(a);
        expect(clip(a, w)).toEqual(fromBits(ba.map((x, p) => x && bw[p]!)));
      }),
      runs,
    );
  });

  it('measure counts points, overlaps once', () => {
    fc.assert(
      fc.property(set, (a) => {
        expect(measure(a)).toBe(count(toBits(a)));
      }),
      runs,
    );
  });

  it('ratio is the covered share of the window, 1 for an empty window', () => {
    fc.assert(
      fc.property(set, interval, (a, w) => {
        const width = w.end - w.start;
        const bw = toBits([w]);
        const inside = count(toBits(a).map((x, p) => x && bw[p]!));
        expect(ratio(a, w)).toBe(width > 0 ? inside / width : 1);
      }),
      runs,
    );
  });
});

describe('interval algebra examples', () => {
  it('merges adjacent intervals and drops empty ones', () => {
    expect(
      normalize([
        { start: 10, end: 20 },
        { start: 0, end: 10 },
        { start: 5, end: 5 },
        { start: 30, end: 25 },
      ]),
    ).toEqual([{ start: 0, end: 20 }]);
  });

  it('handles negative and large safe integers', () => {
    const big = Number.MAX_SAFE_INTEGER;
    expect(complement({ start: -5, end: big }, [{ start: 0, end: big - 1 }])).toEqual([
      { start: -5, end: 0 },
      { start: big - 1, end: big },
    ]);
  });

  it('returns plain intervals even for richer inputs', () => {
    const seg = { start: 1, end: 2, version: 'v1' };
    expect(normalize([seg])).toEqual([{ start: 1, end: 2 }]);
  });
});
