/**
 * The status page at `/` (SPEC §8): each asset's coverage and each rollup's periods over a window,
 * server-rendered. It reads only merged segments and period rows overlapping the window, and draws
 * at most about two items per pixel column, so a year of minute-level events costs no more than a
 * day of them.
 */
import type { FastifyReply } from 'fastify';
import { piecesOf, projectCoverage } from '../../core/coverage.js';
import { BadInputError } from '../../core/errors.js';
import type { Interval, Piece } from '../../core/types.js';
import { type AssetRow, listAssets } from '../../index/assets.js';
import type { Db } from '../../index/db.js';
import { segmentsOverlapping } from '../../index/segments-sql.js';
import type { RollupRuntime } from '../../scheduler/scheduler.js';
import type { HttpContext } from '../context.js';
import type { RouteRegistrar } from '../server.js';
import { formatLength } from '../status/format.js';
import { CONTENT_SECURITY_POLICY, renderErrorPage, renderPage } from '../status/layout.js';
import {
  type AssetView,
  COVERAGE_STATES,
  type LastTrigger,
  type PageView,
  PERIOD_STATES,
  type PeriodDetail,
  type PeriodState,
  type PieceDetail,
  type Problem,
  type RollupView,
} from '../status/model.js';
import { type DrawPiece, toDrawItems } from '../status/pixels.js';
import { PLOT_WIDTH } from '../status/timeline.js';
import { parseWindowQuery, resolveWindow, WindowError, type WindowQuery } from '../status/window.js';

/** Gaps listed under a timeline; the rest are counted. */
const MAX_PROBLEMS = 20;
/** Asset cards on one page; the rest are listed by name. */
const MAX_ASSETS = 50;
/** Above this many periods in the window, the strip is drawn from per-pixel counts. */
const MAX_DETAILED_PERIODS = 2000;

const coverageSeverity = (state: string) => COVERAGE_STATES.indexOf(state as never);
const periodSeverity = (state: string) => PERIOD_STATES.indexOf(state as never);

type Query = Record<string, string | string[] | undefined>;

export function registerStatusPage(rollups: readonly RollupRuntime[]): RouteRegistrar {
  return (app, ctx) => {
    app.get<{ Querystring: Query }>('/', async (request, reply) => {
      ctx.auth.requireRead(request);
      const one = (name: string) => {
        const value = request.query[name];
        const text = Array.isArray(value) ? value[value.length - 1] : value;
        return text === '' ? undefined : text;
      };
      try {
        const query = parseWindowQuery({ window: one('window'), start: one('start'), end: one('end') });
        const { page, found } = await loadPage(ctx, rollups, query, one('asset'), one('rollup'));
        return send(reply.status(found ? 200 : 404), renderPage(page));
      } catch (error) {
        if (error instanceof WindowError || error instanceof BadInputError) {
          return send(reply.status(400), renderErrorPage(error.message));
        }
        throw error;
      }
    });
  };
}

function send(reply: FastifyReply, body: string): FastifyReply {
  return reply
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(body);
}

async function loadPage(
  ctx: HttpContext,
  rollups: readonly RollupRuntime[],
  query: WindowQuery,
  asset: string | undefined,
  rollup: string | undefined,
): Promise<{ page: PageView; found: boolean }> {
  const now = Date.now() * 1000;
  const all = await listAssets(ctx.sql);
  const byName = new Map(all.map((a) => [a.name, a]));
  const notes: string[] = [];
  let assets: AssetRow[] = all;
  let shownRollups = rollups;
  if (rollup !== undefined) {
    shownRollups = rollups.filter((r) => r.rollup.id === rollup);
    if (shownRollups.length === 0) notes.push(`No rollup named ${rollup} is configured.`);
    const upstream = new Set(shownRollups.flatMap((r) => r.rollup.upstream));
    assets = all.filter((a) => upstream.has(a.name));
  } else if (asset !== undefined) {
    assets = all.filter((a) => a.name === asset);
    if (assets.length === 0) notes.push(`No asset named ${asset} has been seen.`);
    shownRollups = rollups.filter((r) => r.rollup.upstream.includes(asset));
  }
  const drawn = assets.slice(0, MAX_ASSETS);
  const [assetViews, rollupViews] = await Promise.all([
    Promise.all(drawn.map((a) => loadAsset(ctx.sql, a, query, now))),
    Promise.all(shownRollups.map((r) => loadRollup(ctx.sql, r, byName, query, now))),
  ]);
  const page: PageView = {
    generatedAt: new Date(now / 1000),
    now,
    preset: query.start !== undefined && query.end !== undefined ? null : query.preset,
    focus: rollup !== undefined ? { rollup } : asset !== undefined ? { asset } : {},
    assets: assetViews,
    moreAssets: assets.slice(MAX_ASSETS).map((a) => a.name),
    rollups: rollupViews,
    notes,
  };
  return { page, found: notes.length === 0 };
}

