/**
 * The events consumer on BullMQ's PostgreSQL backend (pg-batch-consumer.ts, pg-jobs.ts): many jobs
 * per statement through BullMQ's own functions, and the job states BullMQ's Worker would leave.
 * Handlers here are plain functions; the queue is BullMQ's, on the real local PostgreSQL.
 */
import type { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import type { EventJob, JobOutcome } from '../../src/ingest/event-job.js';
import { pgBatchConsumer } from '../../src/ingest/pg-batch-consumer.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { queueConnection } from '../../src/queue/backend.js';
import { queueSchema } from '../../src/queue/schema.js';
import { connect } from '../../src/store/pg/db.js';
import {
  claimJobs,
  completeJobs,
  extendLocks,
  giveBackJobs,
  type JobQueue,
  reclaimStalled,
} from '../../src/store/queue/jobs.js';
import { createLogger } from '../../src/support/log.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const log = createLogger('silent');
const connection = queueConnection(parseConfig({ database_url: db.url, queue: { backend: 'postgres' } }));
const queues: Queue[] = [];
const sql = connect(db.url, { max: 3 });
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
  await connection.close();
  await sql.end({ timeout: 5 });
});

/** A fresh queue of its own, with `n` jobs added in order (data: their number). */
async function filled(name: string, n: number, opts: Record<string, unknown> = {}) {
  const prefix = createTestPrefix().replace(/[^A-Za-z0-9_]/g, '_');
  const queue = connection.queue(name, prefix);
  queues.push(queue);
  for (let i = 0; i < n; i += 500)
    await queue.addBulk(
      Array.from({ length: Math.min(500, n - i) }, (_, k) => ({ name: 'e', data: { n: i + k }, opts })),
    );
  await queue.waitUntilReady();
  const q: JobQueue = { sql, schema: queueSchema(prefix), name };
  return { queue, prefix, q };
}

function consumer(
  queue: Queue,
  prefix: string,
  handle: (job: EventJob) => Promise<JobOutcome>,
  concurrency = 100,
) {
  return pgBatchConsumer({
    name: queue.name,
    prefix,
    concurrency,
    maxStalledCount: 1,
    handle,
    log,
    metrics: createMetrics(),
    sql: connect(db.url, { max: 3, asyncCommit: true }),
    schema: queueSchema(prefix),
    queue,
  });
}

const done = (n: number): JobOutcome => ({ kind: 'done', result: { status: 'duplicate', asset: `a${n}` } });
const numberOf = (job: EventJob) => (job.data as { n: number }).n;

describe('batches of jobs through BullMQ functions', () => {
  it('claims oldest first under one token each, and completes only jobs still held', async () => {
    const { queue, q } = await filled('claims', 10);
    const first = await claimJobs(q, 4, 'tok', 60_000, 'test');
    expect(first.map((j) => (j.data as { n: number }).n)).toEqual([0, 1, 2, 3]);
    expect(new Set(first.map((j) => j.token)).size).toBe(4);
    expect(await queue.getJobCounts('active', 'waiting')).toEqual({ active: 4, waiting: 6 });

    // One token wrong (the job was taken back and claimed again elsewhere): the others complete.
    const completions = first.map((j, i) => ({ id: j.id, token: i === 2 ? 'other' : j.token, value: '1' }));
    const completed = await completeJobs(q, completions);
    expect([...completed].sort()).toEqual([first[0]!.id, first[1]!.id, first[3]!.id].sort());
    expect(await queue.getJobCounts('active', 'completed')).toEqual({ active: 1, completed: 0 });

    // Renewal tells the lock it lost; giving back returns the job to the queue (at its tail on
    // this backend, as BullMQ's moveToWait does), attempts unchanged.
    expect(await extendLocks(q, [{ id: first[2]!.id, token: 'other' }], 60_000)).toEqual([first[2]!.id]);
    expect(await extendLocks(q, [first[2]!], 60_000)).toEqual([]);
    await giveBackJobs(q, [first[2]!]);
    const again = await claimJobs(q, 10, 'tok2', 60_000, 'test');
    expect(again.map((j) => (j.data as { n: number }).n)).toEqual([4, 5, 6, 7, 8, 9, 2]);
    const job = await queue.getJob(first[2]!.id);
    expect(job?.attemptsMade).toBe(0);
  });

  it('returns a job whose lock lapsed to the queue, and fails it once stalled too often', async () => {
    const { queue, q } = await filled('stalls', 1);
    const stalledOnce = async () => {
      await claimJobs(q, 1, 'gone', 1, 'test');
      // Two passes: the first marks the active job, the next takes it back once its lock lapsed.
      await waitFor(async () => (await reclaimStalled(q, 1, 0)).length === 1, { what: 'the job taken back' });
    };
    await stalledOnce();
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    await stalledOnce();
    const [claimed] = await claimJobs(q, 1, 'tok', 60_000, 'test');
    expect(claimed?.deferredFailure).toMatch(/stalled more than allowable limit/);
  });
});

