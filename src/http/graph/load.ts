/**
 * The answer of `GET /v1/graph` and what the graph page draws: the configured rollups, the assets
 * they read and write and the declared assets, laid out by depth (core/rollups/graph.ts), each with its
 * state. A few statements whatever the history: period counts per rollup (kept by triggers),
 * freshness probes for the graph's assets only, failed-run counts per rollup.
 */
import type { z } from 'zod';
import { maxLags } from '../../config/index.js';
import type { RollupRuntime } from '../../config/rollups.js';
import { freshnessOf } from '../../core/intervals/freshness.js';
import { buildGraph } from '../../core/rollups/graph.js';
import { freshnessFacts } from '../../store/assets/freshness.js';
import { rollupCounts } from '../../store/periods/reads.js';
import type { Sql } from '../../store/pg/db.js';
import { failedRunCounts } from '../../store/runs/graph-states.js';
import type { HttpContext } from '../context.js';
import type { AssetNode, GraphAnswer, RollupNode } from '../schemas/graph.js';

export type GraphJson = z.output<typeof GraphAnswer>;
type AssetNodeJson = z.output<typeof AssetNode>;
type RollupNodeJson = z.output<typeof RollupNode>;

export async function loadGraph(
  ctx: Pick<HttpContext, 'config'>,
  sql: Sql,
  rollups: readonly RollupRuntime[],
  nowMs: number,
): Promise<GraphJson> {
  const graph = buildGraph(
    rollups.map((r) => r.rollup),
    ctx.config.assets.map((a) => a.name),
  );
  const assetNames = graph.nodes.filter((n) => n.kind === 'asset').map((n) => n.name);
  const [counts, facts, failed] = await Promise.all([
    rollupCounts(
      sql,
      rollups.map((r) => r.rollup),
      nowMs,
    ),
    freshnessFacts(sql, assetNames),
    failedRunCounts(
      sql,
      rollups.map((r) => r.rollup.id),
    ),
  ]);
  const lags = maxLags(ctx.config);
  const writer = new Map(rollups.flatMap((r) => (r.rollup.output ? [[r.rollup.output, r.rollup.id]] : [])));
  const nodes = graph.nodes.map((n): AssetNodeJson | RollupNodeJson => {
    if (n.kind === 'rollup') {
      const c = counts.get(n.name)!;
      const failedRuns = failed.get(n.name) ?? 0;
      return {
        id: `rollup:${n.name}`,
        kind: 'rollup',
        name: n.name,
        depth: n.depth,
        state:
          failedRuns > 0
            ? 'failed'
            : c.rerun_pending > 0
              ? 'rerun_pending'
              : c.waiting > 0
                ? 'waiting'
                : 'ok',
        failed_runs: failedRuns,
        waiting: c.waiting,
        rerun_pending: c.rerun_pending,
        triggered: c.triggered,
        missed: c.missed,
      };
    }
    const f = facts.get(n.name);
    const freshness = f === undefined ? null : freshnessOf({ ...f, maxLagMs: lags.get(n.name) }, nowMs);
    return {
      id: `asset:${n.name}`,
      kind: 'asset',
      name: n.name,
      depth: n.depth,
      state: freshness?.stale === true ? 'stale' : freshness?.stale === false ? 'fresh' : 'unknown',
      written_by: writer.get(n.name) ?? null,
      freshness,
    };
  });
  const edges = graph.edges.map((e) => ({
    from: `${e.from.kind}:${e.from.name}`,
    to: `${e.to.kind}:${e.to.name}`,
    role: e.role,
  }));
  return { nodes, edges };
}
