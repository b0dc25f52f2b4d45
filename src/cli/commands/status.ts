import { maxLags } from '../../config/index.js';
import { defineRollups } from '../../config/rollups.js';
import { compareWorstFirst, failedRunCount } from '../../core/rollups/rollup-rank.js';
import { formatLength } from '../../http/status/draw/format.js';
import { assetJson } from '../../store/assets/asset-json.js';
import { pageAssets } from '../../store/assets/assets.js';
import { freshnessFacts } from '../../store/assets/freshness.js';
import { leaseStates } from '../../store/lease.js';
import { rollupCounts } from '../../store/periods/reads.js';
import { runCountsOf } from '../../store/runs/periods-by-run-state.js';
import { outboxSummary } from '../../store/triggers.js';
import { plural } from '../format.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

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
    const lines = [`assets (${assets.length}):`];
    for (const a of assets) {
      const extent = a.covered_extent
        ? `[${a.covered_extent.start}, ${a.covered_extent.end})`
        : '(nothing covered)';
      lines.push(
        `  ${a.asset}  ${a.domain}  ${plural(a.event_count, 'event')}  ${plural(a.segment_count, 'segment')}  ${extent}`,
      );
      // The page's units: 2h 5m, not 7500 s (--json keeps lag_seconds exact).
      const lag = a.lag_seconds === null ? '' : `, lag ${formatLength('time', a.lag_seconds * 1_000_000)}`;
      const until = a.covered_until === null ? 'nothing complete' : `covered until ${a.covered_until}${lag}`;
      const stale = a.stale
        ? `  STALE: ${a.stale_reason}`
        : a.stale === false
          ? `  fresh (max_lag ${a.max_lag})`
          : '';
      lines.push(`    ${until}, last event at ${a.last_event_at ?? 'never'}${stale}`);
    }
    lines.push(`rollups (${rollups.length}):`);
    for (const r of rollups) {
      const states = Object.entries(r.periods)
        .filter(([, n]) => n > 0)
        .map(([s, n]) => `${n} ${s}`)
        .join(', ');
      const failed = r.failed_runs > 0 ? `  ${plural(r.failed_runs, 'failed run')}` : '';
      lines.push(
        `  ${r.id}  ${states || 'no periods yet'}${failed}  last trigger ${r.last_trigger ?? 'none'}  undelivered ${r.undelivered}`,
      );
    }
    lines.push('scheduler lease:');
    for (const l of leases) {
      const live = l.expires_in_s !== null && l.expires_in_s > 0;
      lines.push(
        `  ${l.name}  ${live ? `held by ${l.holder} (token ${l.token}, ${l.expires_in_s!.toFixed(1)} s left)` : 'free'}`,
      );
    }
    if (leases.length === 0) lines.push('  never acquired');
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  });
}
