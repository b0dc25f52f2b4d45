/**
 * Sparse periods. A period has a stored row only once something happened to it; every
 * other period since `begin` is derived here from the calendar and the policy, through the same
 * `decide()` as a stored one, so a derived state can never disagree with a stored one. Pure.
 */
import { DateTime } from 'luxon';
import type { Period } from './calendar.js';
import { countStarts } from './period-count.js';
import { decide, PERIOD_STATES, type PeriodFacts, type PeriodState, type Rerun } from './policy.js';
import type { Rollup } from './rollup.js';

/** One period as the listings show it, stored or derived. */
export interface PeriodView extends Period {
  readonly state: PeriodState;
  readonly ratio: number;
  readonly ratios: Readonly<Record<string, number>>;
  readonly generation: number;
  readonly reason: string | null;
  readonly triggeredAt: Date | null;
}

/** A run of consecutive periods in one state: the compact summary of a long listing. */
export interface Run {
  readonly start: number;
  readonly end: number;
  readonly state: PeriodState;
  readonly count: number;
}

export type StateCounts = Record<PeriodState, number>;

const zeroCounts = (): StateCounts => Object.fromEntries(PERIOD_STATES.map((s) => [s, 0])) as StateCounts;

/**
 * The end of the last period that exists: time periods exist up to the one holding now, integer
 * ones up to what the upstreams cover (`coveredHi`, the largest covered end, null for none).
 * Periods exist in [begin, this end); it is a period boundary, `begin` when there are none.
 */
export function periodsEnd(rollup: Rollup, nowMs: number, coveredHi: number | null): number {
  if (rollup.domain === 'time') {
    const end = rollup.calendar.periodContaining(nowMs * 1000).end;
    return Math.max(end, rollup.begin);
  }
  if (coveredHi === null || coveredHi <= rollup.begin) return rollup.begin;
  return rollup.calendar.periodContaining(coveredHi - 1).end;
}

/**
 * A window [lo, hi) (null: open on that side) as the periods it selects: [from, to) between period
 * boundaries, the periods overlapping it that exist, from `begin` up to `end` (periodsEnd). Empty
 * is `{ from, to: from }`. The listings' `start`/`end` and the status page's window both go
 * through here, so the two always select the same periods. May throw CalendarError for a point
 * the calendar cannot place.
 */
export function periodRange(
  rollup: Rollup,
  lo: number | null,
  hi: number | null,
  end: number,
): { from: number; to: number } {
  const { calendar, begin } = rollup;
  const from = lo === null || lo <= begin ? begin : calendar.periodContaining(lo).start;
  const to = hi === null || hi >= end ? end : hi <= from ? from : calendar.periodContaining(hi - 1).end;
  return from < to ? { from, to } : { from, to: from };
}

/** What the policy reads of a period's stored row (src/store/periods/ reads it). */
export interface StoredFacts {
  readonly state: PeriodState;
  readonly generation: number;
  readonly satisfiedSince: Date | null;
  readonly lastChangeAt: Date | null;
  readonly rerun: Rerun | null;
  readonly manualRequested: boolean;
}

/**
 * The facts `decide()` takes about the period ending at `end` from its stored row: the one
 * mapping of a row to facts, for the scheduler's evaluation and the period explanation alike.
 */
export function storedFacts(rollup: Rollup, end: number, row: StoredFacts): PeriodFacts {
  return {
    state: row.state,
    generation: row.generation,
    satisfiedSince: row.satisfiedSince?.getTime() ?? null,
    lastChangeAt: row.lastChangeAt?.getTime() ?? null,
    rerun: row.rerun,
    manual: row.manualRequested,
    endMs: endMs(rollup, end),
  };
}

/** The facts of a period nothing happened to. */
export function untouchedFacts(rollup: Rollup, period: Period): PeriodFacts {
  return {
    state: 'waiting',
    generation: 0,
    satisfiedSince: null,
    lastChangeAt: null,
    rerun: null,
    manual: false,
    endMs: endMs(rollup, period.end),
  };
}

