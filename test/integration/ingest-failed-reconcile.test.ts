/**
 * Failed event jobs whose events are committed are reconciled by the daemon: a job
 * whose commit succeeded but whose completion Redis lost (a Cluster fail-over) sits in the failed
 * set; ingest removes it once the event log shows its event. A failed job whose event is not in
 * the log stays failed, as before. Nothing is committed twice.
 */

import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events/events.js';
import { normalizeOptions } from '../../src/ingest/precheck.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { enqueue, ingestConfig, type Queues, queuesOf, startWorker } from './ingest-harness.js';

let db: TestDatabase;
let q: Queues;
const prefix = createTestPrefix();
const event = (id: string, hour: number) => ({
  asset: 'reconcile.a',
  start: new Date(Date.UTC(2026, 0, 1, hour)).toISOString(),
  end: new Date(Date.UTC(2026, 0, 1, hour + 1)).toISOString(),
  id,
});

beforeAll(async () => {
  db = await createTestDatabase();
  const config = ingestConfig(db, prefix, { queue: { reconcile_every: 'PT0.2S' } });
  q = queuesOf(config);
  // Before the daemon's worker: a worker that commits some events and then fails their jobs, as
  // when the commit succeeded and the completion was refused by a Redis master going away; and
  // fails one job without committing it, as a genuine failure.
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const failing = new Worker(
    config.queue.name,
    async (job) => {
      if (job.data.id !== 'never-committed') {
        await commitEvents(db.sql, [normalizeEvent(job.data, normalizeOptions(config))]);
      }
      throw new Error('Too many Cluster redirections. Last error: Connection is closed.');
    },
    { connection, prefix: config.queue.prefix },
  );
  failing.on('error', () => {});
  afterAll(() => connection.disconnect());
  await enqueue(q.events, [
    ...Array.from({ length: 250 }, (_, i) => event(`lost-${i}`, i)),
    event('never-committed', 300),
  ]);
  await waitFor(async () => (await q.events.getFailedCount()) === 251, { what: '251 failed jobs' });
  await failing.close();
  startWorker(config);
});

describe('failed jobs whose events are committed', () => {
  it('are removed from the failed set; the others stay failed', async () => {
    await waitFor(async () => (await q.events.getFailedCount()) === 1, {
      what: 'the failed set reconciled',
      timeout: 30_000,
    });
    const [left] = await q.events.getFailed(0, -1);
    expect(left?.data.id).toBe('never-committed');
    const [counts] = await db.sql<[{ events: number; assets: number }]>`
      select (select count(*)::int from events) as events, (select event_count::int from assets where name = 'reconcile.a') as assets`;
    expect(counts).toEqual({ events: 250, assets: 250 });
  });
});
