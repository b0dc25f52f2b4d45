/**
 * The short Redis Cluster smoke test of `npm test`: a real 3-master Cluster started from
 * `redis-server`, the events queue spread over 3 groups, every producer path (POST /v1/events,
 * `emit`) routing by asset, dead letters kept per group, and a queue target on its own hash tag.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { runEmit } from '../../src/cli/commands/emit.js';
import type { Config } from '../../src/config/index.js';
import { groupOf } from '../../src/core/events/routing.js';
import type { Daemon } from '../../src/daemon/daemon.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { queueGroups } from '../../src/queue/groups.js';
import { type RedisClient, redisConnection, warnUnlessNoEviction } from '../../src/queue/redis.js';
import { createLogger, type Logger } from '../../src/support/log.js';
import { TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { hasRedisServer, type LocalRedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import { waitFor } from '../helpers/wait.js';
import { indexCoverage, MINUTE, micros } from './ingest-harness.js';

const ASSETS = ['cl.orders', 'cl.payments', 'cl.customers', 'cl.refunds', 'cl.shipments', 'cl.returns'];
const HOUR = '2025-06-01T10:00:00Z';
const HOLE = '2025-06-01T10:30:00.000Z';
const slices = (asset: string) =>
  Array.from({ length: 12 }, (_, i) => ({
    asset,
    start: new Date(micros(HOUR) / 1000 + i * 300_000).toISOString(),
    end: new Date(micros(HOUR) / 1000 + (i + 1) * 300_000).toISOString(),
    version: 'v1',
  }));

describe.skipIf(!hasRedisServer)('on a real 3-master Redis Cluster with 3 queue groups', () => {
  let cluster: LocalRedisCluster;
  let db: TestDatabase;
  let config: Config;
  let daemon: Daemon;
  let redis: RedisClient;
  const queues: Queue[] = [];
  /** A handle on a queue of the Cluster, closed after the file. */
  const queueOn = (name: string, prefix: string) => {
    const queue = new Queue(name, { connection: redis, prefix });
    queues.push(queue);
    return queue;
  };

  beforeAll(async () => {
    [cluster, db] = await Promise.all([startRedisCluster({ masters: 3 }), createTestDatabase()]);
    config = testConfig(db, 'crc', {
      redis_url: cluster.url,
      queue: { prefix: 'crc', groups: 3, batch_wait: 'PT0.002S' },
      rollups: [
        {
          id: 'cl_hourly',
          upstream: ASSETS,
          every: 'hour',
          begin: '2025-06-01',
          policy: { ratio: 1 },
          target: { type: 'queue', queue: 'runs', prefix: '{crc-runs}' },
        },
      ],
    });
    redis = redisConnection(cluster.url);
    daemon = await startDaemon(config, createLogger(config.log_level));
  });

  afterAll(async () => {
    await daemon?.stop();
    await Promise.all(queues.map((q) => q.close()));
    redis?.disconnect();
    await cluster?.stop();
  });

  it('puts the groups on different shards, and the test assets in every group', async () => {
    const masters = new Set<number>();
    for (const group of queueGroups(config.queue)) {
      const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', group.prefix));
      masters.add((await cluster.masterOf(slot)).port);
    }
    expect(masters.size).toBe(3);
    expect(new Set(ASSETS.map((a) => groupOf(a, 3)))).toEqual(new Set([0, 1, 2]));
  });

  it('ingests events sent through POST /v1/events and emit into the index exactly, each on its asset group', async () => {
    const [first, ...others] = ASSETS;
    const events = [...slices(first!).filter((e) => e.start !== HOLE), ...others.flatMap(slices)].sort(
      (a, b) => a.start.localeCompare(b.start) || a.asset.localeCompare(b.asset),
    );
    const sent = await daemon.http.inject({
      method: 'POST',
      url: '/v1/events',
      headers: { authorization: `Bearer ${TEST_TOKEN}` },
      payload: events,
    });
    expect(sent.statusCode).toBe(202);
    const full = [{ start: micros(HOUR), end: micros(HOUR) + 60 * MINUTE }];
    const holed = [
      { start: micros(HOUR), end: micros(HOLE) },
      { start: micros(HOLE) + 5 * MINUTE, end: micros(HOUR) + 60 * MINUTE },
    ];
    const indexed = async () => Promise.all(ASSETS.map((a) => indexCoverage(db.sql, a)));
    const expected = [holed, ...others.map(() => full)];
    await waitFor(async () => JSON.stringify(await indexed()) === JSON.stringify(expected), {
      what: 'the index to hold every event sent over HTTP',
    }).catch(async (error) => {
      expect(await indexed()).toEqual(expected); // says how they differ
      throw error;
    });

    // The missing slice through `emit`, reading its config file as the CLI does.
    const dir = mkdtempSync(join(tmpdir(), 'crc-emit-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const configFile = join(dir, 'config.json');
    const queue = { prefix: 'crc', groups: 3 };
    writeFileSync(configFile, JSON.stringify({ redis_url: cluster.url, database_url: db.url, queue }));
    const eventsFile = join(dir, 'events.jsonl');
    writeFileSync(eventsFile, `${JSON.stringify(slices(first!).find((e) => e.start === HOLE))}\n`);
    expect(await runEmit([], { config: configFile, file: eventsFile })).toBe(0);
    await waitFor(async () => JSON.stringify(await indexed()) === JSON.stringify(ASSETS.map(() => full)), {
      what: 'the event sent by emit to fill the hole',
    });

    // Every job went through its asset's group, and every group carried some.
    for (const group of queueGroups(config.queue)) {
      const done = await queueOn(group.name, group.prefix).getJobs(['completed']);
      expect(done.length).toBeGreaterThan(0);
      expect(done.map((j) => groupOf(j.data.asset, 3))).toEqual(done.map(() => group.index));
    }
  });

  it('delivers the trigger to a queue target under its own hash-tagged prefix', async () => {
    const runs = queueOn('runs', '{crc-runs}');
    const key = 'cl_hourly@20250601T100000Z#1';
    const job = await waitFor(() => runs.getJob(key), { what: 'the trigger job on the Cluster' });
    expect(job.data).toMatchObject({ rollup: 'cl_hourly', generation: 1, reason: 'covered' });
  });

  it('dead-letters a bad event in its own group', async () => {
    const bad = { asset: 'cl.bad', start: 'not a time', end: HOUR };
    const groups = queueGroups(config.queue);
    const home = groups[groupOf(bad.asset, 3)]!;
    await queueOn(home.name, home.prefix).add('event', bad);
    const dead = groups.map((g) => queueOn(g.deadLetter, g.prefix));
    await waitFor(async () => (await dead[home.index]!.getJobCounts('waiting')).waiting === 1, {
      what: 'the dead letter in its group',
    });
    const counts = await Promise.all(dead.map(async (q) => (await q.getJobCounts('waiting')).waiting));
    expect(counts).toEqual(groups.map((g) => (g.index === home.index ? 1 : 0)));
  });

  it('warns about every node whose maxmemory-policy is not noeviction', async () => {
    const [node] = cluster.nodes;
    const plain = redisConnection(`redis://${node!.address}`);
    onTestFinished(() => plain.disconnect());
    await plain.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const warnings: Array<Record<string, unknown>> = [];
    const log = { warn: (fields: Record<string, unknown>) => warnings.push(fields) } as unknown as Logger;
    const client = redisConnection(cluster.url);
    onTestFinished(() => client.disconnect());
    await warnUnlessNoEviction(client, log);
    expect(warnings).toEqual([{ redis: node!.address, maxmemory_policy: 'allkeys-lru' }]);
    await plain.config('SET', 'maxmemory-policy', 'noeviction');
  });

  it('answers /readyz with Redis ok through the Cluster client', async () => {
    const ready = await daemon.http.inject({ method: 'GET', url: '/readyz' });
    expect(ready.json()).toMatchObject({ status: 'ready', redis: 'ok' });
  });
});

if (!hasRedisServer) {
  console.warn(
    'redis-cluster.test.ts skipped: redis-server is not on PATH (it starts a local Redis Cluster)',
  );
}
