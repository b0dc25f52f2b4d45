/**
 * How many periods start in [a, b): what the listings need to count periods that have no row
 * without walking years of a calendar on every request. Pure, with a memo.
 *
 * Fixed grids (integer buckets, fixed ISO durations, minute to week in UTC) are counted by
 * arithmetic. Other calendars (zones with daylight saving, months, calendar durations) are walked
 * once per chunk of about CHUNK periods and the chunk's count is remembered per calendar grid, so
 * a thousand rollups on one grid share one walk and a later count costs a sum over chunks plus a
 * binary search in at most two remembered chunks.
 */
import { isFixed, parseDuration } from './calendar/every.js';
import type { Calendar } from './calendar.js';

const CHUNK = 256;
/** Chunks whose period starts are kept for the partial ends of a count, per grid. */
const KEPT_STARTS = 64;

const UTC_UNIT_US: Partial<Record<string, { size: number; origin: number }>> = {
  minute: { size: 60e6, origin: 0 },
  hour: { size: 3_600e6, origin: 0 },
  day: { size: 86_400e6, origin: 0 },
  // 1970-01-05 was a Monday, the first day of an ISO week.
  week: { size: 7 * 86_400e6, origin: 4 * 86_400e6 },
};

interface Grid {
  readonly width: number;
  readonly counts: Map<number, number>;
  readonly starts: Map<number, number[]>;
}

const grids = new Map<string, Grid>();

export function countStarts(calendar: Calendar, a: number, b: number): number {
  if (a >= b) return 0;
  const fixed = fixedGrid(calendar);
  if (fixed) return firstIndexAtOrAfter(b, fixed) - firstIndexAtOrAfter(a, fixed);
  const grid = gridOf(calendar);
  const ca = Math.floor(a / grid.width);
  const cb = Math.floor(b / grid.width);
  const starts = (c: number) => chunkStarts(calendar, grid, c);
  if (ca === cb) return lowerBound(starts(ca), b) - lowerBound(starts(ca), a);
  let n = starts(ca).length - lowerBound(starts(ca), a);
  for (let c = ca + 1; c < cb; c++) n += chunkCount(calendar, grid, c);
  return n + lowerBound(starts(cb), b);
}

/**
 * How many periods overlap [a, b) (a period that starts before `a` counts): what one event over
 * that interval touches. Exact on fixed grids, by arithmetic. On other calendars (zones with
 * daylight saving, months, quarters, years, calendar durations) an estimate from the average
 * period length, within a few periods of the exact count whatever the span (the lengths vary
 * around that average, not drift from it), and in constant time: no walk of the calendar.
 */
export function countOverlapping(calendar: Calendar, a: number, b: number): number {
  if (a >= b) return 0;
  const fixed = fixedGrid(calendar);
  if (fixed) {
    const first = firstIndexAtOrAfter(a, fixed);
    // The period holding `a` starts before it unless `a` is a boundary.
    const before = fixed.origin + first * fixed.size > a ? 1 : 0;
    return firstIndexAtOrAfter(b, fixed) - first + before;
  }
  return Math.ceil((b - a) / averageLengthUs(calendar)) + 1;
}

const DAY_US = 86_400e6;
const MONTH_DAYS = 365.2425 / 12;
const UNIT_DAYS: Record<string, number> = {
  minute: 1 / 1440,
  hour: 1 / 24,
  day: 1,
  week: 7,
  month: MONTH_DAYS,
  quarter: 3 * MONTH_DAYS,
  year: 365.2425,
};

/** The average length of a period, in microseconds (Gregorian years and months). */
function averageLengthUs(calendar: Calendar): number {
  const { every } = calendar;
  if (every.kind === 'integer') return every.size;
  if (every.kind === 'unit') return UNIT_DAYS[every.unit]! * DAY_US;
  const d = parseDuration(every.iso);
  return (d.years * 365.2425 + d.months * MONTH_DAYS + d.weeks * 7 + d.days) * DAY_US + d.timeUs;
}

function fixedGrid(calendar: Calendar): { size: number; origin: number } | null {
  const { every } = calendar;
  if (every.kind === 'integer') return { size: every.size, origin: calendar.origin };
  if (every.kind === 'duration') {
    const d = parseDuration(every.iso);
    return isFixed(d) ? { size: d.timeUs, origin: calendar.origin } : null;
  }
  return calendar.timezone === 'UTC' ? (UTC_UNIT_US[every.unit] ?? null) : null;
}

/** The smallest k with origin + k·size ≥ x. */
function firstIndexAtOrAfter(x: number, { size, origin }: { size: number; origin: number }): number {
  let k = Math.ceil((x - origin) / size);
  // Float division may be off by one far from the origin; step to the exact index.
  while (origin + (k - 1) * size >= x) k--;
  while (origin + k * size < x) k++;
  return k;
}

function gridOf(calendar: Calendar): Grid {
  const id = JSON.stringify([calendar.every, calendar.timezone, calendar.origin]);
  let grid = grids.get(id);
  if (!grid) {
    const sample = calendar.periodContaining(calendar.origin);
    grid = { width: (sample.end - sample.start) * CHUNK, counts: new Map(), starts: new Map() };
    grids.set(id, grid);
  }
  return grid;
}

function chunkCount(calendar: Calendar, grid: Grid, c: number): number {
  return grid.counts.get(c) ?? chunkStarts(calendar, grid, c).length;
}

function chunkStarts(calendar: Calendar, grid: Grid, c: number): number[] {
  const kept = grid.starts.get(c);
  if (kept) {
    grid.starts.delete(c); // most recently used last
    grid.starts.set(c, kept);
    return kept;
  }
  const from = c * grid.width;
  const to = from + grid.width;
  const starts: number[] = [];
  let p = calendar.periodContaining(from);
  if (p.start < from) p = calendar.next(p);
  while (p.start < to) {
    starts.push(p.start);
    p = calendar.next(p);
  }
  grid.counts.set(c, starts.length);
  grid.starts.set(c, starts);
  if (grid.starts.size > KEPT_STARTS) grid.starts.delete(grid.starts.keys().next().value!);
  return starts;
}

/** The number of entries < x in an ascending array. */
function lowerBound(sorted: readonly number[], x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
