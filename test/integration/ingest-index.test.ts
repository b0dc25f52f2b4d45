/** Events through the real queue and worker into the index: spellings, domains, ordering, replays. */
import { beforeAll, describe, expect, it } from 'vitest';
import { findAsset } from '../../src/store/assets/assets.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testQueueBackend } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import {
  drained,
  enqueue,
  indexOf,
  ingestConfig,
  logCoverage,
  MINUTE,
  micros,
  type Queues,
  queuesOf,
  startWorker,
} from './ingest-harness.js';

let db: TestDatabase;
let q: Queues;
const prefix = createTestPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  const config = ingestConfig(db, prefix, {
    assets: [
      { name: 'declared.berlin', domain: 'time', zone: 'Europe/Berlin' },
      { name: 'declared.offsets', domain: 'integer' },
    ],
  });
  q = queuesOf(config);
  startWorker(config);
});

async function ingest(...events: unknown[]): Promise<void> {
  await enqueue(q.events, events);
  await drained(q.events);
}

const S = micros('2025-06-01T10:05:00Z');
const E = micros('2025-06-01T10:10:00Z');
const H = micros('2025-06-01T10:00:00Z');
const complete = (start: number, end: number, version: string | null = null) => ({
  start,
  end,
  version,
  state: 'complete',
  requiredVersion: null,
});
const required = (start: number, end: number, version: string | null, requiredVersion: string) => ({
  start,
  end,
  version,
  state: 'replay_required',
  requiredVersion,
});

