/** An asset's card: coverage of its merged segments over the window. */
import { piecesOf, projectCoverage } from '../../../core/intervals/coverage.js';
import { freshnessOf } from '../../../core/intervals/freshness.js';
import type { Interval, Piece } from '../../../core/types.js';
import type { AssetHistory } from '../../../store/assets/asset-history.js';
import type { AssetRow } from '../../../store/assets/assets.js';
import { segmentsOverlapping } from '../../../store/assets/segments-sql.js';
import type { Db } from '../../../store/pg/db.js';
import { type DrawPiece, toDrawItems } from '../draw/pixels.js';
import { PLOT_WIDTH } from '../draw/timeline.js';
import { resolveWindow, type WindowQuery } from '../draw/window.js';
import { type AssetView, COVERAGE_STATES, type PieceDetail, type Problem } from './model.js';

/** Gaps listed under a timeline; the rest are counted. */
const MAX_PROBLEMS = 20;

const coverageSeverity = (state: string) => COVERAGE_STATES.indexOf(state as never);

export const extentOf = (a: AssetRow): Interval | null =>
  a.covered_lo === null || a.covered_hi === null ? null : { start: a.covered_lo, end: a.covered_hi };

export async function loadAsset(
  sql: Db,
  asset: AssetRow,
  query: WindowQuery,
  now: number,
  history: AssetHistory | undefined,
  maxLagMs: number | undefined,
): Promise<AssetView> {
  const extent = extentOf(asset);
  const window = resolveWindow(query, asset.domain, extent, now);
  const segments = await segmentsOverlapping(sql, asset.id, window);
  const coverage = projectCoverage({ window, segments, extent, limit: 0 });
  const lagFrom = asset.domain === 'time' ? now : Number.NEGATIVE_INFINITY;
  const pieces = drawPieces(piecesOf(window, segments), extent, lagFrom);
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
    freshness: freshnessOf(
      {
        domain: asset.domain,
        coveredUntil: history?.coveredUntil ?? null,
        lastEventAt: history?.lastEventAt ?? null,
        maxLagMs,
      },
      Math.floor(now / 1000),
    ),
    history: { gaps: history?.gaps ?? null, replayRequired: history?.replayRequired ?? null },
  };
}

/**
 * Coverage pieces for drawing: gaps before the covered extent, inside it, and after it are told
 * apart; after it and before `now` (time assets) is the lag.
 */
function* drawPieces(
  pieces: readonly Piece[],
  extent: Interval | null,
  now: number,
): Generator<DrawPiece<PieceDetail>> {
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
    const lag = extent === null ? outer : Math.min(Math.max(now, outer), p.end);
    if (lag > outer) yield { start: outer, end: lag, state: 'behind', detail };
    if (p.end > lag) yield { start: lag, end: p.end, state: 'outside', detail };
  }
}
