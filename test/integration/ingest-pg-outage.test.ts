/**
 * PostgreSQL connections killed again and again while events flow: commits are retried, nothing
 * accepted is lost, nothing is dead-lettered, and the index equals PostgreSQL's own merge of the log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectOnce } from '../../src/store/pg/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { ADMIN_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import {
  drained,
  enqueue,
  indexCoverage,
  indexOf,
  ingestConfig,
  logCoverage,
  MINUTE,
  micros,
  type Queues,
  queuesOf,
  type RunningWorker,
  startWorker,
} from './ingest-harness.js';

let db: TestDatabase;
let q: Queues;
let worker: RunningWorker;
const prefix = createTestPrefix();
const admin = connectOnce(ADMIN_URL);
afterAll(() => admin.end({ timeout: 5 }));

beforeAll(async () => {
  db = await createTestDatabase();
  const config = ingestConfig(db, prefix, { queue: { concurrency: 100, batch_size: 50 } });
  q = queuesOf(config);
  worker = startWorker(config);
});

const ASSETS = ['outage.a', 'outage.b', 'outage.c', 'outage.d'];
const SLICES = 600; // per asset
const T0 = micros('2025-06-01T00:00:00Z');

/** 1-minute slices with ids; every 37th is a hole; every 11th is delivered twice. */
function stream(): { events: unknown[]; expected: Map<string, { ids: Set<string>; covered: number }> } {
  const events: unknown[] = [];
  const expected = new Map<string, { ids: Set<string>; covered: number }>();
  for (const asset of ASSETS) {
    const ids = new Set<string>();
    for (let i = 0; i < SLICES; i++) {
      if (i % 37 === 36) continue;
      const event = {
        asset,
        start: new Date((T0 + i * MINUTE) / 1000).toISOString(),
        end: new Date((T0 + (i + 1) * MINUTE) / 1000).toISOString(),
        version: 'v1',
        id: `${asset}-${i}`,
      };
      ids.add(event.id);
      events.push(event);
      if (i % 11 === 0) events.push({ ...event });
    }
    expected.set(asset, { ids, covered: ids.size * MINUTE });
  }
  // Interleave assets the way several producers would.
  events.sort(
    (a, b) =>
      (((a as { id: string }).id.length * 31 + (a as { start: string }).start.charCodeAt(15)) % 7) -
      (((b as { id: string }).id.length * 31 + (b as { start: string }).start.charCodeAt(15)) % 7),
  );
  return { events, expected };
}

async function killBackends(): Promise<number> {
  const [row] = await admin<{ n: number }[]>`
    select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
    where datname = ${db.name} and pid <> pg_backend_pid()`;
  return row?.n ?? 0;
}

describe('PostgreSQL connections killed mid-stream', () => {
  it('loses nothing and dead-letters nothing', async () => {
    const { events, expected } = stream();
    let killing = true;
    let kills = 0;
    let rounds = 0;
    const killer = (async () => {
      while (killing) {
        kills += await killBackends();
        rounds++;
        await new Promise((r) => setTimeout(r, 20 + Math.random() * 60));
      }
    })();
    // Events arrive in chunks while the killer runs.
    for (let i = 0; i < events.length; i += 100) await enqueue(q.events, events.slice(i, i + 100));
    // Keep killing until a good share of the stream went through retries.
    const { waitFor } = await import('../helpers/wait.js');
    await waitFor(
      async () => rounds >= 20 && (await worker.metrics.commitRetries.get()).values[0]!.value >= 5,
      {
        timeout: 30_000,
        what: 'kills to cause commit retries',
      },
    );
    killing = false;
    await killer;
    await drained(q.events, 45_000);

    expect(kills).toBeGreaterThan(0);
    expect((await worker.metrics.commitRetries.get()).values[0]!.value).toBeGreaterThanOrEqual(5);
    // The reasons, not just the count, so a failure says what failed the job.
    expect((await q.events.getFailed()).map((job) => job.failedReason)).toEqual([]);
    expect(await q.dead.getJobCounts('waiting', 'completed', 'failed')).toEqual({
      waiting: 0,
      completed: 0,
      failed: 0,
    });

    for (const [asset, { ids, covered }] of expected) {
      const logged = await db.sql<{ event_id: string }[]>`
        select e.event_id from events e join assets a on a.id = e.asset_id where a.name = ${asset}`;
      expect(new Set(logged.map((r) => r.event_id))).toEqual(ids);
      expect(logged.length).toBe(ids.size);
      const log = await logCoverage(db.sql, asset);
      expect(await indexCoverage(db.sql, asset)).toEqual(log);
      // One version throughout, so the index is exactly the merged log: one segment per run.
      const index = await indexOf(db.sql, asset);
      expect(index.map(({ start, end }) => ({ start, end }))).toEqual(log);
      expect(index.reduce((n, s) => n + s.end - s.start, 0)).toBe(covered);
      const [row] = await db.sql<{ event_count: number; segment_count: number }[]>`
        select event_count, segment_count from assets where name = ${asset}`;
      expect(row).toEqual({ event_count: ids.size, segment_count: index.length });
    }
  });
});
