import { Queue } from 'bullmq';
import type { TriggerPayload } from '../../core/trigger.js';
import type { RedisClient } from '../../ingest/redis.js';
import type { DeliveryResult, Target } from './target.js';

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
): Target {
  const queue = new Queue(name, { connection, prefix });
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
    close: () => queue.close(),
  };
}
