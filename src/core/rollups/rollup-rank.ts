/**
 * The order rollups are listed in, worst first, by the status page and `coverage-rollup status`
 * alike: most failed runs, then missed periods, reruns owed, waiting periods; then by id, digits
 * compared as numbers (r2 before r10). Pure.
 */
import type { StateCounts } from '../periods/periods.js';
import { type RunState, UNSUCCESSFUL_STATES } from '../runs/runs.js';

/** r2 before r10: digits compare as numbers. */
export const NATURAL = new Intl.Collator('en', { numeric: true });

export interface RollupRank {
  readonly id: string;
  readonly counts: StateCounts;
  /** Periods whose current run failed, timed out or was lost. */
  readonly failed: number;
}

/** Periods whose current run failed, timed out or was lost, from the counts by run state. */
export function failedRunCount(byRunState: Partial<Record<RunState, number>> | undefined): number {
  return UNSUCCESSFUL_STATES.reduce((n, s) => n + (byRunState?.[s] ?? 0), 0);
}

export function compareWorstFirst(a: RollupRank, b: RollupRank): number {
  const score = (r: RollupRank) => [r.failed, r.counts.missed, r.counts.rerun_pending, r.counts.waiting];
  const [sa, sb] = [score(a), score(b)];
  for (let i = 0; i < sa.length; i++) if (sa[i] !== sb[i]) return sb[i]! - sa[i]!;
  return NATURAL.compare(a.id, b.id);
}
