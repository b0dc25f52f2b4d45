import { DateTime, Duration, IANAZone } from 'luxon';
import { BadInputError } from './errors.js';
import type { Domain } from './types.js';

/** A parsed bound: the comparable value (see types.ts) and the producer's text, kept for display. */
export interface Bound {
  readonly domain: Domain;
  readonly value: number;
  readonly text: string;
}

const MICROS_PER_MS = 1000;
// Microseconds must stay safe integers (types.ts): about 1684-07-28 to 2255-06-05. A wider range
// would silently round bounds, claiming or dropping coverage.
const MIN_TIME = -Number.MAX_SAFE_INTEGER;
const MAX_TIME = Number.MAX_SAFE_INTEGER;
const TIME_RANGE = 'the supported range (1684-07-28 to 2255-06-05, microseconds as safe integers)';

/** The grammar of a bound's text once trimmed: a timestamp, or a decimal integer (exported for the API description). */
export const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?$/;
export const DECIMAL = /^-?\d+$/;

/** Zone names found valid: only config values are asked about, so as many as the config names. */
const validZones = new Set<string>();

/**
 * Whether luxon knows the IANA zone. Its own check builds an `Intl.DateTimeFormat` on every call
 * (about 0.1 ms, and ICU memory that glibc keeps after the collector frees it): a config of 1,000
 * rollups asked it thousands of times at start-up, which cost the daemon 25-30 MB of RSS for good.
 * Valid names are remembered; an unknown one is checked each time.
 */
export function isValidZone(zone: string): boolean {
  if (validZones.has(zone)) return true;
  const valid = IANAZone.isValidZone(zone);
  if (valid) validZones.add(zone);
  return valid;
}

/** Which domain a raw JSON bound belongs to; null when it is neither. */
export function domainOf(raw: unknown): Domain | null {
  if (typeof raw === 'number') return 'integer';
  if (typeof raw !== 'string') return null;
  const text = raw.trim();
  if (DECIMAL.test(text)) return 'integer';
  return ISO_TIME.test(text) ? 'time' : null;
}

export function parseIntegerBound(raw: unknown, field: string): Bound {
  if (typeof raw === 'number') {
    if (!Number.isInteger(raw))
      throw new BadInputError('invalid_bound', `${field} must be an integer, got ${raw}`);
    if (!Number.isSafeInteger(raw)) {
      throw new BadInputError('out_of_range', `${field} ${raw} is outside the safe integer range (±2^53-1)`);
    }
    return { domain: 'integer', value: raw, text: String(raw) };
  }
  if (typeof raw === 'string' && DECIMAL.test(raw.trim())) {
    const value = Number(raw.trim());
    if (!Number.isSafeInteger(value)) {
      throw new BadInputError('out_of_range', `${field} ${raw} is outside the safe integer range (±2^53-1)`);
    }
    return { domain: 'integer', value, text: raw.trim() };
  }
  throw new BadInputError(
    'invalid_bound',
    `${field} must be an integer or a decimal string, got ${describe(raw)}`,
  );
}

/**
 * ISO 8601 date or date-time. An offset may be Z, +hh, +hhmm or +hh:mm; without one the local
 * time is read in `zone`. Fractions keep microseconds; finer digits must be zero, since rounding
 * them either way would claim or drop coverage.
 */
