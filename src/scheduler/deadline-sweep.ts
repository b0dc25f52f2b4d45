/**
 * Deadlines of periods that have no row (periods are sparse). With `on_deadline:
 * trigger` such a period owes a trigger once its deadline passes (within `catch_up`): the sweep
 * gives it a dirty row, newest first and a bounded number per pass, and the evaluation decides it
 * like any other period. With `on_deadline: miss` nothing is written, the period is derived
 * `missed`; the sweep only logs and counts the periods that became missed while it watched.
 * State is in memory and rebuilt on each lease: rows already made are skipped by the insert.
 */

import type { Period } from '../core/calendar.js';
import { missedBefore, nextPassAt, passedBefore } from '../core/periods.js';
import type { Rollup } from '../core/rollup.js';
import type { Metrics } from '../metrics/registry.js';
import { storedStarts } from '../store/periods/reads.js';
import { insertOwed } from '../store/periods/writes.js';
import type { Sql } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';

/** Owed deadline triggers given a row per pass (all rollups together), each rollup's newest first. */
const CATCH_UP_BATCH = 1000;
/** Missed periods logged one by one per sweep; more are summed up in one line. */
const LOGGED_MISSES = 20;

interface Range {
  from: number;
  to: number;
}

export class DeadlineSweep {
  /** Deadlines of periods starting before this boundary are handled. */
  private frontier: number | undefined;
  /** Ranges of periods (boundaries) still owed a row, oldest first; taken from the newest end. */
  private readonly backlog: Range[] = [];
  /** Due at once on a new lease; never for a rollup without a deadline (nothing to sweep). */
  private nextAtMs: number;

  constructor(private readonly rollup: Rollup) {
    this.nextAtMs =
      rollup.policy.deadlineMs === undefined ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
  }

  /** When the sweep has something to do next (epoch ms); +Infinity: never. */
  get wakeAt(): number {
    return this.backlog.length > 0 ? Number.NEGATIVE_INFINITY : this.nextAtMs;
  }

  /**
   * Handles what is due at `nowMs`: returns the periods owed a row now (the caller inserts every
   * rollup's in one statement, `catchUpDeadlines`) and whether more are owed after them.
   */
  async run(
    sql: Sql,
    nowMs: number,
    batch: number,
    log: Logger,
    metrics: Metrics,
  ): Promise<{ owed: Period[]; more: boolean }> {
    const { rollup } = this;
    const { deadlineMs, onDeadline } = rollup.policy;
    if (deadlineMs === undefined || nowMs < this.wakeAt) return { owed: [], more: false };
    const passed = passedBefore(rollup, nowMs, deadlineMs);
    const missedAt = missedBefore(rollup, nowMs) ?? rollup.begin;
    // First pass of a lease: owed triggers are those within catch-up; older misses are history.
    this.frontier ??= onDeadline === 'trigger' ? Math.min(Math.max(missedAt, rollup.begin), passed) : passed;
    if (passed > this.frontier) {
      const range = { from: this.frontier, to: passed };
      if (onDeadline === 'trigger') this.backlog.push(range);
      else await this.reportMisses(sql, range, log, metrics);
      this.frontier = passed;
    }
    this.nextAtMs = nextPassAt(rollup, nowMs, deadlineMs);
    if (onDeadline !== 'trigger') return { owed: [], more: false };
    const owed = this.takeNewest(missedAt, batch);
    return { owed, more: this.backlog.length > 0 };
  }

  /** Up to `max` owed periods, newest first; what fell behind the catch-up window is dropped. */
  private takeNewest(missedAt: number, max: number): Period[] {
    const out: Period[] = [];
    while (out.length < max && this.backlog.length > 0) {
      const range = this.backlog.at(-1)!;
      range.from = Math.max(range.from, missedAt);
      if (range.from >= range.to) {
        this.backlog.pop();
        continue;
      }
      const p = this.rollup.calendar.periodContaining(range.to - 1);
      out.push(p);
      range.to = p.start;
    }
    return out;
  }

  private async reportMisses(sql: Sql, range: Range, log: Logger, metrics: Metrics): Promise<void> {
    const { rollup } = this;
    const periods = rollup.calendar.periodsOverlapping({ start: range.from, end: range.to }, 10_000);
    const have = await storedStarts(
      sql,
      rollup.id,
      periods.map((p) => p.start),
    );
    const missed = periods.filter((p) => !have.has(p.start));
    if (missed.length === 0) return;
    metrics.periodsMissed.inc({ rollup: rollup.id }, missed.length);
    for (const p of missed.slice(-LOGGED_MISSES))
      log.warn({ rollup: rollup.id, period: p.key, ratio: 0 }, 'period missed its deadline');
    if (missed.length > LOGGED_MISSES)
      log.warn(
        { rollup: rollup.id, periods: missed.length, first: missed[0]!.key, last: missed.at(-1)!.key },
        'periods missed their deadline',
      );
  }
}

/**
 * Deadline catch-up, after a pass's fresh work: runs every sweep that is due and gives the owed
 * periods their rows in one statement (decided on the next pass), a bounded number per pass.
 * Busy when more are owed; null when the lease was lost mid-sweep.
 */
export async function catchUpDeadlines(
  sql: Sql,
  sweeps: ReadonlyMap<string, DeadlineSweep>,
  now: Date,
  signal: AbortSignal,
  log: Logger,
  metrics: Metrics,
): Promise<{ inserted: number; busy: boolean } | null> {
  const owed: Array<{ rollupId: string; period: Period }> = [];
  let busy = false;
  for (const [rollupId, sweep] of sweeps) {
    if (signal.aborted) return null;
    if (sweep.wakeAt > now.getTime()) continue;
    if (owed.length >= CATCH_UP_BATCH) {
      busy = true; // the rest on the next pass, after fresher work
      break;
    }
    const swept = await sweep.run(sql, now.getTime(), CATCH_UP_BATCH - owed.length, log, metrics);
    for (const period of swept.owed) owed.push({ rollupId, period });
    if (swept.more) busy = true;
  }
  if (owed.length === 0) return { inserted: 0, busy };
  await insertOwed(sql, owed);
  return { inserted: owed.length, busy: true };
}