/** A period's end as an instant (whole ms) for the deadline; null for integer rollups. */
const endMs = (rollup: Rollup, end: number): number | null =>
  rollup.domain === 'time' ? Math.floor(end / 1000) : null;

/**
 * The state of a period without a row at `nowMs`: waiting, or missed once its deadline (and, with
 * `on_deadline: trigger`, the catch-up window) has passed. A deadline trigger that is owed but not
 * yet made shows as waiting: the scheduler makes it on its next pass.
 */
export function derivedState(rollup: Rollup, period: Period, nowMs: number): PeriodState {
  const width = period.end - period.start;
  const nothing = rollup.upstream.map(() => ({ ratio: 0, notComplete: width, replayRequired: 0 }));
  const outcome = decide(rollup.policy, untouchedFacts(rollup, period), nothing, nowMs);
  if (outcome.kind === 'miss') return 'missed';
  return outcome.kind === 'wait' ? outcome.state : 'waiting';
}

/**
 * Untouched periods starting before this point are derived `missed`, the others `waiting`
 * (null: none is ever missed). Equal to `derivedState` period by period (a property test holds it).
 */
export function missedBefore(rollup: Rollup, nowMs: number): number | null {
  const { deadlineMs, onDeadline, catchUpMs } = rollup.policy;
  if (deadlineMs === undefined) return null;
  const late = deadlineMs + (onDeadline === 'trigger' ? (catchUpMs ?? Number.POSITIVE_INFINITY) : 0);
  return Number.isFinite(late) ? passedBefore(rollup, nowMs, late) : null;
}

/**
 * Periods starting before the returned point ended at least `lateMs` before `nowMs` (as decide()
 * compares: whole milliseconds of the end); a period boundary, never before `begin`.
 */
export function passedBefore(rollup: Rollup, nowMs: number, lateMs: number): number {
  if (rollup.domain !== 'time') return rollup.begin;
  const lastEnd = (nowMs - lateMs + 1) * 1000 - 1;
  if (lastEnd < rollup.begin) return rollup.begin;
  return rollup.calendar.periodContaining(lastEnd).start;
}

/** When (epoch ms) `passedBefore(rollup, ·, lateMs)` next moves past its value at `nowMs`. */
export function nextPassAt(rollup: Rollup, nowMs: number, lateMs: number): number {
  const lastEnd = Math.max((nowMs - lateMs + 1) * 1000 - 1, rollup.begin);
  const { end } = rollup.calendar.periodContaining(lastEnd);
  return Math.ceil((end + 1) / 1000) + lateMs - 1;
}

/**
 * Counts per state of the periods in [from, to) (both period boundaries): the stored rows'
 * counts, plus the periods without a row split at `missedBefore`.
 */
export function combineCounts(
  rollup: Rollup,
  from: number,
  to: number,
  missedAt: number | null,
  stored: { readonly counts: Readonly<Partial<StateCounts>>; readonly beforeMissed: number },
): StateCounts {
  const counts = zeroCounts();
  let storedTotal = 0;
  for (const s of PERIOD_STATES) {
    counts[s] += stored.counts[s] ?? 0;
    storedTotal += stored.counts[s] ?? 0;
  }
  const total = countStarts(rollup.calendar, from, to);
  const split = missedAt === null ? from : Math.min(Math.max(missedAt, from), to);
  const missedTotal = countStarts(rollup.calendar, from, split);
  counts.missed += missedTotal - stored.beforeMissed;
  counts.waiting += total - missedTotal - (storedTotal - stored.beforeMissed);
  return counts;
}

/** A stored row, as far as the summary needs it. */
export interface StoredState {
  readonly start: number;
  readonly end: number;
  readonly state: PeriodState;
}

