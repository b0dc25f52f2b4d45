import type { FastifyInstance } from 'fastify';
import { maxLags } from '../../config/index.js';
import { BadInputError } from '../../core/errors.js';
import { parseBound } from '../../core/intervals/bounds.js';
import { DEFAULT_ORDERS, toCoverageAnswer } from '../../core/intervals/coverage-answer.js';
import { assetJson } from '../../store/assets/asset-json.js';
import { assetsByName, countAssets, findAsset } from '../../store/assets/assets.js';
import { type AssetFacts, queryCoverage } from '../../store/assets/coverage-query.js';
import { freshnessFacts } from '../../store/assets/freshness.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { assetCoverage, listAssets } from '../schemas/assets.js';
import { decodeCursor, encodeCursor } from './paging.js';

const MAX_CACHED_ASSETS = 10_000;

export function registerAssetRoutes(app: FastifyInstance, ctx: HttpContext): void {
  // An asset's id, domain and zone never change once it exists, so a coverage query needs only
  // one round trip after the first (the extent, which does change, is read with the segments).
  const known = new Map<string, AssetFacts>();
  const facts = async (name: string): Promise<AssetFacts> => {
    const cached = known.get(name);
    if (cached) return cached;
    const row = await findAsset(ctx.read().sql, name);
    if (!row) throw new HttpError(404, 'unknown_asset', `no asset named ${name} has been seen`);
    if (known.size >= MAX_CACHED_ASSETS) known.clear();
    const fact = { id: row.id, name: row.name, domain: row.domain, zone: row.zone };
    known.set(name, fact);
    return fact;
  };

  const lags = maxLags(ctx.config);

  route(app, ctx, listAssets, async ({ query }) => {
    const { sql } = ctx.read();
    // By name, the cursor being the last name answered: a page costs the same at any depth.
    const after = query.cursor === undefined ? null : decodeCursor(query.cursor, 'a');
    const [rows, total] = await Promise.all([
      assetsByName(sql, { q: query.q, after, limit: query.limit + 1 }),
      countAssets(sql, query.q),
    ]);
    const page = rows.slice(0, query.limit);
    const facts = await freshnessFacts(
      sql,
      page.map((a) => a.name),
    );
    const now = Date.now();
    return {
      assets: page.map((a) => assetJson(a, facts.get(a.name)!, lags.get(a.name), now)),
      total,
      next_cursor: rows.length > query.limit ? encodeCursor('a', page.at(-1)!.name) : null,
    };
  });

  route(app, ctx, assetCoverage, async ({ params, query }) => {
    const asset = await facts(params.asset);
    const window = badRequest(() => {
      const s = parseBound(query.start, asset.domain, 'start', asset.zone);
      const e = parseBound(query.end, asset.domain, 'end', asset.zone);
      if (e.value < s.value)
        throw new BadInputError('end_before_start', `end ${query.end} is before start ${query.start}`);
      return { start: s.value, end: e.value };
    });
    // Without `order`, each list keeps its documented default; with it, every list follows it.
    const orders = query.order === undefined ? DEFAULT_ORDERS : { ranges: query.order, batches: query.order };
    const read = ctx.read();
    const coverage = await queryCoverage(read.sql, asset, { window, limit: query.limit, orders });
    return toCoverageAnswer(
      {
        asset: asset.name,
        domain: asset.domain,
        window,
        coverage,
        ...coverage,
        maxLagMs: lags.get(asset.name),
        asOf: read.asOf,
      },
      Date.now(),
    );
  });
}

/** Runs a parse step, turning BadInputError into a 400 with its reason as the code. */
export function badRequest<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof BadInputError) throw new HttpError(400, error.reason, error.message);
    throw error;
  }
}
