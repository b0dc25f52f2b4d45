/**
 * A bounded walk over a calendar, newest period first: how the scheduler marks the periods of a
 * wide event or segment a slice per pass, the freshest ones first, and resumes where it stopped.
 */
import type { Calendar, Period } from './calendar.js';

export interface WalkDown {
  /** The periods overlapping the window, newest first, at most `max` of them. */
  readonly periods: Period[];
  /**
   * Where the walk stopped (a period boundary: the periods overlapping [from, below) are left),
   * or null when it reached the oldest.
   */
  readonly below: number | null;
}

/** The periods overlapping [from, top), newest first, `max` at most; `below` says where to resume. */
export function walkDown(calendar: Calendar, from: number, top: number, max: number): WalkDown {
  const periods: Period[] = [];
  if (from >= top) return { periods, below: null };
  let at = top;
  while (periods.length < max) {
    const p = calendar.periodContaining(at - 1);
    periods.push(p);
    if (p.start <= from) return { periods, below: null };
    at = p.start;
  }
  return { periods, below: at };
}
