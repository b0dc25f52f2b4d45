/**
 * A rollup's output asset in the index (SPEC §11 "Output assets"): its condemnation when periods
 * owe a rerun, and its completion when a run succeeds, each committed inside the transaction that
 * changes the period or the run, through the same path as every producer's events.
 */
import { condemnation } from '../core/outputs.js';
import type { Rollup } from '../core/rollup.js';
import type { Interval } from '../core/types.js';
import { type CommitOutcome, commitEventsIn } from './commit.js';
import type { Tx } from './db.js';

/** A period that just went from `triggered` to `rerun_pending`, at the generation it had. */
export interface CondemnedPeriod extends Interval {
  readonly generation: number;
}

/**
 * Records, on the rollup's output, a replay requirement over each period that now owes a rerun,
 * at the version its next generation will write: a rollup reading the output sees its input
 * condemned before the rerun runs, so it never runs on what is about to change. Why here and now:
 * in the same transaction as the mark, a crash loses both or neither.
 */
export async function condemnOutputs(
  tx: Tx,
  rollup: Rollup,
  periods: readonly CondemnedPeriod[],
): Promise<CommitOutcome[]> {
  if (rollup.output === undefined || periods.length === 0) return [];
  const unique = new Map(periods.map((p) => [p.start, p]));
  return commitEventsIn(
    tx,
    [...unique.values()].map((p) => condemnation(rollup, p, p.generation)),
  );
}
