import type { Queue } from 'bullmq';
import type { BadInputError } from '../core/errors.js';

/** A dead-letter job's data: enough for a producer to see what was wrong and resend. */
export interface DeadLetter {
  readonly reason: string;
  readonly message: string;
  readonly payload: unknown;
  readonly source: { readonly queue: string; readonly job_id: string | undefined; readonly job_name: string };
  readonly dead_lettered_at: string;
}

/**
 * Adds the bad event to the dead-letter queue. The job id is derived from the source job's, so a
 * redelivered bad job is dead-lettered once. It cannot be the source id itself: BullMQ refuses
 * custom ids that are integers (every auto-generated id is one) or contain ":".
 */
export async function deadLetter(
  dlq: Queue,
  error: BadInputError,
  job: { id?: string | undefined; name: string; data: unknown; queueName: string },
): Promise<void> {
  const data: DeadLetter = {
    reason: error.reason,
    message: error.message,
    payload: job.data,
    source: { queue: job.queueName, job_id: job.id, job_name: job.name },
    dead_lettered_at: new Date().toISOString(),
  };
  await dlq.add(error.reason, data, {
    ...(job.id ? { jobId: deadLetterJobId(job.queueName, job.id) } : {}),
    removeOnComplete: false,
    removeOnFail: false,
  });
}

/** A valid custom BullMQ job id for the dead letter of source job `id`. */
export function deadLetterJobId(queueName: string, id: string): string {
  return `${queueName}.${id}`.replaceAll(':', '_');
}
