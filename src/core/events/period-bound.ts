/**
 * The bound on how many periods of one rollup a single event may touch. The scheduler marks every
 * period an event touches; an event over decades of a minutely rollup, or over most of the integer
 * range of a narrow bucket, would be billions of periods: work (and rows) out of all proportion to
 * one event, from anyone allowed to send events. So ingest refuses such an event, naming the
 * rollup, and the producer splits it. The bound passes every sane use: a century of an hourly
 * rollup is under 900,000 periods.
 */
import { BadInputError } from '../errors.js';
import type { Bound } from '../intervals/bounds.js';
import { countOverlapping } from '../periods/period-count.js';
import type { Rollup } from '../rollups/rollup.js';
import type { Domain } from '../types.js';

export const MAX_PERIODS_PER_EVENT = 1_000_000;

/**
 * Refuses (BadInputError `too_many_periods`) an event that touches more than `max` periods of one
 * of `rollups` that reads its asset (in its domain, from its `begin`); returns nothing when it
 * passes. The first such rollup, in the order given, is named.
 */
export function checkPeriodBound(
  event: { readonly asset: string; readonly domain: Domain; readonly start: Bound; readonly end: Bound },
  rollups: readonly Rollup[],
  max = MAX_PERIODS_PER_EVENT,
): void {
  for (const rollup of rollups) {
    if (rollup.domain !== event.domain || !rollup.upstream.includes(event.asset)) continue;
    const from = Math.max(event.start.value, rollup.begin);
    const n = countOverlapping(rollup.calendar, from, event.end.value);
    if (n <= max) continue;
    throw new BadInputError(
      'too_many_periods',
      `the event [${event.start.text}, ${event.end.text}) touches ${n} periods of rollup ${rollup.id} ` +
        `(every ${everyText(rollup)}); an event may touch at most ${max} periods of each rollup ` +
        'reading its asset: split it into smaller events',
    );
  }
}

function everyText({ calendar: { every } }: Rollup): string {
  if (every.kind === 'integer') return String(every.size);
  return every.kind === 'unit' ? every.unit : every.iso;
}
