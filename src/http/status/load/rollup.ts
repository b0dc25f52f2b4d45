/**
 * A rollup's card: its periods over the window (stored and derived), its policy and its latest
 * trigger. A window of few periods is drawn period by period; a longer one from the runs of equal
 * state, so years of hourly periods cost the stored rows of the window, not the calendar.
 */

import type { RollupRuntime } from '../../../config/rollups.js';
import type { Period } from '../../../core/periods/calendar.js';
import { countStarts } from '../../../core/periods/period-count.js';
import { type PeriodView, periodRange, periodsEnd } from '../../../core/periods/periods.js';
import type { PeriodState } from '../../../core/periods/policy.js';
import { UNSUCCESSFUL_STATES } from '../../../core/runs/runs.js';
import type { AssetRow } from '../../../store/assets/assets.js';
import { countPeriods, listPeriods, periodAt, summarizePeriods } from '../../../store/periods/listing.js';
import type { Db } from '../../../store/pg/db.js';
import { currentRuns } from '../../../store/runs/history.js';
import { latestTrigger } from '../../../store/triggers.js';
import { periodHref } from '../draw/period-page.js';
import { periodSeverity, RUN_FAILED } from '../draw/period-severity.js';
import { type DrawPiece, toDrawItems } from '../draw/pixels.js';
import { describePolicy } from '../draw/policy-text.js';
import { PLOT_WIDTH } from '../draw/timeline.js';
import { resolveWindow, type WindowQuery } from '../draw/window.js';
import { extentOf } from './asset.js';
import type { PeriodDetail, RollupView } from './model.js';

/** Above this many periods in the window, the strip is drawn from runs of equal state. */
const MAX_DETAILED_PERIODS = 2000;

/** Periods needing attention listed under a card; the rest are counted. */
const ATTENTION_LISTED = 5;

