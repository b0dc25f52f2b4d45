/**
 * Repair requests sent to a real Apache Airflow 3.3, through both Airflow
 * repair targets: `airflow_asset` (an asset event per attempt, the request in `extra`) and
 * `airflow` (a dag run per attempt, the request in `conf`). examples/airflow/coverage_repair_backfill.py
 * runs on each, announces the requested ranges to the built daemon's `POST /v1/events`, and the
 * loop closes: the requests become `repaired` and the periods that waited on them trigger. A
 * redelivery of an attempt adds no second asset event and no second dag run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import type { RepairPayload } from '../../src/core/repair-payload.js';
import { packageRoot } from '../../src/support/paths.js';
import { RepairTargets } from '../../src/targets/repair-targets.js';
import { redactTarget } from '../../src/targets/secrets.js';
import { TEST_TOKEN } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL, withTestBackend } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import type { DaemonProcess } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { type Json, type RealAirflow, startAirflow } from './helpers/airflow.js';
import { daemonApi, startSuiteDaemon } from './helpers/daemon.js';

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00Z`;
const DAG = 'coverage_repair_backfill';
const REPAIRS = 'coverage_rollup.orders_repairs';
const USER = 'coverage-rollup';

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-repair-'));
let airflow: RealAirflow;
let daemon: DaemonProcess;
let raw: Record<string, unknown>;
let send: (asset: string, start: string, end: string) => Promise<unknown>;

beforeAll(async () => {
  const port = await freePort();
  airflow = await startAirflow({
    name: 'repair',
    dagFiles: [join(packageRoot(), 'examples', 'airflow', 'coverage_repair_backfill.py')],
    dagIds: [DAG],
    // Creating asset events needs the op role with the SimpleAuthManager.
    users: { [USER]: 'op' },
    env: { COVERAGE_ROLLUP_URL: `http://127.0.0.1:${port}`, COVERAGE_ROLLUP_WRITE_TOKEN: TEST_TOKEN },
  });
  const auth = { username: USER, password: airflow.passwords[USER]!, timeout: 'PT60S' };
  const db = await createTestDatabase();
  // Yesterday's period becomes due for repair 30 s after the daemon starts, so the events sent
  // below are in the index by then and the requests ask for exactly the holes they leave.
  const dueInSeconds = Math.ceil((Date.now() - Date.parse(`${day}T00:00:00Z`) - DAY_MS) / 1000) + 30;
  const daily = (id: string, upstream: string, target: Json) => ({
    id,
    upstream: [upstream],
    every: 'day',
    begin: day,
    target: { type: 'queue', queue: `${id}-runs` },
    repair: { after: `PT${dueInSeconds}S`, every: 'PT10M', attempts: 2, target },
  });
  raw = {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port },
    api_tokens: [TEST_TOKEN],
    queue: { prefix: createTestPrefix(), batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    shutdown_timeout: 'PT10S',
    rollups: [
      daily('orders_daily', 'orders.raw', {
        type: 'airflow_asset',
        url: airflow.url,
        asset: REPAIRS,
        ...auth,
      }),
      daily('clicks_daily', 'clicks.raw', { type: 'airflow', url: airflow.url, dag_id: DAG, ...auth }),
    ],
  };
  const started = await startSuiteDaemon('repair-daemon', dir, raw);
  daemon = started.daemon;
  const producer = started.producer;
  send = (asset, start, end) => producer.add('e', { asset, start, end, version: 'v1' });
}, 600_000);

afterAll(async () => {
  await airflow?.stop(); // first: a backfill task may still be announcing to the daemon
  const exit = await daemon?.stop(20_000);
  rmSync(dir, { recursive: true, force: true });
  for (const p of airflow?.processes ?? []) expect(p.running, p.name).toBe(false);
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

const ours = (path: string) => daemonApi(daemon, path);

/** The asset's events (Airflow 3.3.2 answers 500 while a run made from one has no start_date yet). */
async function repairEvents(): Promise<Json[]> {
  const assets = await airflow.api('GET', `/api/v2/assets?name_pattern=${encodeURIComponent(REPAIRS)}`);
  const id = (assets.body.assets as Json[]).find((a) => a.name === REPAIRS)!.id as number;
  const answer = await waitFor(
    async () => {
      const a = await airflow.api('GET', `/api/v2/assets/events?asset_id=${id}&limit=100`);
      return a.status === 500 ? undefined : a;
    },
    { timeout: 120_000, interval: 1_000, what: `the events of ${REPAIRS}` },
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.asset_events as Json[];
}

async function backfillRuns(): Promise<Json[]> {
  const answer = await airflow.api('GET', `/api/v2/dags/${DAG}/dagRuns?limit=100`);
  return answer.body.dag_runs as Json[];
}

/** Every attempt the daemon made for `asset`, with its payload, once all its requests are repaired. */
async function repairedAttempts(asset: string): Promise<Json[]> {
  const listing = await waitFor(
    async () => {
      const answer = await ours(`/v1/repairs?asset=${encodeURIComponent(asset)}`);
      const list = answer.repairs as Json[];
      return list.length > 0 && list.every((r) => r.state === 'repaired') ? list : undefined;
    },
    { timeout: 480_000, interval: 2_000, what: `the repair requests of ${asset} to be repaired` },
  );
  return listing;
}

async function periodOf(rollup: string): Promise<Json> {
  const answer = await ours(`/v1/rollups/${rollup}/periods?limit=10`);
  return (answer.periods as Json[]).find((p) => p.key === day)!;
}

describe('repair requests against Airflow 3.3', () => {
  it('closes the loop through both targets: the backfill DAG announces the ranges, the requests are repaired, the periods trigger', async () => {
    // Yesterday, but for half an hour of orders and a quarter of an hour of clicks.
    await send('orders.raw', at(0), at(10));
    await send(
      'orders.raw',
      at(10, 30),
      `${new Date(Date.parse(at(0)) + DAY_MS).toISOString().slice(0, 19)}Z`,
    );
    await send('clicks.raw', at(0), at(14));
    await send(
      'clicks.raw',
      at(14, 15),
      `${new Date(Date.parse(at(0)) + DAY_MS).toISOString().slice(0, 19)}Z`,
    );

    const orders = await repairedAttempts('orders.raw');
    const clicks = await repairedAttempts('clicks.raw');
    for (const rollup of ['orders_daily', 'clicks_daily']) {
      const period = await waitFor(
        async () => {
          const p = await periodOf(rollup);
          return p?.state === 'triggered' ? p : undefined;
        },
        { timeout: 120_000, interval: 1_000, what: `${rollup} to trigger` },
      );
      expect(period.generation).toBe(1);
    }
    // Exactly the holes were asked for, once each.
    const hole = (start: string, end: string) => [{ start, end, kind: 'missing', required_version: null }];
    expect(orders.map((r) => r.ranges)).toEqual([hole(at(10), at(10, 30))]);
    expect(clicks.map((r) => r.ranges)).toEqual([hole(at(14), at(14, 15))]);

    // airflow_asset: one event per attempt, each carrying the request as the repair payload names it.
    const events = (await repairEvents()).filter((e) => e.extra?.type === 'repair');
    const keys = orders.map((r) => r.idempotency_key as string).sort();
    expect(events.map((e) => e.extra.idempotency_key).sort()).toEqual(keys);
    for (const e of events) {
      expect(e.extra).toMatchObject({ asset: 'orders.raw', rollup: 'orders_daily', attempt: 1 });
      expect(e.extra.period.key).toBe(day);
      expect(e.partition_key ?? null).toBeNull();
    }
    // airflow: one dag run per attempt, named after its key, the request in conf.
    const runs = await waitFor(
      async () => {
        const all = await backfillRuns();
        return all.length === events.length + clicks.length && all.every((r) => r.state === 'success')
          ? all
          : undefined;
      },
      { timeout: 240_000, interval: 2_000, what: 'every backfill run to succeed' },
    );
    const byConf = runs.filter((r) => r.run_type === 'manual');
    expect(byConf.map((r) => r.dag_run_id).sort()).toEqual(
      clicks.map((r) => `coverage_rollup__${r.idempotency_key}`).sort(),
    );
    for (const r of byConf)
      expect(r.conf).toMatchObject({ type: 'repair', asset: 'clicks.raw', rollup: 'clicks_daily' });
    expect(runs.filter((r) => r.run_type === 'asset_triggered')).toHaveLength(events.length);
    // What the backfill task announced, read back from Airflow: the hole, under the attempt's key.
    for (const run of runs) {
      const announced = await airflow.api(
        'GET',
        `/api/v2/dags/${DAG}/dagRuns/${encodeURIComponent(run.dag_run_id)}/taskInstances/backfill/xcomEntries/return_value`,
      );
      expect(announced.status, JSON.stringify(announced.body)).toBe(200);
      const [request] = announced.body.value as Json[];
      const expected = run.run_type === 'manual' ? clicks[0]! : orders[0]!;
      expect(request).toEqual({ idempotency_key: expected.idempotency_key, ranges: expected.ranges });
    }
  }, 900_000);

  it('a redelivered attempt adds no second asset event and no second dag run', async () => {
    const config = parseConfig(withTestBackend(raw));
    const live = config.rollups.map((r) => r.repair!.target);
    // As the daemon does: the stored (redacted) target, its password taken from the live config.
    // No queue target here, so no queue connection.
    const targets = new RepairTargets(undefined as never, 'bull', live);
    const stored = (id: string) => redactTarget(config.rollups.find((r) => r.id === id)!.repair!.target);
    const [event] = (await repairEvents()).filter((e) => e.extra?.type === 'repair');
    const before = (await repairEvents()).length;
    expect(await targets.deliver(stored('orders_daily'), event!.extra as RepairPayload)).toEqual({
      ok: true,
    });
    expect(await repairEvents()).toHaveLength(before);

    const [run] = (await backfillRuns()).filter((r) => r.run_type === 'manual');
    const runsBefore = (await backfillRuns()).length;
    expect(await targets.deliver(stored('clicks_daily'), run!.conf as RepairPayload)).toEqual({ ok: true });
    expect(await backfillRuns()).toHaveLength(runsBefore);
    await targets.close();
  }, 120_000);
});
