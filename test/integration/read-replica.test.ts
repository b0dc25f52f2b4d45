/**
 * database_read_url against a real streaming replica (test/helpers/pg-replica.ts): coverage
 * answers come from the replica with an as_of, lag shows in /readyz and /metrics, a replica too
 * far behind or down sends reads to the primary, and the replica only ever sees the read pool.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { findAsset } from '../../src/store/assets/assets.js';
import { queryCoverage } from '../../src/store/assets/coverage-query.js';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import { TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { uniqueName } from '../helpers/env.js';
import { hasPostgresServer, type LocalReplicaPair, startReplicaPair } from '../helpers/pg-replica.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const ASSET = 'replica.orders';
const MAX_LAG_MS = 3000;
const WINDOW = { start: '2025-06-01T00:00:00Z', end: '2025-06-01T03:00:00Z' };

let pair: LocalReplicaPair;
let primary: Sql;
let replica: Sql;
let daemon: Daemon;

type Json = Record<string, unknown>;

async function get(path: string): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${daemon.url}${path}`);
  return { status: res.status, body: (await res.json()) as Json };
}

const coverage = async () =>
  (await get(`/v1/assets/${ASSET}/coverage?${new URLSearchParams(WINDOW)}`)).body as Json & {
    ratio: number;
    as_of?: string;
  };
const readyz = async () => (await get('/readyz')).body.replica as Json;

/** The primary's own ratio over the window, read directly. */
async function primaryRatio(): Promise<number> {
  const asset = await findAsset(primary, ASSET);
  if (!asset) return 0;
  const window = { start: Date.parse(WINDOW.start) * 1000, end: Date.parse(WINDOW.end) * 1000 };
  return (await queryCoverage(primary, asset, { window, limit: 10 })).ratio;
}

/** Posts one event for hour `hour` (0, 1, 2 in turn) of the window; resolves once the primary has it. */
async function ingestHour(hour: number): Promise<void> {
  const start = new Date(Date.parse(WINDOW.start) + hour * 3_600_000);
  const end = new Date(start.getTime() + 3_600_000);
  const res = await fetch(`${daemon.url}/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
    body: JSON.stringify({ asset: ASSET, start: start.toISOString(), end: end.toISOString() }),
  });
  expect(res.status).toBe(202);
  await waitFor(async () => (await primaryRatio()) > (hour + 0.5) / 3, {
    what: `hour ${hour} in the primary's index`,
  });
}

