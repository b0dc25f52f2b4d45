/**
 * The status page's data (SPEC §8, §10): one page of the assets and rollups in focus, worst
 * first, each loaded over the window. It stays small at 10,000 assets and 1,000 rollups: assets
 * are paged in SQL, rollups ranked from their per-state counts (a few rows each), and only the
 * cards of the page are drawn.
 */

import type { RollupRuntime } from '../../config/rollups.js';
import { maxLags as configuredMaxLags } from '../../config.js';
import { freshnessOf } from '../../core/freshness.js';
import { type RunState, UNSUCCESSFUL_STATES } from '../../core/runs.js';
import { assetHistories } from '../../index/asset-history.js';
import { type AssetRow, countAssets, findAsset, pageAssets } from '../../index/assets.js';
import type { Sql } from '../../index/db.js';
import { failedRuns } from '../../index/failed-runs.js';
import { freshnessFacts } from '../../index/freshness.js';
import { rollupCounts } from '../../index/periods/reads.js';
import { runCountsOf } from '../../index/periods-by-run-state.js';
import type { HttpContext } from '../context.js';
import { loadAsset } from './load-asset.js';
import { loadRollup } from './load-rollup.js';
import type { PageView } from './model.js';
import type { OverviewRollup } from './overview.js';
import { periodHref } from './period-page.js';
import type { WindowQuery } from './window.js';

/** r2 before r10: digits compare as numbers. */
const NATURAL = new Intl.Collator('en', { numeric: true });

/** Cards of each kind on one page. */
export const PAGE_SIZE = 20;
/** Rows of each kind on one page of the overview. */
export const OVERVIEW_PAGE_SIZE = 50;
/** Up to this many assets and rollups, the unfocused page draws them all as cards. */
const CARDS_UP_TO = 12;
/** Failed runs listed at the top of the page; the rest are counted. */
const FAILED_RUNS_LISTED = 20;

export interface PageQuery {
  readonly asset?: string | undefined;
  readonly rollup?: string | undefined;
  /** A case-insensitive part of the names shown. */
  readonly q?: string | undefined;
  /** 1-based. */
  readonly page: number;
}

