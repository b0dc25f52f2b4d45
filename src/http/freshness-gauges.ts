import { maxLags } from '../config.js';
import { freshnessOf } from '../core/freshness.js';
import { freshnessFacts } from '../index/freshness.js';
import type { HttpContext } from './context.js';

/**
 * Sets the per-asset freshness gauges from one statement over every asset, at scrape time: lag
 * for time assets with complete coverage, stale (1 or 0) for assets with a freshness.max_lag.
 */
export async function refreshFreshnessGauges(ctx: HttpContext, nowMs: number): Promise<void> {
  const facts = await freshnessFacts(ctx.sql);
  const lags = maxLags(ctx.config);
  const { assetLag, assetStale } = ctx.metrics;
  assetLag.reset();
  assetStale.reset();
  for (const [asset, f] of facts) {
    const fresh = freshnessOf({ ...f, maxLagMs: lags.get(asset) }, nowMs);
    if (fresh.lag_seconds !== null) assetLag.set({ asset }, fresh.lag_seconds);
    if (fresh.stale !== null) assetStale.set({ asset }, fresh.stale ? 1 : 0);
  }
}