export function parseTimeBound(raw: unknown, field: string, zone: string): Bound {
  if (typeof raw !== 'string') {
    throw new BadInputError(
      'invalid_bound',
      `${field} must be an ISO 8601 timestamp string, got ${describe(raw)}`,
    );
  }
  const text = raw.trim();
  const m = ISO_TIME.exec(text);
  if (!m) {
    throw new BadInputError(
      'invalid_bound',
      `${field} "${clip(text)}" is not an ISO 8601 timestamp (expected e.g. 2025-06-01T10:05:00Z)${plusHint(text)}`,
    );
  }
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '', offset] = m;
  const digits = frac.padEnd(9, '0');
  if (/[1-9]/.test(digits.slice(6))) {
    throw new BadInputError('invalid_bound', `${field} "${clip(text)}" is finer than a microsecond`);
  }
  const micros = Number(digits.slice(0, 6));
  const fast = offset ? fixedOffsetMillis(y!, mo!, d!, h, mi, s, offset) : null;
  if (fast !== null) {
    const value = fast * MICROS_PER_MS + micros;
    if (!Number.isSafeInteger(value) || value < MIN_TIME || value > MAX_TIME) {
      throw new BadInputError('out_of_range', `${field} "${clip(text)}" is outside ${TIME_RANGE}`);
    }
    return { domain: 'time', value, text };
  }
  const fields = {
    year: Number(y),
    month: Number(mo),
    day: Number(d),
    hour: Number(h),
    minute: Number(mi),
    second: Number(s),
  };
  const dt = DateTime.fromObject(fields, { zone: offset ? offsetZone(offset, field, text) : zone });
  if (!dt.isValid) {
    throw new BadInputError(
      'invalid_bound',
      `${field} "${clip(text)}" is not a valid date-time (${dt.invalidReason})`,
    );
  }
  // luxon moves a local time that a daylight-saving gap skips forward, which would silently shift
  // the bound (an hour slice across the gap would become zero-width); compared with the same
  // fields on a clock without gaps, which normalises 24:00 alike. A date alone means the first
  // instant of that local day, wherever it falls.
  if (!offset && m[4] !== undefined) {
    const wall = DateTime.fromObject(fields, { zone: 'utc' });
    const units = ['year', 'month', 'day', 'hour', 'minute', 'second'] as const;
    if (units.some((unit) => wall[unit] !== dt[unit])) {
      throw new BadInputError(
        'invalid_bound',
        `${field} "${clip(text)}" does not exist in ${zone} (skipped by a daylight-saving change); give an offset`,
      );
    }
  }
  const value = epochMillis(dt) * MICROS_PER_MS + micros;
  if (!Number.isSafeInteger(value) || value < MIN_TIME || value > MAX_TIME) {
    throw new BadInputError('out_of_range', `${field} "${clip(text)}" is outside ${TIME_RANGE}`);
  }
  return { domain: 'time', value, text };
}

/**
 * A `+02:00` offset sent unencoded in a URL query arrives as a space (`+` means space there): say
 * so, since the text shown then looks nothing like what the caller typed.
 */
function plusHint(text: string): string {
  return / \d{2}(:?\d{2})?$/.test(text) && /T\d{2}/.test(text)
    ? '; an offset\'s "+" in a URL query must be sent as %2B'
    : '';
}

/**
 * The common case without luxon (it dominates ingest CPU otherwise): an explicit offset needs no
 * zone rules. Returns null for anything unusual (invalid fields, early years), which then takes
 * the general path and its precise error message.
 */
