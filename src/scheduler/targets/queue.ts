import { Queue, QueueEvents } from 'bullmq';
import { queueJobReport } from '../../core/runs.js';
import type { TriggerPayload } from '../../core/trigger.js';
import type { RedisClient } from '../../ingest/redis.js';
import type { DeliveryResult, Observation, ObservedRun, Target } from './target.js';

/** A delivery's bound when the target sets no `timeout`: the webhook's default. */
export const QUEUE_DELIVERY_TIMEOUT_MS = 10_000;

/**
 * A BullMQ job whose jobId is the attempt's run id (the idempotency key for attempt 1): adding it
 * twice leaves one job. Each add is
 * bounded in time: a Redis cut off without a reset never answers (ioredis waits with no deadline),
 * and the lease holder's scheduler, which delivers between decisions, must not wait with it. An
 * add given up on may still land later; the retry then finds the job under its id and adds none.
 */
export function queueTarget(
  connection: RedisClient,
  name: string,
  prefix: string,
  timeoutMs = QUEUE_DELIVERY_TIMEOUT_MS,
  onFinished?: (runId: string) => void,
): Target {
  const queue = new Queue(name, { connection, prefix });
  let events: { stop(): Promise<void> } | undefined;
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const added = queue.add(payload.rollup, payload, { jobId: payload.run_id ?? payload.idempotency_key });
      added.catch(() => {}); // settles harmlessly after a timeout
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer from Redis within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([added, late]);
        return { ok: true };
      } catch (error) {
        return { ok: false, retry: true, error: (error as Error).message };
      } finally {
        clearTimeout(timer);
      }
    },
    /**
     * The job itself is the truth (Queue.getJobState and getJob, which every BullMQ backend has):
     * completed, failed after its own attempts, active, or gone. Sent together, so a batch costs
     * about one round trip, and bounded in time like a delivery.
     */
    async observe(runs: readonly ObservedRun[]): Promise<Observation | { error: string }> {
      if (onFinished) events ??= wakeOnFinished(connection, name, prefix, onFinished);
      const ask = Promise.all(
        runs.map(async ({ runId }) => {
          const state = await queue.getJobState(runId);
          if (['completed', 'active', 'unknown'].includes(state))
            return [runId, queueJobReport(state, undefined)] as const;
          // Failed (its reason) or waiting (attempts made so far); removed in between is gone.
          const job = await queue.getJob(runId);
          return [runId, queueJobReport(job ? state : 'unknown', job)] as const;
        }),
      );
      ask.catch(() => {});
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer from Redis within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        return new Map(await Promise.race([ask, late]));
      } catch (error) {
        return { error: (error as Error).message };
      } finally {
        clearTimeout(timer);
      }
    },
    close: async () => {
      await events?.stop();
      await queue.close();
    },
  };
}

/**
 * A wake-up, never the record: BullMQ's event stream says a job completed or failed, and the run
 * is asked about at once instead of at its next check. An event this misses (the stream is
 * trimmed, the daemon was down, a backend without it) only costs the check interval. Runs on its
 * own connection, as a blocking stream read needs.
 */
function wakeOnFinished(
  connection: RedisClient,
  name: string,
  prefix: string,
  onFinished: (runId: string) => void,
): { stop(): Promise<void> } {
  const own = connection.duplicate();
  own.on('error', () => {}); // reconnects by itself; the checks cover the gap
  const events = new QueueEvents(name, { connection: own, prefix, blockingTimeout: 2000 });
  events.on('error', () => {});
  const note = ({ jobId }: { jobId: string }) => onFinished(jobId);
  events.on('completed', note);
  events.on('failed', note);
  return {
    stop: async () => {
      own.disconnect();
      await events.close().catch(() => {});
    },
  };
}
