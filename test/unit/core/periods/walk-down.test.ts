import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Calendar,
  createCalendar,
  type Every,
  type Period,
} from '../../../../src/core/periods/calendar.js';
import { countOverlapping } from '../../../../src/core/periods/period-count.js';
import { walkDown } from '../../../../src/core/periods/walk-down.js';

const HOUR = 3_600_000_000;
const YEAR = 365 * 24 * HOUR;
/** 2000-01-01T00:00Z in microseconds. */
const Y2K = Date.UTC(2000, 0, 1) * 1000;

const integer = (size: number, origin = 0) => createCalendar({ every: { kind: 'integer', size }, origin });
const timed = (every: Every, timezone = 'UTC') => createCalendar({ every, timezone });

/** Every window's period, newest first, by resuming walks of at most `max` periods. */
function walkAll(
  calendar: Calendar,
  from: number,
  top: number,
  max: number,
): { periods: Period[]; walks: number } {
  const periods: Period[] = [];
  let at: number | null = top;
  let walks = 0;
  while (at !== null) {
    const w = walkDown(calendar, from, at, max);
    walks++;
    expect(w.periods.length).toBeLessThanOrEqual(max);
    periods.push(...w.periods);
    at = w.below;
  }
  return { periods, walks };
}

describe('walkDown', () => {
  it('walks the periods overlapping a window newest first, and resumes where it stopped', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: -5000, max: 5000 }),
        fc.integer({ min: -5000, max: 5000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: -1000, max: 1000 }),
        (size, a, b, max, origin) => {
          const calendar = integer(size, origin);
          const [from, top] = a <= b ? [a, b] : [b, a];
          const expected = calendar.periodsOverlapping({ start: from, end: top }, 1_000_000).reverse();
          const { periods, walks } = walkAll(calendar, from, top, max);
          expect(periods).toEqual(expected);
          // Each walk but the last is full: a wide window costs no more walks than it must.
          expect(walks).toBe(Math.max(1, Math.ceil(expected.length / max)));
        },
      ),
    );
  });

  it('stops on a period boundary, before which the rest of the window lies', () => {
    const w = walkDown(integer(1000), 311, 8_700_000_000_000, 3);
    expect(w.periods.map((p) => p.start)).toEqual([8_699_999_999_000, 8_699_999_998_000, 8_699_999_997_000]);
    expect(w.below).toBe(8_699_999_997_000);
  });

  it('walks nothing of an empty window, and nothing more with no budget left', () => {
    expect(walkDown(integer(10), 50, 50, 5)).toEqual({ periods: [], below: null });
    expect(walkDown(integer(10), 0, 50, 0)).toEqual({ periods: [], below: 50 });
  });

  it('follows daylight saving in a zone (23 and 25 hour days)', () => {
    const berlin = timed({ kind: 'unit', unit: 'day' }, 'Europe/Berlin');
    const from = Date.UTC(2025, 2, 28) * 1000;
    const top = Date.UTC(2025, 10, 3) * 1000;
    const { periods } = walkAll(berlin, from, top, 7);
    expect(periods).toEqual(berlin.periodsOverlapping({ start: from, end: top }, 1000).reverse());
  });
});

describe('countOverlapping', () => {
  it('counts exactly on fixed grids (integer buckets, UTC units, fixed durations)', () => {
    // Each with its period length: windows of up to a few thousand periods.
    const calendars: Array<[Calendar, number]> = [
      [integer(1000), 1000],
      [integer(7, 3), 7],
      [timed({ kind: 'unit', unit: 'hour' }), HOUR],
      [timed({ kind: 'unit', unit: 'week' }), 7 * 24 * HOUR],
      [timed({ kind: 'duration', iso: 'PT15M' }), HOUR / 4],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...calendars),
        fc.integer({ min: Y2K - 3 * YEAR, max: Y2K + 3 * YEAR }),
        fc.double({ min: 0, max: 3000, noNaN: true }),
        ([calendar, size], start, periods) => {
          const end = start + Math.floor(periods * size);
          expect(countOverlapping(calendar, start, end)).toBe(
            calendar.periodsOverlapping({ start, end }, 1_000_000).length,
          );
        },
      ),
    );
  });

  it('counts a huge window by arithmetic', () => {
    expect(countOverlapping(integer(1000), 311, 8_700_000_000_000)).toBe(8_700_000_000);
    expect(countOverlapping(integer(1000), 0, 1000)).toBe(1);
    expect(countOverlapping(integer(1000), 999, 1001)).toBe(2);
    expect(countOverlapping(integer(1000), 5, 5)).toBe(0);
  });

  it('estimates other calendars within a few periods, whatever the span', () => {
    const calendars = [
      timed({ kind: 'unit', unit: 'hour' }, 'Europe/Berlin'),
      timed({ kind: 'unit', unit: 'hour' }, 'Australia/Lord_Howe'),
      timed({ kind: 'unit', unit: 'day' }, 'America/New_York'),
      timed({ kind: 'unit', unit: 'month' }),
      timed({ kind: 'unit', unit: 'quarter' }, 'Asia/Kathmandu'),
      timed({ kind: 'unit', unit: 'year' }),
      timed({ kind: 'duration', iso: 'P1M' }, 'Europe/Berlin'),
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...calendars),
        fc.integer({ min: Y2K - 20 * YEAR, max: Y2K + 20 * YEAR }),
        fc.integer({ min: 0, max: YEAR }),
        (calendar, start, width) => {
          const end = start + width;
          const exact = calendar.periodsOverlapping({ start, end }, 1_000_000).length;
          const estimate = countOverlapping(calendar, start, end);
          expect(Math.abs(estimate - exact)).toBeLessThanOrEqual(3);
        },
      ),
      { numRuns: 60 },
    );
  });
});
