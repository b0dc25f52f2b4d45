/** Text for the status page: points, durations, ratios and axis ticks. Pure; times in UTC. */
import { formatTime } from '../../../core/intervals/bounds.js';
import type { Domain, Interval } from '../../../core/types.js';

const SECOND = 1_000_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
// 1970-01-05 was a Monday: weekly ticks fall on Mondays.
const MONDAY = 4 * DAY;

/** A point for reading: `2025-06-01 10:05` (seconds and fractions only when present). */
export function formatPointText(domain: Domain, value: number): string {
  if (domain === 'integer') return value.toLocaleString('en-US');
  const iso = formatTime(value);
  return iso.replace('T', ' ').replace(/:00Z$/, '').replace(/Z$/, '');
}

/** A length: `3d 4h`, `20m`, `1m 30s`, `0.25s` for time; a grouped number for integers. */
export function formatLength(domain: Domain, length: number): string {
  if (domain === 'integer') return length.toLocaleString('en-US');
  if (length < SECOND) return `${+(length / SECOND).toPrecision(3)}s`;
  const rounded = Math.round(length / SECOND) * SECOND;
  const i = UNITS.findIndex(([, size]) => rounded >= size);
  const [name, size] = UNITS[i]!;
  const whole = Math.floor(rounded / size);
  const next = UNITS[i + 1];
  const rest = next === undefined ? 0 : Math.floor((rounded - whole * size) / next[1]);
  return rest > 0 && next !== undefined ? `${whole}${name} ${rest}${next[0]}` : `${whole}${name}`;
}

const UNITS: ReadonlyArray<readonly [string, number]> = [
  ['d', DAY],
  ['h', HOUR],
  ['m', MINUTE],
  ['s', SECOND],
];

/** `2025-06-02 10:20 UTC (3h 10m ago)` for an ISO instant, relative to `nowMs`. */
export function formatWhen(iso: string, nowMs: number): string {
  const ms = Date.parse(iso);
  const delta = ms - nowMs;
  const rel =
    Math.abs(delta) < 1000
      ? 'now'
      : delta > 0
        ? `in ${formatLength('time', delta * 1000)}`
        : `${formatLength('time', -delta * 1000)} ago`;
  return `${formatPointText('time', ms * 1000)} UTC (${rel})`;
}

const PERCENT = '\u00a0%';

/**
 * A ratio as a percentage that never rounds up to 100 % (or down to 0 %) unless it is exact. The
 * space before `%` is a no-break space: a narrow window wrapped "100" and "%" onto two lines.
 */
export function formatRatio(ratio: number): string {
  if (ratio >= 1) return `100${PERCENT}`;
  if (ratio <= 0) return `0${PERCENT}`;
  const pct = Math.floor(ratio * 10_000) / 100;
  if (pct === 0) return `<\u00a00.01${PERCENT}`;
  return `${pct.toFixed(2)}${PERCENT}`;
}

export interface Tick {
  readonly at: number;
  readonly label: string;
  /** A second line (the date under a time of day), when it changes from the previous tick. */
  readonly sub?: string | undefined;
}

const FIXED_STEPS = [
  SECOND,
  2 * SECOND,
  5 * SECOND,
  10 * SECOND,
  15 * SECOND,
  30 * SECOND,
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  DAY,
  2 * DAY,
  7 * DAY,
  14 * DAY,
];
const MONTH_STEPS = [1, 2, 3, 6, 12, 24, 60, 120, 600];

/** Axis ticks at round UTC times (or round numbers), at most `maxTicks` of them. */
export function ticks(domain: Domain, window: Interval, maxTicks: number): Tick[] {
  return domain === 'time' ? timeTicks(window, maxTicks) : integerTicks(window, maxTicks);
}

function timeTicks(window: Interval, maxTicks: number): Tick[] {
  const width = window.end - window.start;
  const fixed = FIXED_STEPS.find((step) => width / step <= maxTicks);
  if (fixed !== undefined) {
    const offset = fixed >= 7 * DAY ? MONDAY : 0;
    const points: number[] = [];
    for (let at = Math.ceil((window.start - offset) / fixed) * fixed + offset; at < window.end; at += fixed) {
      points.push(at);
    }
    return labelTimes(points, fixed);
  }
  const months = MONTH_STEPS.find((m) => width / (m * 30.44 * DAY) <= maxTicks) ?? 1200;
  const first = new Date(Math.floor(window.start / 1000));
  let index = first.getUTCFullYear() * 12 + first.getUTCMonth();
  index = Math.ceil(index / months) * months;
  const points: number[] = [];
  for (;;) {
    const at = Date.UTC(Math.floor(index / 12), index % 12, 1) * 1000;
    if (at >= window.end) break;
    if (at >= window.start) points.push(at);
    index += months;
  }
  return labelTimes(points, months * 30 * DAY);
}

function labelTimes(points: readonly number[], step: number): Tick[] {
  let lastDate = '';
  return points.map((at) => {
    const iso = formatTime(at);
    const date = iso.slice(0, 10);
    if (step >= 365 * DAY) return { at, label: iso.slice(0, 4) };
    if (step >= 28 * DAY) return { at, label: iso.slice(0, 7) };
    if (step >= DAY) return { at, label: date };
    const label = step >= MINUTE ? iso.slice(11, 16) : iso.slice(11, 19);
    const sub = date === lastDate ? undefined : date;
    lastDate = date;
    return { at, label, sub };
  });
}

function integerTicks(window: Interval, maxTicks: number): Tick[] {
  const rough = Math.max((window.end - window.start) / maxTicks, 1);
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude;
  const out: Tick[] = [];
  for (let at = Math.ceil(window.start / step) * step; at < window.end; at += step) {
    out.push({ at, label: at.toLocaleString('en-US') });
  }
  return out;
}