describe.skipIf(!hasPostgresServer)('a PostgreSQL streaming replica for reads', () => {
  beforeAll(async () => {
    pair = await startReplicaPair();
    const name = uniqueName('cr_replica');
    await pair.createDatabase(name);
    primary = connect(pair.primaryUrl(name), { max: 2, applicationName: 'test' });
    replica = connect(pair.replicaUrl(name), { max: 2, applicationName: 'test' });
    const config = testConfig({ name, url: pair.primaryUrl(name), sql: primary }, createTestPrefix(), {
      database_read_url: pair.replicaUrl(name),
      database_read_max_lag: `PT${MAX_LAG_MS / 1000}S`,
      assets: [{ name: ASSET, domain: 'time' }],
      // A scheduled rollup, so the lease and the scheduler run too (on the primary only).
      rollups: [
        {
          id: 'hourly',
          upstream: ASSET,
          every: 'hour',
          begin: WINDOW.start,
          target: { type: 'queue', queue: 'replica-runs' },
        },
      ],
    });
    daemon = await startDaemon(config, createLogger(config.log_level));
  });

  afterAll(async () => {
    await daemon?.stop();
    await primary?.end({ timeout: 1 });
    await replica?.end({ timeout: 1 });
    await pair?.stop();
  });

  it('answers coverage from the replica with an as_of, converging to the primary', async () => {
    await ingestHour(0);
    const answer = await waitFor(
      async () => {
        const a = await coverage();
        return a.as_of !== undefined && a.ratio > 0 ? a : undefined;
      },
      { what: 'a replica answer with the first hour' },
    );
    expect(answer.ratio).toBeCloseTo(1 / 3);
    expect(Date.now() - Date.parse(answer.as_of!)).toBeLessThan(MAX_LAG_MS + 1000);
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.replica).toMatchObject({ status: 'ok', reads: 'replica', max_lag: 'PT3S' });
    expect((ready.body.replica as Json).lag_seconds).toBeLessThan(MAX_LAG_MS / 1000);
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(metrics).toMatch(/^coverage_rollup_replica_lag_seconds \d/m);
    expect(metrics).toMatch(/^coverage_rollup_replica_serving_reads 1$/m);
    const periods = await get(`/v1/rollups/hourly/periods?${new URLSearchParams(WINDOW)}`);
    expect(periods.status).toBe(200);
    expect(periods.body.periods).toHaveLength(3);
    expect((await get('/v1/rollups/hourly/periods/2025-06-01T00')).status).toBe(200);
    expect((await fetch(`${daemon.url}/`)).status).toBe(200); // the status page
  });

  it('keeps the replica current across a WAL segment switch on an idle primary', async () => {
    // The primary's insert position then sits past the new segment's page header, a point the
    // replica's replay position never reaches while nothing is written: as_of must advance anyway.
    await primary`select pg_switch_wal()`;
    const switched = Date.now();
    await waitFor(
      async () => {
        const state = await readyz();
        return state.status === 'ok' && Date.parse(state.as_of as string) > switched + 1000;
      },
      { timeout: 10_000, what: 'as_of to advance past the switch' },
    );
  });

  it('serves the lagging answer while replay is paused, then the primary once past the maximum lag', async () => {
    await pair.pauseReplay();
    try {
      await ingestHour(1);
      // Replay stopped before the commit: the replica answers without it, saying it is behind.
      const lagging = await coverage();
      expect(lagging.as_of).toBeDefined();
      expect(lagging.ratio).toBeCloseTo(1 / 3);
      // Past database_read_max_lag the primary answers: without as_of, with the new hour.
      const fromPrimary = await waitFor(
        async () => {
          const a = await coverage();
          return a.as_of === undefined ? a : undefined;
        },
        { what: 'reads to move to the primary' },
      );
      expect(fromPrimary.ratio).toBeCloseTo(2 / 3);
      const ready = await get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.replica).toMatchObject({ status: 'lagging', reads: 'primary' });
      expect((ready.body.replica as Json).lag_seconds).toBeGreaterThan(MAX_LAG_MS / 1000);
      expect((ready.body.replica as Json).lag_bytes).toBeGreaterThan(0);
    } finally {
      await pair.resumeReplay();
    }
    const caughtUp = await waitFor(
      async () => {
        const a = await coverage();
        return a.as_of !== undefined ? a : undefined;
      },
      { what: 'reads back on the replica' },
    );
    expect(caughtUp.ratio).toBeCloseTo(2 / 3);
  });

  it('keeps answering from the primary, ready, while the replica is down', async () => {
    await pair.stopReplica();
    try {
      await waitFor(async () => (await readyz()).status === 'unavailable', {
        what: 'the replica reported down',
      });
      const ready = await get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.replica).toMatchObject({ reads: 'primary' });
      expect((ready.body.replica as Json).error).toMatch(/^replica: /);
      await ingestHour(2);
      const answer = await coverage();
      expect(answer.as_of).toBeUndefined();
      expect(answer.ratio).toBe(1);
      expect((await get('/v1/assets')).status).toBe(200);
    } finally {
      await pair.startReplica();
    }
    const back = await waitFor(
      async () => {
        const a = await coverage();
        return a.as_of !== undefined ? a : undefined;
      },
      { what: 'reads back on the restarted replica' },
    );
    expect(back.ratio).toBe(1);
  });

  it('lets only the read-only pool connect to the replica; the lease and ingest use the primary', async () => {
    const clients = await replica<{ application_name: string }[]>`
      select distinct split_part(application_name, '@', 1) as application_name from pg_stat_activity
      where datname = current_database() and application_name <> 'test'`;
    expect(clients.map((c) => c.application_name)).toEqual(['coverage-rollup-read']);
    const onPrimary = await primary<{ application_name: string }[]>`
      select distinct split_part(application_name, '@', 1) as application_name from pg_stat_activity
      where datname = current_database() and application_name like 'coverage-rollup%'`;
    expect(onPrimary.map((c) => c.application_name).sort()).toEqual([
      'coverage-rollup',
      'coverage-rollup-ingest',
      'coverage-rollup-lease',
    ]);
  });
});