export async function loadPage(
  ctx: HttpContext,
  rollups: readonly RollupRuntime[],
  query: WindowQuery,
  pq: PageQuery,
): Promise<{ page: PageView; found: boolean }> {
  const now = ctx.now() * 1000;
  const { sql } = ctx.read();
  const notes: string[] = [];
  let missing = false; // 404: the page names a rollup or asset nothing knows
  let shownRollups = rollups;
  let assetNames: readonly string[] | undefined;
  if (pq.rollup !== undefined) {
    shownRollups = rollups.filter((r) => r.rollup.id === pq.rollup);
    if (shownRollups.length === 0) {
      notes.push(`No rollup named ${pq.rollup} is configured.`);
      missing = true;
    }
    assetNames = shownRollups.flatMap((r) => r.rollup.upstream);
  } else if (pq.asset !== undefined) {
    assetNames = [pq.asset];
    shownRollups = rollups.filter((r) => r.rollup.upstream.includes(pq.asset!));
    if (!(await findAsset(sql, pq.asset))) {
      // An upstream no event named yet is a fact worth a page (its rollups wait for it), not a 404.
      const waiting = shownRollups.map((r) => r.rollup.id);
      notes.push(
        waiting.length > 0
          ? `${pq.asset} has never been seen: no event for it has been ingested yet. ${waiting.length === 1 ? 'Rollup' : 'Rollups'} ${waiting.join(', ')} wait${waiting.length === 1 ? 's' : ''} for it.`
          : `No asset named ${pq.asset} has been seen.`,
      );
      missing = waiting.length === 0;
    }
  }
  const needle = pq.q?.toLowerCase();
  if (needle !== undefined) {
    shownRollups = shownRollups.filter(
      (r) => r.rollup.id.toLowerCase().includes(needle) || r.rollup.upstream.some((u) => u.includes(needle)),
    );
  }
  const focused = pq.rollup !== undefined || pq.asset !== undefined;
  const [assetCount, { ranked, counts, failed }, failedRunRows] = await Promise.all([
    focused ? Promise.resolve(null) : countAssets(sql, pq.q),
    worstFirst(sql, shownRollups, now / 1000),
    failedRuns(
      sql,
      shownRollups.map((r) => r.rollup.id),
      FAILED_RUNS_LISTED,
    ),
  ]);
  // A large installation gets one row per asset and rollup; the cards are for focused pages.
  const overview = !focused && ((assetCount ?? 0) > CARDS_UP_TO || ranked.length > CARDS_UP_TO);
  const size = overview ? OVERVIEW_PAGE_SIZE : PAGE_SIZE;
  const offset = (pq.page - 1) * size;
  const maxLags = configuredMaxLags(ctx.config);
  const stale = { maxLags, nowMs: Math.floor(now / 1000) };
  const assetPage = await pageAssets(sql, { names: assetNames, q: pq.q, offset, limit: size, stale });
  const rollupPage = ranked.slice(offset, offset + size);
  const paging = {
    q: pq.q,
    page: pq.page,
    pageSize: size,
    assetsTotal: assetCount ?? assetPage.total,
    rollupsTotal: ranked.length,
  };
  const base = {
    generatedAt: new Date(now / 1000),
    now,
    preset: query.start !== undefined && query.end !== undefined ? null : query.preset,
    followsNow: query.start === undefined && query.end === undefined,
    focus:
      pq.rollup !== undefined ? { rollup: pq.rollup } : pq.asset !== undefined ? { asset: pq.asset } : {},
    paging,
    notes,
    failedRuns: {
      rows: failedRunRows.map((r) => ({ ...r, href: periodHref(r.rollupId, r.key) })),
      total: [...failed.values()].reduce((a, b) => a + b, 0),
    },
  };
  if (overview) {
    const rows: OverviewRollup[] = rollupPage.map(({ rollup, config }) => ({
      id: rollup.id,
      every: String(config.every),
      upstreams: rollup.upstream.length,
      counts: counts.get(rollup.id)!,
      failedRuns: failed.get(rollup.id) ?? 0,
    }));
    const facts = await freshnessFacts(
      sql,
      assetPage.rows.map((a) => a.name),
    );
    const assets = assetPage.rows.map((a) => {
      const f = facts.get(a.name);
      const known = { domain: a.domain, coveredUntil: null, lastEventAt: null };
      const judged = { ...(f ?? known), maxLagMs: maxLags.get(a.name) };
      return { ...a, coveredUntil: judged.coveredUntil, freshness: freshnessOf(judged, now / 1000) };
    });
    const page: PageView = { ...base, assets: [], rollups: [], overview: { assets, rollups: rows } };
    return { page, found: !missing };
  }
  // Upstream extents for the rollups' windows, read for just this page's rollups.
  const upstreams = new Set(rollupPage.flatMap((r) => r.rollup.upstream));
  const upstreamRows = await pageAssets(sql, { names: [...upstreams], offset: 0, limit: upstreams.size });
  const byName = new Map<string, AssetRow>(upstreamRows.rows.map((a) => [a.name, a]));
  const histories = await assetHistories(
    sql,
    assetPage.rows.map((a) => a.id),
  );
  const [assetViews, rollupViews] = await Promise.all([
    Promise.all(
      assetPage.rows.map((a) => loadAsset(sql, a, query, now, histories.get(a.id), maxLags.get(a.name))),
    ),
    Promise.all(
      rollupPage.map((r) =>
        loadRollup(sql, r, byName, query, now, counts.get(r.rollup.id)!, failed.get(r.rollup.id) ?? 0),
      ),
    ),
  ]);
  const page: PageView = { ...base, assets: assetViews, rollups: rollupViews };
  return { page, found: !missing };
}

/** Most failed runs, then most missed, most owed reruns, most waiting periods first; then by id. */
async function worstFirst(sql: Sql, rollups: readonly RollupRuntime[], nowMs: number) {
  const ids = rollups.map((r) => r.rollup.id);
  const [counts, runCounts] = await Promise.all([
    rollupCounts(
      sql,
      rollups.map((r) => r.rollup),
      nowMs,
    ),
    runCountsOf(sql, ids),
  ]);
  const failed = new Map(
    ids.map((id) => {
      const byState: Partial<Record<RunState, number>> = runCounts.get(id) ?? {};
      return [id, UNSUCCESSFUL_STATES.reduce((n, s) => n + (byState[s] ?? 0), 0)];
    }),
  );
  const score = (r: RollupRuntime) => {
    const c = counts.get(r.rollup.id)!;
    return [failed.get(r.rollup.id) ?? 0, c.missed, c.rerun_pending, c.waiting] as const;
  };
  const ranked = [...rollups].sort((a, b) => {
    const [sa, sb] = [score(a), score(b)];
    for (let i = 0; i < sa.length; i++) if (sa[i] !== sb[i]) return sb[i]! - sa[i]!;
    return NATURAL.compare(a.rollup.id, b.rollup.id);
  });
  return { ranked, counts, failed };
}
