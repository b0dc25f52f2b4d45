/**
 * The status page's data: one page of the assets and rollups in focus, worst
 * first, each loaded over the window. It stays small at 10,000 assets and 1,000 rollups: assets
 * are paged in SQL, rollups ranked from their per-state counts (a few rows each), and only the
 * cards of the page are drawn.
 */

import type { Catalog } from '../../../config/catalog.js';
import { maxLags as configuredMaxLags } from '../../../config/index.js';
import type { RollupRuntime } from '../../../config/rollups.js';
import { freshnessOf } from '../../../core/intervals/freshness.js';
import { compareWorstFirst, failedRunCount, NATURAL } from '../../../core/rollups/rollup-rank.js';
import { assetHistories } from '../../../store/assets/asset-history.js';
import { type AssetRow, countAssets, domainsOf, pageAssets } from '../../../store/assets/assets.js';
import { freshnessFacts } from '../../../store/assets/freshness.js';
import { rollupCounts } from '../../../store/periods/reads.js';
import type { Sql } from '../../../store/pg/db.js';
import { openRepairsByAsset } from '../../../store/repairs/listings.js';
import { failedRuns } from '../../../store/runs/failed-runs.js';
import { runCountsOf } from '../../../store/runs/periods-by-run-state.js';
import type { HttpContext } from '../../context.js';
import { periodHref } from '../draw/period-page.js';
import { REPAIRS_LISTED } from '../draw/repair-views.js';
import { whyWaiting } from '../draw/why-waiting.js';
import type { WindowQuery } from '../draw/window.js';
import { loadAsset } from './asset.js';
import type { OverviewRollup, PageView } from './model.js';
import { loadRollup } from './rollup.js';

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
  catalog: Catalog,
  query: WindowQuery,
  pq: PageQuery,
): Promise<{ page: PageView; found: boolean }> {
  const { rollups } = catalog;
  const sourceOf = (id: string) => catalog.entry(id)?.source ?? 'file';
  const now = ctx.now() * 1000;
  const { sql } = ctx.read();
  const notes: string[] = [];
  let missing = false; // 404: the page names a rollup or asset nothing knows
  let shownRollups = rollups;
  /** The assets a focused page lists; undefined: all of them, paged in SQL. */
  let focusNames: readonly string[] | undefined;
  if (pq.rollup !== undefined) {
    shownRollups = rollups.filter((r) => r.rollup.id === pq.rollup);
    if (shownRollups.length === 0) {
      notes.push(`No rollup named ${pq.rollup} is configured.`);
      missing = true;
    }
    focusNames = shownRollups.flatMap((r) => r.rollup.upstream);
  } else if (pq.asset !== undefined) {
    focusNames = [pq.asset];
    shownRollups = rollups.filter((r) => r.rollup.upstream.includes(pq.asset!));
  }
  const needle = pq.q?.toLowerCase();
  const inFocus = focusNames === undefined ? undefined : await listedAssets(sql, rollups, focusNames, needle);
  if (pq.asset !== undefined && inFocus?.known === false) {
    notes.push(`No asset named ${pq.asset} has been seen.`);
    missing = true;
  }
  if (needle !== undefined) {
    shownRollups = shownRollups.filter(
      (r) =>
        r.rollup.id.toLowerCase().includes(needle) ||
        r.rollup.upstream.some((u) => u.toLowerCase().includes(needle)),
    );
  }
  const focused = inFocus !== undefined;
  const [assetCount, { ranked, counts, failed }, failedRunRows, repairs] = await Promise.all([
    focused ? inFocus.seen.length + inFocus.unseen.length : countAssets(sql, pq.q),
    worstFirst(sql, shownRollups, now / 1000),
    failedRuns(
      sql,
      shownRollups.map((r) => r.rollup.id),
      FAILED_RUNS_LISTED,
    ),
    openRepairsByAsset(sql, { names: focusNames, q: pq.q }, REPAIRS_LISTED),
  ]);
  // A large installation gets one row per asset and rollup; the cards are for focused pages.
  const overview = !focused && (assetCount > CARDS_UP_TO || ranked.length > CARDS_UP_TO);
  const size = overview ? OVERVIEW_PAGE_SIZE : PAGE_SIZE;
  const offset = (pq.page - 1) * size;
  const maxLags = configuredMaxLags(ctx.config);
  const stale = { maxLags, nowMs: Math.floor(now / 1000) };
  // A focused page lists its never-seen upstreams first, then the seen ones: one sequence, paged
  // and counted as one, so the range, the total and the page links agree with the cards drawn.
  const unseen = inFocus?.unseen.slice(offset, offset + size) ?? [];
  const assetPage = await pageAssets(sql, {
    names: inFocus?.seen,
    q: focused ? undefined : pq.q,
    offset: Math.max(0, offset - (inFocus?.unseen.length ?? 0)),
    limit: size - unseen.length,
    stale,
  });
  const rollupPage = ranked.slice(offset, offset + size);
  const paging = {
    q: pq.q,
    page: pq.page,
    pageSize: size,
    assetsTotal: assetCount,
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
    unseen: unseen.map((name) => ({ name, waiting: waitingFor(rollups, name) })),
    failedRuns: {
      rows: failedRunRows.map((r) => ({ ...r, href: periodHref(r.rollupId, r.key) })),
      total: [...failed.values()].reduce((a, b) => a + b, 0),
    },
    repairs,
  };
  // Upstream extents of this page's rollups, read once for both drawings: the cards' windows, the
  // overview's reasons to wait.
  const upstreams = [...new Set(rollupPage.flatMap((r) => r.rollup.upstream))];
  const upstreamRows = pageAssets(sql, { names: upstreams, offset: 0, limit: upstreams.length });
  if (overview) {
    const [facts, ends] = await Promise.all([
      freshnessFacts(
        sql,
        assetPage.rows.map((a) => a.name),
      ),
      upstreamRows,
    ]);
    const endOf = new Map(ends.rows.map((a) => [a.name, { coveredHi: a.covered_hi }]));
    const rows: OverviewRollup[] = rollupPage.map(({ rollup, config }) => ({
      id: rollup.id,
      source: sourceOf(rollup.id),
      every: String(config.every),
      upstreams: rollup.upstream.length,
      counts: counts.get(rollup.id)!,
      failedRuns: failed.get(rollup.id) ?? 0,
      domain: rollup.domain,
      why: whyWaiting(rollup, endOf, now),
    }));
    const assets = assetPage.rows.map((a) => {
      const f = facts.get(a.name);
      const known = { domain: a.domain, coveredUntil: null, lastEventAt: null };
      const judged = { ...(f ?? known), maxLagMs: maxLags.get(a.name) };
      return { ...a, coveredUntil: judged.coveredUntil, freshness: freshnessOf(judged, now / 1000) };
    });
    const page: PageView = { ...base, assets: [], rollups: [], overview: { assets, rollups: rows } };
    return { page, found: !missing };
  }
  const byName = new Map<string, AssetRow>((await upstreamRows).rows.map((a) => [a.name, a]));
  const histories = await assetHistories(
    sql,
    assetPage.rows.map((a) => a.id),
  );
  const [assetViews, rollupViews] = await Promise.all([
    Promise.all(
      assetPage.rows.map((a) => loadAsset(sql, a, query, now, histories.get(a.id), maxLags.get(a.name))),
    ),
    Promise.all(
      rollupPage.map(async (r) => ({
        ...(await loadRollup(
          sql,
          r,
          byName,
          query,
          now,
          counts.get(r.rollup.id)!,
          failed.get(r.rollup.id) ?? 0,
        )),
        source: sourceOf(r.rollup.id),
      })),
    ),
  ]);
  const page: PageView = { ...base, assets: assetViews, rollups: rollupViews };
  return { page, found: !missing };
}

