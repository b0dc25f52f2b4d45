/**
 * The status page at `/`: each asset's coverage and each rollup's periods over a window
 * ending at now, server-rendered. It reads only merged segments and period rows overlapping the
 * window, and draws at most about two items per pixel column, so a year of minute-level events
 * costs no more than a day of them. `/rollups/{id}/periods/{key}` explains one period, from the
 * same explanation as `GET /v1/rollups/{id}/periods/{key}`.
 */
import type { FastifyReply } from 'fastify';
import type { RollupCatalog } from '../../config/catalog.js';
import { BadInputError } from '../../core/errors.js';
import { noPeriodMessage } from '../../core/periods/periods.js';
import { loadGraph } from '../graph/load.js';
import { explainPeriod } from '../period-explain.js';
import type { RouteRegistrar } from '../server.js';
import {
  CONTENT_SECURITY_POLICY,
  renderErrorPage,
  renderGraphPage,
  renderPage,
  renderPeriodPage,
} from '../status/draw/layout.js';
import { parseWindowQuery, WindowError } from '../status/draw/window.js';
import { loadPage } from '../status/load/page.js';

type Query = Record<string, string | string[] | undefined>;

export function registerStatusPage(catalog: RollupCatalog): RouteRegistrar {
  return (app, ctx) => {
    app.get<{ Querystring: Query }>('/', async (request, reply) => {
      ctx.auth.requireRead(request);
      const one = (name: string) => {
        const value = request.query[name];
        const text = Array.isArray(value) ? value[value.length - 1] : value;
        // No name holds U+0000, and PostgreSQL could not compare it: a 400, not a failed read.
        if (text?.includes('\u0000')) throw new WindowError(`${name} holds U+0000 (NUL)`);
        return text === '' ? undefined : text;
      };
      try {
        const query = parseWindowQuery({ window: one('window'), start: one('start'), end: one('end') });
        const pageText = one('page') ?? '1';
        if (!/^[1-9]\d{0,5}$/.test(pageText)) throw new WindowError('page must be a positive integer');
        const { page, found } = await loadPage(ctx, catalog.current(), query, {
          asset: one('asset'),
          rollup: one('rollup'),
          q: one('q'),
          page: Number(pageText),
        });
        return send(reply.status(found ? 200 : 404), renderPage(page));
      } catch (error) {
        if (error instanceof WindowError || error instanceof BadInputError) {
          return send(reply.status(400), renderErrorPage(error.message));
        }
        throw error;
      }
    });

    app.get('/graph', async (request, reply) => {
      ctx.auth.requireRead(request);
      const nowMs = ctx.now();
      const graph = await loadGraph(ctx, ctx.read().sql, catalog.current().rollups, nowMs);
      return send(reply, renderGraphPage(graph, new Date(nowMs)));
    });

    app.get<{ Params: { id: string; key: string } }>('/rollups/:id/periods/:key', async (request, reply) => {
      ctx.auth.requireRead(request);
      const { id, key } = request.params;
      const runtime = catalog.current().get(id);
      if (runtime === undefined) {
        return send(reply.status(404), renderErrorPage(`No rollup named ${id} is configured.`, 'not found'));
      }
      const nowMs = ctx.now();
      const answer = await explainPeriod(ctx.read().sql, runtime.rollup, key, nowMs);
      if (answer === null) {
        return send(
          reply.status(404),
          renderErrorPage(`R${noPeriodMessage(runtime.rollup, key).slice(1)}.`, 'not found'),
        );
      }
      return send(reply, renderPeriodPage(runtime.rollup, answer, nowMs));
    });
  };
}

function send(reply: FastifyReply, body: string): FastifyReply {
  return reply
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(body);
}
