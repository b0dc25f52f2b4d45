/**
 * The scheduler's side of the catalog: its rollups recorded (`rollups.definition`, their outputs
 * registered) and the runs a switch to run.outcome delivery left waiting ended, for every rollup
 * on a new lease, or only for what changed since the catalog the scheduler last applied.
 */
import { type Catalog, type CatalogChange, catalogChange } from '../config/catalog.js';
import type { RollupRuntime } from '../config/rollups.js';
import { registerDeclaredAssets } from '../store/assets/assets.js';
import { syncRollups } from '../store/rollups.js';
import { redactTarget } from '../targets/secrets.js';
import { endDeliveredRuns } from './delivered-runs.js';
import type { DispatchContext } from './dispatch.js';

/**
 * On a new lease: records every rollup's definition and ends the runs a rollup now ending runs on
 * delivery left waiting (delivered-runs.ts).
 */
export async function recordRollups(ctx: DispatchContext, rollups: readonly RollupRuntime[]): Promise<void> {
  await syncRollups(ctx.sql, rollups.map(storedSpec), ctx.log);
  // Before any pass follows runs: a run of these left started would time out and be delivered again.
  await endDeliveredRuns(ctx, endingOnDelivery(rollups));
}

/**
 * A catalog changed since the last pass (a reload, an API write, here or on another instance):
 * only the added and changed rollups are recorded (a new calendar rebuilds their untriggered
 * periods, as at start), their outputs registered, and the runs a switch to run.outcome delivery
 * left waiting ended, as on a new lease; `use` first makes them the scheduler's, to be marked from
 * their cursors. Removed ones are no longer marked, evaluated, swept or delivered to; their history
 * stays. The caller holds `next` as applied once this returns; when a statement fails it is
 * applied again whole (the next pass retries).
 */
export async function applyCatalogChange(
  ctx: DispatchContext,
  applied: Catalog,
  next: Catalog,
  use: (catalog: Catalog, change: CatalogChange) => void,
): Promise<void> {
  const change = catalogChange(applied, next);
  if (change.added.length + change.changed.length + change.removed.length === 0) return; // a reload that changed no rollup
  use(next, change);
  const touched = [...change.added, ...change.changed].map((id) => next.get(id)!);
  await syncRollups(ctx.sql, touched.map(storedSpec), ctx.log);
  await registerDeclaredAssets(ctx.sql, outputsOf(touched, next));
  await endDeliveredRuns(ctx, endingOnDelivery(touched));
  ctx.log.info(
    { added: change.added, changed: change.changed, removed: change.removed, rollups: next.rollups.length },
    'rollups changed: applied',
  );
}

/** Every configured target, repair targets included: a stored one's literal secrets are found there. */
export function liveTargets(rollups: readonly RollupRuntime[]) {
  return rollups.flatMap((r) => [r.config.target, ...(r.config.repair ? [r.config.repair.target] : [])]);
}

function endingOnDelivery(rollups: readonly RollupRuntime[]): string[] {
  return rollups.filter((r) => r.rollup.run.outcome === 'delivery').map((r) => r.rollup.id);
}

/** A rollup as recorded in `rollups.definition`: literal secrets replaced by placeholders. */
function storedSpec(r: RollupRuntime) {
  return {
    rollup: r.rollup,
    spec: {
      ...r.config,
      target: redactTarget(r.config.target),
      ...(r.config.repair
        ? { repair: { ...r.config.repair, target: redactTarget(r.config.repair.target) } }
        : {}),
    },
  };
}

/** The outputs of these rollups not declared under `assets:`: known, all gap, before their first run. */
function outputsOf(rollups: readonly RollupRuntime[], catalog: Catalog) {
  const named = new Set(catalog.config.assets.map((a) => a.name));
  return rollups.flatMap(({ rollup }) =>
    rollup.output === undefined || named.has(rollup.output)
      ? []
      : [{ name: rollup.output, domain: rollup.domain, zone: 'UTC' }],
  );
}
