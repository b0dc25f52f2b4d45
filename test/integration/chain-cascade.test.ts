import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { chainLevel, chainSettled } from '../helpers/chain.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// The cascade guarantee: raw -> hourly -> daily -> monthly, `rerun: on_replay`, real
// BullMQ workers that complete the downstream jobs at once. A replay requirement over one raw hour
// reruns its hour, its day and its month once each, each decided only after the level below
// succeeded, and nothing else; also with a failure and retry in the middle of the chain, and with a
// generation superseded while it runs.

const db = await createTestDatabase();
const prefix = createTestPrefix();
const level = (id: string, upstream: string, every: string) =>
  chainLevel(id, upstream, every, { backoff: 'PT0.3S' });
const config = testConfig(db, prefix, {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    level('hourly', 'raw', 'hour'),
    level('daily', 'agg.hourly', 'day'),
    level('monthly', 'agg.daily', 'month'),
  ],
});
await startTestDaemon(config);
const producer = testProducer(config);

/** Job ids to fail on their first sight, and jobs held until released (by id). */
const failOnce = new Set<string>();
const held = new Map<string, () => void>();
const holds = new Set<string>();
const seen: string[] = [];
const workers = ['hourly', 'daily', 'monthly'].map((id) => {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker(
    `${id}-runs`,
    async (job: Job) => {
      seen.push(job.id!);
      if (failOnce.delete(job.id!)) throw new Error('injected failure');
      if (holds.delete(job.id!)) await new Promise<void>((resolve) => held.set(job.id!, resolve));
    },
    { connection, prefix, concurrency: 100 },
  );
  return { worker, connection };
});
afterAll(async () => {
  for (const release of held.values()) release();
  for (const { worker, connection } of workers) {
    await worker.close();
    connection.disconnect();
  }
});

const HOUR = 3_600_000;
const ms = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString();
let ids = 0;
const rawHour = (start: string, version: string) => ({
  asset: 'raw',
  start,
  end: iso(ms(start) + HOUR),
  version,
  id: `raw-${++ids}`,
});
const replay = (start: string, version: string) =>
  producer.add('replay', {
    type: 'replay_requirement',
    asset: 'raw',
    start,
    end: iso(ms(start) + HOUR),
    version,
  });

interface Decision {
  rollup_id: string;
  period_lo: number;
  generation: number;
  reason: string;
  decided_at: Date;
}
const decisions = () =>
  db.sql<Decision[]>`
    select rollup_id, period_lo, generation, reason, decided_at from triggers order by decided_at, rollup_id`;
const countsByRollup = async () => {
  const rows = await db.sql<{ rollup_id: string; generation: number; n: number }[]>`
    select rollup_id, generation, count(*)::int as n from triggers group by 1, 2 order by 1, 2`;
  return rows.map((r) => `${r.rollup_id}#${r.generation}:${r.n}`);
};
interface RunRow {
  attempt: number;
  state: string;
  finished_at: Date | null;
}
const runsOf = (rollupId: string, start: string, generation: number) =>
  db.sql<RunRow[]>`
    select attempt, state, finished_at from runs
    where rollup_id = ${rollupId} and period_lo = ${ms(start) * 1000} and generation = ${generation} order by attempt`;
const succeeded = (rollupId: string, start: string, generation: number) =>
  waitFor(
    async () => {
      const runs = await runsOf(rollupId, start, generation);
      return runs.find((r) => r.state === 'succeeded');
    },
    { timeout: 240_000, what: `${rollupId} ${start} generation ${generation} succeeded` },
  );

const quiet = () => waitFor(() => chainSettled(db.sql), { timeout: 180_000, what: 'the chain to settle' });

/** The decisions made since `before`, as `rollup@period-start#generation reason`. */
const newSince = async (before: number) =>
  (await decisions())
    .slice(before)
    .map((d) => `${d.rollup_id}@${iso(d.period_lo / 1000)}#${d.generation} ${d.reason}`);

