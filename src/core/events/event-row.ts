/**
 * How the event log keeps what a producer sent in few bytes without losing a character
 * (migrations/0012_compact_events.sql applies the same rules to rows logged before it; keep the two
 * alike): each field in its compact form when that form spells the text back exactly, else as text.
 */
import { type Bound, formatTime } from '../intervals/bounds.js';
import type { Domain } from '../types.js';

const HEX_ID = /^(?:[0-9a-f]{2})+$/;

/** An id of lowercase hexadecimal digits, of even length (a commit or job digest): kept as its bytes. */
export function isHexId(id: string): boolean {
  return HEX_ID.test(id);
}

const PRODUCED_AT_UTC =
  /^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.(\d{1,6}))?Z$/;

/**
 * A `produced_at` in UTC with `Z` and 0-6 fractional digits (Date#toISOString's spelling, Java's
 * Instant's, our examples'), kept as its instant and this digit count; null for any other spelling,
 * kept as text. Every field of that shape is in range but the day of the month, checked here, so
 * the instant and the count spell the text back (formatTimeFixed; event_produced_at() in SQL).
 * Called per logged event: no parse, no formatting.
 */
export function producedAtDigits(text: string): number | null {
  const m = PRODUCED_AT_UTC.exec(text);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  if (year === 0 || Number(m[3]) > daysInMonth(year, month)) return null;
  return m[4]?.length ?? 0;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** The producer's spelling of a bound, or null when it is the canonical one (most events). */
export function textUnlessCanonical(domain: Domain, bound: Bound): string | null {
  const canonical = domain === 'time' ? formatTime(bound.value) : String(bound.value);
  return bound.text === canonical ? null : bound.text;
}
