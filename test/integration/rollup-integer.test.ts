import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const bucket = (id: string, upstream: string, policy: Record<string, unknown> = {}) => ({
  id,
  upstream: [upstream],
  every: 1000,
  begin: 0,
  policy,
  target: { type: 'queue', queue: 'int-runs' },
});
const config = testConfig(db, prefix, {
  assets: [
    { name: 'kafka.offsets', domain: 'integer' },
    { name: 'kafka.lax', domain: 'integer' },
  ],
  rollups: [bucket('offsets', 'kafka.offsets'), bucket('offsets_lax', 'kafka.lax', { max_missing: 10 })],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const downstream = testQueue('int-runs', prefix, config);

const send = (asset: string, start: number | string, end: number | string) =>
  producer.add('e', { asset, start, end, version: 'snap-7' });

const periodRow = async (rollup: string, lo: number) => {
  const [row] = await db.sql<{ state: string; ratio: number; generation: number }[]>`
    select state, ratio, generation from periods where rollup_id = ${rollup} and lo = ${lo}`;
  return row;
};

describe('integer-bucket rollup (every: 1000 over offsets)', () => {
  it('triggers each complete bucket once, keyed rollup@start#generation', async () => {
    await send('kafka.offsets', 0, 400);
    await send('kafka.offsets', 400, 1000);
    await send('kafka.offsets', '1000', '1500'); // decimal strings are integers too
    const job = await waitFor(() => downstream.getJob('offsets@0#1'), { what: 'job offsets@0#1' });
    expect(job.data).toEqual({
      rollup: 'offsets',
      idempotency_key: 'offsets@0#1',
      generation: 1,
      reason: 'covered',
      period: { start: 0, end: 1000, key: '0' },
      upstreams: { 'kafka.offsets': { ratio: 1, missing: [], replay_required: [], versions: ['snap-7'] } },
      decided_at: expect.any(String),
      attempt: 1,
      run_id: 'offsets@0#1',
    });
    const half = await waitFor(async () => {
      const row = await periodRow('offsets', 1000);
      return row?.ratio === 0.5 ? row : undefined;
    });
    expect(half).toEqual({ state: 'waiting', ratio: 0.5, generation: 0 });
    expect(await downstream.getJob('offsets@1000#1')).toBeUndefined();

    // One event spanning the rest of bucket 1000 and the whole of 2000 and 3000.
    await send('kafka.offsets', 1500, 4000);
    const jobs = await waitFor(
      async () => {
        const found = await Promise.all(
          ['offsets@1000#1', 'offsets@2000#1', 'offsets@3000#1'].map((id) => downstream.getJob(id)),
        );
        return found.every((j) => j !== undefined) ? found : undefined;
      },
      { what: 'buckets 1000, 2000 and 3000' },
    );
    expect(jobs.map((j) => j!.data.period)).toEqual([
      { start: 1000, end: 2000, key: '1000' },
      { start: 2000, end: 3000, key: '2000' },
      { start: 3000, end: 4000, key: '3000' },
    ]);
    const rows = await db.sql<{ period_lo: number; generation: number; idempotency_key: string }[]>`
      select period_lo, generation, idempotency_key from triggers where rollup_id = 'offsets' order by period_lo`;
    expect(rows).toEqual([
      { period_lo: 0, generation: 1, idempotency_key: 'offsets@0#1' },
      { period_lo: 1000, generation: 1, idempotency_key: 'offsets@1000#1' },
      { period_lo: 2000, generation: 1, idempotency_key: 'offsets@2000#1' },
      { period_lo: 3000, generation: 1, idempotency_key: 'offsets@3000#1' },
    ]);

    const response = await daemon.http.inject({ url: '/v1/rollups/offsets/periods?start=0&end=2000' });
    expect(response.statusCode).toBe(200);
    expect(response.json().periods).toEqual([
      expect.objectContaining({
        start: 0,
        end: 1000,
        key: '0',
        state: 'triggered',
        generation: 1,
        reason: 'covered',
      }),
      expect.objectContaining({ start: 1000, end: 2000, key: '1000', state: 'triggered', generation: 1 }),
    ]);
  });

  it('max_missing in offsets: 10 missing triggers (reason ratio, the gap in numbers), 11 missing does not', async () => {
    await send('kafka.lax', 0, 990);
    await send('kafka.lax', 1000, 1989);
    const job = await waitFor(() => downstream.getJob('offsets_lax@0#1'), { what: 'job offsets_lax@0#1' });
    expect(job.data).toMatchObject({
      reason: 'ratio',
      period: { start: 0, end: 1000, key: '0' },
      upstreams: { 'kafka.lax': { ratio: 0.99, missing: [{ start: 990, end: 1000 }] } },
    });
    const below = await waitFor(async () => {
      const row = await periodRow('offsets_lax', 1000);
      return row?.ratio === 0.989 ? row : undefined;
    });
    expect(below.state).toBe('waiting');
    expect(await downstream.getJob('offsets_lax@1000#1')).toBeUndefined();
  });
});
