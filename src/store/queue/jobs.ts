/**
 * Many jobs at a time on BullMQ's PostgreSQL backend. The backend's Worker claims and completes
 * one job per transaction; each statement here calls the backend's own functions (the SQL shared
 * by BullMQ's ports, in the queue's schema) for a whole batch in one transaction, so a job's
 * states, locks, events and retention are exactly what BullMQ's Worker would leave. Nothing here
 * writes BullMQ's tables directly. The `job` table is read only to skip jobs no longer ours.
 */
import type { Sql } from '../pg/db.js';

/** A claimed job: its lock token and what the handler reads. */
export interface ClaimedJob {
  readonly id: string;
  readonly token: string;
  readonly name: string;
  readonly data: unknown;
  /** Set when BullMQ decided the job must fail when next taken (stalled too often). */
  readonly deferredFailure: string | null;
}

export interface JobQueue {
  readonly sql: Sql;
  /** The queue's schema (queue-schema.ts) and name. */
  readonly schema: string;
  readonly name: string;
}

/**
 * Claims up to `count` waiting jobs, oldest first, each locked for `lockMs` under its own token
 * (`tokenBase:n`). Calls for an empty queue cost a few index probes each.
 */
export async function claimJobs(
  q: JobQueue,
  count: number,
  tokenBase: string,
  lockMs: number,
  workerName: string,
): Promise<ClaimedJob[]> {
  const { sql } = q;
  const rows = await sql<
    { id: string; lock_token: string; name: string; data: unknown; deferred_failure: string | null }[]
  >`
    select j.id, j.lock_token, j.name, j.data, j.deferred_failure
    from generate_series(1, ${count}::int) as g,
      lateral ${sql(q.schema)}.move_to_active(
        ${q.name}, ${tokenBase} || ':' || g, ${lockMs}::bigint, ${Date.now()}::bigint,
        ${workerName}, null, null) as j
    order by g`;
  return rows.map((r) => ({
    id: r.id,
    token: r.lock_token,
    name: r.name,
    data: r.data,
    deferredFailure: r.deferred_failure,
  }));
}

export interface Completion {
  readonly id: string;
  readonly token: string;
  /** The job's return value, as JSON text. */
  readonly value: string;
}

/**
 * Completes jobs still active under their tokens, deleting them as BullMQ's `removeOnComplete:
 * true` does; returns the ids completed. A job whose lock was lost (taken back as stalled) is
 * skipped: its event is committed, so whoever takes it again finds a duplicate.
 */
export async function completeJobs(q: JobQueue, jobs: readonly Completion[]): Promise<Set<string>> {
  try {
    return await completeStillHeld(q, jobs);
  } catch (error) {
    // A job taken back between the statement's read and its completion fails the batch: one by one.
    if (!isFinishError(error)) throw error;
    const completed = new Set<string>();
    for (const job of jobs) {
      const one = await completeStillHeld(q, [job]).catch((e: unknown) => {
        if (isFinishError(e)) return new Set<string>();
        throw e;
      });
      for (const id of one) completed.add(id);
    }
    return completed;
  }
}

async function completeStillHeld(q: JobQueue, jobs: readonly Completion[]): Promise<Set<string>> {
  const { sql } = q;
  const s = sql(q.schema);
  const rows = await sql<{ id: string }[]>`
    select u.id, ${s}.move_to_completed(
      ${q.name}, u.id, u.token, u.value::jsonb, ${Date.now()}::bigint, true, null, null) as finished_on
    from unnest(${jobs.map((j) => j.id)}::text[], ${jobs.map((j) => j.token)}::text[],
      ${jobs.map((j) => j.value)}::text[]) as u(id, token, value)
    join ${s}.job as j on j.queue = ${q.name} and j.id = u.id and j.state = 'active'
      and j.lock_token = u.token`;
  return new Set(rows.map((r) => r.id));
}

/** Returns jobs to the queue (its tail, as BullMQ's moveToWait on this backend), attempts unchanged. */
export async function giveBackJobs(
  q: JobQueue,
  jobs: readonly { id: string; token: string }[],
): Promise<void> {
  const { sql } = q;
  await sql`
    select ${sql(q.schema)}.move_active_to_wait(${q.name}, u.id, u.token, ${Date.now()}::bigint)
    from unnest(${jobs.map((j) => j.id)}::text[], ${jobs.map((j) => j.token)}::text[]) as u(id, token)`;
}

/** Renews the locks of jobs in hand; returns the ids whose lock was lost. */
export async function extendLocks(
  q: JobQueue,
  jobs: readonly { id: string; token: string }[],
  lockMs: number,
): Promise<string[]> {
  const { sql } = q;
  const rows = await sql<{ id: string }[]>`
    select u.id
    from unnest(${jobs.map((j) => j.id)}::text[], ${jobs.map((j) => j.token)}::text[]) as u(id, token)
    where ${sql(q.schema)}.extend_lock(${q.name}, u.id, u.token, ${lockMs}::bigint, ${Date.now()}::bigint) = 0`;
  return rows.map((r) => r.id);
}

/**
 * BullMQ's stalled-job check: active jobs whose lock lapsed go back to wait (or are marked to fail
 * past `maxStalled`). Throttled across instances by the backend to once per `intervalMs`.
 */
export async function reclaimStalled(q: JobQueue, maxStalled: number, intervalMs: number): Promise<string[]> {
  const { sql } = q;
  const rows = await sql<{ id: string }[]>`
    select t.id from ${sql(q.schema)}.move_stalled_jobs_to_wait(
      ${q.name}, ${maxStalled}::int, ${Date.now()}::bigint, ${intervalMs}::bigint) as t(id)`;
  return rows.map((r) => r.id);
}

/** BullMQ's finish-op refusal (missing job, not active, lock mismatch): SQLSTATE BM001. */
function isFinishError(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'BM001';
}

/**
 * Listens for the backend's notification of new jobs (channel `bullmq_jobs`, the queue's name as
 * payload): `onQueue` with each queue name.
 */
export function listenForJobs(
  sql: Sql,
  onQueue: (queue: string) => void,
): Promise<{ unlisten(): Promise<void> }> {
  return sql.listen('bullmq_jobs', onQueue);
}
