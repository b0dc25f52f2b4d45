import type { FastifyInstance } from 'fastify';
import { BadInputError } from '../../core/errors.js';
import { type NormalizedEvent, normalizeEvent } from '../../core/events.js';
import type { Domain } from '../../core/types.js';
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
    const errors: Array<{ index: number; reason: string; message: string }> = [];
    const valid: Array<{ index: number; event: NormalizedEvent }> = [];
    const refuse = (index: number, error: BadInputError) => {
      errors.push({ index, reason: error.reason, message: error.message });
      ctx.metrics.eventsRejected.inc({ reason: error.reason });
    };
    items.forEach((item, index) => {
      try {
        valid.push({ index, event: normalizeEvent(item, options) });
      } catch (error) {
        if (!(error instanceof BadInputError)) throw error;
        refuse(index, error);
      }
    });
    // The worker would dead-letter an event whose bounds contradict the asset's recorded domain;
    // answer that here too, so a 202 keeps meaning "will be ingested".
    const names = [...new Set(valid.map((v) => v.event.asset))];
    const known = new Map(
      names.length === 0
        ? []
        : (
            await ctx.sql<{ name: string; domain: Domain }[]>`
              select name, domain from assets where name = any(${names}::text[])`
          ).map((r) => [r.name, r.domain]),
    );
    for (const { index, event } of valid) {
      const domain = known.get(event.asset);
      if (domain !== undefined && domain !== event.domain) {
        refuse(
          index,
          new BadInputError(
            'domain_mismatch',
            `asset ${event.asset} holds ${domain} bounds but this event's are ${event.domain}`,
          ),
        );
      }
    }
    errors.sort((a, b) => a.index - b.index);
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
    const jobs = await ctx.eventsQueue.addBulk(items.map((data) => ({ name: 'event', data })));
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
