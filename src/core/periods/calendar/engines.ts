/** Engines: each maps a (validated) point to its period. */
import { DateTime, Duration } from 'luxon';
import { epochMillis } from '../../intervals/bounds.js';
import type { ParsedDuration } from './every.js';
import { checkResult, splitMicros } from './points.js';
import { CalendarError, type CalendarUnit, type Period } from './types.js';
import { DAY_MS, following, HOUR_MS, truncate, unitLabel, utcDate } from './wall-clock.js';
import type { Zone } from './zone.js';
import type { Transition } from './zone-offsets.js';

export type Engine = (point: number) => Period;

export function unitEngine(zone: Zone, unit: CalendarUnit): Engine {
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

export function fixedEngine(zone: Zone, origin: number, sizeUs: number): Engine {
  return (point) => {
    const start = checkResult(bucketStart(point, origin, sizeUs));
    return { start, end: checkResult(start + sizeUs), key: zone.durationKey(start) };
  };
}

/** Calendar arithmetic in the zone: boundary k is origin.plus(k × duration), as luxon adds it. */
export function calendarDurationEngine(zone: Zone, origin: number, d: ParsedDuration): Engine {
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
    return epochMillis(moved) * 1000 + originSub + k * d.timeUs;
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

export function integerEngine(origin: number, size: number): Engine {
  return (point) => {
    const start = checkResult(bucketStart(point, origin, size));
    return { start, end: checkResult(start + size), key: String(start) };
  };
}

export function defaultTimeOrigin(zone: Zone): number {
  // Local midnight of 2001-01-01 (or the first instant of that local day).
  const noonUtc = utcDate(2001, 0, 1) + 12 * HOUR_MS;
  const inside = noonUtc - zone.offsets.at(noonUtc);
  return unitEngine(zone, 'day')(inside * 1000).start;
}
