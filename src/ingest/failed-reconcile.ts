/**
 * Reconciles the events queues' failed sets with the event log: a job whose commit
 * succeeded but whose completion Redis lost (a Cluster master failing over mid-acknowledgement:
 * "Too many Cluster redirections") sits in BullMQ's failed set although its event is committed.
 * Such jobs are removed: their work is done, and an operator has nothing to clean. A failed job
 * whose event is not in the log stays failed, as every failed job did before (its error is in the
 * log; retrying it is the operator's call, and safe: commits are idempotent by event id).
 */
import type { Job, Queue } from 'bullmq';
import { BadInputError } from '../core/errors.js';
import { type NormalizeOptions, normalizeEvent } from '../core/events.js';
import { committedEvents, type EventRef, refKey } from '../store/assets/event-lookup.js';
import type { Sql } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { Periodic } from '../support/periodic.js';

export interface ReconcileOptions {
  /** Failed jobs read and checked per statement. */
  readonly batch: number;
  /** At most this many failed jobs looked at per pass (the newest first). */
  readonly maxJobs: number;
}

export interface ReconcileReport {
  readonly checked: number;
  /** Removed: their events are committed. */
  readonly removed: number;
  /** Left failed: their events are not in the log (or they never held a valid event). */
  readonly kept: number;
}

/** One pass over one queue's failed set, newest first, in bounded batches. */
export async function reconcileFailed(
  queue: Queue,
  sql: Sql,
  normalize: NormalizeOptions,
  { batch, maxJobs }: ReconcileOptions,
): Promise<ReconcileReport> {
  let checked = 0;
  let removed = 0;
  let kept = 0;
  while (checked < maxJobs) {
    // Removed jobs leave the set, so the next page starts after the ones kept so far.
    const jobs = (await queue.getFailed(kept, kept + Math.min(batch, maxJobs - checked) - 1)).filter(
      (j): j is Job => j !== undefined,
    );
    if (jobs.length === 0) break;
    checked += jobs.length;
    const refs = new Map<Job, EventRef>();
    for (const job of jobs) {
      const ref = eventRef(job, normalize);
      if (ref) refs.set(job, ref);
    }
    const committed = await committedEvents(sql, [...refs.values()]);
    for (const job of jobs) {
      const ref = refs.get(job);
      if (ref && committed.has(refKey(ref)) && (await removeJob(job))) removed++;
      else kept++;
    }
    if (jobs.length < batch) break;
  }
  return { checked, removed, kept };
}

/** The job's event as the log keys it; undefined when the job holds no valid event. */
function eventRef(job: Job, normalize: NormalizeOptions): EventRef | undefined {
  try {
    const event = normalizeEvent(job.data, normalize);
    return { asset: event.asset, key: event.key };
  } catch (error) {
    if (error instanceof BadInputError) return undefined;
    throw error;
  }
}

/** False when the job cannot go (an operator retried it meanwhile and a worker holds it). */
async function removeJob(job: Job): Promise<boolean> {
  try {
    await job.remove();
    return true;
  } catch {
    return false;
  }
}

const OPTIONS: ReconcileOptions = { batch: 100, maxJobs: 1000 };

/**
 * Reconciles each queue every `everyMs` (the first pass after one period: a fail-over's failed
 * jobs appear while the cluster recovers). Returns a stop function that waits for a running pass.
 */
export function startReconciling(
  queues: readonly Queue[],
  sql: Sql,
  normalize: NormalizeOptions,
  everyMs: number,
  log: Logger,
): () => Promise<void> {
  const loop: Periodic = new Periodic(async () => {
    for (const queue of queues) {
      if (loop.isStopped) return;
      try {
        const report = await reconcileFailed(queue, sql, normalize, OPTIONS);
        if (report.removed > 0) {
          log.info(
            { queue: queue.name, prefix: queue.opts.prefix, ...report },
            'failed event jobs whose events are committed removed (a completion lost by Redis)',
          );
        }
      } catch (error) {
        log.warn(
          { err: error, queue: queue.name },
          'failed-job reconciliation pass failed; retrying at the next one',
        );
      }
    }
  }, everyMs);
  loop.start();
  return () => loop.stop();
}
