import { afterAll } from 'vitest';
import { deleteKeysWithPrefix, redisConnection } from '../../src/ingest/redis.js';
import { REDIS_URL, uniqueName } from './env.js';

/**
 * A BullMQ prefix of this test file's own; every key under it is deleted after the file, so
 * nothing leaks between files or runs.
 */
export function createTestPrefix(): string {
  const prefix = uniqueName('crtest');
  afterAll(async () => {
    const redis = redisConnection(REDIS_URL);
    await deleteKeysWithPrefix(redis, prefix);
    await redis.quit();
  });
  return prefix;
}
