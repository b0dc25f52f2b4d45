import type { FastifyInstance } from 'fastify';
import { freshnessGauges } from '../../metrics/freshness-gauges.js';
import { ping } from '../../store/pg/db.js';
import { appliedVersion, latestVersion } from '../../store/upkeep/migrate.js';
import type { HttpContext } from '../context.js';
import { route } from '../route.js';
import { healthz, metrics, readyz } from '../schemas/health.js';

/** A probe must answer even when a dependency hangs (ioredis queues commands while it reconnects). */
const PROBE_MS = 2000;

function answerWithin<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from ${what} within ${PROBE_MS} ms`)), PROBE_MS);
  });
  work.catch(() => {}); // settles harmlessly after the limit
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

export function registerHealthRoutes(app: FastifyInstance, ctx: HttpContext): void {
  const latest = latestVersion();
  const refreshFreshness = freshnessGauges(ctx.sql, ctx.config, ctx.metrics, ctx.log);

  route(app, ctx, healthz, async () => ({ status: 'ok' as const }));

  route(app, ctx, readyz, async (_input, request, reply) => {
    const checks: Record<string, unknown> = {};
    let ready = true;
    try {
      const version = await answerWithin(
        ping(ctx.sql).then(() => appliedVersion(ctx.sql)),
        'PostgreSQL',
      );
      checks.postgres = 'ok';
      checks.migrations = { applied: version, expected: latest, current: version === latest };
      ready &&= version === latest;
    } catch (error) {
      checks.postgres = `error: ${(error as Error).message}`;
      ready = false;
    }
    // Named after the store: `redis`, or `queue` when the queues live in PostgreSQL.
    const queueCheck = ctx.queues.backend === 'redis' ? 'redis' : 'queue';
    try {
      await answerWithin(ctx.queues.ping(), ctx.queues.backend === 'redis' ? 'Redis' : 'the queue schema');
      checks[queueCheck] = 'ok';
    } catch (error) {
      checks[queueCheck] = `error: ${(error as Error).message}`;
      ready = false;
    }
    if (ctx.schedulerStatus) checks.scheduler = ctx.schedulerStatus();
    // A replica that cannot serve sends reads to the primary: reported, never a reason to be unready.
    if (ctx.replicaStatus) checks.replica = ctx.replicaStatus();
    if (ctx.retentionStatus) checks.retention = ctx.retentionStatus();
    if (ctx.maintenanceStatus) checks.maintenance = ctx.maintenanceStatus();
    reply.status(ready ? 200 : 503);
    const status = ready ? ('ready' as const) : ('not_ready' as const);
    // The detail names the instance, the lease token and the database's state: for readers only
    // where reads need a token (a probe without one still gets its status and its answer code).
    return ctx.auth.mayReadDetail(request) ? { status, ...checks } : { status };
  });

  route(app, ctx, metrics, async (_input, _request, reply) => {
    ctx.schedulerStatus?.(); // brings the lease gauges and counters up to date
    try {
      if (!ctx.queues.reachable) throw new Error('queue store unreachable');
      const counts = await answerWithin(
        ctx.eventsQueue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized'),
        'Redis',
      );
      for (const [state, n] of Object.entries(counts)) ctx.metrics.queueDepth.set({ state }, n);
    } catch {
      // Redis down: the other metrics still serve, and /readyz reports it.
    }
    // Bounded, and never failing: cut off from PostgreSQL it serves the gauges from the last read.
    await refreshFreshness(Date.now());
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
}
