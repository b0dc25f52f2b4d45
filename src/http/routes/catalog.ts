/**
 * Rollups as resources and the reload of the config file: `PUT /v1/rollups/{id}`,
 * `GET /v1/rollups/{id}/definition`, `DELETE /v1/rollups/{id}`, `POST /v1/admin/reload`. The
 * catalog (src/daemon/live-catalog.ts) checks and applies; here only the HTTP side.
 */
import { CatalogRefusal, type EditableCatalog } from '../../config/catalog.js';
import { ConfigError } from '../../config/errors.js';
import { recordAudit } from '../../store/audit.js';
import type { Db } from '../../store/pg/db.js';
import { audited } from '../audit.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { deleteRollup, getRollupDefinition, putRollup, reloadConfig } from '../schemas/catalog.js';
import type { RouteRegistrar } from '../server.js';

export function registerCatalogRoutes(catalog: EditableCatalog): RouteRegistrar {
  return (app, ctx) => {
    route(app, ctx, putRollup, async ({ params, query, body, caller }) => {
      const named = (body as { id?: unknown }).id;
      if (named !== undefined && named !== params.id)
        throw new HttpError(
          400,
          'invalid_request',
          `the body names rollup ${String(named)}, the path ${params.id}`,
        );
      const dryRun = query.dry_run === 'true' || query.dry_run === '1';
      const by = caller.name;
      const audit = (db: unknown, before: unknown, after: unknown) =>
        recordAudit(
          db as Db,
          audited(ctx, caller, 'rollup_put', { type: 'rollup', id: params.id }, { before, after }),
        );
      const result = await refused(() => catalog.put(params.id, body, by, dryRun, audit));
      if (!dryRun && result.change !== 'unchanged')
        ctx.log.info({ rollup: params.id, change: result.change, by }, 'rollup written through the API');
      return {
        id: params.id,
        source: 'api' as const,
        dry_run: dryRun,
        change: result.change,
        periods: result.periods,
        target: result.target,
        written_by: result.written?.writtenBy ?? null,
        written_at: result.written?.writtenAt.toISOString() ?? null,
      };
    });

    route(app, ctx, getRollupDefinition, async ({ params }) => {
      const found = catalog.definition(params.id);
      if (!found) throw new HttpError(404, 'unknown_rollup', `no rollup ${params.id} is configured`);
      return {
        id: params.id,
        source: found.source,
        definition: found.definition as Record<string, unknown>,
        written_by: found.written?.writtenBy ?? null,
        written_at: found.written?.writtenAt.toISOString() ?? null,
      };
    });

    route(app, ctx, deleteRollup, async ({ params, caller }) => {
      const audit = (db: unknown, before: unknown) =>
        recordAudit(
          db as Db,
          audited(ctx, caller, 'rollup_delete', { type: 'rollup', id: params.id }, { before, after: null }),
        );
      await refused(() => catalog.remove(params.id, caller.name, audit));
      return { id: params.id, deleted: true as const };
    });

    route(app, ctx, reloadConfig, async ({ caller }) => {
      const result = await refused(() => catalog.reload());
      // After the reload (it writes no row of its own): what it changed, by whom.
      await recordAudit(
        ctx.sql,
        audited(
          ctx,
          caller,
          'reload',
          { type: 'config', id: 'rollups' },
          {
            added: result.change.added,
            changed: result.change.changed,
            removed: result.change.removed,
          },
        ),
      );
      return {
        rollups: {
          added: [...result.change.added],
          changed: [...result.change.changed],
          removed: [...result.change.removed],
          unchanged: result.unchanged,
        },
        restart_required: [...result.restartRequired],
      };
    });
  };
}

/** The catalog's refusals as their answers: every problem listed, nothing changed. */
async function refused<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof CatalogRefusal)
      throw new HttpError(error.status, error.code, error.message, {
        ...(error.errors.length > 0 ? { errors: error.errors } : {}),
      });
    if (error instanceof ConfigError) {
      const lines = error.message.split('\n');
      throw new HttpError(422, 'invalid_configuration', `${lines[0]} nothing changed`, {
        errors: lines.slice(1).map((l) => l.trim()),
      });
    }
    throw error;
  }
}
