/** `GET /v1/audit`: the audit of API writes, newest first, paged by id. */
import type { FastifyInstance } from 'fastify';
import { listAudit } from '../../store/audit.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { listAudit as listAuditOp } from '../schemas/audit.js';
import { decodeCursor, encodeCursor } from './paging.js';

export function registerAuditRoute(app: FastifyInstance, ctx: HttpContext): void {
  route(app, ctx, listAuditOp, async ({ query }) => {
    // The cursor is the last id answered: a page costs the same at any depth. From the primary:
    // an entry just written is listed at once.
    const cursor = query.cursor === undefined ? null : decodeCursor(query.cursor, 'a');
    const before = cursor === null ? null : Number(cursor);
    if (before !== null && !Number.isSafeInteger(before))
      throw new HttpError(400, 'invalid_cursor', 'cursor is not one this listing returned (in this order)');
    const rows = await listAudit(ctx.sql, { before, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    return {
      entries: page.map((r) => ({
        id: r.id,
        at: r.at.toISOString(),
        token: r.token,
        action: r.action,
        target_type: r.targetType,
        target: r.target,
        detail: r.detail,
      })),
      next_cursor: rows.length > query.limit ? encodeCursor('a', String(page.at(-1)!.id)) : null,
    };
  });
}
