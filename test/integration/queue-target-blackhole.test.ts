/**
 * A queue target whose Redis is cut off without a reset (a proxy that stops forwarding): a
 * delivery gives up after the target's timeout as a retried failure instead of waiting for an
 * answer that never comes (found by test:lease-partition: the lease holder's scheduler stopped
 * deciding, for every rollup, while its Redis was silent). After the heal the retry delivers, and
 * the abandoned add, which lands too, leaves no second job.
 */

import { afterAll, describe, expect, it } from 'vitest';
import type { TriggerPayload } from '../../src/core/runs/trigger.js';
import { redisQueues } from '../../src/queue/backend.js';
import { redisConnection } from '../../src/queue/redis.js';
import { queueTarget } from '../../src/targets/queue.js';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { testQueue } from '../helpers/daemon.js';
import { REDIS_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const prefix = createTestPrefix();
const redis = new URL(REDIS_URL);
const proxy = await BlackholeProxy.start({ host: redis.hostname, port: Number(redis.port || 6379) });
const connection = redisConnection(proxy.proxiedUrl(REDIS_URL));
const target = queueTarget(redisQueues(connection), 'silent-runs', prefix, 300);
afterAll(async () => {
  await target.close();
  connection.disconnect();
  await proxy.close();
});
const runs = testQueue('silent-runs', prefix);

const payload = { rollup: 'silent', idempotency_key: 'silent@20250601T000000Z#1' } as TriggerPayload;

describe('a queue target on a silent Redis', () => {
  it('times out as a retried failure, then delivers once after the heal', async () => {
    expect(await target.deliver(payload)).toEqual({ ok: true });
    await runs.remove(payload.idempotency_key);

    proxy.blackhole();
    const started = Date.now();
    const result = await target.deliver(payload);
    const waited = Date.now() - started;
    expect(result).toEqual({ ok: false, retry: true, error: 'no answer from Redis within 300 ms' });
    // Gave up rather than waited for the heal; the margin over 300 ms is for a loaded machine.
    expect(waited).toBeLessThan(10_000);

    proxy.heal();
    // Retried as the scheduler retries it: on a loaded machine the first answer after the heal can
    // itself take longer than 300 ms (a retried failure again), and a later try delivers.
    await waitFor(async () => (await target.deliver(payload)).ok, { what: 'a delivery after the heal' });
    await waitFor(async () => (await runs.getJobCounts('waiting')).waiting === 1, { what: 'one job' });
    expect((await runs.getJob(payload.idempotency_key))?.data).toEqual(payload);
  });
});
