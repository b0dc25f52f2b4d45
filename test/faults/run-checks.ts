/**
 * Runs under faults: a downstream worker that always succeeds, and the checks that every
 * attempt is exactly one job at the target and every triggered period's run ended succeeded,
 * whatever was killed, restarted or fenced on the way.
 */
import { type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Sql } from '../../src/store/pg/db.js';

export interface DownstreamWorker {
  /** Times the worker ran each job id (more than once: BullMQ re-ran a stalled job). */
  readonly processed: Map<string, number>;
  close(): Promise<void>;
}

/**
 * A BullMQ worker on the target queue that completes every job (keeping it, so the daemon can
 * read its state after any restart). It rides out Redis restarts like the daemon does.
 */
export function startDownstreamWorker(redisUrl: string, queue: string, prefix: string): DownstreamWorker {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  connection.on('error', () => {});
  const processed = new Map<string, number>();
  const worker = new Worker(
    queue,
    async (job) => {
      processed.set(job.id!, (processed.get(job.id!) ?? 0) + 1);
      return { ok: true };
    },
    { connection, prefix, concurrency: 8 },
  );
  worker.on('error', () => {}); // connection errors while Redis is down; the worker reconnects
  return {
    processed,
    async close() {
      if (worker.closing) return worker.closing; // closed already (idempotent)
      await worker.close();
      connection.disconnect();
    },
  };
}

/** Runs not finished yet (open, or owed an automatic retry): the scheduler has not settled. */
export async function unfinishedRuns(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select (select count(*) from runs where state in ('pending', 'started', 'running'))::int
      + (select count(*) from runs where next_retry_at is not null)::int as n`;
  return row!.n;
}

/** Every job id at the target, whatever its state. */
async function targetJobIds(target: Queue): Promise<Set<string>> {
  const ids = new Set<string>();
  const types = [
    'completed',
    'failed',
    'waiting',
    'active',
    'delayed',
    'prioritized',
    'waiting-children',
  ] as const;
  for (let start = 0; ; start += 1000) {
    const jobs = await target.getJobs([...types], start, start + 999, true);
    for (const job of jobs) if (job?.id) ids.add(job.id);
    if (jobs.length < 1000) break;
  }
  return ids;
}

export async function checkRuns(sql: Sql, target: Queue, worker: DownstreamWorker) {
  const runs = await sql<{ run_id: string; state: string; attempt: number }[]>`
    select run_id, state, attempt from runs`;
  const jobs = await targetJobIds(target);
  const runIds = new Set(runs.map((r) => r.run_id));
  const runsWithoutJob = runs.filter((r) => !jobs.has(r.run_id)).map((r) => r.run_id);
  const jobsWithoutRun = [...jobs].filter((id) => !runIds.has(id));
  // The current run of every triggered period: the worker succeeds, so each must have succeeded.
  const notSucceeded = await sql<
    { rollup_id: string; key: string; generation: number; run_state: string | null }[]
  >`
    select rollup_id, key, generation, run_state from periods
    where generation > 0 and run_state is distinct from 'succeeded' order by rollup_id, lo limit 20`;
  const [counts] = await sql<{ not_succeeded: number; runs: number; retried: number }[]>`
    select (select count(*) from periods where generation > 0 and run_state is distinct from 'succeeded')::int
        as not_succeeded,
      (select count(*) from runs)::int as runs,
      (select count(*) from runs where attempt > 1)::int as retried`;
  const byState: Record<string, number> = {};
  for (const r of runs) byState[r.state] = (byState[r.state] ?? 0) + 1;
  const reran = [...worker.processed].filter(([, n]) => n > 1).map(([id, n]) => ({ id, runs: n }));
  const [reports] = await sql<{ reports: number; stale: number; refused: number }[]>`
    select count(*)::int as reports, count(*) filter (where effect = 'stale')::int as stale,
      count(*) filter (where effect = 'refused')::int as refused from run_reports`;
  return {
    checks: {
      runs_without_a_job_at_target: runsWithoutJob.length,
      jobs_at_target_without_a_run: jobsWithoutRun.length,
      triggered_periods_whose_run_did_not_succeed: counts!.not_succeeded,
    },
    details: {
      runs: counts!.runs,
      runs_by_state: byState,
      runs_beyond_attempt_1: counts!.retried,
      jobs_at_target: jobs.size,
      jobs_run_by_the_worker: worker.processed.size,
      jobs_run_more_than_once_by_the_worker: reran.length,
      reran: reran.slice(0, 10),
      run_reports: reports,
      runs_without_a_job: runsWithoutJob.slice(0, 10),
      jobs_without_a_run: jobsWithoutRun.slice(0, 10),
      not_succeeded: notSucceeded,
    },
  };
}
