/** The status page's window: presets, explicit bounds, zooming and panning. Pure. */
import { domainOf, formatTime, parseBound } from '../../../core/intervals/bounds.js';
import type { Domain, Interval } from '../../../core/types.js';

const SECOND = 1_000_000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;

/** Time presets, widest first; values in microseconds. */
export const PRESETS = [
  ['1y', 365 * DAY],
  ['30d', 30 * DAY],
  ['7d', 7 * DAY],
  ['1d', DAY],
  ['1h', HOUR],
] as const;
export type PresetName = (typeof PRESETS)[number][0];
/** A day: wide enough to show a feed that stopped overnight, narrow enough to read its last hours. */
export const DEFAULT_PRESET: PresetName = '1d';

const MIN_TIME_WIDTH = SECOND;
const MAX_TIME_WIDTH = 50 * 365 * DAY;
// Keep zoomed and panned windows well inside the safe-integer range of microseconds.
const TIME_LIMIT = 8_000_000_000_000_000;

/** A window parameter the page cannot use; its message is shown to the reader. */
export class WindowError extends Error {
  override readonly name = 'WindowError';
}

/** A bound from the query string, kept as text and parsed per asset domain. */
export interface RawBound {
  readonly text: string;
  readonly domain: Domain;
}

export interface WindowQuery {
  readonly preset: PresetName;
  /** Whether `window=` was given (explicit start and end override it). */
  readonly presetGiven: boolean;
  readonly start?: RawBound | undefined;
  readonly end?: RawBound | undefined;
}

/** Validates the window parameters; throws WindowError or BadInputError (from parseBound). */
export function parseWindowQuery(params: {
  window?: string | undefined;
  start?: string | undefined;
  end?: string | undefined;
}): WindowQuery {
  const preset = params.window ?? DEFAULT_PRESET;
  const known = PRESETS.find(([name]) => name === preset);
  if (!known) {
    throw new WindowError(
      `window must be one of ${PRESETS.map(([n]) => n).join(', ')}, or give start and end`,
    );
  }
  const bound = (text: string | undefined, field: string): RawBound | undefined => {
    if (text === undefined || text.trim() === '') return undefined;
    const domain = domainOf(text);
    if (domain === null) {
      throw new WindowError(`${field} must be an ISO 8601 timestamp or an integer`);
    }
    parseBound(text, domain, field); // throws a precise message for e.g. 2025-13-01
    return { text, domain };
  };
  return {
    preset: known[0],
    presetGiven: params.window !== undefined,
    start: bound(params.start, 'start'),
    end: bound(params.end, 'end'),
  };
}

export function presetWidth(name: PresetName): number {
  return PRESETS.find(([n]) => n === name)![1];
}

/**
 * The window for one asset or rollup. Time: explicit bounds win; a missing side is the preset's
 * width away from the other; with neither, the preset ends at now, so every time card shares one
 * axis and a feed that stopped shows as the empty stretch before the now marker.
 * Integer: explicit bounds win, a missing side comes from the covered extent; presets do not apply.
 * Bounds of the other domain are ignored here, so one query can serve both kinds of asset.
 */
export function resolveWindow(
  query: WindowQuery,
  domain: Domain,
  extent: Interval | null,
  nowMicros: number,
): Interval {
  const value = (b: RawBound | undefined, field: string, zone = 'UTC') =>
    b !== undefined && b.domain === domain ? parseBound(b.text, domain, field, zone).value : undefined;
  const start = value(query.start, 'start');
  const end = value(query.end, 'end');
  let window: Interval;
  if (domain === 'time') {
    const width = presetWidth(query.preset);
    if (start !== undefined && end !== undefined) window = { start, end };
    else if (start !== undefined) window = { start, end: start + width };
    else {
      // Now, to the next whole second: the window reads `… → 15:31:24`, the marker at its end.
      const e = end ?? Math.ceil(nowMicros / SECOND) * SECOND;
      window = { start: e - width, end: e };
    }
  } else {
    const lo = start ?? extent?.start ?? 0;
    const hi = end ?? extent?.end ?? lo + 1;
    window = { start: lo, end: hi };
  }
  if (window.end <= window.start) {
    throw new WindowError('the window is empty: end must be after start');
  }
  return clamp(window, domain);
}

/**
 * Shrinks (factor < 1) or widens (factor > 1) a window keeping its end: the newest data stays in
 * view, as zooming around the centre would drop it.
 */
export function zoom(window: Interval, factor: number, domain: Domain): Interval {
  const next = Math.round((window.end - window.start) * factor);
  return clamp({ start: window.end - next, end: window.end }, domain);
}

/** The preset next narrower (`-1`) or wider (`+1`) than `name`, if any. */
export function nextPreset(name: PresetName, step: -1 | 1): PresetName | undefined {
  const i = PRESETS.findIndex(([n]) => n === name);
  // PRESETS is widest first: narrower is further down the list.
  return PRESETS[i - step]?.[0];
}

/** Moves a window by a fraction of its width (negative: earlier). */
export function pan(window: Interval, fraction: number, domain: Domain): Interval {
  const shift = Math.round((window.end - window.start) * fraction);
  return clamp({ start: window.start + shift, end: window.end + shift }, domain);
}

function clamp(window: Interval, domain: Domain): Interval {
  if (domain === 'integer') {
    const start = Math.max(window.start, -Number.MAX_SAFE_INTEGER);
    const end = Math.min(Math.max(window.end, start + 1), Number.MAX_SAFE_INTEGER);
    return { start: Math.min(start, end - 1), end };
  }
  const width = Math.min(Math.max(window.end - window.start, MIN_TIME_WIDTH), MAX_TIME_WIDTH);
  const start = Math.min(Math.max(window.start, -TIME_LIMIT), TIME_LIMIT - width);
  return { start, end: start + width };
}

/** A bound as the page writes it into links: ISO 8601 UTC for time, the number for integers. */
export function boundParam(domain: Domain, value: number): string {
  return domain === 'time' ? formatTime(value) : String(value);
}
