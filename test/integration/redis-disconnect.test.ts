/**
 * Closing a Redis connection twice (the eviction check's client: once after its check, once at
 * shutdown) must not arm ioredis's 2 s "stream still open" timer, which kept the daemon's process
 * alive for 2 s after it logged "stopped".
 */
import { describe, expect, it } from 'vitest';
import { disconnect, redisConnection } from '../../src/queue/redis.js';
import { REDIS_URL } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('disconnect', () => {
  it('closes a connection, and a second call arms no timer', async () => {
    const redis = redisConnection(REDIS_URL);
    expect(await redis.ping()).toBe('PONG');
    disconnect(redis);
    await waitFor(() => redis.status === 'end', { what: 'the connection to end' });
    const before = timers();
    disconnect(redis);
    // ioredis arms its timer synchronously inside disconnect(), so counting right after is exact.
    expect(timers()).toBe(before);
  });
});
