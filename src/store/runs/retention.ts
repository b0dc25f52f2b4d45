/**
 * History retention of runs (`retention.history`): a superseded run (an earlier
 * attempt of its generation, or a run of an older generation) that finished before the cutoff is
 * deleted with its reports. A period's current run is kept whatever its age, as are its reports:
 * listings, the period detail and the run counts read it, and the next retry numbers from it. An
 * open run, or one with work still scheduled (a retry due, an Airflow run watched for a clear),
 * is never deleted.
 */
import type { Db, Sql } from '../pg/db.js';

export interface RunsPruned {
  readonly runs: number;
  readonly reports: number;
}

/** Runs deleted per transaction, so no statement holds many row locks for long. */
const BATCH = 1000;

/**
 * The prunable runs: joined to their period by its key, superseded when (generation, attempt)
 * sorts before the period's current one (a later attempt or generation exists; none sorts after).
 * A run migrated as succeeded without a finish time ages by its creation.
 */
function prunable(sql: Db, before: Date) {
  return sql`
    from runs r join periods p on p.rollup_id = r.rollup_id and p.lo = r.period_lo
    where (r.generation, r.attempt) < (p.generation, p.run_attempt)
      and r.state in ('succeeded', 'failed', 'timed_out', 'lost')
      and coalesce(r.finished_at, r.created_at) < ${before}
      and r.next_retry_at is null and r.check_at is null`;
}

/** Deletes (or, dry, counts) the superseded runs finished before `before`, and their reports. */
export async function pruneRuns(sql: Sql, before: Date, dryRun: boolean): Promise<RunsPruned> {
  if (dryRun) {
    const [row] = await sql<[{ runs: number; reports: number }]>`
      select count(*)::int as runs, coalesce(sum(
        (select count(*) from run_reports x where x.rollup_id = r.rollup_id and x.period_lo = r.period_lo
          and x.generation = r.generation and x.attempt = r.attempt)), 0)::int as reports
      ${prunable(sql, before)}`;
    return row;
  }
  let runs = 0;
  let reports = 0;
  for (;;) {
    const done = await sql.begin(async (tx) => {
      // Skip locked: a run a report is moving right now waits for the next pass.
      const batch = await tx<{ rollup_id: string; period_lo: number; generation: number; attempt: number }[]>`
        select r.rollup_id, r.period_lo, r.generation, r.attempt ${prunable(tx, before)}
        limit ${BATCH} for update of r skip locked`;
      if (batch.length === 0) return 0;
      const keys = tx`
        unnest(${batch.map((b) => b.rollup_id)}::text[], ${batch.map((b) => b.period_lo)}::int8[],
          ${batch.map((b) => b.generation)}::int4[], ${batch.map((b) => b.attempt)}::int4[])
        as k(rollup_id, period_lo, generation, attempt)`;
      // The reports first, to count them (the foreign key would cascade them silently).
      const gone = await tx`
        delete from run_reports x using ${keys}
        where x.rollup_id = k.rollup_id and x.period_lo = k.period_lo and x.generation = k.generation
          and x.attempt = k.attempt`;
      await tx`
        delete from runs r using ${keys}
        where r.rollup_id = k.rollup_id and r.period_lo = k.period_lo and r.generation = k.generation
          and r.attempt = k.attempt`;
      reports += gone.count;
      return batch.length;
    });
    runs += done;
    if (done < BATCH) return { runs, reports };
  }
}