describe('the batch consumer', () => {
  it('completes every job once, deleting it, and counts completions', async () => {
    const n = 1200;
    const { queue, prefix } = await filled('all', n);
    const seen: number[] = [];
    const c = consumer(queue, prefix, async (job) => {
      seen.push(numberOf(job));
      return done(numberOf(job));
    });
    let completed = 0;
    c.onCompleted(() => completed++);
    await waitFor(() => completed === n, { what: `${n} completions` });
    await c.close(false);
    expect(seen.length).toBe(n);
    expect(new Set(seen).size).toBe(n);
    expect(await queue.getJobCounts('waiting', 'active', 'completed', 'failed')).toEqual({
      waiting: 0,
      active: 0,
      completed: 0,
      failed: 0,
    });
  });

  it('shares a queue with another consumer: each job handled by one of them', async () => {
    const n = 1000;
    const { queue, prefix } = await filled('shared', n);
    const seen: number[] = [];
    const handle = async (job: EventJob) => {
      seen.push(numberOf(job));
      await new Promise((r) => setImmediate(r));
      return done(numberOf(job));
    };
    const both = [consumer(queue, prefix, handle, 50), consumer(queue, prefix, handle, 50)];
    let completed = 0;
    for (const c of both) c.onCompleted(() => completed++);
    await waitFor(() => completed === n, { what: `${n} completions` });
    await Promise.all(both.map((c) => c.close(false)));
    expect(seen.length).toBe(n);
    expect(new Set(seen).size).toBe(n);
  });

  it("fails a job through BullMQ's Job: retried while attempts remain, then failed with the error", async () => {
    const { queue, prefix } = await filled('fails', 3, { attempts: 2 });
    const tries = new Map<number, number>();
    const c = consumer(queue, prefix, async (job) => {
      const n = numberOf(job);
      tries.set(n, (tries.get(n) ?? 0) + 1);
      if (n === 1) throw new Error('poisoned');
      return done(n);
    });
    await waitFor(async () => (await queue.getJobCounts('failed')).failed === 1, { what: 'the failure' });
    await c.close(false);
    const [failed] = await queue.getFailed();
    expect(failed?.failedReason).toBe('poisoned');
    expect(failed?.attemptsMade).toBe(2);
    expect(tries).toEqual(
      new Map([
        [0, 1],
        [1, 2],
        [2, 1],
      ]),
    );
  });

  it('gives jobs back uncounted, takes none while paused, and waits for jobs in hand on close', async () => {
    const { queue, prefix } = await filled('pause', 20);
    let giveBack = true;
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const c = consumer(queue, prefix, async (job) => {
      if (giveBack) return { kind: 'give-back' };
      await gate;
      return done(numberOf(job));
    });
    await waitFor(async () => (await queue.getJobCounts('waiting')).waiting === 20, {
      what: 'jobs given back',
    });
    await c.pause();
    giveBack = false;
    // Jobs taken by the last claim before the pause go back too, and nothing is taken after it.
    await waitFor(
      async () => {
        const counts = await queue.getJobCounts('active', 'waiting');
        return counts.active === 0 && counts.waiting === 20;
      },
      { what: 'every job back in the queue' },
    );
    const waiting = await queue.getJobs(['waiting']);
    expect(waiting.map((j) => j.attemptsMade)).toEqual(waiting.map(() => 0));
    expect(Math.min(...waiting.map((j) => j.attemptsStarted))).toBeGreaterThanOrEqual(1);
    expect(c.isPaused()).toBe(true);

    c.resume();
    await waitFor(async () => (await queue.getJobCounts('active')).active === 20, { what: 'jobs in hand' });
    const closed = c.close(false);
    let closedYet = false;
    void closed.then(() => {
      closedYet = true;
    });
    expect(await queue.getJobCounts('active')).toEqual({ active: 20 });
    expect(closedYet).toBe(false);
    release();
    await closed;
    expect(await queue.getJobCounts('active', 'waiting')).toEqual({ active: 0, waiting: 0 });
  });
});
