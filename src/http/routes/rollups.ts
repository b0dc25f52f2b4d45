import type { FastifyInstance } from 'fastify';
import { parseBound } from '../../core/bounds.js';
import { BadInputError } from '../../core/errors.js';
import { EVENTS_CHANNEL } from '../../index/commit.js';
import type { RollupRuntime } from '../../scheduler/scheduler.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import type { RouteRegistrar } from '../server.js';
import { badRequest } from './assets.js';

const STATES = ['waiting', 'settling', 'triggered', 'rerun_pending', 'missed'];
const DEFAULT_PERIODS = 500;
const MAX_WINDOW_PERIODS = 100_000;

interface PeriodRow {
  lo: number;
  hi: number;
  key: string;
  state: string;
  ratio: number;
  ratios: Record<string, number>;
  generation: number;
  reason: string | null;
  triggered_at: Date | null;
}

export function registerRollupRoutes(rollups: readonly RollupRuntime[]): RouteRegistrar {
  const byId = new Map(rollups.map((r) => [r.rollup.id, r]));
  const find = (id: string) => {
    const r = byId.get(id);
    if (!r) throw new HttpError(404, 'unknown_rollup', `no rollup ${id} is configured`);
    return r;
  };

  return (app: FastifyInstance, ctx: HttpContext) => {
    app.get('/v1/rollups', async (request) => {
      ctx.auth.requireRead(request);
      const counts = await ctx.sql<{ rollup_id: string; state: string; n: number }[]>`
        select rollup_id, state, count(*)::int as n from periods group by 1, 2`;
      return {
        rollups: rollups.map(({ rollup, config }) => ({
          id: rollup.id,
          upstream: rollup.upstream,
          every: config.every,
          timezone: config.timezone,
          begin: rollup.calendar.formatPoint(rollup.begin),
          policy: config.policy,
          rerun: config.rerun,
          target: { type: config.target.type },
          periods: Object.fromEntries(
            STATES.map((s) => [s, counts.find((c) => c.rollup_id === rollup.id && c.state === s)?.n ?? 0]),
          ),
        })),
      };
    });

    app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>(
      '/v1/rollups/:id/periods',
      async (request) => {
        ctx.auth.requireRead(request);
        const { rollup } = find(request.params.id);
        const { start, end, state } = request.query;
        if (state !== undefined && !STATES.includes(state)) {
          throw new HttpError(400, 'invalid_state', `state must be one of ${STATES.join(', ')}`);
        }
        const lo =
          start === undefined
            ? null
            : badRequest(() => parseBound(start, rollup.domain, 'start', timezoneOf(rollup)).value);
        const hi =
          end === undefined
            ? null
            : badRequest(() => parseBound(end, rollup.domain, 'end', timezoneOf(rollup)).value);
        if (lo !== null && hi !== null && hi < lo) {
          throw new HttpError(400, 'end_before_start', `end ${end} is before start ${start}`);
        }
        // Only a closed window bounds the answer; anything else is capped to the latest periods.
        const limit = lo !== null && hi !== null ? MAX_WINDOW_PERIODS : DEFAULT_PERIODS;
        const rows = await ctx.sql<PeriodRow[]>`
          select * from (
            select lo, hi, key, state, ratio, ratios, generation, reason, triggered_at from periods
            where rollup_id = ${rollup.id}
              and (${lo}::int8 is null or hi > ${lo}::int8)
              and (${hi}::int8 is null or lo < ${hi}::int8)
              and (${state ?? null}::text is null or state = ${state ?? null}::text)
            order by lo desc limit ${limit}
          ) p order by lo`;
        return {
          periods: rows.map((p) => ({
            start: rollup.calendar.formatPoint(p.lo),
            end: rollup.calendar.formatPoint(p.hi),
            key: p.key,
            state: p.state,
            ratio: p.ratio,
            ratios: p.ratios,
            generation: p.generation,
            reason: p.reason,
            triggered_at: p.triggered_at?.toISOString() ?? null,
          })),
        };
      },
    );

    app.post<{ Params: { id: string; start: string } }>(
      '/v1/rollups/:id/periods/:start/trigger',
      async (request, reply) => {
        ctx.auth.requireWrite(request);
        const { rollup } = find(request.params.id);
        const point = badRequest(
          () => parseBound(request.params.start, rollup.domain, 'start', timezoneOf(rollup)).value,
        );
        const period = rollup.calendar.periodContaining(point);
        const refuse = (why: string) =>
          badRequest(() => {
            throw new BadInputError('out_of_range', `the period starting ${request.params.start} ${why}`);
          });
        if (period.start < rollup.begin) throw refuse("is before the rollup's begin");
        // Periods exist up to now: a manual run of one that has not begun would run on no data.
        if (rollup.domain === 'time' && period.start > Date.now() * 1000) throw refuse('has not begun');
        await ctx.sql.begin(async (tx) => {
          await tx`
          insert into periods (rollup_id, lo, hi, key) values (${rollup.id}, ${period.start}, ${period.end}, ${period.key})
          on conflict do nothing`;
          await tx`update periods set manual_requested = true, dirty = true where rollup_id = ${rollup.id} and lo = ${period.start}`;
          await tx`select pg_notify(${EVENTS_CHANNEL}, '')`;
        });
        ctx.log.info({ rollup: rollup.id, period: period.key }, 'manual trigger requested');
        return reply.status(202).send({
          rollup: rollup.id,
          period: {
            start: rollup.calendar.formatPoint(period.start),
            end: rollup.calendar.formatPoint(period.end),
            key: period.key,
          },
          requested: true,
        });
      },
    );
  };
}

function timezoneOf(rollup: RollupRuntime['rollup']): string {
  return rollup.calendar.timezone ?? 'UTC';
}
