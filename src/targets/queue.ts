/**
 * The `queue` target type: a decision becomes a BullMQ job on a queue of the daemon's own queue
 * store (Redis or PostgreSQL), and the job itself says how the run went.
 */
import { z } from 'zod';
import { queueJobReport, type RunReport } from '../core/runs/runs.js';
import type { TriggerPayload } from '../core/runs/trigger.js';
import { isoDuration, queueName } from '../support/fields.js';
import {
  type DeliveryResult,
  defineTarget,
  type JobQueues,
  type Observation,
  type ObservedRun,
  type RepairTarget,
  type Target,
} from './target.js';

export const queueType = defineTarget({
  type: 'queue',
  docs: 'docs/targets/queue.md',
  schema: z.strictObject({
    type: z.literal('queue'),
    queue: queueName,
    prefix: z.string().optional(),
    // No default here: a default would change every stored queue rollup's definition hash.
    timeout: isoDuration.optional(),
  }),
  secrets: { fields: [], last: false },
  follow: { source: 'queue', firstCheckMs: 0, thinOut: true, watchFinished: false },
  trigger: (config, { queues, defaultPrefix, onFinished }) =>
    queueTarget(queues, config.queue, config.prefix ?? defaultPrefix, config.timeout, onFinished),
  repair: (config, { queues, defaultPrefix }) =>
    queueRepairTarget(
      queues,
      config.queue,
      config.prefix ?? defaultPrefix,
      config.timeout ?? QUEUE_DELIVERY_TIMEOUT_MS,
    ),
  describe: (config) => `queue ${config.queue}`,
});

/** A delivery's bound when the target sets no `timeout`: the webhook's default. */
const QUEUE_DELIVERY_TIMEOUT_MS = 10_000;

/**
 * A BullMQ job whose jobId is the attempt's run id (the idempotency key for attempt 1): adding it
 * twice leaves one job. Each add is
 * bounded in time (on either backend): a Redis cut off without a reset never answers (ioredis waits with no deadline),
 * and the lease holder's scheduler, which delivers between decisions, must not wait with it. An
 * add given up on may still land later; the retry then finds the job under its id and adds none.
 */
export function queueTarget(
  queues: JobQueues,
  name: string,
  prefix: string,
  timeoutMs = QUEUE_DELIVERY_TIMEOUT_MS,
  onFinished?: (runId: string) => void,
): Target {
  const queue = queues.queue(name, prefix);
  const store = queues.backend === 'redis' ? 'Redis' : 'PostgreSQL';
  // Outcomes the event stream told of, for jobs removed on completion (removeOnComplete) before
  // their run was asked about; bounded, and only ever consulted for a job that is gone.
  const finished = new Map<string, RunReport>();
  const events =
    onFinished &&
    wakeOnFinished(queues, name, prefix, (jobId, report) => {
      finished.delete(jobId);
      finished.set(jobId, report);
      if (finished.size > MAX_FINISHED) finished.delete(finished.keys().next().value!);
      onFinished(jobId);
    });
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const added = queue.add(payload.rollup, payload, { jobId: payload.run_id ?? payload.idempotency_key });
      try {
        await withinTime(added, timeoutMs, `no answer from ${store} within ${timeoutMs} ms`);
        return { ok: true };
      } catch (error) {
        return { ok: false, retry: true, error: (error as Error).message };
      }
    },
    /**
     * The job itself is the truth (Queue.getJobState and getJob, which every BullMQ backend has):
     * completed, failed after its own attempts, active, or gone. Sent together, so a batch costs
     * about one round trip, and bounded in time like a delivery.
     */
    async observe(runs: readonly ObservedRun[]): Promise<Observation | { error: string }> {
      const ask = Promise.all(
        runs.map(async ({ runId }) => {
          const state = await queue.getJobState(runId);
          if (state !== 'failed' && state !== 'unknown')
            return [runId, queueJobReport(state, undefined)] as const;
          // Failed: its reason; removed in between is gone.
          const job = state === 'unknown' ? undefined : await queue.getJob(runId);
          // Gone: succeeded or failed if the event stream told of it (removed on completion), else lost.
          if (!job) return [runId, finished.get(runId) ?? queueJobReport('unknown', undefined)] as const;
          return [runId, queueJobReport(state, job)] as const;
        }),
      );
      try {
        return new Map(await withinTime(ask, timeoutMs, `no answer from ${store} within ${timeoutMs} ms`));
      } catch (error) {
        return { error: (error as Error).message };
      }
    },
    close: async () => {
      await events?.stop();
      await queue.close();
    },
  };
}

/** Completion events remembered per queue for removed jobs. */
const MAX_FINISHED = 10_000;

/**
 * A wake-up, not the record: BullMQ's event stream says a job completed or failed (for good: a
 * failure BullMQ retries is not in the stream as `failed`), and the run is asked about at once
 * instead of at its next check. An event this misses (the stream is trimmed, the daemon was down,
 * a backend without it) costs only the check interval, except for a job removed on completion,
 * which is then lost. The queue factory gives it a connection of its own on either backend.
 */
function wakeOnFinished(
  queues: JobQueues,
  name: string,
  prefix: string,
  onFinished: (jobId: string, report: RunReport) => void,
): { stop(): Promise<void> } {
  // Stream ids are the store's clock in ms: read from a minute back rather than from the end ('$'),
  // so a job that finishes while the reader is still starting (or on a skewed clock) is not missed.
  const events = queues.queueEvents(name, prefix, { lastEventId: `${Date.now() - 60_000}-0` });
  events.on('error', () => {}); // reconnects by itself; the checks cover the gap
  events.on('completed', ({ jobId }) => onFinished(jobId, { kind: 'target', state: 'succeeded' }));
  events.on('failed', ({ jobId, failedReason }) =>
    onFinished(jobId, { kind: 'target', state: 'failed', error: failedReason || 'the job failed' }),
  );
  return { stop: () => events.close().catch(() => {}) };
}

/** The BullMQ job name of a repair request on a queue target. */
export const REPAIR_JOB_NAME = 'repair';

/** A repair request attempt as a job named `repair` whose jobId is the attempt's key: added twice, one job. */
function queueRepairTarget(queues: JobQueues, name: string, prefix: string, timeoutMs: number): RepairTarget {
  const queue = queues.queue(name, prefix);
  return {
    async deliver(payload) {
      const added = queue.add(REPAIR_JOB_NAME, payload, { jobId: payload.idempotency_key });
      try {
        await withinTime(added, timeoutMs, `no answer from the queue within ${timeoutMs} ms`);
        return { ok: true };
      } catch (error) {
        return { ok: false, retry: true, error: (error as Error).message };
      }
    },
    close: () => queue.close(),
  };
}

/**
 * `work`'s answer, or a rejection with `message` after `timeoutMs`: a Redis cut off without a reset
 * never answers (ioredis waits with no deadline), and the scheduler must not wait with it. `work`
 * may still settle later; that is harmless.
 */
async function withinTime<T>(work: Promise<T>, timeoutMs: number, message: string): Promise<T> {
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), timeoutMs);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
