import { Redis } from 'ioredis';

/** BullMQ needs maxRetriesPerRequest: null so blocking commands survive reconnects. */
export function redisConnection(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}

/**
 * For one-shot producers (`emit`): gives up after a few connection attempts, so an unreachable
 * Redis fails the command with its error instead of queueing it forever.
 */
export function oneShotConnection(url: string): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: 2,
    connectTimeout: 5_000,
    retryStrategy: (attempt) => (attempt > 3 ? null : 250 * attempt),
  });
  redis.on('error', () => {}); // each command that fails reports it
  return redis;
}

/** Deletes every key under a BullMQ prefix (tests, the demo, benchmarks): SCAN, never KEYS. */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
