import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { REDIS_URL, uniqueName } from './env.js';

/**
 * A BullMQ prefix of this test file's own; every key under it is deleted after the file, so
 * nothing leaks between files or runs.
 */
export function createTestPrefix(): string {
  const prefix = uniqueName('crtest');
  afterAll(async () => {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
    await redis.quit();
  });
  return prefix;
}
