import { Queue } from 'bullmq';
import type { TriggerPayload } from '../../core/trigger.js';
import type { RedisClient } from '../../ingest/redis.js';
import type { DeliveryResult, Target } from './target.js';

/** A BullMQ job whose jobId is the idempotency key: adding it twice leaves one job. */
export function queueTarget(connection: RedisClient, name: string, prefix: string): Target {
  const queue = new Queue(name, { connection, prefix });
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      try {
        await queue.add(payload.rollup, payload, { jobId: payload.idempotency_key });
        return { ok: true };
      } catch (error) {
        return { ok: false, retry: true, error: (error as Error).message };
      }
    },
    close: () => queue.close(),
  };
}
