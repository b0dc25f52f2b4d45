import type { FastifyInstance, FastifyReply } from 'fastify';
import { limitsNames } from '../../core/access/scopes.js';
import { normalizeEvent } from '../../core/events/events.js';
import { directCommitter } from '../../ingest/direct.js';
import {
  checkEvents,
  normalizeOptions,
  precheckEvents,
  type Refusal,
  rememberDomains,
} from '../../ingest/precheck.js';
import { domainsOf } from '../../store/assets/assets.js';
import { isTransient } from '../../store/pg/transient.js';
import { allow } from '../auth.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { postEvents, postReplayRequirement } from '../schemas/events.js';

/**
 * Writes are validated here with the same code the worker uses, so a 400 says why not, per item,
 * and nothing of the batch goes on. Then, where the queue lives in the index's own PostgreSQL
 * (ctx.direct), the batch is committed into the index, in a transaction shared with the requests
 * that came meanwhile, and the answer (200) comes after the commit; on Redis it goes through the
 * same queue as every producer's events, and a 202 means "will be ingested".
 */
export function registerEventRoutes(app: FastifyInstance, ctx: HttpContext): void {
  const options = normalizeOptions(ctx.config, ctx.rollups);
  // Names only, before the token is checked: nothing about the rollups reading an asset the
  // token may not write reaches its answer.
  const naming = normalizeOptions(ctx.config);
  const assetsOf = (items: unknown[]) =>
    items.flatMap((item) => {
      try {
        return [normalizeEvent(item, naming).asset];
      } catch {
        return [];
      }
    });
  const direct = ctx.direct ? { sql: ctx.direct, committer: directCommitter(ctx.direct) } : undefined;
  const recorded = rememberDomains((names) => domainsOf(direct?.sql ?? ctx.sql, names));

  const refuse = (refusals: readonly Refusal[], total: number, outcome: string): never => {
    for (const { error } of refusals) ctx.metrics.eventsRejected.inc({ reason: error.reason });
    const errors = refusals.map(({ index, error }) => ({
      index,
      reason: error.reason,
      message: error.message,
    }));
    throw new HttpError(
      400,
      'invalid_events',
      `${errors.length} of ${total} events are invalid; ${outcome}`,
      {
        errors,
      },
    );
  };

  const enqueue = async (items: unknown[], reply: FastifyReply) => {
    const refusals = await precheckEvents(items, options, recorded);
    if (refusals.length > 0) refuse(refusals, items.length, 'none was enqueued');
    const jobs = await ctx.eventsQueue.addBulk(items);
    reply.status(202);
    return { accepted: jobs.length, ids: jobs.map((j) => j.id ?? null) };
  };

  const commit = async ({ committer }: NonNullable<typeof direct>, items: unknown[], reply: FastifyReply) => {
    // Checked alone before they join a shared commit: a bad event refuses its own request only.
    const checked = await checkEvents(items, options, recorded);
    if (checked.refusals.length > 0) refuse(checked.refusals, items.length, 'none was committed');
    const outcome = await committer.add(checked.events).catch((error: unknown) => {
      if (!isTransient(error)) throw error;
      ctx.log.warn({ err: error, events: items.length }, 'POST /v1/events: PostgreSQL did not answer');
      throw new HttpError(
        503,
        'database_unavailable',
        'PostgreSQL did not answer (retried); the batch may or may not be committed: send it again (a re-sent event is a duplicate)',
      );
    });
    if (outcome.kind === 'refused') return refuse(outcome.refusals, items.length, 'none was committed');
    for (const r of outcome.results) ctx.metrics.eventsIngested.inc({ status: r.status });
    reply.status(200);
    return { accepted: items.length, ids: items.map(() => null), results: outcome.results };
  };

  const accept = (items: unknown[], reply: FastifyReply) =>
    direct ? commit(direct, items, reply) : enqueue(items, reply);

  route(app, ctx, postEvents, async ({ body, caller }, _request, reply) => {
    const items = Array.isArray(body) ? body : [body];
    // All or nothing, before anything is enqueued or committed: one asset outside the token's
    // patterns refuses the batch. An item that does not normalise names no asset; it is refused
    // (400) by the checks that follow.
    if (limitsNames(caller.grant, 'events')) allow(caller, { scope: 'events', assets: assetsOf(items) });
    return accept(items, reply);
  });

  route(app, ctx, postReplayRequirement, async ({ params, body }, _request, reply) =>
    accept([{ ...body, type: 'replay_requirement', asset: params.asset }], reply),
  );
}