/** Worst first (src/core/rollups/rollup-rank.ts), with the counts each rollup was ranked by. */
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
  const failed = new Map(ids.map((id) => [id, failedRunCount(runCounts.get(id))]));
  const rank = (r: RollupRuntime) => ({
    id: r.rollup.id,
    counts: counts.get(r.rollup.id)!,
    failed: failed.get(r.rollup.id)!,
  });
  const ranked = [...rollups].sort((a, b) => compareWorstFirst(rank(a), rank(b)));
  return { ranked, counts, failed };
}

/**
 * The assets a focused page lists, those whose name contains `needle` (lower case): the seen ones,
 * and the never-seen ones some rollup waits for, in the order named: an upstream no event named yet
 * is a fact worth a card (its rollups wait for it). `known`: whether any named asset is seen or
 * waited for (an asset page on neither is a 404).
 */
async function listedAssets(
  sql: Sql,
  rollups: readonly RollupRuntime[],
  names: readonly string[],
  needle: string | undefined,
): Promise<{ seen: string[]; unseen: string[]; known: boolean }> {
  const unique = [...new Set(names)];
  const seenNames = await domainsOf(sql, unique);
  const waited = new Set(rollups.flatMap((r) => r.rollup.upstream));
  const known = unique.filter((name) => seenNames.has(name) || waited.has(name));
  const listed = needle === undefined ? known : known.filter((n) => n.toLowerCase().includes(needle));
  return {
    seen: listed.filter((name) => seenNames.has(name)),
    unseen: listed.filter((name) => !seenNames.has(name)),
    known: known.length > 0,
  };
}

/** Ids of the rollups an asset is an upstream of, naturally sorted. */
function waitingFor(rollups: readonly RollupRuntime[], name: string): string[] {
  return rollups
    .filter((r) => r.rollup.upstream.includes(name))
    .map((r) => r.rollup.id)
    .sort(NATURAL.compare);
}
