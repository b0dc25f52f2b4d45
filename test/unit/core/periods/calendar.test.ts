import fc from 'fast-check';
import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import {
  CALENDAR_UNITS,
  type Calendar,
  CalendarError,
  type CalendarUnit,
  createCalendar,
  type Every,
  type Period,
  parseEvery,
} from '../../../../src/core/periods/calendar.js';

const HOUR = 3_600_000_000;
const MINUTE = 60_000_000;
const DAY = 24 * HOUR;

/** Microseconds of an ISO 8601 instant with offset. */
function us(iso: string): number {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad instant ${iso}`);
  return ms * 1000;
}

function unit(u: CalendarUnit, timezone = 'UTC'): Calendar {
  return createCalendar({ every: { kind: 'unit', unit: u }, timezone });
}

function duration(iso: string, timezone = 'UTC', origin?: number): Calendar {
  return createCalendar({
    every: { kind: 'duration', iso },
    timezone,
    ...(origin === undefined ? {} : { origin }),
  });
}

/** Periods as [key, local start, local end] for readable expectations. */
function show(cal: Calendar, periods: Period[]): string[][] {
  return periods.map((p) => [p.key, String(cal.formatPoint(p.start)), String(cal.formatPoint(p.end))]);
}

function expectCalendarError(fn: () => unknown, reason: string): void {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(CalendarError);
    expect((error as CalendarError).reason).toBe(reason);
    expect((error as CalendarError).name).toBe('CalendarError');
    expect((error as CalendarError).message.length).toBeGreaterThan(10);
    return;
  }
  throw new Error('expected a CalendarError');
}

describe('parseEvery', () => {
  it('accepts unit names, ISO durations and integer sizes', () => {
    for (const u of CALENDAR_UNITS) expect(parseEvery(u)).toEqual({ kind: 'unit', unit: u });
    expect(parseEvery(' Day ')).toEqual({ kind: 'unit', unit: 'day' });
    for (const iso of ['PT5M', 'PT15M', 'PT1H', 'P1D', 'P2W', 'P1M', 'P1Y', 'P1DT12H', 'PT0.5S', 'PT1M30S']) {
      expect(parseEvery(iso)).toEqual({ kind: 'duration', iso });
    }
    expect(parseEvery('pt15m')).toEqual({ kind: 'duration', iso: 'PT15M' });
    expect(parseEvery(1000)).toEqual({ kind: 'integer', size: 1000 });
    expect(parseEvery('250')).toEqual({ kind: 'integer', size: 250 });
    expect(parseEvery(Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'integer', size: Number.MAX_SAFE_INTEGER });
  });

  it('rejects zero, negative and malformed values', () => {
    const bad: Array<string | number> = [
      0,
      -5,
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      2 ** 53,
      '0',
      '-10',
      'PT0M',
      'P0D',
      'PT0S',
      '-PT5M',
      'P-1D',
      'P',
      'PT',
      'P1DT',
      'P1.5D',
      'PT1.5H',
      'PT0.0000001S',
      '5 minutes',
      'hourly',
      'days',
      '',
      'garbage',
    ];
    for (const value of bad) expectCalendarError(() => parseEvery(value), 'invalid_every');
  });
});

describe('createCalendar validation', () => {
  it('rejects unknown zones and bad options', () => {
    expectCalendarError(() => unit('day', 'Mars/Olympus_Mons'), 'invalid_timezone');
    expectCalendarError(() => unit('day', ''), 'invalid_timezone');
    expectCalendarError(
      () => createCalendar({ every: { kind: 'unit', unit: 'fortnight' as CalendarUnit } }),
      'invalid_every',
    );
    expectCalendarError(() => createCalendar({ every: { kind: 'duration', iso: 'PT0M' } }), 'invalid_every');
    expectCalendarError(() => createCalendar({ every: { kind: 'duration', iso: 'soon' } }), 'invalid_every');
    expectCalendarError(() => createCalendar({ every: { kind: 'integer', size: 0 } }), 'invalid_every');
    expectCalendarError(() => createCalendar({ every: { kind: 'integer', size: -3 } }), 'invalid_every');
    expectCalendarError(
      () => createCalendar({ every: { kind: 'integer', size: 10 }, origin: 0.5 }),
      'invalid_point',
    );
    expectCalendarError(() => createCalendar({ every: undefined as unknown as Every }), 'invalid_every');
  });

  it('rejects points that are not safe integers', () => {
    const cal = unit('day');
    expectCalendarError(() => cal.periodContaining(1.5), 'invalid_point');
    expectCalendarError(() => cal.periodContaining(Number.NaN), 'invalid_point');
    expectCalendarError(() => cal.periodContaining(2 ** 60), 'invalid_point');
    expectCalendarError(() => cal.periodsOverlapping({ start: 0, end: 0.5 }), 'invalid_point');
    expectCalendarError(() => cal.periodsOverlapping({ start: 0, end: DAY }, -1), 'invalid_window');
    expectCalendarError(() => cal.formatPoint(Number.POSITIVE_INFINITY), 'invalid_point');
  });

  it('reports the domain, zone and origin', () => {
    const day = unit('day', 'Europe/Berlin');
    expect(day.domain).toBe('time');
    expect(day.timezone).toBe('Europe/Berlin');
    expect(day.formatPoint(day.origin)).toBe('2001-01-01T00:00:00+01:00');
    const ints = createCalendar({ every: { kind: 'integer', size: 5 } });
    expect(ints.domain).toBe('integer');
    expect(ints.origin).toBe(0);
  });
});

describe('Europe/Berlin', () => {
  const tz = 'Europe/Berlin';

  it('a spring-forward day is 23 hours and has 23 hourly periods', () => {
    const day = unit('day', tz).periodContaining(us('2025-03-30T12:00:00+02:00'));
    expect(day.key).toBe('2025-03-30');
    expect(day.start).toBe(us('2025-03-30T00:00:00+01:00'));
    expect(day.end).toBe(us('2025-03-31T00:00:00+02:00'));
    expect(day.end - day.start).toBe(23 * HOUR);
    const hours = unit('hour', tz).periodsOverlapping(day);
    expect(hours).toHaveLength(23);
    expect(hours.map((h) => h.key).slice(0, 4)).toEqual([
      '2025-03-30T00',
      '2025-03-30T01',
      '2025-03-30T03',
      '2025-03-30T04',
    ]);
    expect(hours.every((h) => h.end - h.start === HOUR)).toBe(true);
  });

  it('a fall-back day is 25 hours; the repeated hour is two one-hour periods with distinct keys', () => {
    const days = unit('day', tz);
    const day = days.periodContaining(us('2025-10-26T12:00:00+01:00'));
    expect(day.key).toBe('2025-10-26');
    expect(day.end - day.start).toBe(25 * HOUR);
    expect(days.formatPoint(day.start)).toBe('2025-10-26T00:00:00+02:00');
    expect(days.formatPoint(day.end)).toBe('2025-10-27T00:00:00+01:00');
    const hourly = unit('hour', tz);
    const hours = hourly.periodsOverlapping(day);
    expect(hours).toHaveLength(25);
    expect(new Set(hours.map((h) => h.key)).size).toBe(25);
    expect(hours.every((h) => h.end - h.start === HOUR)).toBe(true);
    expect(show(hourly, hours.slice(1, 5))).toEqual([
      ['2025-10-26T01', '2025-10-26T01:00:00+02:00', '2025-10-26T02:00:00+02:00'],
      ['2025-10-26T02', '2025-10-26T02:00:00+02:00', '2025-10-26T02:00:00+01:00'],
      ['2025-10-26T02+01:00', '2025-10-26T02:00:00+01:00', '2025-10-26T03:00:00+01:00'],
      ['2025-10-26T03', '2025-10-26T03:00:00+01:00', '2025-10-26T04:00:00+01:00'],
    ]);
    // Points in either repeated hour land in their own period.
    expect(hourly.periodContaining(us('2025-10-26T02:59:59.999999+02:00')).key).toBe('2025-10-26T02');
    expect(hourly.periodContaining(us('2025-10-26T02:00:00+01:00')).key).toBe('2025-10-26T02+01:00');
  });

  it('minutes and ISO durations disambiguate repeated local times the same way', () => {
    const minutes = unit('minute', tz);
    expect(minutes.periodContaining(us('2025-06-01T10:05:30+02:00')).key).toBe('2025-06-01T10:05');
    expect(minutes.periodContaining(us('2025-10-26T02:30:00+02:00')).key).toBe('2025-10-26T02:30');
    expect(minutes.periodContaining(us('2025-10-26T02:30:00+01:00')).key).toBe('2025-10-26T02:30+01:00');
    const quarterHours = duration('PT15M', tz);
    const day = unit('day', tz).periodContaining(us('2025-10-26T12:00:00+01:00'));
    const periods = quarterHours.periodsOverlapping(day);
    expect(periods).toHaveLength(100);
    expect(new Set(periods.map((p) => p.key)).size).toBe(100);
    expect(periods.map((p) => p.key).slice(8, 13)).toEqual([
      '2025-10-26T02:00',
      '2025-10-26T02:15',
      '2025-10-26T02:30',
      '2025-10-26T02:45',
      '2025-10-26T02:00+01:00',
    ]);
  });

  it('week, month, quarter and year keys and bounds', () => {
    const point = us('2025-06-01T10:00:00+02:00'); // a Sunday
    const expectations: Array<[CalendarUnit, string, string, string]> = [
      ['minute', '2025-06-01T10:00', '2025-06-01T10:00:00+02:00', '2025-06-01T10:01:00+02:00'],
      ['hour', '2025-06-01T10', '2025-06-01T10:00:00+02:00', '2025-06-01T11:00:00+02:00'],
      ['day', '2025-06-01', '2025-06-01T00:00:00+02:00', '2025-06-02T00:00:00+02:00'],
      ['week', '2025-W22', '2025-05-26T00:00:00+02:00', '2025-06-02T00:00:00+02:00'],
      ['month', '2025-06', '2025-06-01T00:00:00+02:00', '2025-07-01T00:00:00+02:00'],
      ['quarter', '2025-Q2', '2025-04-01T00:00:00+02:00', '2025-07-01T00:00:00+02:00'],
      ['year', '2025', '2025-01-01T00:00:00+01:00', '2026-01-01T00:00:00+01:00'],
    ];
    for (const [u, key, start, end] of expectations) {
      const cal = unit(u, tz);
      expect(show(cal, [cal.periodContaining(point)])).toEqual([[key, start, end]]);
    }
    const weeks = unit('week', tz);
    expect(weeks.periodContaining(us('2025-06-02T00:00:00+02:00')).key).toBe('2025-W23');
    // ISO week-years differ from calendar years around New Year.
    expect(weeks.periodContaining(us('2024-12-30T12:00:00+01:00')).key).toBe('2025-W01');
    expect(weeks.periodContaining(us('2021-01-03T12:00:00+01:00')).key).toBe('2020-W53');
    expect(weeks.periodContaining(us('2026-12-31T12:00:00+01:00')).key).toBe('2026-W53');
    // A week containing the fall-back is 169 hours.
    const fallWeek = weeks.periodContaining(us('2025-10-26T12:00:00+01:00'));
    expect(fallWeek.end - fallWeek.start).toBe(169 * HOUR);
    const quarters = unit('quarter', tz);
    expect(quarters.periodContaining(us('2025-12-31T23:59:59.999999+01:00')).key).toBe('2025-Q4');
    expect(quarters.periodContaining(us('2026-01-01T00:00:00+01:00')).key).toBe('2026-Q1');
  });
});

describe('unusual zones', () => {
  it('America/New_York: 23 and 25 hour days', () => {
    const days = unit('day', 'America/New_York');
    const spring = days.periodContaining(us('2025-03-09T12:00:00-04:00'));
    const fall = days.periodContaining(us('2025-11-02T12:00:00-05:00'));
    expect(spring.end - spring.start).toBe(23 * HOUR);
    expect(fall.end - fall.start).toBe(25 * HOUR);
    const hours = unit('hour', 'America/New_York').periodsOverlapping(fall);
    expect(hours.map((h) => h.key).slice(0, 4)).toEqual([
      '2025-11-02T00',
      '2025-11-02T01',
      '2025-11-02T01-05:00',
      '2025-11-02T02',
    ]);
  });

  it('Australia/Lord_Howe shifts by 30 minutes', () => {
    const tz = 'Australia/Lord_Howe';
    const days = unit('day', tz);
    const fallDay = days.periodContaining(us('2025-04-06T12:00:00+10:30'));
    expect(fallDay.end - fallDay.start).toBe(24 * HOUR + 30 * MINUTE);
    const springDay = days.periodContaining(us('2025-10-05T12:00:00+11:00'));
    expect(springDay.end - springDay.start).toBe(23 * HOUR + 30 * MINUTE);
    expect(days.formatPoint(springDay.start)).toBe('2025-10-05T00:00:00+10:30');

    const hourly = unit('hour', tz);
    // Fall back 02:00+11:00 -> 01:30+10:30: the wall clock shows 01:00 once, 02:00 once, so the
    // 01 hour lasts 90 minutes and no key repeats.
    const fallHours = hourly.periodsOverlapping(fallDay);
    expect(fallHours).toHaveLength(24);
    expect(show(hourly, fallHours.slice(1, 3))).toEqual([
      ['2025-04-06T01', '2025-04-06T01:00:00+11:00', '2025-04-06T02:00:00+10:30'],
      ['2025-04-06T02', '2025-04-06T02:00:00+10:30', '2025-04-06T03:00:00+10:30'],
    ]);
    // Spring forward 02:00+10:30 -> 02:30+11:00: the 02 hour starts at 02:30 and lasts 30 minutes.
    const springHours = hourly.periodsOverlapping(springDay);
    expect(springHours).toHaveLength(24);
    expect(show(hourly, springHours.slice(2, 4))).toEqual([
      ['2025-10-05T02', '2025-10-05T02:30:00+11:00', '2025-10-05T03:00:00+11:00'],
      ['2025-10-05T03', '2025-10-05T03:00:00+11:00', '2025-10-05T04:00:00+11:00'],
    ]);
    // Minutes: 01:30..01:59 are shown twice; the second run carries the offset.
    const minutes = unit('minute', tz);
    expect(minutes.periodContaining(us('2025-04-06T01:45:00+11:00')).key).toBe('2025-04-06T01:45');
    expect(minutes.periodContaining(us('2025-04-06T01:45:00+10:30')).key).toBe('2025-04-06T01:45+10:30');
  });

  it('Asia/Kathmandu is +05:45', () => {
    const tz = 'Asia/Kathmandu';
    const day = unit('day', tz);
    const period = day.periodContaining(us('2025-06-01T12:00:00Z'));
    expect(period.start).toBe(us('2025-05-31T18:15:00Z'));
    expect(day.formatPoint(period.start)).toBe('2025-06-01T00:00:00+05:45');
    expect(unit('hour', tz).periodContaining(us('2025-06-01T04:20:00Z')).start).toBe(
      us('2025-06-01T04:15:00Z'),
    );
    // The default origin (2001) is after the 1986 change from +05:30, so PT1H is on local hours.
    const hourly = duration('PT1H', tz);
    expect(hourly.periodContaining(us('2025-06-01T04:20:00Z')).key).toBe('2025-06-01T10:00');
    // The 1986 switch from +05:30 to +05:45 skipped 15 minutes: that day's 00 hour is 45 minutes.
    const h = unit('hour', tz).periodContaining(us('1986-01-01T00:20:00+05:45'));
    expect(h.key).toBe('1986-01-01T00');
    expect(h.end - h.start).toBe(45 * MINUTE);
  });

  it('America/Santiago: local midnight skipped; fall-back at midnight', () => {
    const tz = 'America/Santiago';
    const days = unit('day', tz);
    // 2025-09-07 00:00-04:00 jumped to 01:00-03:00: the day starts at its first instant.
    const spring = days.periodContaining(us('2025-09-07T12:00:00-03:00'));
    expect(show(days, [spring])).toEqual([
      ['2025-09-07', '2025-09-07T01:00:00-03:00', '2025-09-08T00:00:00-03:00'],
    ]);
    expect(days.periodContaining(spring.start - 1).key).toBe('2025-09-06');
    // 2025-04-06 00:00-03:00 fell back to 2025-04-05 23:00-04:00: the 5th has 25 hours.
    const fall = days.periodContaining(us('2025-04-05T12:00:00-03:00'));
    expect(fall.end - fall.start).toBe(25 * HOUR);
    const hours = unit('hour', tz).periodsOverlapping(fall);
    expect(hours.map((p) => p.key).slice(-2)).toEqual(['2025-04-05T23', '2025-04-05T23-04:00']);
  });

  it('Pacific/Apia skipped 2011-12-30 entirely', () => {
    const days = unit('day', 'Pacific/Apia');
    const periods = days.periodsOverlapping({
      start: us('2011-12-29T12:00:00-10:00'),
      end: us('2011-12-31T12:00:00+14:00'),
    });
    expect(periods.map((p) => p.key)).toEqual(['2011-12-29', '2011-12-31']);
    expect(periods[0]!.end).toBe(periods[1]!.start);
  });
});

describe('ISO durations', () => {
  it('PT15M is aligned to the origin, before and after it', () => {
    const cal = duration('PT15M', 'Europe/Berlin');
    expect(show(cal, [cal.periodContaining(us('2025-06-01T10:20:00+02:00'))])).toEqual([
      ['2025-06-01T10:15', '2025-06-01T10:15:00+02:00', '2025-06-01T10:30:00+02:00'],
    ]);
    expect(cal.periodContaining(us('1969-07-20T20:17:40Z')).key).toBe('1969-07-20T21:15');
    const shifted = duration('PT15M', 'UTC', us('2025-01-01T00:05:00Z'));
    expect(shifted.periodContaining(us('2025-06-01T10:20:00Z')).key).toBe('2025-06-01T10:20');
    expect(shifted.periodContaining(us('2024-12-31T23:59:00Z')).key).toBe('2024-12-31T23:50');
    expect(shifted.periodContaining(us('2025-06-01T10:04:59.999999Z')).key).toBe('2025-06-01T09:50');
  });

  it('fixed durations are absolute: PT1H keeps 60 minutes over DST', () => {
    const cal = duration('PT1H', 'Europe/Berlin');
    const day = unit('day', 'Europe/Berlin').periodContaining(us('2025-03-30T12:00:00+02:00'));
    const periods = cal.periodsOverlapping(day);
    expect(periods).toHaveLength(23);
    expect(periods.every((p) => p.end - p.start === HOUR)).toBe(true);
  });

  it('sub-minute starts show seconds in the key', () => {
    const cal = duration('PT30S');
    expect(cal.periodContaining(us('2025-06-01T10:00:45Z')).key).toBe('2025-06-01T10:00:30');
    expect(cal.periodContaining(us('2025-06-01T10:00:15Z')).key).toBe('2025-06-01T10:00');
    const tiny = duration('PT0.25S');
    expect(tiny.periodContaining(us('2025-06-01T10:00:00.3Z')).key).toBe('2025-06-01T10:00:00.250');
  });

  it('date units use calendar arithmetic in the zone', () => {
    const tz = 'Europe/Berlin';
    const daily = duration('P1D', tz);
    const spring = daily.periodContaining(us('2025-03-30T12:00:00+02:00'));
    expect(show(daily, [spring])).toEqual([
      ['2025-03-30T00:00', '2025-03-30T00:00:00+01:00', '2025-03-31T00:00:00+02:00'],
    ]);
    const monthly = duration('P1M', tz);
    expect(show(monthly, [monthly.periodContaining(us('2025-02-14T00:00:00+01:00'))])).toEqual([
      ['2025-02-01T00:00', '2025-02-01T00:00:00+01:00', '2025-03-01T00:00:00+01:00'],
    ]);
    // P2W from the default origin (Monday 2001-01-01) runs Monday to Monday.
    const biweekly = duration('P2W', tz);
    const p = biweekly.periodContaining(us('2025-06-01T12:00:00+02:00'));
    expect(DateTime.fromMillis(p.start / 1000, { zone: tz }).weekday).toBe(1);
    expect(p.end - p.start).toBe(14 * DAY);
    // From 2001-01-01, 2025-05-26 is 12,928 days later: 923 fortnights and 6 days, so the
    // fortnight holding 2025-06-01 starts 2025-05-19.
    expect(p.key).toBe('2025-05-19T00:00');
    // Calendar days from an origin at 02:30: the spring-forward day has no 02:30 (luxon moves it on).
    const origin = us('2025-03-01T02:30:00+01:00');
    const odd = duration('P1D', tz, origin);
    expect(String(odd.formatPoint(odd.periodContaining(us('2025-03-30T12:00:00+02:00')).start))).toBe(
      '2025-03-30T03:30:00+02:00',
    );
    expect(odd.periodContaining(origin - 1).key).toBe('2025-02-28T02:30');
  });

  it('month-end origins clamp like luxon does', () => {
    const monthly = duration('P1M', 'UTC', us('2025-01-31T00:00:00Z'));
    const periods = monthly.periodsOverlapping({
      start: us('2025-01-31T00:00:00Z'),
      end: us('2025-05-01T00:00:00Z'),
    });
    expect(periods.map((p) => p.key)).toEqual([
      '2025-01-31T00:00',
      '2025-02-28T00:00',
      '2025-03-31T00:00',
      '2025-04-30T00:00',
    ]);
  });

  it('stays on whole microseconds from an origin in local mean time (found by the property below)', () => {
    // Kathmandu kept +05:41:16 until 1920; luxon's offset in fractional minutes once made a
    // boundary 8388608998.999999 µs, refused as out of range.
    const fortnights = duration('P2W', 'Asia/Kathmandu', -1596664287391001);
    const period = fortnights.periodContaining(0);
    expect(period).toMatchObject({ start: -1201211391001, end: 8388608999 });
    expect(fortnights.next(period).start).toBe(period.end);
  });
});

describe('integer buckets', () => {
  it('covers negative and positive points', () => {
    const cal = createCalendar({ every: { kind: 'integer', size: 10 } });
    expect(cal.periodContaining(-1)).toEqual({ start: -10, end: 0, key: '-10' });
    expect(cal.periodContaining(0)).toEqual({ start: 0, end: 10, key: '0' });
    expect(cal.periodContaining(9)).toEqual({ start: 0, end: 10, key: '0' });
    expect(cal.periodContaining(-10)).toEqual({ start: -10, end: 0, key: '-10' });
    expect(cal.periodContaining(-11)).toEqual({ start: -20, end: -10, key: '-20' });
    expect(cal.periodsOverlapping({ start: -15, end: 15 }).map((p) => p.key)).toEqual([
      '-20',
      '-10',
      '0',
      '10',
    ]);
    expect(cal.formatPoint(42)).toBe(42);
    expect(cal.next({ start: 0, end: 10, key: '0' })).toEqual({ start: 10, end: 20, key: '10' });
  });

  it('aligns to the origin', () => {
    const cal = createCalendar({ every: { kind: 'integer', size: 10 }, origin: 3 });
    expect(cal.periodContaining(-8)).toEqual({ start: -17, end: -7, key: '-17' });
    expect(cal.periodContaining(3)).toEqual({ start: 3, end: 13, key: '3' });
    expect(cal.periodContaining(2)).toEqual({ start: -7, end: 3, key: '-7' });
  });

  it('is exact far from the origin and refuses periods beyond the safe range', () => {
    const cal = createCalendar({ every: { kind: 'integer', size: 7 } });
    const big = Number.MAX_SAFE_INTEGER - 100;
    const p = cal.periodContaining(big);
    expect(p.start % 7).toBe(0);
    expect(p.start <= big && big < p.end).toBe(true);
    expectCalendarError(() => cal.periodContaining(Number.MAX_SAFE_INTEGER), 'out_of_range');
  });
});

describe('microsecond precision and formatting', () => {
  it('a point 1 µs before a boundary belongs to the previous period', () => {
    const hourly = unit('hour', 'Europe/Berlin');
    const boundary = us('2025-06-01T10:00:00+02:00');
    expect(hourly.periodContaining(boundary - 1).key).toBe('2025-06-01T09');
    expect(hourly.periodContaining(boundary - 1).end).toBe(boundary);
    expect(hourly.periodContaining(boundary).key).toBe('2025-06-01T10');
    // Before 1970 (negative points) too.
    const days = unit('day');
    expect(days.periodContaining(-1).key).toBe('1969-12-31');
    expect(days.periodContaining(-1).end).toBe(0);
    expect(days.periodContaining(0).key).toBe('1970-01-01');
    const custom = duration('PT1M', 'UTC', 1_500);
    expect(custom.periodContaining(1_499).start).toBe(1_500 - MINUTE);
    expect(custom.periodContaining(1_500).start).toBe(1_500);
  });

  it('formats points in the zone with seconds and only non-zero fractions', () => {
    const berlin = unit('day', 'Europe/Berlin');
    expect(berlin.formatPoint(us('2025-06-01T00:00:00+02:00'))).toBe('2025-06-01T00:00:00+02:00');
    expect(berlin.formatPoint(us('2025-06-01T00:00:00.5+02:00'))).toBe('2025-06-01T00:00:00.500+02:00');
    expect(berlin.formatPoint(us('2025-06-01T00:00:00+02:00') + 1)).toBe('2025-06-01T00:00:00.000001+02:00');
    expect(berlin.formatPoint(us('2025-06-01T00:00:00+02:00') - 1)).toBe('2025-05-31T23:59:59.999999+02:00');
    expect(unit('day').formatPoint(-1)).toBe('1969-12-31T23:59:59.999999Z');
    expect(unit('day', 'Europe/London').formatPoint(us('2025-01-01T00:00:00Z'))).toBe(
      '2025-01-01T00:00:00+00:00',
    );
    expect(unit('day', 'America/New_York').formatPoint(us('2025-01-01T05:00:00Z'))).toBe(
      '2025-01-01T00:00:00-05:00',
    );
  });
});

describe('periodsOverlapping', () => {
  const days = unit('day', 'Europe/Berlin');
  const start = us('2025-06-01T00:00:00+02:00');

  it('returns the periods that overlap a half-open window, ascending', () => {
    expect(days.periodsOverlapping({ start, end: start + DAY }).map((p) => p.key)).toEqual(['2025-06-01']);
    expect(days.periodsOverlapping({ start: start + 1, end: start + DAY + 1 }).map((p) => p.key)).toEqual([
      '2025-06-01',
      '2025-06-02',
    ]);
    expect(days.periodsOverlapping({ start: start - 1, end: start }).map((p) => p.key)).toEqual([
      '2025-05-31',
    ]);
  });

  it('is empty for empty or inverted windows', () => {
    expect(days.periodsOverlapping({ start, end: start })).toEqual([]);
    expect(days.periodsOverlapping({ start, end: start - DAY })).toEqual([]);
  });

  it('caps the count', () => {
    const many = unit('minute').periodsOverlapping({ start: 0, end: 365 * DAY });
    expect(many).toHaveLength(100_000);
    expect(many[0]!.key).toBe('1970-01-01T00:00');
    const few = days.periodsOverlapping({ start, end: start + 30 * DAY }, 3);
    expect(few.map((p) => p.key)).toEqual(['2025-06-01', '2025-06-02', '2025-06-03']);
    expect(days.periodsOverlapping({ start, end: start + DAY }, 0)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const ZONES = [
  'UTC',
  'Europe/Berlin',
  'America/New_York',
  'Australia/Lord_Howe',
  'Asia/Kathmandu',
  'America/Santiago',
  'America/St_Johns',
  'Pacific/Apia',
];

const EVERYS: Every[] = [
  ...CALENDAR_UNITS.map((u): Every => ({ kind: 'unit', unit: u })),
  ...['PT15M', 'PT1H', 'PT7M', 'PT90M', 'PT0.001S', 'P1D', 'P1W', 'P1M', 'P2W', 'P1DT12H'].map(
    (iso): Every => ({ kind: 'duration', iso }),
  ),
];

/** Instants near DST and other offset changes, to make the properties look there often. */
const TRANSITIONS = [
  '2025-03-30T01:00:00Z',
  '2025-10-26T01:00:00Z',
  '2025-03-09T07:00:00Z',
  '2025-11-02T06:00:00Z',
  '2025-04-05T15:00:00Z',
  '2025-10-04T15:30:00Z',
  '2025-04-06T03:00:00Z',
  '2025-09-07T04:00:00Z',
  '2011-12-30T10:00:00Z',
  '1985-12-31T18:30:00Z',
].map(us);

const MIN_POINT = us('1900-01-01T00:00:00Z');
const MAX_POINT = us('2100-01-01T00:00:00Z');

const point = fc.oneof(
  fc.integer({ min: MIN_POINT, max: MAX_POINT }),
  fc.constantFrom(...TRANSITIONS).chain((t) => fc.integer({ min: t - 2 * DAY, max: t + 2 * DAY })),
);

const timeCalendar = fc
  .record({ zone: fc.constantFrom(...ZONES), every: fc.constantFrom(...EVERYS), origin: fc.option(point) })
  .map(({ zone, every, origin }) =>
    createCalendar({
      every,
      timezone: zone,
      ...(origin === null || every.kind === 'unit' ? {} : { origin }),
    }),
  );

const integerCalendar = fc
  .record({
    size: fc.integer({ min: 1, max: 10 ** 9 }),
    origin: fc.integer({ min: -(10 ** 12), max: 10 ** 12 }),
  })
  .map(({ size, origin }) => createCalendar({ every: { kind: 'integer', size }, origin }));

const calendarAndPoint = fc.oneof(
  fc.tuple(timeCalendar, point),
  fc.tuple(integerCalendar, fc.integer({ min: -(10 ** 13), max: 10 ** 13 })),
);

/** A window length that spans a handful to a few hundred periods. */
function spanFor(cal: Calendar): number {
  const every = cal.every;
  if (every.kind === 'integer') return every.size * 300;
  if (every.kind === 'unit') {
    const scale: Record<CalendarUnit, number> = {
      minute: 6 * HOUR,
      hour: 10 * DAY,
      day: 200 * DAY,
      week: 1000 * DAY,
      month: 6000 * DAY,
      quarter: 20000 * DAY,
      year: 40000 * DAY,
    };
    return scale[every.unit];
  }
  return every.iso.startsWith('PT') ? (every.iso === 'PT0.001S' ? 200_000 : 10 * DAY) : 2000 * DAY;
}

const LUXON_FORMAT: Record<CalendarUnit, string> = {
  minute: "yyyy-MM-dd'T'HH:mm",
  hour: "yyyy-MM-dd'T'HH",
  day: 'yyyy-MM-dd',
  week: "kkkk-'W'WW",
  month: 'yyyy-MM',
  quarter: "yyyy-'Q'q",
  year: 'yyyy',
};

describe('properties', () => {
  it('periodContaining(p) contains p, is stable at its own bounds, and next() is contiguous', () => {
    fc.assert(
      fc.property(calendarAndPoint, ([cal, p]) => {
        const period = cal.periodContaining(p);
        expect(period.start).toBeLessThanOrEqual(p);
        expect(p).toBeLessThan(period.end);
        expect(period.key.length).toBeGreaterThan(0);
        expect(cal.periodContaining(period.start)).toEqual(period);
        expect(cal.periodContaining(period.end - 1)).toEqual(period);
        const next = cal.next(period);
        expect(next.start).toBe(period.end);
        expect(next.end).toBeGreaterThan(next.start);
        expect(next.key).not.toBe(period.key);
        expect(cal.periodContaining(period.start - 1).end).toBe(period.start);
      }),
      { numRuns: 2000 },
    );
  });

  it('periodsOverlapping tiles the window without gaps or overlaps, with unique keys', () => {
    fc.assert(
      fc.property(calendarAndPoint, fc.double({ min: 0, max: 1, noNaN: true }), ([cal, a], fraction) => {
        const b = a + Math.floor(spanFor(cal) * fraction);
        const periods = cal.periodsOverlapping({ start: a, end: b });
        if (a === b) {
          expect(periods).toEqual([]);
          return;
        }
        expect(periods.length).toBeGreaterThan(0);
        const first = periods[0]!;
        const last = periods[periods.length - 1]!;
        expect(first.start).toBeLessThanOrEqual(a);
        expect(a).toBeLessThan(first.end);
        expect(last.start).toBeLessThan(b);
        expect(b).toBeLessThanOrEqual(last.end);
        for (let i = 1; i < periods.length; i++) {
          expect(periods[i]!.start).toBe(periods[i - 1]!.end);
          expect(periods[i]!.end).toBeGreaterThan(periods[i]!.start);
        }
        expect(new Set(periods.map((p) => p.key)).size).toBe(periods.length);
      }),
      { numRuns: 300 },
    );
  });

  it('a calendar-unit key names the local unit of every point in the period (luxon as oracle)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ZONES), fc.constantFrom(...CALENDAR_UNITS), point, (zone, u, p) => {
        const period = unit(u, zone).periodContaining(p);
        const label = DateTime.fromMillis(Math.floor(p / 1000), { zone }).toFormat(LUXON_FORMAT[u]);
        expect(period.key.slice(0, label.length)).toBe(label);
        expect(period.key.slice(label.length)).toMatch(/^(|[+-]\d\d:\d\d)$/);
      }),
      { numRuns: 2000 },
    );
  });

  it("matches luxon's startOf where the zone's transitions stay inside units", () => {
    // Berlin, New York and Kathmandu shift by whole hours at whole hours, away from midnight, so
    // luxon's startOf(unit) and startOf(unit).plus(1 unit) are the expected bounds there.
    fc.assert(
      fc.property(
        fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kathmandu'),
        fc.constantFrom(...CALENDAR_UNITS),
        fc.integer({ min: us('1987-01-01T00:00:00Z'), max: MAX_POINT }),
        (zone, u, p) => {
          const period = unit(u, zone).periodContaining(p);
          const begin = DateTime.fromMillis(Math.floor(p / 1000), { zone }).startOf(u);
          expect(period.start).toBe(begin.toMillis() * 1000);
          if (u !== 'hour' && u !== 'minute') {
            expect(period.end).toBe(
              begin
                .plus({ [u]: 1 })
                .startOf(u)
                .toMillis() * 1000,
            );
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
