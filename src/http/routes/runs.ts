/**
 * `POST /v1/runs` (the callback any downstream job may use to report its run) and
 * `POST /v1/rollups/{id}/periods/{key}/retry` (a manual retry of one period's run).
 */
import type { FastifyInstance } from 'fastify';
import type { RollupRuntime } from '../../config/rollups.js';
import { noPeriodMessage, periodOfKey } from '../../core/periods/periods.js';
import { DEFAULT_RUN_POLICY, parseRunId, type RunReport, runId } from '../../core/runs/runs.js';
import { wakeScheduler } from '../../store/assets/commit.js';
import { recordAudit } from '../../store/audit.js';
import { currentRuns, runAt, runByKey } from '../../store/runs/history.js';
import { reportRun } from '../../store/runs/report.js';
import { retryPeriodRun } from '../../store/runs/retry.js';
import { audited } from '../audit.js';
import { allow } from '../auth.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { postRunReport, RunReportBody, retryPeriod } from '../schemas/runs.js';
import { runJson } from './run-json.js';

export function registerRunRoutes(rollups: readonly RollupRuntime[]) {
  const byId = new Map(rollups.map((r) => [r.rollup.id, r]));

  return (app: FastifyInstance, ctx: HttpContext) => {
    route(app, ctx, postRunReport, async ({ body: raw, caller }) => {
      const body = RunReportBody.parse(raw);
      // A run id (`<key>~aN`) names its attempt itself; it must agree with `attempt`.
      const named = parseRunId(body.idempotency_key);
      const key = named.attempt === body.attempt ? named.idempotencyKey : body.idempotency_key;
      const ref = await runByKey(ctx.sql, key, body.attempt);
      if (!ref) {
        throw new HttpError(
          404,
          'unknown_run',
          `no trigger has idempotency key ${body.idempotency_key} with an attempt ${body.attempt}`,
        );
      }
      // Found first: the run names the rollup the token must cover.
      allow(caller, { scope: 'rollups', rollup: ref.rollupId });
      const report: RunReport = {
        kind: 'target',
        state: body.state,
        error: body.error ?? null,
        version: body.version ?? null,
      };
      const policy = byId.get(ref.rollupId)?.rollup.run ?? DEFAULT_RUN_POLICY;
      const result = await ctx.sql.begin(async (tx) => {
        const moved = await reportRun(tx, ref, report, 'callback', policy, {
          record: 'all',
          rollup: byId.get(ref.rollupId)?.rollup ?? null,
        });
        // A retry now owed: wake the lease holder, whose timer does not know of it yet.
        if (moved?.after.nextRetryAt) await wakeScheduler(tx);
        if (moved) {
          const detail = {
            rollup: ref.rollupId,
            state: body.state,
            error: report.error,
            version: report.version,
          };
          const target = { type: 'run', id: runId(key, ref.attempt) } as const;
          await recordAudit(
            tx,
            audited(ctx, caller, 'run_report', target, { ...detail, effect: moved.effect }),
          );
        }
        return moved;
      });
      if (!result) throw new HttpError(404, 'unknown_run', `run ${body.idempotency_key} is gone`);
      ctx.metrics.runReported(byId.get(ref.rollupId)?.config.target.type ?? '', result);
      const fields = {
        rollup: ref.rollupId,
        generation: ref.generation,
        attempt: ref.attempt,
        idempotency_key: key,
        state: body.state,
        effect: result.effect,
      };
      // Recorded, and moving nothing (runs core): a consumer that reports expects its report to
      // count, so the log says what would make it (a failure reported here is never retried).
      if (policy.outcome === 'delivery')
        ctx.log.warn(
          fields,
          'run reported to a rollup whose runs succeed on delivery: recorded, the run is unchanged; set run: {outcome: callback} on the rollup for reports to decide its runs',
        );
      else ctx.log.info(fields, 'run reported');
      const run = await runAt(ctx.sql, ref);
      return {
        idempotency_key: key,
        attempt: ref.attempt,
        effect: result.effect,
        current: result.current,
        run: runJson(run!),
      };
    });

    route(app, ctx, retryPeriod, async ({ params, caller }, _request, reply) => {
      const runtime = byId.get(params.id);
      if (!runtime) throw new HttpError(404, 'unknown_rollup', `no rollup ${params.id} is configured`);
      const { rollup } = runtime;
      const period = periodOfKey(rollup, params.key);
      if (period === null || period.start < rollup.begin) {
        throw new HttpError(404, 'unknown_period', noPeriodMessage(rollup, params.key));
      }
      const result = await retryPeriodRun(ctx.sql, rollup.id, period.start, (tx, made) => {
        const detail = { period: period.key, run_id: made.runId };
        return recordAudit(tx, audited(ctx, caller, 'retry', { type: 'rollup', id: rollup.id }, detail));
      });
      if (!result.ok) {
        throw new HttpError(
          409,
          'not_retryable',
          `period ${period.key} of ${rollup.id} cannot be retried: ${result.reason}`,
        );
      }
      ctx.log.info({ rollup: rollup.id, period: period.key, run_id: result.runId }, 'manual retry requested');
      const runs = await currentRuns(ctx.sql, rollup.id, [period.start]);
      reply.status(202);
      return {
        rollup: rollup.id,
        period: {
          start: rollup.calendar.formatPoint(period.start),
          end: rollup.calendar.formatPoint(period.end),
          key: period.key,
        },
        run: runJson(runs.get(period.start)!),
      };
    });
  };
}
