/**
 * POST /v1/events without the queue (issue 38): where the queue and the index share one
 * PostgreSQL (queue.backend: postgres), the request commits its events into the index and answers
 * after the commit. Against a whole daemon on that backend, and a second one on Redis for the
 * answers the queue path gives to the same requests.
 */
import { describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events/events.js';
import { directCommitter } from '../../src/ingest/direct.js';
import { commitEvents, EventsRefused } from '../../src/store/assets/commit.js';
import { connect } from '../../src/store/pg/db.js';
import { isTransient } from '../../src/store/pg/transient.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { answerChecker } from '../helpers/openapi.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  queue: { prefix, batch_wait: 'PT0.002S', backend: 'postgres' },
  assets: [{ name: 'd.offsets', domain: 'integer' }],
  rollups: [
    {
      id: 'd_buckets',
      upstream: ['d.offsets'],
      every: 1000,
      begin: 0,
      target: { type: 'queue', queue: 'd-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const runs = testQueue('d-runs', prefix, config);

// The queue path, for comparison: the same daemon on Redis, over a database of its own.
const redisDb = await createTestDatabase();
const redisPrefix = createTestPrefix();
const onRedis = await startTestDaemon(
  testConfig(redisDb, redisPrefix, {
    queue: { prefix: redisPrefix, batch_wait: 'PT0.002S', backend: 'redis' },
    assets: [{ name: 'd.offsets', domain: 'integer' }],
  }),
);

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function post(url: string, path: string, body: unknown): Promise<Reply> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const events = (body: unknown) => post(daemon.url, '/v1/events', body);

async function coverage(asset: string, start: string | number, end: string | number) {
  const query = new URLSearchParams({ start: String(start), end: String(end) });
  const res = await fetch(`${daemon.url}/v1/assets/${encodeURIComponent(asset)}/coverage?${query}`);
  return (await res.json()) as { covered: boolean; ratio: number; missing: unknown[] };
}

const eventCount = async (asset: string) => {
  const [row] = await db.sql<{ event_count: number }[]>`select event_count from assets where name = ${asset}`;
  return row?.event_count ?? 0;
};

/** Every job the events queue holds in any state: none, when nothing went through it. */
const queuedJobs = async () => {
  const counts = await producer.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
  return Object.values(counts).reduce((a, b) => a + b, 0);
};

describe('POST /v1/events on the PostgreSQL backend', () => {
  it('commits before it answers: the next coverage answer includes the events (read-your-writes)', async () => {
    const reply = await events([
      { asset: 'd.orders', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:30:00Z', id: 'o-1' },
      { asset: 'd.orders', interval: '2025-06-01T10:30:00Z/PT30M', id: 'o-2' },
    ]);
    expect(reply).toEqual({
      status: 200,
      body: {
        accepted: 2,
        ids: [null, null],
        results: [
          { status: 'committed', asset: 'd.orders', seq: 1 },
          { status: 'committed', asset: 'd.orders', seq: 2 },
        ],
      },
    });
    const document = (await daemon.http.inject({ url: '/openapi.json' })).json() as Record<string, unknown>;
    expect(answerChecker(document)('POST', '/v1/events', 200, reply.body)).toEqual({ errors: null });
    // No wait: the answer came after the commit.
    expect(await coverage('d.orders', '2025-06-01T10:00:00Z', '2025-06-01T11:00:00Z')).toMatchObject({
      covered: true,
      ratio: 1,
    });
    const replay = await post(daemon.url, '/v1/assets/d.orders/replay-requirements', {
      start: '2025-06-01T10:00:00Z',
      end: '2025-06-01T10:15:00Z',
      version: 'v2',
    });
    expect(replay).toMatchObject({ status: 200, body: { results: [{ status: 'committed', seq: 3 }] } });
    expect(await coverage('d.orders', '2025-06-01T10:00:00Z', '2025-06-01T11:00:00Z')).toMatchObject({
      covered: false,
      ratio: 0.75,
    });
    expect(await queuedJobs()).toBe(0);
  });

  it('dedupes as the worker does: a re-sent key, or one repeated in the batch, is a duplicate', async () => {
    const again = await events([
      { asset: 'd.orders', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:30:00Z', id: 'o-1' },
      { asset: 'd.orders', interval: '2025-06-01T11:00:00Z/PT30M', id: 'o-3' },
      { asset: 'd.orders', interval: '2025-06-01T11:00:00Z/PT30M', id: 'o-3' },
      { asset: 'd.orders', interval: '2025-06-01T11:30:00Z/PT30M' },
      { asset: 'd.orders', interval: '2025-06-01T11:30:00Z/PT30M' }, // same content, no id
    ]);
    // Seqs follow ingest order; a key found a duplicate leaves its candidate seq unused.
    expect(again.body.results).toEqual([
      { status: 'duplicate', asset: 'd.orders' },
      { status: 'committed', asset: 'd.orders', seq: expect.any(Number) },
      { status: 'duplicate', asset: 'd.orders' },
      { status: 'committed', asset: 'd.orders', seq: expect.any(Number) },
      { status: 'duplicate', asset: 'd.orders' },
    ]);
    const [o3, o4] = (again.body.results as Array<{ seq?: number }>).flatMap((r) => r.seq ?? []);
    expect(o3).toBeGreaterThan(3);
    expect(o4).toBeGreaterThan(o3!);
    expect(await eventCount('d.orders')).toBe(5);
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(metrics).toContain('coverage_rollup_events_ingested_total{status="committed"} 5');
    expect(metrics).toContain('coverage_rollup_events_ingested_total{status="duplicate"} 3');
  });

  it('refuses a batch with any bad item, committing none of it, with the errors the queue path gives', async () => {
    const batch = [
      { asset: 'd.fresh', start: 5, end: 10 },
      { asset: 'd.fresh', start: 'soon', end: '2025-06-01T10:00:00Z' },
      { asset: 'd.fresh', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z' }, // first is integer
      { asset: 'd.offsets', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z' }, // declared integer
      { asset: 'd.fresh', start: 10, end: 5 },
      { start: 1, end: 2 },
      { asset: 'd.fresh', start: 1, end: 2, type: 'truncate' },
      { asset: 'd.fresh', start: 1, end: 2, extra: 'not an object' },
    ];
    const direct = await events(batch);
    const queued = await post(onRedis.url, '/v1/events', batch);
    expect(direct.status).toBe(400);
    expect(queued.status).toBe(400);
    expect(direct.body.code).toBe('invalid_events');
    expect(direct.body.message).toBe('7 of 8 events are invalid; none was committed');
    expect(queued.body.message).toBe('7 of 8 events are invalid; none was enqueued');
    expect(direct.body.errors).toEqual(queued.body.errors);
    expect((direct.body.errors as Array<{ index: number }>).map((e) => e.index)).toEqual([
      1, 2, 3, 4, 5, 6, 7,
    ]);
    const [fresh] = await db.sql`select 1 from assets where name = 'd.fresh'`;
    expect(fresh).toBeUndefined();
    // A body that is no event is refused before any of this, alike on both paths.
    for (const body of [[], 42]) {
      const [a, b] = [await events(body), await post(onRedis.url, '/v1/events', body)];
      expect(a.status).toBe(400);
      expect(b.status).toBe(400);
      expect({ ...a.body, message: undefined }).toEqual({ ...b.body, message: undefined });
    }
  });

  it('commits all or nothing when the index itself refuses an event checked before (a domain race)', async () => {
    // As if another producer registered d.race as integer between this batch's check and its commit.
    await db.sql`insert into assets (name, domain, zone) values ('d.race', 'integer', 'UTC')`;
    const batch = [
      { asset: 'd.unraced', start: 0, end: 5 },
      { asset: 'd.race', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z' },
    ].map((e) => normalizeEvent(e, { maxPayloadBytes: 65_536 }));
    const refused = await commitEvents(db.sql, batch, { allOrNothing: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EventsRefused);
    expect((refused as EventsRefused).refused).toEqual([
      { index: 1, error: expect.objectContaining({ reason: 'domain_mismatch' }) },
    ]);
    expect(await db.sql`select name from assets where name = 'd.unraced'`).toEqual([]);
    // Without the option the queue worker's behaviour stands: the rest commits, the refused one is reported.
    const outcomes = await commitEvents(db.sql, batch);
    expect(outcomes.map((o) => o.status)).toEqual(['committed', 'rejected']);
  });

  it('gives up on a PostgreSQL that refuses connections with its transient error (the route answers 503)', async () => {
    const down = connect('postgres://127.0.0.1:1/nowhere', { max: 1, connectTimeout: 2 });
    try {
      const event = normalizeEvent({ asset: 'd.x', start: 0, end: 1 }, { maxPayloadBytes: 65_536 });
      const error = await directCommitter(down)
        .add([event])
        .catch((e: unknown) => e);
      expect(isTransient(error)).toBe(true);
    } finally {
      await down.end({ timeout: 1 });
    }
  });

  it('the scheduler learns of directly committed events as of queued ones: one trigger per period', async () => {
    // [0, 1000) half through the queue, half over HTTP; [1000, 2000) over HTTP alone.
    await producer.add('event', { asset: 'd.offsets', start: 0, end: 500, id: 'q-0' });
    expect((await events({ asset: 'd.offsets', start: 500, end: 1000, id: 'h-500' })).status).toBe(200);
    expect((await events({ asset: 'd.offsets', start: 1000, end: 2000, id: 'h-1000' })).status).toBe(200);
    const first = await waitFor(() => runs.getJob('d_buckets@0#1'), { what: 'the trigger of [0, 1000)' });
    const second = await waitFor(() => runs.getJob('d_buckets@1000#1'), {
      what: 'the trigger of [1000, 2000)',
    });
    expect(first.data).toMatchObject({ reason: 'covered', upstreams: { 'd.offsets': { ratio: 1 } } });
    expect(second.data).toMatchObject({ reason: 'covered', upstreams: { 'd.offsets': { ratio: 1 } } });
    // The marking cursor followed the log over both paths' events.
    const cursor = await waitFor(async () => {
      const [row] = await db.sql<{ seq: number }[]>`
        select seq from rollup_cursors where rollup_id = 'd_buckets' and asset_name = 'd.offsets'`;
      const [asset] = await db.sql<
        { last_seq: number }[]
      >`select last_seq from assets where name = 'd.offsets'`;
      return row && asset && row.seq === asset.last_seq ? row : undefined;
    });
    const [{ last_seq }] = await db.sql<[{ last_seq: number }]>`
      select last_seq from assets where name = 'd.offsets'`;
    expect(cursor.seq).toBe(last_seq);
    // A re-send changes nothing: no rerun.
    expect((await events({ asset: 'd.offsets', start: 500, end: 1000, id: 'h-500' })).body.results).toEqual([
      { status: 'duplicate', asset: 'd.offsets' },
    ]);
    const triggers = await db.sql<{ n: number }[]>`
      select count(*)::int as n from triggers where rollup_id = 'd_buckets'`;
    expect(triggers[0]!.n).toBe(2);
  });

  it('concurrent single-event requests share commits; each is answered once its event is durable, counted once', async () => {
    // Every transaction that moves d.shared.one leaves its id here: how many commits the requests took.
    await db.sql.unsafe(`
      create table commit_probe (txid int8 not null);
      create function probe_commit() returns trigger language plpgsql as $$
        begin insert into commit_probe values (txid_current()); return new; end $$;
      create trigger probe_commit after update on assets for each row
        when (new.name = 'd.shared.one') execute function probe_commit();`);
    try {
      // 40 keys, each sent by two requests, 80 requests in flight at once.
      const replies = await Promise.all(
        Array.from({ length: 80 }, (_, r) =>
          events({ asset: 'd.shared.one', start: (r % 40) * 10, end: (r % 40) * 10 + 10, id: `s-${r % 40}` }),
        ),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(80).fill(200));
      const statuses = replies.map((r) => (r.body.results as Array<{ status: string }>)[0]!.status);
      expect(statuses.filter((s) => s === 'committed')).toHaveLength(40);
      expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(40);
      // Durable before the answers: no wait.
      expect(await eventCount('d.shared.one')).toBe(40);
      expect(await coverage('d.shared.one', 0, 400)).toMatchObject({ covered: true, missing: [] });
      const seqs = replies.flatMap((r) =>
        (r.body.results as Array<{ seq?: number }>).flatMap((x) => x.seq ?? []),
      );
      expect(new Set(seqs).size).toBe(40);
      const [{ commits }] = await db.sql<[{ commits: number }]>`
        select count(distinct txid)::int as commits from commit_probe`;
      expect(commits).toBeGreaterThan(0);
      expect(commits).toBeLessThan(40);
    } finally {
      await db.sql.unsafe(`
        drop trigger probe_commit on assets; drop function probe_commit(); drop table commit_probe;`);
    }
  });

  it('a commit that fails answers every request that waited on it, and commits none of them', async () => {
    // The index refuses every update of d.fail.* assets: for good (P0001), or transiently (40001)
    // for d.fail.transient.*; requests for other assets in the same commits go through.
    await db.sql.unsafe(`
      create function fail_commit() returns trigger language plpgsql as $$
        begin
          raise exception 'refused by the test'
            using errcode = case when new.name like 'd.fail.transient.%' then '40001' else 'P0001' end;
        end $$;
      create trigger fail_commit before update on assets for each row
        when (new.name like 'd.fail.%') execute function fail_commit();`);
    try {
      const send = (asset: string, k: number) => events({ asset, start: k, end: k + 1, id: `${asset}-${k}` });
      // For good: the commits holding d.fail.hard.* are split until each fails alone (500), and the
      // requests that shared them commit without them.
      const [hard, fine] = await Promise.all([
        Promise.all(Array.from({ length: 6 }, (_, k) => send(`d.fail.hard.${k}`, k))),
        Promise.all(Array.from({ length: 6 }, (_, k) => send('d.fail-free', k))),
      ]);
      expect(hard.map((r) => r.status)).toEqual(Array(6).fill(500));
      expect(fine.map((r) => r.status)).toEqual(Array(6).fill(200));
      expect(await eventCount('d.fail-free')).toBe(6);
      // Transiently: retried, then every request of the batch hears 503 (send again), those that
      // shared its commit too; none is answered 200 unless its event is in the index.
      const [transient, shared] = await Promise.all([
        Promise.all(Array.from({ length: 6 }, (_, k) => send(`d.fail.transient.${k}`, k))),
        Promise.all(Array.from({ length: 6 }, (_, k) => send('d.fail-shared', k))),
      ]);
      expect(transient.map((r) => r.status)).toEqual(Array(6).fill(503));
      expect(transient[0]!.body.code).toBe('database_unavailable');
      for (const r of shared) expect([200, 503]).toContain(r.status);
      const acknowledged = shared.filter((r) => r.status === 200).length;
      expect(await eventCount('d.fail-shared')).toBe(acknowledged);
      expect(await db.sql`select name from assets where name like 'd.fail.%'`).toEqual([]);
    } finally {
      await db.sql.unsafe(`drop trigger fail_commit on assets; drop function fail_commit();`);
    }
  });

  it('a bad event refuses its own request only, not the others sharing its commit', async () => {
    // Two new assets raced: a request keys each as integer, another as time, all at once.
    const replies = await Promise.all([
      events({ asset: 'd.mixed.a', start: 0, end: 10, id: 'int' }),
      events({ asset: 'd.mixed.a', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z', id: 'time' }),
      events({ asset: 'd.offsets', start: 'soon', end: 10 }),
      ...Array.from({ length: 6 }, (_, k) => events({ asset: 'd.mixed.b', start: k, end: k + 1 })),
    ]);
    // The first commit of d.mixed.a sets its domain: exactly one of the two is refused.
    expect(
      replies
        .slice(0, 2)
        .map((r) => r.status)
        .sort(),
    ).toEqual([200, 400]);
    expect(replies[2]!.status).toBe(400);
    expect(replies.slice(3).map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(await eventCount('d.mixed.a')).toBe(1);
    expect(await eventCount('d.mixed.b')).toBe(6);
  });

  it('concurrent requests and the queue on the same assets commit every event once, in one index', async () => {
    const slice = (asset: string, k: number) => ({
      asset,
      start: k * 10,
      end: k * 10 + 10,
      id: `${asset}-${k}`,
    });
    const assets = ['d.busy.a', 'd.busy.b'];
    // 8 requests of 50 events over both assets (every key sent twice), and 100 more through the queue.
    const requests = Array.from({ length: 8 }, (_, r) =>
      events(Array.from({ length: 50 }, (_, i) => slice(assets[i % 2]!, (r % 4) * 25 + Math.floor(i / 2)))),
    );
    await producer.addBulk(
      Array.from({ length: 100 }, (_, i) => ({
        name: 'event',
        data: slice(assets[i % 2]!, 100 + Math.floor(i / 2)),
      })),
    );
    const replies = await Promise.all(requests);
    expect(replies.map((r) => r.status)).toEqual(Array(8).fill(200));
    const statuses = replies.flatMap((r) =>
      (r.body.results as Array<{ status: string }>).map((x) => x.status),
    );
    expect(statuses.filter((s) => s === 'committed')).toHaveLength(200);
    expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(200);
    await waitFor(async () => (await eventCount('d.busy.a')) + (await eventCount('d.busy.b')) === 300, {
      what: 'the queued events',
    });
    for (const asset of assets) {
      const seqs = await db.sql<{ seq: number }[]>`
        select e.seq from events e join assets a on a.id = e.asset_id where a.name = ${asset} order by e.seq`;
      expect(new Set(seqs.map((s) => s.seq)).size).toBe(150);
      expect(await coverage(asset, 0, 1500)).toMatchObject({ covered: true, missing: [] });
      const [{ n }] = await db.sql<[{ n: number }]>`
        select count(*)::int as n from segments s join assets a on a.id = s.asset_id where a.name = ${asset}`;
      expect(n).toBe(1);
    }
  });
});
