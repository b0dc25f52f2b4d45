/** Bad input through the real queue: dead-lettered with its reason, never indexed, never retried. */
import { beforeAll, describe, expect, it } from 'vitest';
import { BAD_INPUT_REASONS } from '../../src/core/errors.js';
import type { DeadLetter } from '../../src/queue/dead-letter.js';
import { findAsset } from '../../src/store/assets/assets.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import {
  drained,
  enqueue,
  indexOf,
  ingestConfig,
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

beforeAll(async () => {
  db = await createTestDatabase();
  const config = ingestConfig(db, prefix, {
    queue: { max_payload_bytes: 1024 },
    assets: [{ name: 'declared.offsets', domain: 'integer' }],
    // Reads bad.wide, whose event touches billions of its periods.
    rollups: [
      { id: 'buckets', upstream: 'bad.wide', every: 1000, begin: 0, target: { type: 'queue', queue: 'q' } },
    ],
  });
  q = queuesOf(config);
  worker = startWorker(config);
});

const ok = (asset: string, i = 0) => ({
  asset,
  start: new Date(Date.UTC(2025, 5, 1, 10, i * 5)).toISOString(),
  end: new Date(Date.UTC(2025, 5, 1, 10, i * 5 + 5)).toISOString(),
});

/** One bad event per reason; each names a distinct asset where it names one, so none may appear. */
const bad: Array<[string, unknown]> = [
  ['invalid_json', '{"asset": "bad.json", "start": '],
  ['payload_too_large', { ...ok('bad.large'), extra: { blob: 'x'.repeat(2000) } }],
  ['invalid_payload', [ok('bad.array')]],
  ['missing_asset', { start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z' }],
  ['invalid_asset', { ...ok('x'), asset: { name: 'bad.object' } }],
  ['missing_bounds', { asset: 'bad.nobounds', start: '2025-06-01T10:00:00Z' }],
  ['invalid_bound', { asset: 'bad.bound', start: 'yesterday', end: '2025-06-01T11:00:00Z' }],
  ['invalid_interval', { asset: 'bad.interval', interval: '2025-06-01T10:00:00Z' }],
  ['invalid_duration', { asset: 'bad.duration', interval: '2025-06-01T10:00:00Z/PT5Q' }],
  ['out_of_range', { asset: 'bad.range', start: 0, end: 2 ** 53 }],
  ['mixed_domain', { asset: 'bad.mixed', start: 5, end: '2025-06-01T11:00:00Z' }],
  [
    'domain_mismatch',
    { asset: 'declared.offsets', start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z' },
  ],
  [
    'end_before_start',
    { asset: 'bad.order', start: '2025-06-01T10:00:00+02:00', end: '2025-06-01T07:59:59Z' },
  ],
  ['invalid_field', { ...ok('bad.field'), version: ['v1'] }],
  ['unknown_type', { ...ok('bad.type'), type: 'delete' }],
  ['too_many_periods', { asset: 'bad.wide', start: 311, end: 8_700_000_000_000 }],
];

async function deadLetters(): Promise<DeadLetter[]> {
  const jobs = await q.dead.getJobs(['waiting', 'completed', 'failed', 'delayed'], 0, -1, true);
  return jobs.map((j) => j.data as DeadLetter);
}

describe('bad input', () => {
  it('every reason lands in the dead-letter queue with its code, and the worker keeps going', async () => {
    expect(new Set(bad.map(([r]) => r))).toEqual(new Set(BAD_INPUT_REASONS));
    // Good and bad events interleaved: every good one must still be indexed.
    const stream: unknown[] = [];
    bad.forEach(([, payload], i) => {
      stream.push(ok('good.stream', 2 * i));
      stream.push(payload);
      stream.push(ok('good.stream', 2 * i + 1));
    });
    await enqueue(q.events, stream);
    await drained(q.events);

    const letters = await deadLetters();
    expect(letters.map((l) => l.reason).sort()).toEqual(bad.map(([r]) => r).sort());
    for (const [reason, payload] of bad) {
      const letter = letters.find((l) => l.reason === reason)!;
      expect(letter.payload, reason).toEqual(payload);
      expect(letter.message.length, reason).toBeGreaterThan(10);
      expect(letter.source).toMatchObject({ queue: 'asset-events', job_name: 'event' });
      expect(letter.source.job_id).toMatch(/^\d+$/);
      expect(Date.parse(letter.dead_lettered_at)).not.toBeNaN();
    }
    for (const reason of bad.map(([r]) => r)) {
      expect(
        (await worker.metrics.eventsRejected.get()).values.find((v) => v.labels.reason === reason)?.value,
      ).toBe(1);
    }

    // Not retried: no job failed, none waits for a retry.
    expect(await q.events.getJobCounts('failed', 'delayed', 'waiting', 'active')).toEqual({
      failed: 0,
      delayed: 0,
      waiting: 0,
      active: 0,
    });
    // Never indexed.
    const assets = await db.sql<{ name: string }[]>`select name from assets order by name`;
    expect(assets.map((a) => a.name)).toEqual(['good.stream']);
    expect(await findAsset(db.sql, 'good.stream')).toMatchObject({ event_count: bad.length * 2 });
    expect(await indexOf(db.sql, 'good.stream')).toEqual([
      {
        start: micros('2025-06-01T10:00:00Z'),
        end: micros('2025-06-01T10:00:00Z') + bad.length * 2 * 5 * 60e6,
        version: null,
        state: 'complete',
        requiredVersion: null,
      },
    ]);
  });

  it('bounds contradicting the domain the index recorded for the asset are dead-lettered', async () => {
    await enqueue(q.events, [{ asset: 'seen.as.time', interval: '2025-06-01T10:00:00Z/PT1H' }]);
    await drained(q.events);
    const before = (await deadLetters()).length;
    await enqueue(q.events, [
      { asset: 'seen.as.time', start: 1, end: 2, id: 'int-on-time' },
      { asset: 'seen.as.time', interval: '2025-06-01T11:00:00Z/PT1H' },
    ]);
    await drained(q.events);
    const letters = await deadLetters();
    expect(letters.length).toBe(before + 1);
    expect(letters.find((l) => (l.payload as { id?: string }).id === 'int-on-time')).toMatchObject({
      reason: 'domain_mismatch',
    });
    expect(await findAsset(db.sql, 'seen.as.time')).toMatchObject({ domain: 'time', event_count: 2 });
    expect(await indexOf(db.sql, 'seen.as.time')).toHaveLength(1);
  });

  it('a redelivered bad job with a producer job id is dead-lettered once', async () => {
    const before = (await deadLetters()).length;
    const payload = { asset: 'bad.again', start: 'nope', end: 'nope' };
    await q.events.add('event', payload, { jobId: 'producer-7' });
    await drained(q.events);
    // Same job id again after the first one was removed: a redelivery.
    await (await q.events.getJob('producer-7'))?.remove();
    await q.events.add('event', payload, { jobId: 'producer-7' });
    await drained(q.events);
    const letters = await deadLetters();
    expect(letters.length).toBe(before + 1);
    expect(letters.find((l) => l.source.job_id === 'producer-7')).toMatchObject({ reason: 'invalid_bound' });
  });
});