const extentOf = (a: AssetRow): Interval | null =>
  a.covered_lo === null || a.covered_hi === null ? null : { start: a.covered_lo, end: a.covered_hi };

async function loadAsset(sql: Db, asset: AssetRow, query: WindowQuery, now: number): Promise<AssetView> {
  const extent = extentOf(asset);
  const window = resolveWindow(query, asset.domain, extent, now);
  const segments = await segmentsOverlapping(sql, asset.id, window);
  const coverage = projectCoverage({ window, segments, extent, limit: 0 });
  const pieces = drawPieces(piecesOf(window, segments), extent);
  const items = toDrawItems(pieces, window, PLOT_WIDTH, coverageSeverity);
  const problems: Problem[] = [
    ...coverage.knownGaps.map((g) => ({ ...g, state: 'gap' as const, version: null, requiredVersion: null })),
    ...coverage.replayRequired.map((r) => ({ ...r, state: 'replay_required' as const })),
  ].sort((a, b) => b.start - a.start);
  return {
    name: asset.name,
    domain: asset.domain,
    eventCount: asset.event_count,
    segmentCount: asset.segment_count,
    extent,
    window,
    ratio: coverage.ratio,
    covered: coverage.covered,
    items,
    problems: problems.slice(0, MAX_PROBLEMS),
    problemCount: problems.length,
    gapCount: coverage.knownGaps.length,
    replayCount: coverage.replayRequired.length,
    missing: coverage.missing.reduce((sum, m) => sum + (m.end - m.start), 0),
  };
}

/** Coverage pieces for drawing: gaps before or after the covered extent are told apart. */
function* drawPieces(pieces: readonly Piece[], extent: Interval | null): Generator<DrawPiece<PieceDetail>> {
  for (const p of pieces) {
    const detail = { version: p.version, requiredVersion: p.requiredVersion };
    if (p.state !== 'gap') {
      yield { start: p.start, end: p.end, state: p.state, detail };
      continue;
    }
    const inner = extent === null ? p.end : Math.min(Math.max(extent.start, p.start), p.end);
    const outer = extent === null ? p.end : Math.min(Math.max(extent.end, inner), p.end);
    if (inner > p.start) yield { start: p.start, end: inner, state: 'outside', detail };
    if (outer > inner) yield { start: inner, end: outer, state: 'gap', detail };
    if (p.end > outer) yield { start: outer, end: p.end, state: 'outside', detail };
  }
}

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

async function loadRollup(
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

/**
 * Many periods (a minute rollup over a year): count them per pixel column and state in the
 * database, and draw each column in its most severe state.
 */
async function periodBuckets(
  sql: Db,
  rollupId: string,
  window: Interval,
  counts: Record<PeriodState, number>,
): Promise<DrawPiece<PeriodDetail>[]> {
  const rows = await sql<{ px: number; state: PeriodState; n: number; lo: number; hi: number }[]>`
    select floor((greatest(lo, ${window.start}::int8) - ${window.start}::int8)::float8 * ${PLOT_WIDTH}
                 / (${window.end}::int8 - ${window.start}::int8))::int as px,
           state, count(*)::int as n, min(lo) as lo, max(hi) as hi
    from periods
    where rollup_id = ${rollupId} and hi > ${window.start} and lo < ${window.end}
    group by 1, 2 order by 1`;
  const columns: Array<{
    px: number;
    start: number;
    end: number;
    state: PeriodState;
    count: number;
    weights: Record<string, number>;
  }> = [];
  for (const r of rows) {
    counts[r.state] += r.n;
    const column = columns[columns.length - 1];
    if (column === undefined || column.px !== r.px) {
      columns.push({
        px: r.px,
        start: r.lo,
        end: r.hi,
        state: r.state,
        count: r.n,
        weights: { [r.state]: r.n },
      });
      continue;
    }
    column.start = Math.min(column.start, r.lo);
    column.end = Math.max(column.end, r.hi);
    column.count += r.n;
    column.weights[r.state] = r.n;
    if (periodSeverity(r.state) > periodSeverity(column.state)) column.state = r.state;
  }
  // Periods are grouped by where they start; clip each column at the next so none overlap.
  return columns.map((c, i) => ({
    start: c.start,
    end: Math.min(c.end, columns[i + 1]?.start ?? c.end),
    state: c.state,
    count: c.count,
    weights: c.weights,
  }));
}
