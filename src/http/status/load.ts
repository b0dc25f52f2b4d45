/**
 * The status page's data (SPEC §8): the assets and rollups in focus, each loaded over the window.
 * Reads only merged segments and period rows overlapping the window.
 */
import { type AssetRow, listAssets } from '../../index/assets.js';
import type { RollupRuntime } from '../../scheduler/scheduler.js';
import type { HttpContext } from '../context.js';
import { loadAsset } from './load-asset.js';
import { loadRollup } from './load-rollup.js';
import type { PageView } from './model.js';
import type { WindowQuery } from './window.js';

/** Asset cards on one page; the rest are listed by name. */
const MAX_ASSETS = 50;

export async function loadPage(
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
