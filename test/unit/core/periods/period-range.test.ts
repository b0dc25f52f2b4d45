/** periodRange: a window as the periods it selects, checked against a walk of the calendar. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { periodRange } from '../../../../src/core/periods/periods.js';
import { defineRollup, type Rollup } from '../../../../src/core/rollups/rollup.js';

const BEGIN_US = Date.parse('2025-03-01T00:00:00Z') * 1000;
const HOUR_US = 3600e6;

function rollupOf(every: string | number, timezone: string): Rollup {
  return defineRollup({
    id: 'r',
    upstream: ['a'],
    every,
    timezone,
    begin: typeof every === 'number' ? 0 : '2025-03-01T00:00:00Z',
    policy: { settle: 0, on_deadline: 'trigger' },
    rerun: 'never',
  });
}

/** The model: every period from begin to `end`, kept when it overlaps [lo, hi). */
function walk(rollup: Rollup, lo: number | null, hi: number | null, end: number) {
  const all = rollup.calendar.periodsOverlapping({ start: rollup.begin, end }, 100_000);
  return all.filter((p) => (lo === null || p.end > lo) && (hi === null || p.start < hi) && p.end <= end);
}

const cases = [
  {
    name: 'hourly in Europe/Berlin (a DST change inside)',
    rollup: rollupOf('PT1H', 'Europe/Berlin'),
    span: 40 * 24 * HOUR_US,
    origin: BEGIN_US,
  },
  {
    name: 'daily in America/New_York',
    rollup: rollupOf('P1D', 'America/New_York'),
    span: 60 * 24 * HOUR_US,
    origin: BEGIN_US,
  },
  { name: 'integer buckets of 1000', rollup: rollupOf(1000, 'UTC'), span: 50_000, origin: 0 },
];

describe('periodRange', () => {
  for (const c of cases) {
    it(`selects exactly the existing periods overlapping the window: ${c.name}`, () => {
      const { rollup } = c;
      // Points anywhere, and points at a period boundary or one off it, where an off-by-one hides.
      const bounds = rollup.calendar
        .periodsOverlapping({ start: c.origin - c.span / 4, end: c.origin + c.span }, 100_000)
        .map((p) => p.start);
      const point = fc.oneof(
        fc.integer({ min: c.origin - c.span / 4, max: c.origin + c.span }),
        fc.tuple(fc.constantFrom(...bounds), fc.constantFrom(-1, 0, 1)).map(([b, d]) => b + d),
      );
      fc.assert(
        fc.property(
          fc.option(point, { nil: null }),
          fc.option(point, { nil: null }),
          fc.integer({ min: 0, max: 40 }),
          (lo, hi, n) => {
            if (lo !== null && hi !== null && hi < lo) [lo, hi] = [hi, lo];
            // `end` is a period boundary (periodsEnd's answer): the end of the n-th period.
            const periods = rollup.calendar.periodsOverlapping(
              { start: rollup.begin, end: rollup.begin + c.span },
              n + 1,
            );
            const end = n === 0 ? rollup.begin : periods[Math.min(n, periods.length) - 1]!.end;
            const want = walk(rollup, lo, hi, end);
            const got = periodRange(rollup, lo, hi, end);
            if (want.length === 0) expect(got.to).toBe(got.from);
            else expect(got).toEqual({ from: want[0]!.start, to: want.at(-1)!.end });
          },
        ),
      );
    });
  }

  it('is the whole existing range for an open window, and empty before begin', () => {
    const rollup = rollupOf('PT1H', 'UTC');
    const end = rollup.begin + 5 * HOUR_US;
    expect(periodRange(rollup, null, null, end)).toEqual({ from: rollup.begin, to: end });
    const before = periodRange(rollup, null, rollup.begin - HOUR_US, end);
    expect(before.to).toBe(before.from);
  });
});
