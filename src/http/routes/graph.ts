/** `GET /v1/graph`: the rollup graph with each node's state. */
import type { RollupRuntime } from '../../config/rollups.js';
import { loadGraph } from '../graph/load.js';
import { route } from '../route.js';
import { getGraph } from '../schemas/graph.js';
import type { RouteRegistrar } from '../server.js';

export function registerGraphRoute(rollups: readonly RollupRuntime[]): RouteRegistrar {
  return (app, ctx) => {
    route(app, ctx, getGraph, async () => loadGraph(ctx, ctx.read().sql, rollups, ctx.now()));
  };
}
