/** A rollup's card: its period rows over the window, its policy and its latest trigger. */
import type { AssetRow } from '../../index/assets.js';
import type { Db } from '../../index/db.js';
import type { RollupRuntime } from '../../scheduler/scheduler.js';
import { formatLength } from './format.js';
import { extentOf } from './load-asset.js';
import {
  type LastTrigger,
  PERIOD_STATES,
  type PeriodDetail,
  type PeriodState,
  type RollupView,
} from './model.js';
import { periodBuckets, periodSeverity } from './period-buckets.js';
import { type DrawPiece, toDrawItems } from './pixels.js';
import { PLOT_WIDTH } from './timeline.js';
import { resolveWindow, type WindowQuery } from './window.js';

/** Above this many periods in the window, the strip is drawn from per-pixel counts. */
const MAX_DETAILED_PERIODS = 2000;

interface PeriodRow {
  lo: number;
  hi: number;
  key: string;
  state: PeriodState;
  ratio: number;
  generation: number;
  reason: string | null;
  triggered_at: Date | null;
}

export async function loadRollup(
  sql: Db,
  runtime: RollupRuntime,
  assets: ReadonlyMap<string, AssetRow>,
  query: WindowQuery,
  now: number,
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
  const counts = Object.fromEntries(PERIOD_STATES.map((s) => [s, 0])) as Record<PeriodState, number>;
  const rows = await sql<PeriodRow[]>`
    select lo, hi, key, state, ratio, generation, reason, triggered_at from periods
    where rollup_id = ${rollup.id} and hi > ${window.start} and lo < ${window.end}
    order by lo limit ${MAX_DETAILED_PERIODS + 1}`;
  let pieces: DrawPiece<PeriodDetail>[];
  if (rows.length <= MAX_DETAILED_PERIODS) {
    pieces = rows.map((r) => {
      counts[r.state]++;
      const detail = {
        key: r.key,
        generation: r.generation,
        reason: r.reason,
        ratio: r.ratio,
        triggeredAt: r.triggered_at,
      };
      return { start: r.lo, end: r.hi, state: r.state, detail };
    });
  } else pieces = await periodBuckets(sql, rollup.id, window, counts);
  const [last] = await sql<(Omit<LastTrigger, 'decidedAt' | 'deliveredAt' | 'failedAt'> & Dates)[]>`
    select p.key, t.generation, t.reason, t.decided_at, t.delivered_at, t.failed_at, t.attempts, t.last_error
    from triggers t join periods p on p.rollup_id = t.rollup_id and p.lo = t.period_lo
    where t.rollup_id = ${rollup.id}
    order by t.decided_at desc limit 1`;
  const p = rollup.policy;
  const policy = [
    p.ratio === undefined && p.maxMissing === undefined ? 'full coverage' : '',
    p.ratio === undefined ? '' : `ratio ≥ ${p.ratio}`,
    p.maxMissing === undefined ? '' : `at most ${formatLength(rollup.domain, p.maxMissing)} missing`,
    p.settleMs > 0 ? `settle ${formatLength('time', p.settleMs * 1000)}` : '',
    p.deadlineMs === undefined
      ? ''
      : `deadline ${formatLength('time', p.deadlineMs * 1000)} (${p.onDeadline})`,
  ].filter((s) => s !== '');
  return {
    id: rollup.id,
    upstream: rollup.upstream,
    domain: rollup.domain,
    every: String(config.every),
    timezone: config.timezone,
    policy: policy.join(', '),
    rerun: config.rerun,
    target: config.target.type,
    window,
    items: toDrawItems(pieces, window, PLOT_WIDTH, periodSeverity),
    counts,
    lastTrigger:
      last === undefined
        ? null
        : {
            key: last.key,
            generation: last.generation,
            reason: last.reason,
            decidedAt: last.decided_at,
            deliveredAt: last.delivered_at,
            failedAt: last.failed_at,
            attempts: last.attempts,
            lastError: last.last_error,
          },
    formatPoint: (point) => rollup.calendar.formatPoint(point),
  };
}

interface Dates {
  decided_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  last_error: string | null;
}
