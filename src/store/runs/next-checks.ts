/**
 * When the scheduler next asks a target (queue, airflow) about a run: `runs.check_at`, read through
 * the partial index runs_check (run-work.ts runsToCheck).
 */

import type { Db } from '../pg/db.js';
import type { RunRef } from './report.js';

/**
 * After asking the target: when to ask again (ms from now), or null to stop following the run.
 * One statement for the whole batch, so a pass's checks cost one write. `seen` is the check_at the
 * check read (runsToCheck): a run whose check_at changed since, woken by its job's completion
 * event while the check was asking (checkSoon), keeps that wake-up. Written over, a check that had
 * found a job removed on completion gone, just before its completion event arrived, recorded the
 * run lost with no check left, and the event that would have made it succeeded changed nothing.
 */
export async function setNextChecks(
  db: Db,
  checks: ReadonlyArray<{ readonly run: RunRef; readonly afterMs: number | null; readonly seen?: string }>,
): Promise<void> {
  if (checks.length === 0) return;
  const refs = checks.map((c) => c.run);
  await db`
    update runs r set check_at = clock_timestamp() + make_interval(secs => u.after_ms / 1000.0)
    from unnest(${refs.map((r) => r.rollupId)}::text[], ${refs.map((r) => r.lo)}::int8[],
      ${refs.map((r) => r.generation)}::int4[], ${refs.map((r) => r.attempt)}::int4[],
      ${checks.map((c) => c.afterMs)}::float8[], ${checks.map((c) => c.seen ?? null)}::int8[])
      as u(rollup_id, lo, generation, attempt, after_ms, seen)
    where r.rollup_id = u.rollup_id and r.period_lo = u.lo and r.generation = u.generation
      and r.attempt = u.attempt
      and (u.seen is null or (extract(epoch from r.check_at) * 1000000)::int8 is not distinct from u.seen)`;
}

/**
 * Ask about these runs now: a wake-up (a job finished) makes their next check immediate. A run
 * recorded as lost is asked about once more too: a check can find a job removed on completion
 * gone before the reader of the queue's events has seen its completion, and that event, now
 * remembered by the target, turns lost into succeeded (core/runs/runs.ts). Its check after that stops.
 */
export async function checkSoon(db: Db, runIds: readonly string[]): Promise<void> {
  if (runIds.length === 0) return;
  await db`
    update runs set check_at = clock_timestamp()
    where run_id = any(${runIds as string[]}::text[]) and (check_at is not null or state = 'lost')`;
}
