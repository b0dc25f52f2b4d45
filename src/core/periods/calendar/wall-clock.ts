/** Naive wall-clock arithmetic: a local date-time as milliseconds of a UTC-like timeline. */
import type { CalendarUnit } from './types.js';

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export function utcDate(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime();
}

export function utcYear(ms: number): number {
  return new Date(ms).getUTCFullYear();
}

export function floorMod(a: number, n: number): number {
  return ((a % n) + n) % n;
}

function floorTo(w: number, n: number): number {
  return w - floorMod(w, n);
}

export function truncate(w: number, unit: CalendarUnit): number {
  switch (unit) {
    case 'minute':
      return floorTo(w, MINUTE_MS);
    case 'hour':
      return floorTo(w, HOUR_MS);
    case 'day':
      return floorTo(w, DAY_MS);
    case 'week': {
      const day = floorTo(w, DAY_MS);
      return day - ((new Date(day).getUTCDay() + 6) % 7) * DAY_MS;
    }
    case 'month':
    case 'quarter':
    case 'year': {
      const d = new Date(w);
      const month = d.getUTCMonth();
      const first = unit === 'month' ? month : unit === 'quarter' ? month - (month % 3) : 0;
      return utcDate(d.getUTCFullYear(), first, 1);
    }
  }
}

/** The start of the unit after the one starting at u. */
export function following(u: number, unit: CalendarUnit): number {
  switch (unit) {
    case 'minute':
      return u + MINUTE_MS;
    case 'hour':
      return u + HOUR_MS;
    case 'day':
      return u + DAY_MS;
    case 'week':
      return u + 7 * DAY_MS;
    case 'month':
    case 'quarter':
    case 'year': {
      const d = new Date(u);
      const step = unit === 'month' ? 1 : unit === 'quarter' ? 3 : 12;
      return utcDate(d.getUTCFullYear(), d.getUTCMonth() + step, 1);
    }
  }
}

export const pad = (n: number, width = 2) => String(n).padStart(width, '0');

export function ymd(d: Date): string {
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

export function unitLabel(u: number, unit: CalendarUnit): string {
  const d = new Date(u);
  switch (unit) {
    case 'minute':
      return `${ymd(d)}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
    case 'hour':
      return `${ymd(d)}T${pad(d.getUTCHours())}`;
    case 'day':
      return ymd(d);
    case 'week': {
      // ISO week: the week-year is the year of the week's Thursday.
      const thursday = new Date(u + 3 * DAY_MS);
      const year = thursday.getUTCFullYear();
      const week = Math.floor((thursday.getTime() - utcDate(year, 0, 1)) / (7 * DAY_MS)) + 1;
      return `${pad(year, 4)}-W${pad(week)}`;
    }
    case 'month':
      return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}`;
    case 'quarter':
      return `${pad(d.getUTCFullYear(), 4)}-Q${Math.floor(d.getUTCMonth() / 3) + 1}`;
    case 'year':
      return pad(d.getUTCFullYear(), 4);
  }
}

export function formatOffset(offsetMs: number, utc: boolean): string {
  if (utc && offsetMs === 0) return 'Z';
  const sign = offsetMs < 0 ? '-' : '+';
  const total = Math.round(Math.abs(offsetMs) / 1000);
  const text = `${sign}${pad(Math.floor(total / 3600))}:${pad(Math.floor(total / 60) % 60)}`;
  return total % 60 === 0 ? text : `${text}:${pad(total % 60)}`;
}

/** Seconds fraction: nothing when zero, milliseconds when that is exact, else microseconds. */
export function fractionText(micros: number): string {
  if (micros === 0) return '';
  return micros % 1000 === 0 ? `.${pad(micros / 1000, 3)}` : `.${pad(micros, 6)}`;
}