describe('every accepted spelling lands in the index', () => {
  const spellings: Array<[string, (asset: string) => unknown]> = [
    ['canonical', (asset) => ({ asset, start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' })],
    ['offsets', (asset) => ({ asset, start: '2025-06-01T12:05:00+02', end: '2025-06-01T06:10:00.000-0400' })],
    ['interval', (asset) => ({ asset, interval: '2025-06-01T10:05:00Z/2025-06-01T10:10:00+00:00' })],
    ['interval duration', (asset) => ({ asset, interval: '2025-06-01T10:05:00Z/PT5M' })],
    ['partition_key', (asset) => ({ asset, partition_key: '2025-06-01T10:05:00Z/2025-06-01T10:10:00Z' })],
    [
      'extra.interval_*',
      (asset) => ({
        asset,
        extra: { interval_start: '2025-06-01T10:05:00Z', interval_end: '2025-06-01T10:10:00Z' },
      }),
    ],
    [
      'Airflow AssetEvent',
      (asset) => ({
        id: 12,
        asset_id: 1,
        uri: `s3://lake/${asset}`,
        name: asset,
        group: 'asset',
        extra: { interval_start: '2025-06-01T10:05:00+00:00', interval_end: '2025-06-01T10:10:00+00:00' },
        source_dag_id: 'd',
        source_task_id: 't',
        source_run_id: 'r',
        source_map_index: -1,
        created_dagruns: [],
        timestamp: '2025-06-01T10:10:07.5+00:00',
      }),
    ],
    ['uri only', (asset) => ({ uri: asset, start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' })],
    [
      'JSON string job data',
      (asset) => JSON.stringify({ asset, start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' }),
    ],
  ];

  it.each(spellings)('%s', async (name, make) => {
    const asset = `spelling.${name.replaceAll(' ', '_')}`;
    await ingest(make(asset));
    expect(await indexOf(db.sql, asset)).toEqual([complete(S, E)]);
    const row = await findAsset(db.sql, asset);
    expect(row).toMatchObject({ domain: 'time', zone: 'UTC', event_count: 1, segment_count: 1 });
  });

  it('declared zone reads offsetless timestamps there', async () => {
    await ingest({ asset: 'declared.berlin', interval: '2025-06-01T12:05:00/2025-06-01T12:10:00' });
    expect(await indexOf(db.sql, 'declared.berlin')).toEqual([complete(S, E)]);
    expect(await findAsset(db.sql, 'declared.berlin')).toMatchObject({
      domain: 'time',
      zone: 'Europe/Berlin',
    });
  });

  it('the original bound text is kept in the log, unless it is the canonical form', async () => {
    await ingest({ asset: 'spelling.text', start: '2025-06-01T12:05:00+02:00', end: '2025-06-01T10:10:00Z' });
    const [row] = await db.sql<{ start_text: string | null; end_text: string | null; lo: number }[]>`
      select start_text, end_text, lo from events e join assets a on a.id = e.asset_id where a.name = 'spelling.text'`;
    expect(row).toEqual({ start_text: '2025-06-01T12:05:00+02:00', end_text: null, lo: S });
  });

  it('the log keeps id, produced_at and extra as sent, each in its compact form when it has one', async () => {
    const asset = 'stored.forms';
    const hex = '948b3fa0e6a45bfaa4a6be8bd3744adffc5f54f6';
    const at = (m: number) => new Date(Date.UTC(2025, 5, 1, 10, m)).toISOString();
    const sent = [
      { id: hex, produced_at: '2025-06-01T10:10:07.000Z', extra: { job: 'load_orders', attempt: 1 } },
      { id: 'spark-batch-8812', produced_at: '2025-06-01T10:15:07Z', extra: { z: 1, a: [{ b: null }] } },
      { id: 42, produced_at: '2025-06-01T12:20:07.5+02:00' },
      { produced_at: '2025-06-01T10:25:07.123456Z' },
    ].map((fields, i) => ({ asset, start: at(5 * i), end: at(5 * i + 5), version: 'v1', ...fields }));
    await ingest(...sent);
    const rows = await db.sql<Record<string, unknown>[]>`
      select coalesce(e.event_id, encode(e.event_id_hex, 'hex')) as id, e.event_id_hex is not null as hex,
        event_produced_at(e.produced_at, e.produced_at_digits, e.produced_at_text) as produced_at,
        e.produced_at_text is null as compact, e.extra::text as extra
      from events e join assets a on a.id = e.asset_id where a.name = ${asset} order by e.seq`;
    expect(rows).toEqual([
      {
        id: hex,
        hex: true,
        produced_at: '2025-06-01T10:10:07.000Z',
        compact: true,
        extra: '{"job":"load_orders","attempt":1}',
      },
      {
        id: 'spark-batch-8812',
        hex: false,
        produced_at: '2025-06-01T10:15:07Z',
        compact: true,
        // BullMQ's PostgreSQL backend keeps job data as jsonb, which orders keys its own way before
        // the daemon reads the job; on Redis the text arrives as the producer wrote it.
        extra:
          process.env.TEST_QUEUE_BACKEND === 'postgres'
            ? '{"a":[{"b":null}],"z":1}'
            : '{"z":1,"a":[{"b":null}]}',
      },
      { id: '42', hex: true, produced_at: '2025-06-01T12:20:07.5+02:00', compact: false, extra: null },
      { id: null, hex: false, produced_at: '2025-06-01T10:25:07.123456Z', compact: true, extra: null },
    ]);
    // A hex id re-sent is a duplicate, as any id is.
    await ingest({ ...sent[0], version: 'v2' }, { ...sent[2], version: 'v2' });
    expect(await findAsset(db.sql, asset)).toMatchObject({ event_count: 4 });
  });
});

describe('integer domain', () => {
  it('JSON integers and decimal strings merge into integer segments', async () => {
    await ingest(
      { asset: 'topic.offsets', start: 0, end: 100 },
      { asset: 'topic.offsets', start: '100', end: '200' },
      { asset: 'topic.offsets', interval: '300/400' },
      { asset: 'topic.offsets', start: 9_007_199_254_740_000, end: '9007199254740991' },
      { asset: 'declared.offsets', start: '5', end: 7 },
    );
    expect(await indexOf(db.sql, 'topic.offsets')).toEqual([
      complete(0, 200),
      complete(300, 400),
      complete(9_007_199_254_740_000, Number.MAX_SAFE_INTEGER),
    ]);
    expect(await findAsset(db.sql, 'topic.offsets')).toMatchObject({
      domain: 'integer',
      event_count: 4,
      segment_count: 3,
      covered_lo: 0,
      covered_hi: Number.MAX_SAFE_INTEGER,
    });
    expect(await indexOf(db.sql, 'declared.offsets')).toEqual([complete(5, 7)]);
  });
});

describe('delivery order and duplicates', () => {
  it('duplicates (by id and by content) and shuffled delivery give one segment', async () => {
    const asset = 'orders.shuffled';
    const slices = Array.from({ length: 48 }, (_, i) => ({
      asset,
      start: new Date((H + i * 5 * MINUTE) / 1000).toISOString(),
      end: new Date((H + (i + 1) * 5 * MINUTE) / 1000).toISOString(),
      version: 'v1',
      ...(i % 2 === 0 ? { id: `batch-${i}` } : {}),
    }));
    // Every event twice, the second copy re-spelled (same instant, same content), all shuffled.
    const respelled = slices.map((e) => ({
      ...e,
      start: e.start.replace('Z', '+00:00'),
      end: e.end.replace('.000Z', '+0000'),
    }));
    const all = [...slices, ...respelled];
    for (let i = all.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [all[i], all[j]] = [all[j]!, all[i]!];
    }
    await ingest(...all);
    await ingest(...slices.slice(0, 10)); // redelivered later
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 48 * 5 * MINUTE, 'v1')]);
    expect(await findAsset(db.sql, asset)).toMatchObject({ event_count: 48, segment_count: 1 });
  });

  it('a hole stays a hole until filled, whatever the order', async () => {
    const asset = 'orders.holes';
    const slice = (i: number) => ({
      asset,
      start: new Date((H + i * 5 * MINUTE) / 1000).toISOString(),
      interval: undefined,
      end: new Date((H + (i + 1) * 5 * MINUTE) / 1000).toISOString(),
    });
    await ingest(slice(5), slice(0), slice(2), slice(1));
    expect(await indexOf(db.sql, asset)).toEqual([
      complete(H, H + 15 * MINUTE),
      complete(H + 25 * MINUTE, H + 30 * MINUTE),
    ]);
    await ingest(slice(4), slice(3));
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 30 * MINUTE)]);
    expect(await logCoverage(db.sql, asset)).toEqual([{ start: H, end: H + 30 * MINUTE }]);
  });

  it('zero-width events are logged but cover nothing', async () => {
    await ingest({ asset: 'orders.zero', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:00:00+00' });
    expect(await indexOf(db.sql, 'orders.zero')).toEqual([]);
    expect(await findAsset(db.sql, 'orders.zero')).toMatchObject({ event_count: 1, segment_count: 0 });
  });
});

describe('completed event jobs', () => {
  // On PostgreSQL BullMQ trims by count with a scan of every kept job per completion (20 ms a job
  // at 1,000 kept): there the worker deletes each job as it completes.
  it('Redis keeps the last ones; PostgreSQL deletes each as it completes', async () => {
    await ingest(
      { asset: 'kept.jobs', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z' },
      { asset: 'kept.jobs', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' },
    );
    const { completed } = await q.events.getJobCounts('completed');
    if (testQueueBackend() === 'postgres') expect(completed).toBe(0);
    else expect(completed).toBeGreaterThanOrEqual(2);
    expect(await findAsset(db.sql, 'kept.jobs')).toMatchObject({ event_count: 2 });
  });
});

describe('reprocessing and replay requirements', () => {
  const fiveMinute = (asset: string, version: string) =>
    Array.from({ length: 12 }, (_, i) => ({
      asset,
      start: new Date((H + i * 5 * MINUTE) / 1000).toISOString(),
      end: new Date((H + (i + 1) * 5 * MINUTE) / 1000).toISOString(),
      version,
      id: `${version}-${i}`,
    }));

  it('one 1-hour event at v2 replaces twelve 5-minute v1 events: one segment', async () => {
    const asset = 'orders.reprocessed';
    await ingest(...fiveMinute(asset, 'v1'));
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 60 * MINUTE, 'v1')]);
    await ingest({ asset, start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 60 * MINUTE, 'v2')]);
    expect(await findAsset(db.sql, asset)).toMatchObject({ event_count: 13, segment_count: 1 });
  });

  it('a requirement, then completion at the required version', async () => {
    const asset = 'orders.replay.required';
    await ingest(...fiveMinute(asset, 'v1'));
    await ingest({
      type: 'replay_requirement',
      asset,
      start: '2025-06-01T10:10:00Z',
      end: '2025-06-01T10:40:00Z',
      version: 'v2',
    });
    expect(await indexOf(db.sql, asset)).toEqual([
      complete(H, H + 10 * MINUTE, 'v1'),
      required(H + 10 * MINUTE, H + 40 * MINUTE, 'v1', 'v2'),
      complete(H + 40 * MINUTE, H + 60 * MINUTE, 'v1'),
    ]);
    await ingest({ asset, start: '2025-06-01T10:10:00Z', end: '2025-06-01T10:25:00Z', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([
      complete(H, H + 10 * MINUTE, 'v1'),
      complete(H + 10 * MINUTE, H + 25 * MINUTE, 'v2'),
      required(H + 25 * MINUTE, H + 40 * MINUTE, 'v1', 'v2'),
      complete(H + 40 * MINUTE, H + 60 * MINUTE, 'v1'),
    ]);
    await ingest({ asset, interval: '2025-06-01T10:25:00Z/PT15M', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([
      complete(H, H + 10 * MINUTE, 'v1'),
      complete(H + 10 * MINUTE, H + 40 * MINUTE, 'v2'),
      complete(H + 40 * MINUTE, H + 60 * MINUTE, 'v1'),
    ]);
  });

  it('a completion at a third version also ends the requirement', async () => {
    const asset = 'orders.replay.third';
    await ingest(...fiveMinute(asset, 'v1'));
    await ingest({ type: 'replay_requirement', asset, interval: '2025-06-01T10:00:00Z/PT1H', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([required(H, H + 60 * MINUTE, 'v1', 'v2')]);
    await ingest({ asset, interval: '2025-06-01T10:30:00Z/PT30M', version: 'v3' });
    expect(await indexOf(db.sql, asset)).toEqual([
      required(H, H + 30 * MINUTE, 'v1', 'v2'),
      complete(H + 30 * MINUTE, H + 60 * MINUTE, 'v3'),
    ]);
  });

  it('a second requirement supersedes the first where it overlaps', async () => {
    const asset = 'orders.replay.superseded';
    await ingest(...fiveMinute(asset, 'v1'));
    await ingest({ type: 'replay_requirement', asset, interval: '2025-06-01T10:00:00Z/PT1H', version: 'v2' });
    await ingest({
      type: 'replay_requirement',
      asset,
      interval: '2025-06-01T10:00:00Z/PT30M',
      version: 'v3',
    });
    expect(await indexOf(db.sql, asset)).toEqual([
      required(H, H + 30 * MINUTE, 'v1', 'v3'),
      required(H + 30 * MINUTE, H + 60 * MINUTE, 'v1', 'v2'),
    ]);
    // A newer completion ends both; the same requirement issued again later (a distinct event:
    // without an id, identical content would be a duplicate) applies again.
    await ingest({ asset, interval: '2025-06-01T10:00:00Z/PT1H', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 60 * MINUTE, 'v2')]);
    await ingest({
      type: 'replay_requirement',
      asset,
      interval: '2025-06-01T10:00:00Z/PT30M',
      version: 'v3',
    });
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 60 * MINUTE, 'v2')]);
    await ingest({
      type: 'replay_requirement',
      asset,
      interval: '2025-06-01T10:00:00Z/PT30M',
      version: 'v3',
      id: 'replay-2',
    });
    expect(await indexOf(db.sql, asset)).toEqual([
      required(H, H + 30 * MINUTE, 'v2', 'v3'),
      complete(H + 30 * MINUTE, H + 60 * MINUTE, 'v2'),
    ]);
    // A requirement for the version already there clears the state.
    await ingest({
      type: 'replay_requirement',
      asset,
      interval: '2025-06-01T10:00:00Z/PT30M',
      version: 'v2',
    });
    expect(await indexOf(db.sql, asset)).toEqual([complete(H, H + 60 * MINUTE, 'v2')]);
  });

  it('a requirement over a gap does not claim coverage', async () => {
    const asset = 'orders.replay.gap';
    await ingest({ asset, interval: '2025-06-01T10:00:00Z/PT10M', version: 'v1' });
    await ingest({ type: 'replay_requirement', asset, interval: '2025-06-01T10:00:00Z/PT1H', version: 'v2' });
    expect(await indexOf(db.sql, asset)).toEqual([required(H, H + 10 * MINUTE, 'v1', 'v2')]);
    expect(await findAsset(db.sql, asset)).toMatchObject({ covered_lo: H, covered_hi: H + 10 * MINUTE });
  });
});
