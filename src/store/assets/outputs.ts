/**
 * A rollup's output asset in the index: its condemnation when periods
 * owe a rerun, and its completion when a run succeeds, each committed inside the transaction that
 * changes the period or the run, through the same path as every producer's events.
 */
import type { NormalizedEvent } from '../../core/events.js';
import { condemnation, outputCompletion } from '../../core/outputs.js';
import type { Rollup } from '../../core/rollup.js';
import { runId } from '../../core/runs.js';
import { idempotencyKey } from '../../core/trigger.js';
import type { Interval } from '../../core/types.js';
import type { Tx } from '../pg/db.js';
import { type CommitOutcome, commitEventsIn } from './commit.js';

/** A period that just went from `triggered` to `rerun_pending`, at the generation it had. */
export interface CondemnedPeriod extends Interval {
  readonly generation: number;
}

/**
 * Records, on each rollup's output, a replay requirement over each period that now owes a rerun,
 * at the version its next generation will write: a rollup reading the output sees its input
 * condemned before the rerun runs, so it never runs on what is about to change. Why here and now:
 * in the same transaction as the mark, a crash loses both or neither. One commit for every rollup
 * the marking transaction covered.
 */
export async function condemnOutputs(
  tx: Tx,
  marked: ReadonlyArray<{ readonly rollup: Rollup; readonly periods: readonly CondemnedPeriod[] }>,
): Promise<CommitOutcome[]> {
  const events = marked.flatMap(({ rollup, periods }) => {
    if (rollup.output === undefined) return [];
    const unique = new Map(periods.map((p) => [p.start, p]));
    return [...unique.values()].map((p) => condemnation(rollup, p, p.generation));
  });
  return commitEventsIn(tx, events);
}

/**
 * The completion of the rollup's output over a period whose run (`ref`) just succeeded, to commit
 * inside the transaction that records the success (reportRun, which locked the period row first:
 * the order every writer of a period and its output takes). Only for the period's current
 * generation while it owes no rerun: a superseded generation's success, or one that arrives after
 * the period was marked rerun_pending (its output already condemned), would end the condemnation
 * with data read before the reprocessing, and the next level would run on it. Null when nothing
 * is to be recorded.
 */
export async function outputOf(
  tx: Tx,
  rollup: Rollup,
  ref: { readonly lo: number; readonly generation: number; readonly attempt: number },
  version: string | null,
): Promise<NormalizedEvent | null> {
  if (rollup.output === undefined) return null;
  const [period] = await tx<{ hi: number; state: string; generation: number }[]>`
    select hi, state, generation from periods where rollup_id = ${rollup.id} and lo = ${ref.lo}`;
  if (period?.generation !== ref.generation || period.state !== 'triggered') return null;
  const id = runId(idempotencyKey(rollup.id, rollup.domain, ref.lo, ref.generation), ref.attempt);
  return outputCompletion(rollup, { start: ref.lo, end: period.hi }, ref.generation, id, version);
}

/**
 * Commits output completions (outputOf) in one commit, however many runs and rollups they come
 * from: a batch of successes costs one pass through the index, and one notification.
 */
export async function recordOutputs(tx: Tx, events: readonly NormalizedEvent[]): Promise<void> {
  await commitEventsIn(tx, events);
}
