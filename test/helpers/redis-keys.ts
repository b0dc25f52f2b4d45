/** Finding and deleting test keys by a piece of their name (SCAN, never KEYS), on the test Redis. */
import type { Redis } from 'ioredis';

/** Deletes every key whose name contains `text` (SCAN, never KEYS); answers how many. */
export async function deleteKeysContaining(redis: Redis, text: string): Promise<number> {
  let deleted = 0;
  for (const key of await keysContaining(redis, text)) deleted += await redis.del(key);
  return deleted;
}

/** Every key whose name contains `text`, on a single Redis (the test server). */
export async function keysContaining(redis: Redis, text: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `*${text}*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}
