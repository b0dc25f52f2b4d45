/**
 * The queue factory's contract on both backends: what the daemon, queue targets and run outcomes
 * (read back through the Queue/Job API) rely on. Each backend gets its own namespace (a Redis
 * prefix; a schema in this file's database), removed at the end.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { queueConnection } from '../../src/queue/backend.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();

describe.each(['redis', 'postgres'] as const)('queues on %s', (backend) => {
  const prefix = uniqueName('crqb');
  const connection = queueConnection(
    parseConfig({ database_url: db.url, redis_url: REDIS_URL, queue: { backend, prefix } }),
  );
  const queue = connection.queue<{ n: number }>('contract', prefix);
  afterAll(async () => {
    await queue.close();
    await connection.deleteNamespace(prefix);
    await connection.close();
  });

  it('dedupes on the job id, and getJob/getJobState follow a job to its return value', async () => {
    const events = connection.queueEvents('contract', prefix);
    await events.waitUntilReady();
    const completed = new Set<string>();
    events.on('completed', ({ jobId }) => completed.add(jobId));

    await queue.add('run', { n: 1 }, { jobId: 'key-1' });
    await queue.add('run', { n: 2 }, { jobId: 'key-1' }); // the same key: no second job
    expect(await queue.getJobState('key-1')).toBe('waiting');
    expect((await queue.getJob('key-1'))?.data).toEqual({ n: 1 });

    const worker = connection.worker<{ n: number }, { doubled: number }>('contract', prefix, async (job) => ({
      doubled: job.data.n * 2,
    }));
    await waitFor(async () => (await queue.getJobState('key-1')) === 'completed', { what: 'completion' });
    expect((await queue.getJob('key-1'))?.returnvalue).toEqual({ doubled: 2 });
    await waitFor(() => completed.has('key-1'), { what: 'the completed event' });
    expect(await queue.getJobCounts('completed', 'waiting')).toEqual({ completed: 1, waiting: 0 });
    await worker.close();
    await events.close();
  });

  it('keeps prefixes apart', async () => {
    const other = uniqueName('crqb');
    const neighbour = connection.queue('contract', other);
    await neighbour.add('run', { n: 3 });
    expect((await neighbour.getJobCounts('waiting')).waiting).toBe(1);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(0);
    await neighbour.close();
    await connection.deleteNamespace(other);
    const again = connection.queue('contract', other);
    expect((await again.getJobCounts('waiting')).waiting).toBe(0);
    await again.close();
    await connection.deleteNamespace(other);
  });

  it('answers ping while the store is up', async () => {
    await expect(connection.ping()).resolves.toBeUndefined();
    expect(connection.backend).toBe(backend);
  });
});
