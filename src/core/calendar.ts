/**
 * Period calendars of rollups (SPEC §5, keys SPEC §8). Pure: no I/O, no clock reads; the only
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
import { DateTime, Duration, IANAZone } from 'luxon';
import type { Domain } from './types.js';

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

export const DEFAULT_MAX_PERIODS = 100_000;

// ---------------------------------------------------------------------------------------------
// parseEvery

const ISO_DURATION =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,6}))?S)?)?$/;

interface ParsedDuration {
  readonly years: number;
  readonly months: number;
  readonly weeks: number;
  readonly days: number;
  /** Hours, minutes and seconds together, in microseconds. */
  readonly timeUs: number;
}

function parseDuration(text: string): ParsedDuration {
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

function isFixed(d: ParsedDuration): boolean {
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

// ---------------------------------------------------------------------------------------------
// Zone offsets

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/**
 * Sampling step when looking for offset transitions. Every transition between two samples with
 * different offsets is found exactly (to the millisecond); two transitions that cancel out within
 * one step would be missed. Since 1900 the tz database has no two transitions closer than four
 * days, so two days leaves a margin.
 */
const SCAN_STEP_MS = 2 * DAY_MS;
/** How far back a fall-back can repeat the wall clock (the largest jumps are one day). */
const REPEAT_LOOKBACK_MS = 2 * DAY_MS;

interface Transition {
  /** First millisecond with the new offset. */
  readonly at: number;
  readonly before: number;
  readonly after: number;
}

interface YearTable {
  readonly initial: number;
  /** Transitions in [Jan 1, next Jan 1) UTC, ascending. */
  readonly transitions: readonly Transition[];
}

/** UTC offsets of one zone in milliseconds, with its transitions, memoised per UTC year. */
class ZoneOffsets {
  private readonly years = new Map<number, YearTable>();
  private readonly zone: IANAZone;

  constructor(readonly name: string) {
    this.zone = IANAZone.create(name);
  }

  private intl(ms: number): number {
    return Math.round(this.zone.offset(ms) * MINUTE_MS);
  }

  private table(year: number): YearTable {
    let table = this.years.get(year);
    if (!table) {
      table = this.build(year);
      this.years.set(year, table);
    }
    return table;
  }

  private build(year: number): YearTable {
    const start = utcDate(year, 0, 1);
    const end = utcDate(year + 1, 0, 1);
    const initial = this.intl(start);
    const transitions: Transition[] = [];
    const previous = this.intl(start - 1);
    if (previous !== initial) transitions.push({ at: start, before: previous, after: initial });
    let a = start;
    let oa = initial;
    while (a < end - 1) {
      const b = Math.min(a + SCAN_STEP_MS, end - 1);
      const ob = this.intl(b);
      if (ob !== oa) this.locate(a, oa, b, ob, transitions);
      a = b;
      oa = ob;
    }
    return { initial, transitions };
  }

  /** Transitions in (a, b], given offset oa at a and ob ≠ oa at b. */
  private locate(a: number, oa: number, b: number, ob: number, out: Transition[]): void {
    let lo = a;
    let hi = b;
    while (hi - lo > 1) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.intl(mid) === oa) lo = mid;
      else hi = mid;
    }
    const oh = this.intl(hi);
    out.push({ at: hi, before: oa, after: oh });
    if (oh !== ob) this.locate(hi, oh, b, ob, out);
  }

  at(ms: number): number {
    const table = this.table(utcYear(ms));
    let offset = table.initial;
    for (const t of table.transitions) {
      if (t.at > ms) break;
      offset = t.after;
    }
    return offset;
  }

  /** The latest transition in (lo, hi]. */
  lastIn(lo: number, hi: number): Transition | undefined {
    for (let y = utcYear(hi), first = utcYear(lo); y >= first; y--) {
      const list = this.table(y).transitions;
      for (let i = list.length - 1; i >= 0; i--) {
        const t = list[i]!;
        if (t.at <= lo) return undefined;
        if (t.at <= hi) return t;
      }
    }
    return undefined;
  }

  /** The earliest transition in (lo, hi]. */
  firstIn(lo: number, hi: number): Transition | undefined {
    for (let y = utcYear(lo), last = utcYear(hi); y <= last; y++) {
      for (const t of this.table(y).transitions) {
        if (t.at > hi) return undefined;
        if (t.at > lo) return t;
      }
    }
    return undefined;
  }
}

const zoneCache = new Map<string, ZoneOffsets>();

function zoneOffsets(name: string): ZoneOffsets {
  let zone = zoneCache.get(name);
  if (!zone) {
    zone = new ZoneOffsets(name);
    zoneCache.set(name, zone);
  }
  return zone;
}

