/** `POST /v1/repairs`: a repair request by hand (src/http/repair-request.ts). */
import type { RollupRuntime } from '../../config/rollups.js';
import { recordAudit } from '../../store/audit.js';
import type { Tx } from '../../store/pg/db.js';
import { audited } from '../audit.js';
import { allow } from '../auth.js';
import { HttpError } from '../errors.js';
import { RepairRefused, requestRepair } from '../repair-request.js';
import { route } from '../route.js';
import { postRepair } from '../schemas/repairs.js';
import type { RouteRegistrar } from '../server.js';

/** Needs the rollups: a default target, and the assets they read or write. */
export function registerRepairRequest(rollups: readonly RollupRuntime[]): RouteRegistrar {
  return (app, ctx) =>
    route(app, ctx, postRepair, async ({ body, caller }) => {
      allow(caller, { scope: 'events', assets: [body.asset] });
      const ask = {
        asset: body.asset,
        start: String(body.start),
        end: String(body.end),
        target: body.target,
      };
      try {
        const record = (tx: Tx, id: number) => {
          const detail = { repair: id, start: ask.start, end: ask.end };
          return recordAudit(tx, audited(ctx, caller, 'repair', { type: 'asset', id: body.asset }, detail));
        };
        const answer = await requestRepair(
          ctx.sql,
          ctx.config.assets,
          rollups,
          ask,
          (f) => f,
          ctx.now(),
          record,
        );
        if (answer.requested)
          ctx.log.info({ asset: body.asset, repair: answer.requested.id }, 'repair requested by hand');
        return answer;
      } catch (error) {
        if (error instanceof RepairRefused) throw new HttpError(400, 'invalid_repair', error.message);
        throw error;
      }
    });
}
