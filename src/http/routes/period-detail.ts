/**
 * `GET /v1/rollups/{id}/periods/{key}`: why a period is in its state. The answer is
 * computed by explainPeriod, which the status page's period page renders as well.
 */
import type { FastifyInstance } from 'fastify';
import type { RollupRuntime } from '../../config/rollups.js';
import { noPeriodMessage, periodOfKey } from '../../core/periods.js';
import { repairsOfPeriod } from '../../store/repairs/listings.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { explainPeriod } from '../period-explain.js';
import { route } from '../route.js';
import { periodDetail } from '../schemas/rollups.js';
import { repairJson } from './repairs.js';

export function registerPeriodDetail(find: (id: string) => RollupRuntime) {
  return (app: FastifyInstance, ctx: HttpContext) => {
    route(app, ctx, periodDetail, async ({ params }) => {
      const { rollup } = find(params.id);
      const { sql } = ctx.read();
      const answer = await explainPeriod(sql, rollup, params.key, ctx.now());
      if (answer === null) {
        throw new HttpError(404, 'unknown_period', noPeriodMessage(rollup, params.key));
      }
      const lo = periodOfKey(rollup, params.key)!.start;
      return { ...answer, repairs: (await repairsOfPeriod(sql, rollup.id, lo)).map(repairJson) };
    });
  };
}
