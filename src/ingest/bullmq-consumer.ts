/**
 * The events queue consumer as a BullMQ Worker, one job at a time (`concurrency` at once): the
 * consumer on Redis. A job given back returns to the head of the queue without counting as an attempt.
 */
import { type Job, type KeepJobs, WaitingError } from 'bullmq';
import type { Metrics } from '../metrics/registry.js';
import type { QueueConnection } from '../queue/backend.js';
import { type Logger, throttledErrors } from '../support/log.js';
import type { EventJob, IngestResult, JobOutcome } from './event-job.js';

/** What ingest needs of a consumer of one queue group, whichever backend it takes jobs from. */
export interface EventConsumer {
  /** Stops taking jobs; resolves once no fetch is under way. */
  pause(): Promise<void>;
  resume(): void;
  isPaused(): boolean;
  /** Called once per job completed (committed, duplicate or dead-lettered). */
  onCompleted(listener: () => void): void;
  /** Without force, waits for the jobs in hand to settle. */
  close(force: boolean): Promise<void>;
}

export interface ConsumerSettings {
  readonly name: string;
  readonly prefix: string;
  readonly concurrency: number;
  readonly maxStalledCount: number;
  readonly handle: (job: EventJob) => Promise<JobOutcome>;
  readonly log: Logger;
  readonly metrics: Metrics;
}

/** Completed event jobs kept for inspection (the event log is the record of what was ingested). */
const KEEP_COMPLETED: KeepJobs = { count: 1000 };
/** Failed jobs kept (reconciled with the event log: failed-reconcile.ts). */
const KEEP_FAILED = 10_000;

export function bullmqConsumer(connection: QueueConnection, s: ConsumerSettings): EventConsumer {
  const giveBack = async (job: Job, token: string | undefined): Promise<never> => {
    try {
      // Back to the head of the queue, lock released, attemptsMade unchanged.
      await job.moveToWait(token);
      s.metrics.jobsReturned.inc();
    } catch (error) {
      s.log.warn(
        { job_id: job.id, err: error },
        'could not give a job back; it returns when its lock lapses',
      );
    }
    throw new WaitingError(); // tells BullMQ the job left active on purpose: neither completed nor failed
  };
  const worker = connection.worker<unknown, IngestResult>(
    s.name,
    s.prefix,
    async (job, token) => {
      const outcome = await s.handle(job);
      return outcome.kind === 'done' ? outcome.result : giveBack(job, token);
    },
    {
      concurrency: s.concurrency,
      maxStalledCount: s.maxStalledCount,
      removeOnComplete: KEEP_COMPLETED,
      removeOnFail: { count: KEEP_FAILED },
    },
  );
  const workerError = throttledErrors(s.log);
  worker.on('error', (error) => workerError({ queue: s.name }, error, 'events worker error'));
  worker.on('failed', (job, error) =>
    s.log.error({ job_id: job?.id, queue: s.name, err: error }, 'event job failed'),
  );
  return {
    pause: () => worker.pause(true),
    resume: () => worker.resume(),
    isPaused: () => worker.isPaused(),
    onCompleted: (listener) => void worker.on('completed', listener),
    close: (force) => worker.close(force),
  };
}
