/**
 * Integer rollups do not wait behind each other's history: their starts (offsets of one topic,
 * row ids of one table) compare only within a rollup, so a backlog at high offsets in one must not
 * keep a fresh period of another at small offsets waiting until the backlog is done.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const HIGH = 1_000_000_000;
const BACKLOG = 200_000;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  assets: [
    { name: 'topic.small', domain: 'integer' },
    { name: 'topic.high', domain: 'integer' },
    { name: 'topic.never', domain: 'integer' },
  ],
  rollups: [
    {
      id: 'small',
      upstream: ['topic.small'],
      every: 1000,
      begin: 0,
      target: { type: 'queue', queue: 'fair-runs' },
    },
    // Every period of its backlog is evaluated and stays waiting (topic.never never comes): work, no triggers.
    {
      id: 'high',
      upstream: ['topic.high', 'topic.never'],
      every: 1,
      begin: HIGH,
      target: { type: 'queue', queue: 'fair-runs' },
    },
  ],
});
await startTestDaemon(config);
const producer = testProducer(config);
const downstream = testQueue('fair-runs', prefix, config);

const highBacklog = async () => {
  const [row] = await db.sql<{ rows: number; dirty: number }[]>`
    select count(*)::int as rows, (count(*) filter (where dirty))::int as dirty
    from periods where rollup_id = 'high'`;
  return row!;
};

describe('integer rollups claimed apart', () => {
  it("decides a fresh period of one while another's backlog at higher offsets is still being evaluated", async () => {
    await producer.add('e', { asset: 'topic.high', start: HIGH, end: HIGH + BACKLOG });
    await waitFor(async () => ((await highBacklog()).dirty > 0 ? true : undefined), {
      what: "the high rollup's backlog under way",
    });
    await producer.add('e', { asset: 'topic.small', start: 5000, end: 6000 });
    await waitFor(() => downstream.getJob('small@5000#1'), { what: 'job small@5000#1' });
    const backlog = await highBacklog();
    expect(
      backlog.rows < BACKLOG || backlog.dirty > 0,
      `the backlog was done first: ${JSON.stringify(backlog)}`,
    ).toBe(true);
  });
});