export async function loadRollup(
  sql: Db,
  runtime: RollupRuntime,
  assets: ReadonlyMap<string, AssetRow>,
  query: WindowQuery,
  now: number,
  totals: Readonly<Record<PeriodState, number>>,
  failedRuns: number,
): Promise<RollupView> {
  const { rollup, config } = runtime;
  const extents = rollup.upstream.flatMap((name) => {
    const a = assets.get(name);
    const e = a === undefined ? null : extentOf(a);
    return e === null ? [] : [e];
  });
  const extent =
    extents.length === 0
      ? null
      : { start: Math.min(...extents.map((e) => e.start)), end: Math.max(...extents.map((e) => e.end)) };
  const window = resolveWindow(query, rollup.domain, extent, now);
  const nowMs = Math.floor(now / 1000);
  const { calendar } = rollup;
  const covered = Math.max(
    ...rollup.upstream.map((u) => assets.get(u)?.covered_hi ?? Number.NEGATIVE_INFINITY),
  );
  const last = periodsEnd(rollup, nowMs, Number.isFinite(covered) ? covered : null);
  const { from, to } = periodRange(rollup, window.start, window.end, last);
  const href = (key: string) => periodHref(rollup.id, key);
  const newest = newestPeriod(runtime, last, now);
  const late = (p: PeriodView) =>
    p.state === 'missed' ||
    p.state === 'rerun_pending' ||
    (p.state === 'waiting' && (newest === null || p.end <= newest.start));
  let attention: PeriodView[] = [];
  let pieces: DrawPiece<PeriodDetail>[] = [];
  if (from < to && countStarts(calendar, from, to) <= MAX_DETAILED_PERIODS) {
    const page = await listPeriods(
      sql,
      rollup,
      { from, to, order: 'asc', at: null, limit: MAX_DETAILED_PERIODS, state: undefined },
      nowMs,
    );
    attention = page.periods.filter(late).reverse();
    const runs = await currentRuns(
      sql,
      rollup.id,
      page.periods.filter((p) => p.generation > 0).map((p) => p.start),
    );
    // Periods nothing happened to (derived: no ratio, no generation) are drawn as one piece per
    // run; the others keep their own details for the tooltip. Each piece weighs its period count
    // (not its length, the default), so a gathered item's tooltip counts periods per state.
    for (const p of page.periods) {
      const last = pieces.at(-1);
      const plain = p.generation === 0 && p.ratio === 0 && (p.state === 'waiting' || p.state === 'missed');
      if (plain && last?.detail === undefined && last?.state === p.state && last.end === p.start) {
        const count = (last.count ?? 1) + 1;
        pieces[pieces.length - 1] = { ...last, end: p.end, count, weights: { [p.state]: count } };
        continue;
      }
      const run = runs.get(p.start);
      const detail = {
        key: p.key,
        href: href(p.key),
        generation: p.generation,
        reason: p.reason,
        ratio: p.ratio,
        triggeredAt: p.triggeredAt,
        run: run === undefined ? null : { state: run.state, attempt: run.attempt },
      };
      const state = run !== undefined && UNSUCCESSFUL_STATES.includes(run.state) ? RUN_FAILED : p.state;
      pieces.push(
        plain
          ? { start: p.start, end: p.end, state: p.state, weights: { [p.state]: 1 } }
          : { start: p.start, end: p.end, state, weights: { [state]: 1 }, detail },
      );
    }
  } else if (from < to) {
    const runs = await summarizePeriods(sql, rollup, from, to, nowMs);
    pieces = runs.map((r) => ({
      start: r.start,
      end: r.end,
      state: r.state,
      count: r.count,
      weights: { [r.state]: r.count },
    }));
  }
  const [counts, current] = await Promise.all([
    countPeriods(sql, rollup, from, Math.max(from, to), nowMs),
    newest === null ? null : currentPeriod(sql, runtime, newest, nowMs),
  ]);
  const latest = await latestTrigger(sql, rollup.id);
  return {
    id: rollup.id,
    upstream: rollup.upstream,
    domain: rollup.domain,
    every: String(config.every),
    timezone: config.timezone,
    policy: describePolicy(rollup),
    rerun: config.rerun,
    target: config.target.type,
    window,
    items: toDrawItems(pieces, window, PLOT_WIDTH, periodSeverity),
    counts,
    totals,
    lateWaiting: totals.waiting - (current?.state === 'waiting' ? 1 : 0),
    current: current === null ? null : { ...current, href: href(current.key) },
    attention: attention
      .slice(0, ATTENTION_LISTED)
      .map((p) => ({ key: p.key, state: p.state, ratio: p.ratio, href: href(p.key) })),
    attentionCount: attention.length,
    lastTrigger:
      latest === undefined
        ? null
        : {
            key: latest.key,
            generation: latest.generation,
            reason: latest.reason,
            decidedAt: latest.decided_at,
            deliveredAt: latest.delivered_at,
            failedAt: latest.failed_at,
            attempts: latest.attempts,
            lastError: latest.last_error,
          },
    failedRuns,
    formatPoint: (point) => rollup.calendar.formatPoint(point),
  };
}

/**
 * The newest period: for a time rollup the one containing now (it has not ended, so it is not
 * late); for an integer rollup the last one its upstreams reach. Null before `begin`.
 */
function newestPeriod({ rollup }: RollupRuntime, end: number, now: number): Period | null {
  const point = rollup.domain === 'time' ? now : end - 1;
  if (point < rollup.begin || end <= rollup.begin) return null;
  return rollup.calendar.periodContaining(point);
}

/** The newest period's state and ratio: its stored row, or derived when nothing happened to it. */
async function currentPeriod(
  sql: Db,
  { rollup }: RollupRuntime,
  period: Period,
  nowMs: number,
): Promise<{ key: string; state: PeriodState; ratio: number }> {
  const { view } = await periodAt(sql, rollup, period, nowMs);
  return { key: period.key, state: view.state, ratio: view.ratio };
}
