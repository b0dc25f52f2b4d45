import { Redis } from 'ioredis';
import { atFileEnd } from './cleanup.js';
import { REDIS_URL, uniqueName } from './env.js';
import { deleteKeysContaining } from './redis-keys.js';

/**
 * A BullMQ prefix of this test file's own; every key that contains it is deleted after the file
 * (wherever this is called), so nothing leaks between files or runs. "Contains", not "starts
 * with": queue groups live under hash-tagged prefixes such as `{<prefix>-1}`.
 */
export function createTestPrefix(): string {
  const prefix = uniqueName('crtest');
  atFileEnd(async () => {
    const redis = new Redis(REDIS_URL);
    try {
      await deleteKeysContaining(redis, prefix);
    } finally {
      await redis.quit();
    }
  });
  return prefix;
}
