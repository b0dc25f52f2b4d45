import { maxLags } from '../../config/index.js';
import { defineRollups } from '../../config/rollups.js';
import { compareWorstFirst, failedRunCount } from '../../core/rollups/rollup-rank.js';
import { assetJson } from '../../store/assets/asset-json.js';
import { pageAssets } from '../../store/assets/assets.js';
import { freshnessFacts } from '../../store/assets/freshness.js';
import { leaseStates } from '../../store/lease.js';
import { rollupCounts } from '../../store/periods/reads.js';
import { runCountsOf } from '../../store/runs/periods-by-run-state.js';
import { outboxSummary } from '../../store/triggers.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';
import { leaseLines, statusLines } from './status-text.js';

interface StatusOptions extends GlobalOptions {
  readonly json?: boolean | undefined;
}

/** Assets, rollups (periods by state, last trigger) and the scheduler lease, read from PostgreSQL. */
export async function runStatus(values: StatusOptions): Promise<number> {
  const config = await commandConfig(values);
  return withSql(config, async (sql) => {
    const lags = maxLags(config);
    const now = Date.now();
    // In the status page's order (stale first, then the furthest behind), so the two agree.
    const stale = { maxLags: lags, nowMs: now };
    const [{ rows }, facts] = await Promise.all([
      pageAssets(sql, { offset: 0, limit: Number.MAX_SAFE_INTEGER, stale }),
      freshnessFacts(sql),
    ]);
    const assets = rows.map((a) => assetJson(a, facts.get(a.name)!, lags.get(a.name), now));
    // The configured rollups, with every period since begin counted by state as /v1/rollups
    // counts them (stored or derived), and their trigger outbox.
    const defined = defineRollups(config).map((r) => r.rollup);
    const ids = defined.map((r) => r.id);
    const [counts, outbox, runCounts] = await Promise.all([
      rollupCounts(sql, defined, now),
      outboxSummary(sql, ids),
      runCountsOf(sql, ids),
    ]);
    const outboxOf = new Map(outbox.map((o) => [o.id, o]));
    // Worst first, in the status page's order.
    const ranked = ids
      .map((id) => ({ id, counts: counts.get(id)!, failed: failedRunCount(runCounts.get(id)) }))
      .sort(compareWorstFirst);
    const rollups = ranked.map(({ id, counts: periods, failed }) => ({
      id,
      periods,
      failed_runs: failed,
      last_trigger: outboxOf.get(id)?.last_trigger ?? null,
      undelivered: outboxOf.get(id)?.undelivered ?? 0,
    }));
    const leases = await leaseStates(sql);
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ assets, rollups, leases })}\n`);
      return 0;
    }
    const configured = values.config !== undefined || Boolean(process.env.COVERAGE_ROLLUP_CONFIG);
    const lines = statusLines(assets, rollups, leaseLines(leases), configured ? undefined : NO_CONFIG);
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  });
}

/** Read directly without a config file, the rollups are unknown: say where they are. */
const NO_CONFIG = "no config file given: a daemon's rollups are in its config (--config FILE)";
