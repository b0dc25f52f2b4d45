/** The calendar's public types and its one error class, shared by the entry and its internals. */
import type { Domain } from '../../types.js';

export type CalendarUnit = 'minute' | 'hour' | 'day' | 'week' | 'month' | 'quarter' | 'year';

export const CALENDAR_UNITS: readonly CalendarUnit[] = [
  'minute',
  'hour',
  'day',
  'week',
  'month',
  'quarter',
  'year',
];

export type Every =
  | { kind: 'unit'; unit: CalendarUnit }
  | { kind: 'duration'; iso: string }
  | { kind: 'integer'; size: number };

export type CalendarErrorReason =
  | 'invalid_every'
  | 'invalid_timezone'
  | 'invalid_origin'
  | 'invalid_point'
  | 'invalid_window'
  | 'out_of_range';

/** Bad calendar input: a configuration or caller error, never a transient failure. */
export class CalendarError extends Error {
  override readonly name = 'CalendarError';
  constructor(
    readonly reason: CalendarErrorReason,
    message: string,
  ) {
    super(message);
  }
}

export interface Period {
  start: number;
  end: number;
  key: string;
}

export interface Calendar {
  readonly domain: Domain;
  readonly every: Every;
  /** The IANA zone of keys and formatted points ('UTC' for integer calendars). */
  readonly timezone: string;
  /** The point k = 0 periods are aligned to (ISO durations and integer buckets). */
  readonly origin: number;
  periodContaining(point: number): Period;
  /** Periods overlapping [start, end), ascending, at most `max` (the first ones) of them. */
  periodsOverlapping(window: { start: number; end: number }, max?: number): Period[];
  /** The period that starts where `period` ends. */
  next(period: Period): Period;
  /** ISO 8601 in the zone with offset (time), the number itself (integer). */
  formatPoint(point: number): string | number;
}

export interface CalendarOptions {
  every: Every;
  /** IANA zone, default 'UTC'. Ignored by integer calendars. */
  timezone?: string;
  /**
   * Alignment of ISO durations and integer buckets. Time: microseconds, default local midnight of
   * 2001-01-01 in the zone (a Monday, first day of a year, quarter, month and ISO week, and late
   * enough that the zone's modern offset applies: PT1H is on local whole hours in Asia/Kathmandu,
   * P1W runs Monday to Monday, P1M and P3M follow months and quarters). Integer: default 0.
   * Calendar units ignore it.
   */
  origin?: number;
}
