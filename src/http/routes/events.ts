import type { FastifyInstance } from 'fastify';
import { domainsOf } from '../../index/assets.js';
import { precheckEvents } from '../../ingest/precheck.js';
import { normalizeOptions } from '../../ingest/worker.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';

const MAX_EVENTS_PER_REQUEST = 1000;

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
    return { accepted: jobs.length, ids: jobs.map((j) => j.id) };
  };

  app.post('/v1/events', async (request, reply) => {
    ctx.auth.requireWrite(request);
    const body = request.body;
    const items = Array.isArray(body) ? body : [body];
    if (body === undefined || body === null)
      throw new HttpError(400, 'invalid_payload', 'send an event object or an array of them');
    if (items.length === 0 || items.length > MAX_EVENTS_PER_REQUEST) {
      throw new HttpError(400, 'invalid_payload', `send 1 to ${MAX_EVENTS_PER_REQUEST} events per request`);
    }
    return reply.status(202).send(await enqueue(items));
  });

  app.post<{ Params: { asset: string } }>('/v1/assets/:asset/replay-requirements', async (request, reply) => {
    ctx.auth.requireWrite(request);
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new HttpError(400, 'invalid_payload', 'send {"start": ..., "end": ..., "version": ...}');
    }
    const requirement = {
      ...(body as Record<string, unknown>),
      type: 'replay_requirement',
      asset: request.params.asset,
    };
    return reply.status(202).send(await enqueue([requirement]));
  });
}
