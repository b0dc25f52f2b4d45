/**
 * An ingest worker cut off from PostgreSQL (a proxy that stops forwarding, no reset) while Redis
 * stays reachable: it pauses, gives its jobs back without failing them or counting an attempt, a
 * healthy worker commits them, and once PostgreSQL answers again it resumes by itself. A late
 * commit of the same events by the first worker changes nothing.
 */
import type { Job } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events/events.js';
import { normalizeOptions } from '../../src/ingest/precheck.js';
import { connectIngest, startIngestWorker } from '../../src/ingest/worker.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import {
  drained,
  enqueue,
  indexCoverage,
  ingestConfig,
  log,
  logCoverage,
  MINUTE,
  micros,
  type Queues,
  queuesOf,
} from './ingest-harness.js';

const prefix = createTestPrefix();
const T0 = micros('2025-07-01T00:00:00Z');
const ASSETS = ['stall.a', 'stall.b', 'stall.c', 'stall.d'];

const db: TestDatabase = await createTestDatabase();
const target = new URL(db.url);
const proxy = await BlackholeProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
afterAll(() => proxy.close());
const config = ingestConfig(db, prefix, {
  queue: { concurrency: 50, batch_size: 20, pg_stall_timeout: 'PT1S' },
});
const q: Queues = queuesOf(config);
/** The worker cut off: everything it says to PostgreSQL goes through the proxy. */
const cutConfig = { ...config, database_url: proxy.proxiedUrl(db.url) };
const cutSql = connectIngest(cutConfig);
const metrics = createMetrics();
const cut = startIngestWorker(cutConfig, cutSql, log, metrics);
afterAll(async () => {
  proxy.heal();
  await cut.close(10_000);
  await cutSql.end({ timeout: 5 });
});

/** `count` one-minute slices per asset from slice `from`, ids unique per slice. */
function events(from: number, count: number): Array<Record<string, unknown>> {
  return Array.from({ length: count }, (_, k) => from + k).flatMap((i) =>
    ASSETS.map((asset) => ({
      asset,
      start: new Date((T0 + i * MINUTE) / 1000).toISOString(),
      end: new Date((T0 + (i + 1) * MINUTE) / 1000).toISOString(),
      id: `${asset}-${i}`,
    })),
  );
}

async function eventCount(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from events`;
  return row!.n;
}

const gauge = async (m: ReturnType<typeof createMetrics>) =>
  (await m.ingestPausedForPostgres.get()).values[0]?.value ?? 0;
const returned = async (m: ReturnType<typeof createMetrics>) =>
  (await m.jobsReturned.get()).values[0]?.value ?? 0;

describe('an ingest worker cut off from PostgreSQL', () => {
  it('pauses, gives its jobs back uncounted, and resumes when PostgreSQL answers', async () => {
    // Healthy at first: it commits through the proxy.
    await enqueue(q.events, events(0, 5));
    await drained(q.events);
    expect(await eventCount(db.sql)).toBe(20);

    // Cut: the events it takes now cannot commit. It pauses and gives every one of them back.
    proxy.blackhole();
    const stalled = events(5, 10);
    await enqueue(q.events, stalled);
    await waitFor(async () => (await gauge(metrics)) === 1, { what: 'ingest to pause' });
    await waitFor(
      async () => {
        const c = await q.events.getJobCounts('active', 'waiting');
        return c.active === 0 && c.waiting === stalled.length;
      },
      { what: 'every stalled job back in the queue' },
    );
    expect(await returned(metrics)).toBeGreaterThan(0);
    const waiting: Job[] = await q.events.getJobs(['waiting']);
    expect(waiting.map((j) => j.attemptsMade)).toEqual(waiting.map(() => 0));
    expect(Math.max(...waiting.map((j) => j.attemptsStarted))).toBeGreaterThanOrEqual(1);
    // Paused: it takes nothing more while cut off.
    expect(cut.isPaused()).toBe(true);

    // A healthy instance commits them at once (the cut one's asset locks ended with its session).
    const healthySql = connect(db.url, { max: 4 });
    const healthy = startIngestWorker(config, healthySql, log, createMetrics());
    try {
      await drained(q.events);
    } finally {
      await healthy.close(10_000);
      await healthySql.end({ timeout: 5 });
    }
    expect(await eventCount(db.sql)).toBe(60);
    expect(await q.events.getJobCounts('failed')).toEqual({ failed: 0 });
    const done = await q.events.getJobs(['completed']);
    expect(done.length).toBe(60);
    // Completing counts the one attempt that committed; giving back counted none.
    expect(done.map((j) => j.attemptsMade)).toEqual(done.map(() => 1));
    const given = await returned(metrics);
    // Every start but the completing one was a give-back (a job may be given back twice when a
    // fetch under way as ingest paused takes it again).
    expect(done.reduce((n, j) => n + j.attemptsStarted - 1, 0)).toBe(given);

    // Healed: it resumes by itself and commits new events again.
    proxy.heal();
    await waitFor(async () => (await gauge(metrics)) === 0, { what: 'ingest to resume' });
    expect(cut.isPaused()).toBe(false);
    await enqueue(q.events, events(15, 5));
    await drained(q.events);
    expect(await eventCount(db.sql)).toBe(80);

    // A late commit of the events it had given back is a no-op.
    const before = await Promise.all(ASSETS.map((a) => indexCoverage(db.sql, a)));
    const late = stalled.map((e) => normalizeEvent(e, normalizeOptions(config)));
    const outcomes = await commitEvents(cutSql, late);
    expect(outcomes.map((o) => o.status)).toEqual(late.map(() => 'duplicate'));
    expect(await eventCount(db.sql)).toBe(80);
    for (const [i, asset] of ASSETS.entries()) {
      expect(await indexCoverage(db.sql, asset)).toEqual(before[i]);
      expect(await indexCoverage(db.sql, asset)).toEqual(await logCoverage(db.sql, asset));
    }
    expect(await q.dead.getJobCounts('waiting')).toEqual({ waiting: 0 });
  });
});
