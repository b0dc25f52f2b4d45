import type { FastifyInstance } from 'fastify';
import type { RollupCatalog } from '../../config/catalog.js';
import type { RollupRuntime } from '../../config/rollups.js';
import { BadInputError } from '../../core/errors.js';
import { parseBound } from '../../core/intervals/bounds.js';
import { type PeriodView, periodOfKey, type Run } from '../../core/periods/periods.js';
import { recordAudit } from '../../store/audit.js';
import { countPeriods, listPeriods, summarizePeriods } from '../../store/periods/listing.js';
import { coveredHiOf, rollupCounts } from '../../store/periods/reads.js';
import { RollupNotRecorded, requestManualRun } from '../../store/periods/writes.js';
import { currentRuns, type RunView } from '../../store/runs/history.js';
import { runCountsOf } from '../../store/runs/periods-by-run-state.js';
import { outboxSummary } from '../../store/triggers.js';
import { audited } from '../audit.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { isoDuration, policyJson } from '../policy-json.js';
import { route } from '../route.js';
import * as api from '../schemas/rollups.js';
import type { RouteRegistrar } from '../server.js';
import { badRequest } from './assets.js';
import { decodeCursor, encodeCursor } from './paging.js';
import { registerPeriodDetail } from './period-detail.js';
import { periodWindow } from './period-window.js';
import { runJson } from './run-json.js';
import { registerRunRoutes } from './runs.js';

