/** `GET /v1/graph`: the rollup graph with each node's state. */
import type { RollupCatalog } from '../../config/catalog.js';
import { loadGraph } from '../graph/load.js';
import { route } from '../route.js';
import { getGraph } from '../schemas/graph.js';
import type { RouteRegistrar } from '../server.js';

export function registerGraphRoute(catalog: RollupCatalog): RouteRegistrar {
  return (app, ctx) => {
    route(app, ctx, getGraph, async () =>
      loadGraph(ctx, ctx.read().sql, catalog.current().rollups, ctx.now()),
    );
  };
}
