/** The `start`/`end` of a period listing as the periods they select: both period boundaries. */
import { parseBound } from '../../core/intervals/bounds.js';
import { CalendarError } from '../../core/periods/calendar.js';
import { periodRange, periodsEnd } from '../../core/periods/periods.js';
import type { Rollup } from '../../core/rollups/rollup.js';
import { HttpError } from '../errors.js';
import { badRequest } from './assets.js';

/**
 * Periods overlapping [start, end) that exist (from `begin` up to now, or up to the upstreams'
 * coverage for integer rollups), as [from, to) between period boundaries; empty when none.
 */
export function periodWindow(
  rollup: Rollup,
  query: { readonly start?: string | undefined; readonly end?: string | undefined },
  nowMs: number,
  coveredHi: number | null,
): { from: number; to: number } {
  const zone = rollup.calendar.timezone ?? 'UTC';
  const parse = (raw: string | undefined, field: 'start' | 'end') =>
    raw === undefined ? null : badRequest(() => parseBound(raw, rollup.domain, field, zone).value);
  const lo = parse(query.start, 'start');
  const hi = parse(query.end, 'end');
  if (lo !== null && hi !== null && hi < lo) {
    throw new HttpError(400, 'end_before_start', `end ${query.end} is before start ${query.start}`);
  }
  try {
    return periodRange(rollup, lo, hi, periodsEnd(rollup, nowMs, coveredHi));
  } catch (error) {
    if (error instanceof CalendarError) throw new HttpError(400, error.reason, error.message);
    throw error;
  }
}