describe('a reprocessed raw hour under hourly -> daily -> monthly', () => {
  it('builds the month bottom up: 720 hours, 30 days, 1 month, each level on the outputs of the one below', async () => {
    // November 2026, day by day (30 events each covering 24 hours).
    await producer.addBulk(
      Array.from({ length: 30 }, (_, d) => ({
        name: 'e',
        data: {
          asset: 'raw',
          start: iso(ms('2026-11-01') + d * 24 * HOUR),
          end: iso(ms('2026-11-01') + (d + 1) * 24 * HOUR),
          version: 'v1',
          id: `raw-day-${d}`,
        },
      })),
    );
    await succeeded('monthly', '2026-11-01T00:00:00Z', 1);
    await quiet();
    expect(await countsByRollup()).toEqual(['daily#1:30', 'hourly#1:720', 'monthly#1:1']);
    const [month] = await db.sql`
      select e.version from events e join assets a on a.id = e.asset_id where a.name = 'agg.monthly'`;
    expect(month).toEqual({ version: 'monthly#1' });
  }, 300_000);

  it('reruns the hour, then its day, then its month: once each, each after the level below succeeded', async () => {
    const before = (await decisions()).length;
    const hour = '2026-11-10T05:00:00Z';
    await replay(hour, 'v2');
    await producer.add('e', rawHour(hour, 'v2'));
    await succeeded('monthly', '2026-11-01T00:00:00Z', 2);
    await quiet();
    expect(await newSince(before)).toEqual([
      'hourly@2026-11-10T05:00:00.000Z#2 replay',
      'daily@2026-11-10T00:00:00.000Z#2 replay',
      'monthly@2026-11-01T00:00:00.000Z#2 replay',
    ]);
    const [hourRun] = await runsOf('hourly', hour, 2);
    const [dayRun] = await runsOf('daily', '2026-11-10T00:00:00Z', 2);
    const all = await decisions();
    const decided = (rollupId: string) =>
      all.find((d) => d.rollup_id === rollupId && d.generation === 2)!.decided_at;
    expect(decided('daily').getTime()).toBeGreaterThanOrEqual(hourRun!.finished_at!.getTime());
    expect(decided('monthly').getTime()).toBeGreaterThanOrEqual(dayRun!.finished_at!.getTime());
  }, 300_000);

  it('waits through a failure and retry in the middle of the chain, still once per level', async () => {
    const before = (await decisions()).length;
    const hour = '2026-11-20T03:00:00Z';
    failOnce.add('daily@20261120T000000Z#2');
    await replay(hour, 'v2');
    await producer.add('e', rawHour(hour, 'v2'));
    await succeeded('monthly', '2026-11-01T00:00:00Z', 3);
    await quiet();
    expect(await newSince(before)).toEqual([
      'hourly@2026-11-20T03:00:00.000Z#2 replay',
      'daily@2026-11-20T00:00:00.000Z#2 replay',
      'monthly@2026-11-01T00:00:00.000Z#3 replay',
    ]);
    const dayRuns = await runsOf('daily', '2026-11-20T00:00:00Z', 2);
    expect(dayRuns.map((r) => [r.attempt, r.state])).toEqual([
      [1, 'failed'],
      [2, 'succeeded'],
    ]);
    expect(seen).toContain('daily@20261120T000000Z#2~a2');
    const monthly = (await decisions()).find((d) => d.rollup_id === 'monthly' && d.generation === 3)!;
    expect(monthly.decided_at.getTime()).toBeGreaterThanOrEqual(dayRuns[1]!.finished_at!.getTime());
  }, 300_000);

  it('a generation superseded while it runs writes no output; only the newest rerun moves the chain', async () => {
    const before = (await decisions()).length;
    const hour = '2026-11-25T07:00:00Z';
    const gen2 = 'hourly@20261125T070000Z#2';
    holds.add(gen2);
    await replay(hour, 'v2');
    await producer.add('e', rawHour(hour, 'v2'));
    await waitFor(() => held.has(gen2), { what: 'the hourly rerun to be running' });
    // Reprocessed again while generation 2 runs: generation 3 supersedes it.
    await replay(hour, 'v3');
    await producer.add('e', rawHour(hour, 'v3'));
    await succeeded('hourly', hour, 3);
    held.get(gen2)!();
    await succeeded('monthly', '2026-11-01T00:00:00Z', 4);
    await quiet();
    expect(await newSince(before)).toEqual([
      'hourly@2026-11-25T07:00:00.000Z#2 replay',
      'hourly@2026-11-25T07:00:00.000Z#3 replay',
      'daily@2026-11-25T00:00:00.000Z#2 replay',
      'monthly@2026-11-01T00:00:00.000Z#4 replay',
    ]);
    const outputs = await db.sql<{ replay: boolean; version: string }[]>`
      select e.replay, e.version from events e join assets a on a.id = e.asset_id
      where a.name = 'agg.hourly' and e.lo = ${ms(hour) * 1000} order by e.seq`;
    expect(outputs).toEqual([
      { replay: false, version: 'hourly#1' },
      { replay: true, version: 'hourly#2' },
      { replay: true, version: 'hourly#3' },
      { replay: false, version: 'hourly#3' },
    ]);
    expect((await runsOf('hourly', hour, 2)).map((r) => r.state)).toEqual(['succeeded']);
  }, 300_000);
});
