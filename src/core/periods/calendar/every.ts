/** A rollup's `every`: unit names, ISO 8601 durations and integer bucket sizes. */
import { CALENDAR_UNITS, CalendarError, type Every } from './types.js';

const ISO_DURATION =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,6}))?S)?)?$/;

export interface ParsedDuration {
  readonly years: number;
  readonly months: number;
  readonly weeks: number;
  readonly days: number;
  /** Hours, minutes and seconds together, in microseconds. */
  readonly timeUs: number;
}

export function parseDuration(text: string): ParsedDuration {
  const iso = text.trim().toUpperCase();
  const m = ISO_DURATION.exec(iso);
  const bad = (why: string) => new CalendarError('invalid_every', `every: ${JSON.stringify(text)} ${why}`);
  if (!m || iso === 'P' || iso.endsWith('T')) {
    throw bad('is not an ISO 8601 duration such as PT5M, PT1H, P1D or P2W (fractions only on seconds)');
  }
  const int = (i: number) => Number(m[i] ?? 0);
  const fraction = (m[8] ?? '').padEnd(6, '0');
  const timeUs =
    int(5) * 3_600_000_000 + int(6) * 60_000_000 + int(7) * 1_000_000 + (fraction ? Number(fraction) : 0);
  const parsed = { years: int(1), months: int(2), weeks: int(3), days: int(4), timeUs };
  const values = [parsed.years, parsed.months, parsed.weeks, parsed.days, timeUs];
  if (!values.every(Number.isSafeInteger)) throw bad('is too large');
  if (values.every((v) => v === 0)) throw bad('must be longer than zero');
  return parsed;
}

export function isFixed(d: ParsedDuration): boolean {
  return d.years === 0 && d.months === 0 && d.weeks === 0 && d.days === 0;
}

/**
 * A rollup's `every`: a calendar unit name, an ISO 8601 duration (PT15M, PT1H, P1D, P2W), or a
 * positive safe integer (integer buckets; also as a decimal string).
 */
export function parseEvery(value: string | number): Every {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new CalendarError(
        'invalid_every',
        `every: an integer bucket size must be a positive safe integer, got ${value}`,
      );
    }
    return { kind: 'integer', size: value };
  }
  if (typeof value !== 'string') {
    throw new CalendarError(
      'invalid_every',
      `every: expected a unit name, an ISO duration or an integer, got ${typeof value}`,
    );
  }
  const text = value.trim();
  const lower = text.toLowerCase();
  const unit = CALENDAR_UNITS.find((u) => u === lower);
  if (unit) return { kind: 'unit', unit };
  if (/^\d+$/.test(text)) return parseEvery(Number(text));
  if (/^[pP]/.test(text)) {
    parseDuration(text);
    return { kind: 'duration', iso: text.toUpperCase() };
  }
  throw new CalendarError(
    'invalid_every',
    `every: ${JSON.stringify(value)} is neither one of ${CALENDAR_UNITS.join('|')}, nor a positive ISO 8601 duration (PT15M, P1D), nor a positive integer`,
  );
}
