/**
 * Period calendars of rollups and their keys. Pure: no I/O, no clock reads; the only
 * state is a memo of each zone's UTC offsets, derived from the platform's time-zone data (Intl).
 *
 * Points are JavaScript safe integers: microseconds since the Unix epoch in the `time` domain, the
 * value itself in the `integer` domain. Periods are half-open [start, end), contiguous and ordered.
 *
 * Calendar units (minute ... year) follow the local wall clock of the zone. The rule, which also
 * settles every DST oddity, is: a period starts at each instant at which
 *   - the wall clock shows the start of a unit (hh:00:00 for hours, 00:00:00 for days, ...), or
 *   - the unit label (the wall clock truncated to the unit) changes without the wall clock showing
 *     a unit start: a spring-forward jump over a start (a skipped local midnight makes the day
 *     start at its first instant) or a fall-back jump into an earlier unit.
 * Consequences: a 23 h and a 25 h day in Europe/Berlin; on a fall-back day the repeated hour
 * 02:00 is two periods of one real hour each; in Australia/Lord_Howe (30-minute shifts) the hour in
 * which the clock falls back from 02:00 to 01:30 is one 90-minute period, and the hour in which it
 * springs from 02:00 to 02:30 starts at 02:30 and lasts 30 minutes. Every point's period key
 * names the local unit the point's wall-clock time falls in.
 *
 * Keys are unique: when a period starts at a local wall time that the clock already showed before a
 * fall-back (the second 02:00 of 2025-10-26 in Berlin), the key gets the period's UTC offset
 * appended: `2025-10-26T02+01:00` follows `2025-10-26T02`. The same holds for ISO durations
 * (`2025-10-26T02:15+01:00`).
 */
import { isValidZone } from './bounds.js';
import {
  calendarDurationEngine,
  defaultTimeOrigin,
  type Engine,
  fixedEngine,
  integerEngine,
  unitEngine,
} from './calendar/engines.js';
import { isFixed, parseDuration } from './calendar/every.js';
import { checkPoint } from './calendar/points.js';
import {
  CALENDAR_UNITS,
  type Calendar,
  CalendarError,
  type CalendarOptions,
  type Period,
} from './calendar/types.js';
import { Zone } from './calendar/zone.js';
import type { Domain } from './types.js';

export { parseEvery } from './calendar/every.js';
export type {
  Calendar,
  CalendarErrorReason,
  CalendarOptions,
  CalendarUnit,
  Every,
  Period,
} from './calendar/types.js';
export { CALENDAR_UNITS, CalendarError } from './calendar/types.js';

export const DEFAULT_MAX_PERIODS = 100_000;

export function createCalendar(opts: CalendarOptions): Calendar {
  const every = opts.every;
  const timezone = opts.timezone ?? 'UTC';
  if (typeof timezone !== 'string' || !isValidZone(timezone)) {
    throw new CalendarError(
      'invalid_timezone',
      `timezone: ${JSON.stringify(timezone)} is not a known IANA time zone`,
    );
  }
  if (opts.origin !== undefined) checkPoint(opts.origin, 'origin');

  let engine: Engine;
  let domain: Domain;
  let origin: number;
  let zone: Zone | undefined;
  switch (every?.kind) {
    case 'integer': {
      if (!Number.isSafeInteger(every.size) || every.size <= 0) {
        throw new CalendarError(
          'invalid_every',
          `every: an integer bucket size must be a positive safe integer, got ${every.size}`,
        );
      }
      domain = 'integer';
      origin = opts.origin ?? 0;
      engine = integerEngine(origin, every.size);
      break;
    }
    case 'unit': {
      if (!CALENDAR_UNITS.includes(every.unit)) {
        throw new CalendarError('invalid_every', `every: unknown unit ${JSON.stringify(every.unit)}`);
      }
      domain = 'time';
      zone = new Zone(timezone);
      origin = opts.origin ?? defaultTimeOrigin(zone);
      engine = unitEngine(zone, every.unit);
      break;
    }
    case 'duration': {
      const parsed = parseDuration(every.iso);
      domain = 'time';
      zone = new Zone(timezone);
      origin = opts.origin ?? defaultTimeOrigin(zone);
      engine = isFixed(parsed)
        ? fixedEngine(zone, origin, parsed.timeUs)
        : calendarDurationEngine(zone, origin, parsed);
      break;
    }
    default:
      throw new CalendarError(
        'invalid_every',
        `every: expected a unit, duration or integer bucket, got ${JSON.stringify(every)}`,
      );
  }

  const periodContaining = (point: number): Period => {
    checkPoint(point);
    return engine(point);
  };
  const timeZone = zone;
  return {
    domain,
    every,
    timezone: timeZone ? timezone : 'UTC',
    origin,
    periodContaining,
    periodsOverlapping(window, max = DEFAULT_MAX_PERIODS) {
      checkPoint(window.start, 'window start');
      checkPoint(window.end, 'window end');
      if (!Number.isInteger(max) || max < 0) {
        throw new CalendarError('invalid_window', `max must be a non-negative integer, got ${max}`);
      }
      const out: Period[] = [];
      if (window.start >= window.end) return out;
      let period = engine(window.start);
      while (out.length < max && period.start < window.end) {
        out.push(period);
        if (period.end >= window.end) break;
        period = engine(period.end);
      }
      return out;
    },
    next: (period) => periodContaining(period.end),
    formatPoint: (point) => {
      checkPoint(point);
      return timeZone ? timeZone.formatPoint(point) : point;
    },
  };
}
