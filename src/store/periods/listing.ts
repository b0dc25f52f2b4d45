/**
 * A rollup's periods over a window, stored and derived, one page at a time. A page
 * costs its own periods plus the stored rows in its range; counts and the summary cost the stored
 * rows of the window, never the length of the calendar.
 */
import type { Period } from '../../core/calendar.js';
import {
  combineCounts,
  missedBefore,
  type PeriodView,
  type Run,
  type StateCounts,
  summaryRuns,
  viewPeriods,
} from '../../core/periods.js';
import type { PeriodState } from '../../core/policy.js';
import type { Rollup } from '../../core/rollup.js';
import type { Db } from '../pg/db.js';
import { type StoredPeriod, storedCountsIn, storedPeriod, storedPeriods, storedStates } from './reads.js';

/** States only a stored row can have: a filter on them reads rows, not the calendar. */
const STORED_ONLY: ReadonlySet<PeriodState> = new Set(['settling', 'triggered', 'rerun_pending']);
/** Periods one request walks at most looking for a derived state, before it answers a cursor. */
const MAX_SCAN = 50_000;
const SCAN_STEP = 2000;

export interface PageRequest {
  /** The window's periods: [from, to), both period boundaries. */
  readonly from: number;
  readonly to: number;
  readonly order: 'asc' | 'desc';
  /** Continue from this boundary (asc: periods starting at or after it; desc: ending at or before it). */
  readonly at: number | null;
  readonly limit: number;
  readonly state: PeriodState | undefined;
  /** Only periods whose current run is in this state: stored rows only. */
  readonly runState?: string | undefined;
}

export interface Page {
  /** Ascending. */
  readonly periods: PeriodView[];
  /** Where the next page starts, in the request's order; null at the window's end. */
  readonly next: number | null;
}

export async function listPeriods(db: Db, rollup: Rollup, req: PageRequest, nowMs: number): Promise<Page> {
  const from = req.order === 'asc' ? Math.max(req.from, req.at ?? req.from) : req.from;
  const to = req.order === 'desc' ? Math.min(req.to, req.at ?? req.to) : req.to;
  if (from >= to) return { periods: [], next: null };
  if (req.runState) {
    // Every period with a run is stored: read the run-state index, never the calendar.
    const rows = await storedPeriods(db, rollup.id, from, to, { ...req, limit: req.limit + 1 });
    return finish(rows, req);
  }
  if (req.state && STORED_ONLY.has(req.state)) {
    const rows = await storedPeriods(db, rollup.id, from, to, { ...req, limit: req.limit + 1 });
    return finish(rows, req);
  }
  const found: PeriodView[] = [];
  let cursor = req.order === 'asc' ? from : to;
  for (let scanned = 0; found.length <= req.limit && scanned < MAX_SCAN; ) {
    const want = req.state ? SCAN_STEP : Math.min(SCAN_STEP, req.limit + 1 - found.length);
    const periods = walk(rollup, cursor, req.order === 'asc' ? to : from, req.order, want);
    if (periods.length === 0) break;
    scanned += periods.length;
    const lo = periods[0]!.start;
    const hi = periods.at(-1)!.end;
    const rows = await storedPeriods(db, rollup.id, lo, hi, { order: 'asc', limit: periods.length });
    const views = viewPeriods(rollup, periods, new Map(rows.map((r) => [r.start, r])), nowMs);
    const matching = req.state ? views.filter((v) => v.state === req.state) : views;
    found.push(...(req.order === 'asc' ? matching : matching.reverse()));
    cursor = req.order === 'asc' ? hi : lo;
  }
  if (found.length > req.limit) return finish(found, req);
  const done = req.order === 'asc' ? cursor >= to : cursor <= from;
  return { periods: sortAsc(found), next: done ? null : cursor };
}

/**
 * One period as the listings show it: its stored row, or derived when nothing happened to it
 * (`stored` null). The one place the period detail and the status page read a single period.
 */
export async function periodAt(
  db: Db,
  rollup: Rollup,
  period: Period,
  nowMs: number,
): Promise<{ view: PeriodView; stored: StoredPeriod | null }> {
  const stored = await storedPeriod(db, rollup.id, period.start);
  const rows = new Map(stored === null ? [] : [[stored.start, stored]]);
  return { view: viewPeriods(rollup, [period], rows, nowMs)[0]!, stored };
}

/** Counts per state of every period of the window, stored and derived. */
export async function countPeriods(
  db: Db,
  rollup: Rollup,
  from: number,
  to: number,
  nowMs: number,
): Promise<StateCounts> {
  const missedAt = missedBefore(rollup, nowMs);
  const stored = await storedCountsIn(db, rollup.id, from, to, missedAt);
  return combineCounts(rollup, from, to, missedAt, stored);
}

/** The window as runs of equal state: what draws 34,000 hourly periods in one answer. */
export async function summarizePeriods(
  db: Db,
  rollup: Rollup,
  from: number,
  to: number,
  nowMs: number,
): Promise<Run[]> {
  if (from >= to) return [];
  const rows = await storedStates(db, rollup.id, from, to);
  return summaryRuns(rollup, from, to, missedBefore(rollup, nowMs), rows);
}

/** Up to `max` periods from `start` towards `limit`, ascending in the result either way. */
function walk(rollup: Rollup, start: number, limit: number, order: 'asc' | 'desc', max: number): Period[] {
  if (order === 'asc') return rollup.calendar.periodsOverlapping({ start, end: limit }, max);
  const out: Period[] = [];
  for (let at = start; out.length < max && at > limit; ) {
    const p = rollup.calendar.periodContaining(at - 1);
    out.push(p);
    at = p.start;
  }
  return out.reverse();
}

/** A page of `limit` out of `limit + 1` found in the request's order, and the next cursor. */
function finish(found: readonly PeriodView[], req: PageRequest): Page {
  const page = found.slice(0, req.limit);
  const next = found.length > req.limit ? found[req.limit]! : null;
  const cursor = next === null ? null : req.order === 'asc' ? next.start : next.end;
  return { periods: sortAsc(page), next: cursor };
}

const sortAsc = (periods: PeriodView[]) => periods.sort((a, b) => a.start - b.start);