function fixedOffsetMillis(
  y: string,
  mo: string,
  d: string,
  h: string,
  mi: string,
  s: string,
  offset: string,
): number | null {
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (year < 1000 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59)
    return null;
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return null;
  let offsetMinutes = 0;
  if (offset !== 'Z' && offset !== 'z') {
    const digits = offset.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2) || '0');
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (offset[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  return Date.UTC(year, month - 1, day, hour, minute, second) - offsetMinutes * 60_000;
}

function offsetZone(offset: string, field: string, text: string): string {
  if (offset === 'Z' || offset === 'z') return 'UTC';
  const sign = offset[0];
  const digits = offset.slice(1).replace(':', '');
  const hours = Number(digits.slice(0, 2));
  const minutes = Number(digits.slice(2) || '0');
  if (hours > 23 || minutes > 59)
    throw new BadInputError(
      'invalid_bound',
      `${field} "${clip(text)}" has an offset out of range (${offset})`,
    );
  const total = hours * 60 + minutes;
  return total === 0 ? 'UTC' : `UTC${sign}${Math.floor(total / 60)}:${String(total % 60).padStart(2, '0')}`;
}

/**
 * luxon keeps a zone's offset in minutes, a fraction for the second-level offsets of local mean
 * time (Asia/Kathmandu was +05:41:16 until 1920), so its millisecond count can come out a float
 * error away from the integer it stands for.
 */
export function epochMillis(dt: DateTime): number {
  return Math.round(dt.toMillis());
}

/** start + an ISO 8601 duration, calendar-aware in `zone` (P1D across DST is one local day). */
export function addIsoDuration(start: Bound, iso: string, zone: string): Bound {
  const duration = Duration.fromISO(iso);
  if (!duration.isValid) {
    throw new BadInputError('invalid_duration', `"${clip(iso)}" is not an ISO 8601 duration (e.g. PT5M)`);
  }
  const micros = start.value % MICROS_PER_MS;
  const startMs = (start.value - micros) / MICROS_PER_MS;
  const endMs = epochMillis(DateTime.fromMillis(startMs, { zone }).plus(duration));
  if (endMs <= startMs) {
    throw new BadInputError(
      'invalid_duration',
      `"${clip(iso)}" is not a positive ISO 8601 duration (e.g. PT5M)`,
    );
  }
  const value = endMs * MICROS_PER_MS + micros;
  if (!Number.isSafeInteger(value) || value > MAX_TIME) {
    throw new BadInputError('out_of_range', `${start.text}/${iso} ends outside ${TIME_RANGE}`);
  }
  return { domain: 'time', value, text: formatTime(value) };
}

/** ISO 8601 in UTC; fractional seconds only when present, to the microsecond. */
export function formatTime(value: number): string {
  const [base, micros] = wholeSeconds(value);
  if (micros === 0) return `${base}Z`;
  return `${base}.${String(micros).padStart(6, '0').replace(/0+$/, '')}Z`;
}

/**
 * ISO 8601 in UTC with exactly `digits` (0-6) fractional-second digits, cut rather than rounded:
 * `2025-01-01T00:05:07.000Z` at 3, as Date#toISOString spells it.
 */
export function formatTimeFixed(value: number, digits: number): string {
  const [base, micros] = wholeSeconds(value);
  if (digits === 0) return `${base}Z`;
  return `${base}.${String(micros).padStart(6, '0').slice(0, digits)}Z`;
}

/** `YYYY-MM-DDTHH:MM:SS` of a time value, and its microseconds past that second. */
function wholeSeconds(value: number): [base: string, micros: number] {
  const micros = ((value % 1_000_000) + 1_000_000) % 1_000_000;
  const seconds = (value - micros) / 1_000_000;
  const days = Math.floor(seconds / 86_400);
  const secondOfDay = seconds - days * 86_400;
  const base = `${civilDate(days)}T${pad2(Math.floor(secondOfDay / 3600))}:${pad2(Math.floor(secondOfDay / 60) % 60)}:${pad2(secondOfDay % 60)}`;
  return [base, micros];
}

/**
 * YYYY-MM-DD of a day count since 1970-01-01 (proleptic Gregorian; H. Hinnant's civil_from_days).
 * Date#toISOString costs about a microsecond, and a coverage answer formats thousands of bounds.
 */
function civilDate(days: number): string {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthIndex = Math.floor((5 * dayOfYear + 2) / 153); // March = 0
  const day = dayOfYear - Math.floor((153 * monthIndex + 2) / 5) + 1;
  const month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  // The supported range (see MIN_TIME) keeps years at four digits.
  return `${year}-${pad2(month)}-${pad2(day)}`;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

export function formatPoint(domain: Domain, value: number): string | number {
  return domain === 'time' ? formatTime(value) : value;
}

/** Parses a user-supplied bound of a known domain (query strings, CLI flags). */
export function parseBound(raw: unknown, domain: Domain, field: string, zone = 'UTC'): Bound {
  return domain === 'time' ? parseTimeBound(raw, field, zone) : parseIntegerBound(raw, field);
}

function describe(raw: unknown): string {
  if (raw === null) return 'null';
  if (Array.isArray(raw)) return 'an array';
  if (typeof raw === 'string') return `"${clip(raw)}"`;
  return typeof raw === 'object' ? 'an object' : `${typeof raw} ${String(raw)}`;
}

function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
}