// ---------------------------------------------------------------------------------------------
// Naive wall-clock arithmetic: a local date-time as milliseconds of a UTC-like timeline.

function utcDate(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime();
}

function utcYear(ms: number): number {
  return new Date(ms).getUTCFullYear();
}

function floorMod(a: number, n: number): number {
  return ((a % n) + n) % n;
}

function floorTo(w: number, n: number): number {
  return w - floorMod(w, n);
}

function truncate(w: number, unit: CalendarUnit): number {
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
function following(u: number, unit: CalendarUnit): number {
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

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function ymd(d: Date): string {
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

function unitLabel(u: number, unit: CalendarUnit): string {
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

function formatOffset(offsetMs: number, utc: boolean): string {
  if (utc && offsetMs === 0) return 'Z';
  const sign = offsetMs < 0 ? '-' : '+';
  const total = Math.round(Math.abs(offsetMs) / 1000);
  const text = `${sign}${pad(Math.floor(total / 3600))}:${pad(Math.floor(total / 60) % 60)}`;
  return total % 60 === 0 ? text : `${text}:${pad(total % 60)}`;
}

/** Seconds fraction: nothing when zero, milliseconds when that is exact, else microseconds. */
function fractionText(micros: number): string {
  if (micros === 0) return '';
  return micros % 1000 === 0 ? `.${pad(micros / 1000, 3)}` : `.${pad(micros, 6)}`;
}

// ---------------------------------------------------------------------------------------------
// Points

function checkPoint(point: number, what = 'point'): void {
  if (!Number.isSafeInteger(point)) {
    throw new CalendarError('invalid_point', `${what} must be a safe integer, got ${point}`);
  }
}

function checkResult(value: number): number {
  if (!Number.isSafeInteger(value)) {
    throw new CalendarError('out_of_range', `period bound ${value} is outside the safe integer range`);
  }
  return value;
}

/** Split microseconds into epoch milliseconds (floor) and the microseconds left over (0..999). */
function splitMicros(point: number): [ms: number, sub: number] {
  const sub = floorMod(point, 1000);
  return [(point - sub) / 1000, sub];
}

const UTC_NAMES = new Set(
  ['UTC', 'UCT', 'GMT', 'GMT0', 'GMT+0', 'GMT-0', 'Universal', 'Zulu', 'Greenwich'].flatMap((n) => [
    n.toLowerCase(),
    `etc/${n.toLowerCase()}`,
  ]),
);

/** Time-domain helpers bound to one zone. */
class Zone {
  readonly offsets: ZoneOffsets;
  private readonly utc: boolean;

  constructor(readonly name: string) {
    this.offsets = zoneOffsets(name);
    this.utc = UTC_NAMES.has(name.toLowerCase());
  }

  wall(ms: number): number {
    return ms + this.offsets.at(ms);
  }

  formatPoint(point: number): string {
    const [ms, sub] = splitMicros(point);
    const offset = this.offsets.at(ms);
    const d = new Date(ms + offset);
    const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
    const fraction = fractionText(d.getUTCMilliseconds() * 1000 + sub);
    return `${ymd(d)}T${time}${fraction}${formatOffset(offset, this.utc)}`;
  }

  /**
   * The offset suffix when the wall clock already showed the wall time of instant `ms` before the
   * latest fall-back (the second 02:00 of a Berlin fall-back night), else ''.
   */
  repeatSuffix(ms: number): string {
    const t = this.offsets.lastIn(ms - REPEAT_LOOKBACK_MS, ms);
    if (t && t.after < t.before && ms + t.after < t.at + t.before) return formatOffset(t.after, false);
    return '';
  }

  /** Key of an ISO-duration period: local start to the minute, seconds only when non-zero. */
  durationKey(start: number): string {
    const [ms, sub] = splitMicros(start);
    const d = new Date(this.wall(ms));
    let key = `${ymd(d)}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
    const micros = d.getUTCSeconds() * 1_000_000 + d.getUTCMilliseconds() * 1000 + sub;
    if (micros !== 0) key += `:${pad(d.getUTCSeconds())}${fractionText(micros % 1_000_000)}`;
    return key + this.repeatSuffix(ms);
  }
}

// ---------------------------------------------------------------------------------------------
// Engines: each maps a (validated) point to its period.

type Engine = (point: number) => Period;

function unitEngine(zone: Zone, unit: CalendarUnit): Engine {
  const offsets = zone.offsets;
  const isBoundary = (t: Transition): boolean => {
    const shown = t.at + t.after;
    const label = truncate(shown, unit);
    return label === shown || label !== truncate(t.at + t.before - 1, unit);
  };
  const GUARD = 64;
  /** The latest period start ≤ ms. */
  const startAtOrBefore = (ms: number): number => {
    let t = ms;
    for (let i = 0; i < GUARD; i++) {
      const offset = offsets.at(t);
      const candidate = truncate(t + offset, unit) - offset;
      // Between candidate and t the offset is constant unless a transition intervenes.
      const tr = offsets.lastIn(candidate, t);
      if (!tr) return candidate;
      if (isBoundary(tr)) return tr.at;
      t = tr.at - 1;
    }
    throw new CalendarError('out_of_range', `no ${unit} boundary found before ${ms} ms in ${zone.name}`);
  };
  /** The earliest period start > ms. */
  const startAfter = (ms: number): number => {
    let t = ms;
    for (let i = 0; i < GUARD; i++) {
      const offset = offsets.at(t);
      const candidate = following(truncate(t + offset, unit), unit) - offset;
      const tr = offsets.firstIn(t, candidate);
      if (!tr) return candidate;
      if (isBoundary(tr)) return tr.at;
      t = tr.at;
    }
    throw new CalendarError('out_of_range', `no ${unit} boundary found after ${ms} ms in ${zone.name}`);
  };
  return (point) => {
    const [ms] = splitMicros(point);
    const start = startAtOrBefore(ms);
    const end = startAfter(ms);
    const key = unitLabel(truncate(zone.wall(start), unit), unit) + zone.repeatSuffix(start);
    return { start: checkResult(start * 1000), end: checkResult(end * 1000), key };
  };
}

/** [origin + k·size, origin + (k+1)·size) for the k that holds the point, negative k included. */
function bucketStart(point: number, origin: number, size: number): number {
  let start = origin + Math.floor((point - origin) / size) * size;
  // Float division may be off by one far from the origin; step to the exact bucket.
  while (start > point) start -= size;
  while (start + size <= point) start += size;
  return start;
}

function fixedEngine(zone: Zone, origin: number, sizeUs: number): Engine {
  return (point) => {
    const start = checkResult(bucketStart(point, origin, sizeUs));
    return { start, end: checkResult(start + sizeUs), key: zone.durationKey(start) };
  };
}

/** Calendar arithmetic in the zone: boundary k is origin.plus(k × duration), as luxon adds it. */
function calendarDurationEngine(zone: Zone, origin: number, d: ParsedDuration): Engine {
  const [originMs, originSub] = splitMicros(origin);
  const base = DateTime.fromMillis(originMs, { zone: zone.name });
  const nominalUs =
    (d.years * 365.2425 + d.months * 30.436875 + d.weeks * 7 + d.days) * DAY_MS * 1000 + d.timeUs;
  const boundary = (k: number): number => {
    const moved = base.plus(
      Duration.fromObject({ years: d.years * k, months: d.months * k, weeks: d.weeks * k, days: d.days * k }),
    );
    if (!moved.isValid)
      throw new CalendarError('out_of_range', `period ${k} of ${zone.name} is out of range`);
    return moved.toMillis() * 1000 + originSub + k * d.timeUs;
  };
  return (point) => {
    let k = Math.floor((point - origin) / nominalUs);
    let start = boundary(k);
    let end = boundary(k + 1);
    for (let i = 0; start > point || end <= point; i++) {
      if (i > 1000) throw new CalendarError('out_of_range', `no period found for ${point}`);
      k += start > point ? -1 : 1;
      start = boundary(k);
      end = boundary(k + 1);
    }
    checkResult(start);
    checkResult(end);
    return { start, end, key: zone.durationKey(start) };
  };
}

function integerEngine(origin: number, size: number): Engine {
  return (point) => {
    const start = checkResult(bucketStart(point, origin, size));
    return { start, end: checkResult(start + size), key: String(start) };
  };
}

// ---------------------------------------------------------------------------------------------
// createCalendar

function defaultTimeOrigin(zone: Zone): number {
  // Local midnight of 2001-01-01 (or the first instant of that local day).
  const noonUtc = utcDate(2001, 0, 1) + 12 * HOUR_MS;
  const inside = noonUtc - zone.offsets.at(noonUtc);
  return unitEngine(zone, 'day')(inside * 1000).start;
}

export function createCalendar(opts: CalendarOptions): Calendar {
  const every = opts.every;
  const timezone = opts.timezone ?? 'UTC';
  if (typeof timezone !== 'string' || !IANAZone.isValidZone(timezone)) {
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
