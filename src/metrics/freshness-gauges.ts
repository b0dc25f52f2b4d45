import { type Config, maxLags } from '../config/index.js';
import { type FreshnessFacts, freshnessOf } from '../core/intervals/freshness.js';
import { freshnessGaugeFacts } from '../store/assets/freshness.js';
import type { Sql } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { boundedScrape } from './bounded-scrape.js';
import { labelsOf } from './lean-registry.js';
import type { Metrics } from './registry.js';

/**
 * The per-asset freshness gauges, set at scrape time from one statement over every asset: lag for
 * time assets with complete coverage, stale (1 or 0) for assets with a freshness.max_lag.
 *
 * The read goes through boundedScrape like the period gauges. When it fails or comes late, the
 * gauges are computed again from the last facts read, at the scrape's time: lags grow and assets
 * turn stale as they would if nothing new arrived, which is all this instance can vouch for. A
 * frozen lag would look fresh for the whole outage.
 */
export function freshnessGauges(
  sql: Sql,
  config: Config,
  metrics: Pick<Metrics, 'assetLag' | 'assetStale'>,
  log: Logger,
): (nowMs: number) => Promise<void> {
  const lags = maxLags(config);
  const read = boundedScrape(() => freshnessGaugeFacts(sql, [...lags.keys()]), log, 'asset freshness gauges');
  let last: Map<string, FreshnessFacts> | undefined;
  // The same label objects at every scrape: their text is formatted once (lean-registry.ts).
  const labels = labelsOf<{ asset: string }>();
  return async (nowMs) => {
    last = (await read()) ?? last;
    if (last === undefined) return;
    const { assetLag, assetStale } = metrics;
    assetLag.reset();
    assetStale.reset();
    for (const [asset, f] of last) {
      const fresh = freshnessOf({ ...f, maxLagMs: lags.get(asset) }, nowMs);
      if (fresh.lag_seconds !== null) assetLag.set(labels({ asset }), fresh.lag_seconds);
      if (fresh.stale !== null) assetStale.set(labels({ asset }), fresh.stale ? 1 : 0);
    }
  };
}
