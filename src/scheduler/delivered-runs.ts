/**
 * Runs delivered while their rollup waited for a report, whose rollup now ends its runs on
 * delivery: a deployment upgraded from a version where every webhook run waited for its callback,
 * or a rollup whose run.outcome was changed from callback to delivery. Their delivery was accepted
 * (a 2xx), so they succeed as that delivery now would have made them, once per lease, before the
 * pass follows runs: left open, each would time out at run.timeout and be delivered again under a
 * new key, which is what `delivery` is there to stop.
 */
import { reportRuns } from '../store/runs/report.js';
import { awaitingCurrentRuns } from '../store/runs/work.js';
import type { DispatchContext } from './dispatch.js';

const BATCH = 200;

/** Succeeds the open current runs of `rollupIds` (rollups whose run.outcome is delivery); returns how many. */
export async function endDeliveredRuns(
  ctx: Pick<DispatchContext, 'sql' | 'log' | 'metrics' | 'policyOf' | 'rollupOf' | 'targetTypeOf'>,
  rollupIds: readonly string[],
): Promise<number> {
  let ended = 0;
  for (;;) {
    const refs = await awaitingCurrentRuns(ctx.sql, rollupIds, BATCH);
    if (refs.length === 0) break;
    // The same report a delivery makes: under run.outcome delivery the runs core succeeds an open run.
    const results = await ctx.sql.begin((tx) =>
      reportRuns(
        tx,
        refs.map((ref) => ({
          ref,
          report: { kind: 'delivered' as const },
          policy: ctx.policyOf(ref.rollupId),
          rollup: ctx.rollupOf(ref.rollupId) ?? null,
        })),
        'scheduler',
        'all',
      ),
    );
    let moved = 0;
    results.forEach((result, i) => {
      ctx.metrics.runReported(ctx.targetTypeOf(refs[i]!.rollupId) ?? '', result);
      if (result?.effect === 'applied' || result?.effect === 'stale') moved++;
    });
    ended += moved;
    // Nothing moved (no rollup here ends on delivery after all): what is left is not ours to end.
    if (moved === 0 || refs.length < BATCH) break;
  }
  if (ended > 0)
    ctx.log.info(
      { runs: ended, rollups: rollupIds.length },
      'runs delivered while waiting for a callback succeeded: their rollups end runs on delivery (run.outcome)',
    );
  return ended;
}