/**
 * Runs of equal state over the periods in [from, to) (both period boundaries), from the stored
 * rows in that range (ascending) and the derived stretches between them. Costs O(stored rows),
 * whatever the calendar's length.
 */
export function summaryRuns(
  rollup: Rollup,
  from: number,
  to: number,
  missedAt: number | null,
  rows: readonly StoredState[],
): Run[] {
  const runs: Run[] = [];
  const push = (start: number, end: number, state: PeriodState, count: number) => {
    if (count <= 0) return;
    const last = runs.at(-1);
    if (last && last.state === state && last.end === start)
      runs[runs.length - 1] = { ...last, end, count: last.count + count };
    else runs.push({ start, end, state, count });
  };
  const derived = (a: number, b: number) => {
    if (a >= b) return;
    const split = missedAt === null ? a : Math.min(Math.max(missedAt, a), b);
    push(a, split, 'missed', countStarts(rollup.calendar, a, split));
    push(split, b, 'waiting', countStarts(rollup.calendar, split, b));
  };
  let at = from;
  for (const row of rows) {
    derived(at, row.start);
    push(row.start, row.end, row.state, 1);
    at = row.end;
  }
  derived(at, to);
  return runs;
}

/** The listing's view of calendar periods: the stored row where there is one, derived otherwise. */
export function viewPeriods(
  rollup: Rollup,
  periods: readonly Period[],
  rows: ReadonlyMap<number, PeriodView>,
  nowMs: number,
): PeriodView[] {
  return periods.map(
    (p) =>
      rows.get(p.start) ?? {
        ...p,
        state: derivedState(rollup, p, nowMs),
        ratio: 0,
        ratios: Object.fromEntries(rollup.upstream.map((u) => [u, 0])),
        generation: 0,
        reason: null,
        triggeredAt: null,
      },
  );
}

/**
 * Why a rollup has no period `key`: not one of its keys at all (with its first key as the form to
 * follow), before its begin, or not begun yet.
 */
export function noPeriodMessage(rollup: Rollup, key: string): string {
  const first = rollup.calendar.periodContaining(rollup.begin).key;
  const period = periodOfKey(rollup, key);
  if (period === null) return `rollup ${rollup.id} has no period ${key}: its keys look like ${first}`;
  if (period.start < rollup.begin) return `rollup ${rollup.id} has no period ${key}: it begins with ${first}`;
  return `rollup ${rollup.id} has no period ${key} (yet)`;
}

/**
 * The period a key names (keys: `2025-06-01T10`, `2025-06-01`, `2025-W23`, `2025-06`,
 * `2025-Q2`, `2025`, ISO-duration starts to the minute, integer starts), or null when no period of
 * this rollup has that key.
 */
export function periodOfKey(rollup: Rollup, key: string): Period | null {
  const { calendar } = rollup;
  let point: number;
  if (rollup.domain === 'integer') {
    if (!/^-?\d+$/.test(key)) return null;
    point = Number(key);
    if (!Number.isSafeInteger(point)) return null;
  } else {
    const m = /^(\d{4}(?:-[^+]*)?)([+-]\d{2}:\d{2})?$/.exec(key);
    if (!m) return null;
    const [, local, offset] = m;
    const quarter = /^(\d{4})-Q([1-4])$/.exec(local!);
    const text = quarter
      ? `${quarter[1]}-${String((Number(quarter[2]) - 1) * 3 + 1).padStart(2, '0')}`
      : local!;
    const parsed = DateTime.fromISO(`${text}${offset ?? ''}`, { zone: calendar.timezone });
    if (!parsed.isValid) return null;
    point = parsed.toMillis() * 1000;
  }
  try {
    const period = calendar.periodContaining(point);
    if (period.key === key) return period;
    // A wall time the clock showed twice resolves to its later instant; the key without an
    // offset names the earlier one.
    const before = calendar.periodContaining(period.start - 1);
    return before.key === key ? before : null;
  } catch {
    return null;
  }
}
