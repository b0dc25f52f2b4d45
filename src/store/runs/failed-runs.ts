/**
 * The periods whose current run failed, timed out or was lost, newest first, for the
 * top of the status page. Read-only (runs.ts and its run-* neighbours write runs; run-history.ts
 * has the other reads), bounded and index-driven whatever the number of rollups and failures.
 */
import { type RunState, UNSUCCESSFUL_STATES } from '../../core/runs.js';
import type { Db } from '../pg/db.js';

/** A period whose current run ended without success. */
export interface FailedRun {
  readonly rollupId: string;
  readonly key: string;
  readonly generation: number;
  readonly attempt: number;
  readonly state: RunState;
  readonly error: string | null;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  /** When the next attempt is made; null when no retry is left (a hand is needed). */
  readonly nextRetryAt: Date | null;
}

/**
 * The newest `limit` periods (by the end of their run) whose current run failed, timed out or was
 * lost, over `rollupIds`. Each (rollup, state) reads at most `limit` rows of the partial index
 * periods_run_state, newest period first, so 1,000 rollups with years of failures cost 3,000 short
 * index scans, not a sort of every failure.
 */
export async function failedRuns(db: Db, rollupIds: readonly string[], limit: number): Promise<FailedRun[]> {
  if (rollupIds.length === 0 || limit <= 0) return [];
  const rows = await db<
    {
      rollup_id: string;
      key: string;
      generation: number;
      attempt: number;
      state: RunState;
      error: string | null;
      started_at: Date | null;
      finished_at: Date | null;
      next_retry_at: Date | null;
    }[]
  >`
    select p.rollup_id, p.key, r.generation, r.attempt, r.state, r.error, r.started_at, r.finished_at,
      r.next_retry_at
    from unnest(${rollupIds as string[]}::text[]) as x(rollup_id)
    cross join unnest(${[...UNSUCCESSFUL_STATES]}::text[]) as s(state)
    cross join lateral (
      select p.rollup_id, p.lo, p.key, p.generation, p.run_attempt from periods p
      where p.rollup_id = x.rollup_id and p.run_state = s.state
      order by p.lo desc limit ${limit}) p
    join runs r on r.rollup_id = p.rollup_id and r.period_lo = p.lo and r.generation = p.generation
      and r.attempt = p.run_attempt
    order by r.finished_at desc nulls last, p.rollup_id, p.lo desc
    limit ${limit}`;
  return rows.map((r) => ({
    rollupId: r.rollup_id,
    key: r.key,
    generation: r.generation,
    attempt: r.attempt,
    state: r.state,
    error: r.error,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    nextRetryAt: r.next_retry_at,
  }));
}
