/** `GET /v1/repairs`: repair requests, newest first, paged by id. */
import type { FastifyInstance } from 'fastify';
import { formatPoint } from '../../core/bounds.js';
import { repairKey } from '../../core/repair-payload.js';
import { countRepairs, listRepairs, type RepairRow } from '../../store/repairs/listings.js';
import type { HttpContext } from '../context.js';
import { route } from '../route.js';
import { listRepairs as listRepairsOp } from '../schemas/repairs.js';
import { decodeCursor, encodeCursor } from './paging.js';

/** A request as the API answers it (the listing and the period detail). */
export function repairJson(r: RepairRow) {
  const point = (p: number) => formatPoint(r.domain, p);
  return {
    id: r.id,
    asset: r.asset,
    state: r.state,
    ranges: r.ranges.map((x) => ({
      start: point(x.start),
      end: point(x.end),
      kind: x.kind,
      required_version: x.requiredVersion,
    })),
    ranges_total: r.rangesTotal,
    missing_total: r.domain === 'time' ? r.missingTotal / 1e6 : r.missingTotal,
    rollup: r.rollupId,
    period: r.period,
    waiting: r.waiting,
    attempt: r.attempt,
    attempts: r.attempts,
    idempotency_key: repairKey(r.id, r.attempt),
    target: r.targetType,
    requested_at: r.requestedAt.toISOString(),
    next_at: r.nextAt?.toISOString() ?? null,
    finished_at: r.finishedAt?.toISOString() ?? null,
    delivery: r.delivery && {
      delivered_at: r.delivery.deliveredAt?.toISOString() ?? null,
      deliveries: r.delivery.deliveries,
      error: r.delivery.error,
    },
  };
}

export function registerRepairRoutes(app: FastifyInstance, ctx: HttpContext): void {
  route(app, ctx, listRepairsOp, async ({ query }) => {
    const { sql } = ctx.read();
    // By id, newest first, the cursor being the last id answered: a page costs the same at any depth.
    const cursor = query.cursor === undefined ? null : decodeCursor(query.cursor, 'r');
    const before = cursor === null ? null : Number(cursor);
    const [rows, counts] = await Promise.all([
      listRepairs(sql, { state: query.state, asset: query.asset, before, limit: query.limit + 1 }),
      countRepairs(sql, { asset: query.asset }),
    ]);
    const page = rows.slice(0, query.limit);
    return {
      repairs: page.map(repairJson),
      counts,
      next_cursor: rows.length > query.limit ? encodeCursor('r', String(page.at(-1)!.id)) : null,
    };
  });
}
