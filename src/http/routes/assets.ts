import type { FastifyInstance } from 'fastify';
import { maxLags } from '../../config.js';
import { parseBound } from '../../core/bounds.js';
import {
  DEFAULT_LIMIT,
  DEFAULT_ORDERS,
  type ListOrders,
  MAX_LIMIT,
  toCoverageAnswer,
} from '../../core/coverage-answer.js';
import { BadInputError } from '../../core/errors.js';
import { assetJson } from '../../index/asset-json.js';
import { findAsset, listAssets } from '../../index/assets.js';
import { type AssetFacts, queryCoverage } from '../../index/coverage-query.js';
import { freshnessFacts } from '../../index/freshness.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';

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

  app.get('/v1/assets', async (request) => {
    ctx.auth.requireRead(request);
    const { sql } = ctx.read();
    const [rows, facts] = await Promise.all([listAssets(sql), freshnessFacts(sql)]);
    const now = Date.now();
    return {
      assets: rows.map((a) => assetJson(a, facts.get(a.name)!, lags.get(a.name), now)),
    };
  });

  app.get<{ Params: { asset: string }; Querystring: Record<string, string | undefined> }>(
    '/v1/assets/:asset/coverage',
    async (request) => {
      ctx.auth.requireRead(request);
      const asset = await facts(request.params.asset);
      const { start, end, limit, order } = request.query;
      const window = badRequest(() => {
        if (start === undefined || end === undefined) {
          throw new BadInputError('missing_bounds', 'give the window as ?start=...&end=...');
        }
        const s = parseBound(start, asset.domain, 'start', asset.zone);
        const e = parseBound(end, asset.domain, 'end', asset.zone);
        if (e.value < s.value)
          throw new BadInputError('end_before_start', `end ${end} is before start ${start}`);
        return { start: s.value, end: e.value };
      });
      const n = parseLimit(limit);
      const orders = parseOrder(order);
      const read = ctx.read();
      const coverage = await queryCoverage(read.sql, asset, { window, limit: n, orders });
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
    },
  );
}

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n > MAX_LIMIT) {
    throw new HttpError(400, 'invalid_limit', `limit must be an integer from 0 to ${MAX_LIMIT}`);
  }
  return n;
}

/** Without `order`, each list keeps its documented default; with it, every list follows it. */
function parseOrder(raw: string | undefined): ListOrders {
  if (raw === undefined) return DEFAULT_ORDERS;
  if (raw !== 'oldest' && raw !== 'newest')
    throw new HttpError(400, 'invalid_order', 'order must be oldest or newest');
  return { ranges: raw, batches: raw };
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
