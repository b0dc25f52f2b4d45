/**
 * Open runs by target type and state, for the `coverage_rollup_runs_open` gauge. Read-only; two
 * statements whose conditions are exactly the predicates of the partial indexes runs_pending and
 * runs_check, so they read the open rows only, never the history of finished runs.
 */
import type { RunState } from '../../core/runs/runs.js';
import type { Db } from '../pg/db.js';

export interface OpenRunCount {
  readonly target: string;
  readonly state: RunState;
  readonly count: number;
}

export async function openRunCounts(db: Db): Promise<OpenRunCount[]> {
  const [pending, following] = await Promise.all([
    db<{ target: string; state: RunState; count: number }[]>`
      select t.target->>'type' as target, r.state, count(*)::int as count
      from runs r join triggers t using (rollup_id, period_lo, generation)
      where r.state = 'pending' group by 1, 2`,
    db<{ target: string; state: RunState; count: number }[]>`
      select t.target->>'type' as target, r.state, count(*)::int as count
      from runs r join triggers t using (rollup_id, period_lo, generation)
      where r.state in ('started', 'running') group by 1, 2`,
  ]);
  return [...pending, ...following];
}