export function registerRollupRoutes(catalog: RollupCatalog): RouteRegistrar {
  const find = (id: string) => {
    const r = catalog.current().get(id);
    if (!r) throw new HttpError(404, 'unknown_rollup', `no rollup ${id} is configured`);
    return r;
  };

  return (app: FastifyInstance, ctx: HttpContext) => {
    route(app, ctx, api.listRollups, async ({ query }) => {
      const { q, cursor, limit } = query;
      // In config order; the cursor is the position after the last one answered.
      const offset = cursor === undefined ? 0 : Number(decodeCursor(cursor, 'r'));
      if (!Number.isSafeInteger(offset) || offset < 0)
        throw new HttpError(400, 'invalid_cursor', 'bad cursor');
      const needle = q?.toLowerCase();
      const current = catalog.current();
      const matching = current.rollups.filter(
        ({ rollup }) =>
          needle === undefined ||
          rollup.id.toLowerCase().includes(needle) ||
          rollup.upstream.some((u) => u.toLowerCase().includes(needle)),
      );
      const page = matching.slice(offset, offset + limit);
      const { sql } = ctx.read();
      const ids = page.map((r) => r.rollup.id);
      const [counts, runCounts, outbox] = await Promise.all([
        rollupCounts(
          sql,
          page.map((r) => r.rollup),
          ctx.now(),
        ),
        runCountsOf(sql, ids),
        outboxSummary(sql, ids),
      ]);
      const outboxOf = new Map(outbox.map((o) => [o.id, o]));
      return {
        rollups: page.map(({ rollup, config }) => ({
          id: rollup.id,
          source: current.entry(rollup.id)?.source ?? ('file' as const),
          upstream: [...rollup.upstream],
          every: config.every,
          timezone: config.timezone,
          begin: rollup.calendar.formatPoint(rollup.begin),
          policy: policyJson(config.policy, rollup.domain),
          rerun: config.rerun,
          target: { type: config.target.type },
          periods: counts.get(rollup.id)!,
          run: {
            retries: rollup.run.retries,
            backoff: isoDuration(rollup.run.backoffMs),
            timeout: isoDuration(rollup.run.timeoutMs),
            outcome: rollup.run.outcome,
          },
          runs: runCounts.get(rollup.id)!,
          last_trigger: outboxOf.get(rollup.id)?.last_trigger ?? null,
          undelivered: outboxOf.get(rollup.id)?.undelivered ?? 0,
        })),
        total: matching.length,
        next_cursor: matching.length > offset + limit ? encodeCursor('r', String(offset + limit)) : null,
      };
    });

    route(app, ctx, api.listPeriods, async ({ params, query }) => {
      const { rollup } = find(params.id);
      const { state, limit, run_state: runState } = query;
      const nowMs = ctx.now();
      const { sql } = ctx.read();
      const covered = await coveredHiOf(sql, [rollup]);
      const window = periodWindow(rollup, query, nowMs, covered.get(rollup.id) ?? null);
      // A closed window is read from its start; an open one from its latest periods (as before paging).
      const order = query.order ?? (query.start !== undefined && query.end !== undefined ? 'asc' : 'desc');
      const at = query.cursor === undefined ? null : Number(decodeCursor(query.cursor, order));
      const wantSummary = query.summary === 'true' || query.summary === '1';
      const [page, counts, runs] = await Promise.all([
        listPeriods(sql, rollup, { ...window, order, at, limit, state, runState }, nowMs),
        countPeriods(sql, rollup, window.from, window.to, nowMs),
        wantSummary ? summarizePeriods(sql, rollup, window.from, window.to, nowMs) : undefined,
      ]);
      const point = (p: number) => rollup.calendar.formatPoint(p);
      // Derived periods have no row, so no run: one primary-key probe per stored period of the page.
      const currentOf = await currentRuns(
        sql,
        rollup.id,
        page.periods.filter((p) => p.generation > 0).map((p) => p.start),
      );
      return {
        periods: page.periods.map((p) => periodJson(rollup.calendar.formatPoint, p, currentOf.get(p.start))),
        counts,
        ...(runs
          ? { summary: runs.map((r: Run) => ({ ...r, start: point(r.start), end: point(r.end) })) }
          : {}),
        next_cursor: page.next === null ? null : encodeCursor(order, String(page.next)),
      };
    });

    registerPeriodDetail(find)(app, ctx);
    registerRunRoutes(catalog)(app, ctx);

    route(app, ctx, api.triggerPeriod, async ({ params, caller }) => {
      const { rollup } = find(params.id);
      // The period's key, as the detail and /retry take it, or any point of the period.
      const period =
        periodOfKey(rollup, params.start) ??
        rollup.calendar.periodContaining(
          badRequest(() => parseBound(params.start, rollup.domain, 'start', timezoneOf(rollup)).value),
        );
      const refuse = (why: string) =>
        badRequest(() => {
          throw new BadInputError('out_of_range', `the period starting ${params.start} ${why}`);
        });
      if (period.start < rollup.begin) throw refuse("is before the rollup's begin");
      // Periods exist up to now: a manual run of one that has not begun would run on no data.
      if (rollup.domain === 'time' && period.start > ctx.now() * 1000) throw refuse('has not begun');
      const target = { type: 'rollup', id: rollup.id } as const;
      await requestManualRun(ctx.sql, rollup.id, period, (tx) =>
        recordAudit(tx, audited(ctx, caller, 'trigger', target, { period: period.key })),
      ).catch((error: unknown) => {
        if (error instanceof RollupNotRecorded)
          throw new HttpError(503, 'rollup_not_recorded', error.message, undefined, { 'retry-after': '1' });
        throw error;
      });
      ctx.log.info({ rollup: rollup.id, period: period.key }, 'manual trigger requested');
      return {
        rollup: rollup.id,
        period: {
          start: rollup.calendar.formatPoint(period.start),
          end: rollup.calendar.formatPoint(period.end),
          key: period.key,
        },
        requested: true as const,
      };
    });
  };
}

function timezoneOf(rollup: RollupRuntime['rollup']): string {
  return rollup.calendar.timezone ?? 'UTC';
}

function periodJson(format: (point: number) => string | number, p: PeriodView, run: RunView | undefined) {
  return {
    start: format(p.start),
    end: format(p.end),
    key: p.key,
    state: p.state,
    ratio: p.ratio,
    ratios: p.ratios,
    generation: p.generation,
    reason: p.reason,
    triggered_at: p.triggeredAt?.toISOString() ?? null,
    run: run ? runJson(run) : null,
  };
}
