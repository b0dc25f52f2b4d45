/**
 * Two workers (each with its own connection pool, as two processes have) on one asset at once give
 * the index one worker gives, and that PostgreSQL's range_agg over the events log gives.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { applyChanges } from '../../src/core/intervals/segments.js';
import type { Change } from '../../src/core/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
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
let twoConfig: Config;
let oneConfig: Config;
let two: Queues;
let one: Queues;
let workers: RunningWorker[];
const twoPrefix = createTestPrefix();
const onePrefix = createTestPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  // Small batches and low concurrency: many interleaved transactions rather than a few big ones.
  const queue = { concurrency: 20, batch_size: 10 };
  twoConfig = ingestConfig(db, twoPrefix, { queue });
  oneConfig = ingestConfig(db, onePrefix, { queue });
  two = queuesOf(twoConfig);
  one = queuesOf(oneConfig);
});

const T0 = micros('2025-06-01T00:00:00Z');

/** Deterministic pseudo-random events: overlapping, of mixed widths, with holes and repeats. */
function events(asset: string, n: number, seed: number, versioned: boolean, span = 2000): unknown[] {
  let x = seed;
  const rand = () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const start = T0 + Math.floor(rand() * span) * MINUTE;
    const width = [1, 1, 5, 5, 15, 60][Math.floor(rand() * 6)]! * MINUTE;
    const e: Record<string, unknown> = {
      asset,
      start: new Date(start / 1000).toISOString(),
      end: new Date((start + width) / 1000).toISOString(),
      version: versioned ? `v${i}` : 'v1',
      id: `e${i}`,
    };
    if (versioned && rand() < 0.1) {
      e.type = 'replay_requirement';
      e.version = `v${i - 3}`;
    }
    out.push(e);
    if (rand() < 0.05) out.push({ ...e });
  }
  return out;
}

async function logChanges(asset: string): Promise<Change[]> {
  const rows = await db.sql<{ kind: Change['kind']; lo: number; hi: number; version: string | null }[]>`
    select case when e.replay then 'replay_requirement' else 'completion' end as kind, e.lo, e.hi, e.version
    from events e join assets a on a.id = e.asset_id
    where a.name = ${asset} order by e.seq`;
  return rows.map((r) => ({ kind: r.kind, start: r.lo, end: r.hi, version: r.version }));
}

describe('two workers on one asset', () => {
  it('give the index one worker gives and range_agg over the log gives', async () => {
    workers = [startWorker(twoConfig, 3), startWorker(twoConfig, 3)];
    const batch = events('shared.same', 1200, 7, false, 20_000);
    await enqueue(
      two.events,
      batch.map((e) => e),
    );
    await drained(two.events);
    // Both workers took part.
    const took = await Promise.all(
      workers.map(async (w) =>
        (await w.metrics.eventsIngested.get()).values.reduce((n, v) => n + v.value, 0),
      ),
    );
    expect(took.every((n) => n > 100)).toBe(true);
    await Promise.all(workers.map((w) => w.stop()));

    const solo = startWorker(oneConfig, 3);
    await enqueue(
      one.events,
      batch.map((e) => ({ ...(e as object), asset: 'solo.same' })),
    );
    await drained(one.events);
    await solo.stop();

    const shared = await indexOf(db.sql, 'shared.same');
    const alone = await indexOf(db.sql, 'solo.same');
    expect(shared.length).toBeGreaterThan(3);
    expect(shared).toEqual(alone);
    const merged = await logCoverage(db.sql, 'shared.same');
    expect(shared.map(({ start, end }) => ({ start, end }))).toEqual(merged);
    expect(await indexCoverage(db.sql, 'shared.same')).toEqual(merged);
  });

  it('with versions and replay requirements, the index is the fold of the log in ingest order', async () => {
    const w = [startWorker(twoConfig, 3), startWorker(twoConfig, 3)];
    const batch = events('shared.versions', 1200, 11, true);
    await enqueue(two.events, batch);
    await drained(two.events);
    await Promise.all(w.map((x) => x.stop()));

    const changes = await logChanges('shared.versions');
    expect(changes.length).toBe(new Set(batch.map((e) => (e as { id: string }).id)).size);
    const { insert } = applyChanges([], changes);
    const index = await indexOf(db.sql, 'shared.versions');
    expect(index).toEqual(insert.map((s) => ({ ...s })));
    expect(index.some((s) => s.state === 'replay_required')).toBe(true);
    expect(await indexCoverage(db.sql, 'shared.versions')).toEqual(
      await logCoverage(db.sql, 'shared.versions'),
    );
    const [row] = await db.sql<{ segment_count: number; last_seq: number }[]>`
      select segment_count, last_seq from assets where name = 'shared.versions'`;
    expect(row?.segment_count).toBe(index.length);
  });
});
