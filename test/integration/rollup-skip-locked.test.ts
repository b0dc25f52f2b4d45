import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'buckets',
      upstream: ['offsets'],
      every: 10,
      begin: 0,
      target: { type: 'queue', queue: 'runs' },
    },
  ],
});
await startTestDaemon(config);
const producer = testProducer(config);

const generation = async (lo: number) =>
  (
    await db.sql<
      { generation: number }[]
    >`select generation from periods where rollup_id = 'buckets' and lo = ${lo}`
  )[0]?.generation ?? 0;

describe('a period locked by someone else', () => {
  it('is skipped, the others are decided, and it is decided once the lock goes away', async () => {
    await producer.add('e', { asset: 'offsets', start: 0, end: 10 });
    await waitFor(async () => (await generation(0)) === 1, { what: 'bucket 0 triggered' });
    // Stand in for a paused former holder: keep bucket 10 locked against evaluation (FOR KEY SHARE
    // conflicts with the evaluator's FOR UPDATE, not with the marking UPDATE) while its data arrives.
    await db.sql`insert into periods (rollup_id, lo, hi, key) values ('buckets', 10, 20, '10') on conflict do nothing`;
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const holding = db.sql.begin(async (tx) => {
      await tx`select 1 from periods where rollup_id = 'buckets' and lo = 10 for key share`;
      await released;
    });
    await producer.add('e', { asset: 'offsets', start: 10, end: 30 });
    await waitFor(async () => (await generation(20)) === 1, {
      what: 'bucket 20 triggered past the locked one',
    });
    expect(await generation(10)).toBe(0);
    release();
    await holding;
    await waitFor(async () => (await generation(10)) === 1, { what: 'bucket 10 triggered after the lock' });
    const decisions = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from triggers where rollup_id = 'buckets'`;
    expect(decisions[0]!.n).toBe(3);
  });
});
