import type { FastifyInstance } from 'fastify';
import { maxLags } from '../../config/index.js';
import { parseBound } from '../../core/bounds.js';
import { DEFAULT_ORDERS, toCoverageAnswer } from '../../core/coverage-answer.js';
import { BadInputError } from '../../core/errors.js';
import { parseWait } from '../../core/wait.js';
import { assetJson } from '../../store/assets/asset-json.js';
import { assetsByName, countAssets, findAsset } from '../../store/assets/assets.js';
import { type AssetFacts, queryCoverage } from '../../store/assets/coverage-query.js';
import { freshnessFacts } from '../../store/assets/freshness.js';
import type { ReadHandle } from '../../store/pg/read-replica.js';
import type { HttpContext } from '../context.js';
import { CoverageWaiters } from '../coverage-waiters.js';
import { HttpError } from '../errors.js';
import type { AnswerOf, RequestOf } from '../operation.js';
import { route } from '../route.js';
import { assetCoverage, listAssets } from '../schemas/assets.js';
import { decodeCursor, encodeCursor } from './paging.js';

const MAX_CACHED_ASSETS = 10_000;

export function registerAssetRoutes(app: FastifyInstance, ctx: HttpContext): void {
  // An asset's id, domain and zone never change once it exists, so a coverage query needs only
  // one round trip after the first (the extent, which does change, is read with the segments).
  const known = new Map<string, AssetFacts>();
  const facts = async (name: string, sql: ReadHandle['sql']): Promise<AssetFacts> => {
    const cached = known.get(name);
    if (cached) return cached;
    const row = await findAsset(sql, name);
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

  // Reads the coverage answer of one request's window from `read`.
  const answer = async (
    name: string,
    query: RequestOf<typeof assetCoverage>['query'],
    read: ReadHandle,
  ): Promise<AnswerOf<typeof assetCoverage>> => {
    const asset = await facts(name, read.sql);
    const window = badRequest(() => {
      const s = parseBound(query.start, asset.domain, 'start', asset.zone);
      const e = parseBound(query.end, asset.domain, 'end', asset.zone);
      if (e.value < s.value)
        throw new BadInputError('end_before_start', `end ${query.end} is before start ${query.start}`);
      return { start: s.value, end: e.value };
    });
    // Without `order`, each list keeps its documented default; with it, every list follows it.
    const orders = query.order === undefined ? DEFAULT_ORDERS : { ranges: query.order, batches: query.order };
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
  };

  const waiters = new CoverageWaiters(
    ctx.sql,
    ctx.config.http.max_waiters,
    ctx.log.child({ component: 'http' }),
    (n) => ctx.metrics.coverageWaiters.set(n),
  );
  // Before the server stops: every held request answers with what it has, so none holds the close.
  app.addHook('preClose', () => waiters.close());
  // A waiting request reads the primary: the commit that wakes it may not be on a replica yet.
  const primary: ReadHandle = { sql: ctx.sql, asOf: null };

  route(app, ctx, assetCoverage, async ({ params, query }, _request, reply) => {
    if (query.wait === undefined) return answer(params.asset, query, ctx.read());
    const wait = parseWait(query.wait, ctx.config.http.max_wait);
    if (!wait.ok) throw new HttpError(400, 'invalid_wait', wait.why);
    if (wait.ms === 0) return answer(params.asset, query, ctx.read());

    const left = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) left.abort();
    });
    let last: AnswerOf<typeof assetCoverage> | undefined;
    const check = async () => {
      try {
        last = await answer(params.asset, query, primary);
      } catch (error) {
        // Not seen yet: waited for like any window; its first commit wakes this request.
        if (error instanceof HttpError && error.code === 'unknown_asset') return false;
        throw error;
      }
      return last.covered;
    };
    const ended = await waiters
      .wait(params.asset, Date.now() + wait.ms, left.signal, check)
      .catch((error) => {
        if (error instanceof HttpError && error.code === 'too_many_waiters') {
          ctx.metrics.coverageWaits.inc({ outcome: 'refused' });
        }
        throw error;
      });
    ctx.metrics.coverageWaits.inc({ outcome: ended === 'done' ? 'covered' : ended });
    if (ended === 'done' || (ended === 'aborted' && last)) return last!;
    // Closing: the client must not keep this connection alive, or the server's close waits for its
    // keep-alive timeout (a minute and more) after the answer.
    if (ended === 'closing') void reply.header('connection', 'close');
    // The deadline, or the server closing: what is missing now (a 404 if the asset is still unknown).
    return answer(params.asset, query, primary);
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
