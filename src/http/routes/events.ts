import type { FastifyInstance } from 'fastify';
import { domainsOf } from '../../index/assets.js';
import { precheckEvents } from '../../ingest/precheck.js';
import { normalizeOptions } from '../../ingest/worker.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { postEvents, postReplayRequirement } from '../schemas/events.js';

/**
 * Writes go through the same queue as every producer's events, validated here with the same code
 * the worker uses, so a 202 means "will be ingested" and a 400 says why not, per item.
 */
export function registerEventRoutes(app: FastifyInstance, ctx: HttpContext): void {
  const options = normalizeOptions(ctx.config);

  const enqueue = async (items: unknown[]) => {
    const refusals = await precheckEvents(items, options, (names) => domainsOf(ctx.sql, names));
    for (const { error } of refusals) ctx.metrics.eventsRejected.inc({ reason: error.reason });
    const errors = refusals.map(({ index, error }) => ({
      index,
      reason: error.reason,
      message: error.message,
    }));
    if (errors.length > 0) {
      throw new HttpError(
        400,
        'invalid_events',
        `${errors.length} of ${items.length} events are invalid; none was enqueued`,
        {
          errors,
        },
      );
    }
    const jobs = await ctx.eventsQueue.addBulk(items);
    return { accepted: jobs.length, ids: jobs.map((j) => j.id ?? null) };
  };

  route(app, ctx, postEvents, async ({ body }) => enqueue(Array.isArray(body) ? body : [body]));

  route(app, ctx, postReplayRequirement, async ({ params, body }) =>
    enqueue([{ ...body, type: 'replay_requirement', asset: params.asset }]),
  );
}
