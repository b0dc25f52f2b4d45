/**
 * The `airflow_asset` target against a real Apache Airflow 3.3: the built daemon turns
 * each covered hour into an asset event with the period start as `partition_key`; Airflow's own
 * scheduler runs examples/airflow/coverage_asset_hourly.py once per covered hour
 * (StartOfHourMapper) with the key and our payload visible to the task, and
 * examples/airflow/coverage_asset_daily.py once for the day (RollupMapper, all 24 hours). With
 * `follow_dag_id` the daemon's run is the hourly DAG's run; without, it succeeds once Airflow took
 * the event. A redelivery adds no event. Then the real temporal mappers read our keys across the
 * DST changes of Europe/Berlin as the partitions we meant.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionKey } from '../../src/core/partition-key.js';
import type { TriggerPayload } from '../../src/core/trigger.js';
import { packageRoot } from '../../src/support/paths.js';
import { airflowAssetTarget } from '../../src/targets/airflow-asset.js';
import { TEST_TOKEN } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import type { DaemonProcess } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { type Json, type RealAirflow, startAirflow } from './helpers/airflow.js';
import { daemonApi, startSuiteDaemon } from './helpers/daemon.js';
import { venvBin } from './helpers/system.js';

const ROOT = packageRoot();
const DAY_MS = 86_400_000;
const day = new Date(Date.now() - 2 * DAY_MS).toISOString().slice(0, 10);
const hh = (h: number) => String(h).padStart(2, '0');
const at = (h: number) =>
  new Date(Date.parse(`${day}T00:00:00Z`) + h * 3_600_000).toISOString().replace('.000Z', 'Z');
const HOURLY = 'coverage_rollup.orders_hourly';
const REPORT = 'coverage_rollup.orders_daily_report';
const USER = 'coverage-rollup';

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-asset-'));
let airflow: RealAirflow;
let daemon: DaemonProcess;
let send: (asset: string, start: string, end: string) => Promise<unknown>;

beforeAll(async () => {
  airflow = await startAirflow({
    name: 'asset',
    dagFiles: ['coverage_asset_hourly.py', 'coverage_asset_daily.py'].map((f) =>
      join(ROOT, 'examples', 'airflow', f),
    ),
    dagIds: ['coverage_asset_hourly', 'coverage_asset_daily'],
    // Creating asset events needs the op role with the SimpleAuthManager.
    users: { [USER]: 'op' },
  });
  const db = await createTestDatabase();
  const auth = { username: USER, password: airflow.passwords[USER]! };
  const raw = {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port: 0 },
    api_tokens: [TEST_TOKEN],
    queue: { prefix: createTestPrefix(), batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    shutdown_timeout: 'PT10S',
    scheduler: { run_check_every: 'PT3S' },
    rollups: [
      {
        id: 'orders_hourly',
        upstream: ['orders.raw'],
        every: 'hour',
        begin: day,
        run: { retries: 0, timeout: 'PT15M' },
        target: {
          type: 'airflow_asset',
          url: airflow.url,
          asset: HOURLY,
          follow_dag_id: 'coverage_asset_hourly',
          timeout: 'PT60S',
          ...auth,
        },
      },
      {
        id: 'report',
        upstream: ['report.raw'],
        every: 'hour',
        begin: day,
        run: { retries: 0, timeout: 'PT15M' },
        target: { type: 'airflow_asset', url: airflow.url, asset: REPORT, timeout: 'PT60S', ...auth },
      },
    ],
  };
  const started = await startSuiteDaemon('asset-daemon', dir, raw);
  daemon = started.daemon;
  const producer = started.producer;
  send = (asset, start, end) => producer.add('e', { asset, start, end, version: 'v1' });
}, 600_000);

afterAll(async () => {
  const exit = await daemon?.stop(20_000);
  await airflow?.stop();
  rmSync(dir, { recursive: true, force: true });
  for (const p of airflow?.processes ?? []) expect(p.running, p.name).toBe(false);
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

const ours = (path: string) => daemonApi(daemon, path);
async function assetId(name: string): Promise<number> {
  const answer = await airflow.api('GET', `/api/v2/assets?name_pattern=${encodeURIComponent(name)}`);
  return (answer.body.assets as Json[]).find((a) => a.name === name)!.id as number;
}
/**
 * The asset's events. Airflow 3.3.2 answers this list with a 500 while a dag run created from one
 * of its events has no start_date yet (`DagRunAssetReference.start_date` is not optional in its
 * response model): asked again until the run starts, as the target itself retries.
 */
async function events(name: string): Promise<Json[]> {
  const id = await assetId(name);
  const answer = await waitFor(
    async () => {
      const a = await airflow.api('GET', `/api/v2/assets/events?asset_id=${id}&limit=100`);
      if (a.status === 500) return undefined;
      return a;
    },
    { timeout: 120_000, interval: 1_000, what: `the events of ${name}` },
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.asset_events as Json[];
}
async function dagRuns(dag: string): Promise<Json[]> {
  const answer = await airflow.api('GET', `/api/v2/dags/${dag}/dagRuns?limit=100`);
  return answer.body.dag_runs as Json[];
}
async function returned(dag: string, runId: string, task: string): Promise<Json> {
  const answer = await airflow.api(
    'GET',
    `/api/v2/dags/${dag}/dagRuns/${encodeURIComponent(runId)}/taskInstances/${task}/xcomEntries/return_value`,
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.value as Json;
}

describe('the airflow_asset target against Airflow 3.3', () => {
  it('one asset event per covered hour; Airflow runs the hourly DAG once per hour and the daily DAG once', async () => {
    for (let h = 0; h < 24; h++) await send('orders.raw', at(h), at(h + 1));
    // Our runs follow the hourly DAG's runs: all 24 succeed.
    const listing = await waitFor(
      async () => {
        const answer = await ours(`/v1/rollups/orders_hourly/periods?limit=100`);
        const done = (answer.periods as Json[]).filter((p) => p.run?.state === 'succeeded');
        return done.length === 24 ? answer : undefined;
      },
      { timeout: 480_000, interval: 2_000, what: '24 runs succeeded' },
    );
    expect((listing.periods as Json[]).filter((p) => p.run).length).toBe(24);

    const posted = (await events(HOURLY)).filter((e) => e.extra?.rollup === 'orders_hourly');
    expect(posted).toHaveLength(24);
    expect(posted.map((e) => e.partition_key).sort()).toEqual(
      Array.from({ length: 24 }, (_, h) => `${day}T${hh(h)}:00:00`),
    );
    for (const e of posted) {
      expect(e.extra).toMatchObject({ from_rest_api: true, rollup: 'orders_hourly', generation: 1 });
      expect(e.extra.period.start).toBe(`${e.partition_key}Z`);
    }

    const hourly = await dagRuns('coverage_asset_hourly');
    expect(hourly).toHaveLength(24);
    expect(hourly.every((r) => r.state === 'success')).toBe(true);
    expect(hourly.map((r) => r.partition_key).sort()).toEqual(
      Array.from({ length: 24 }, (_, h) => `${day}T${hh(h)}`),
    );
    const five = hourly.find((r) => r.partition_key === `${day}T05`)!;
    expect(await returned('coverage_asset_hourly', five.dag_run_id, 'build')).toEqual({
      partition_key: `${day}T05`,
      upstream_keys: [`${day}T05:00:00`],
      idempotency_keys: [`orders_hourly@${day.replaceAll('-', '')}T050000Z#1`],
    });

    const daily = await waitFor(
      async () => {
        const runs = await dagRuns('coverage_asset_daily');
        return runs.length > 0 && runs.every((r) => r.state === 'success') ? runs : undefined;
      },
      { timeout: 240_000, interval: 2_000, what: 'the daily DAG to run' },
    );
    expect(daily).toHaveLength(1);
    expect(daily[0]!.partition_key).toBe(day);
    const built = await returned('coverage_asset_daily', daily[0]!.dag_run_id, 'build_day');
    expect(built.partition_key).toBe(day);
    expect(built.hours).toHaveLength(24);
  }, 600_000);

  it('a redelivery finds its event and posts no second one', async () => {
    const [event] = (await events(HOURLY)).filter((e) => e.partition_key === `${day}T07:00:00`);
    const { from_rest_api: _, ...payload } = event!.extra as Json;
    const target = airflowAssetTarget({
      url: airflow.url,
      asset: HOURLY,
      username: USER,
      password: airflow.passwords[USER]!,
      timeout: 30_000,
      partition_key_format: '%Y-%m-%dT%H:%M:%S',
      partition_timezone: 'UTC',
    });
    expect(await target.deliver(payload as unknown as TriggerPayload)).toEqual({ ok: true });
    expect((await events(HOURLY)).filter((e) => e.extra?.rollup === 'orders_hourly')).toHaveLength(24);
    // A new decision (another run id) is posted.
    const fresh = {
      ...payload,
      run_id: `${payload.idempotency_key}~a9`,
      attempt: 9,
    } as unknown as TriggerPayload;
    expect(await target.deliver(fresh)).toEqual({ ok: true });
    expect(await target.deliver(fresh)).toEqual({ ok: true });
    const again = (await events(HOURLY)).filter((e) => e.extra?.run_id === fresh.run_id);
    expect(again).toHaveLength(1);
  });

  it('without follow_dag_id the run succeeds once Airflow took the event', async () => {
    await send('report.raw', at(3), at(4));
    const answer = await waitFor(
      async () => {
        const a = await ours(`/v1/rollups/report/periods/${day}T03`);
        return a.period?.run?.state === 'succeeded' ? a : undefined;
      },
      { timeout: 120_000, interval: 500, what: 'the report run to succeed' },
    );
    expect(answer.period.run).toMatchObject({ attempt: 1, error: null });
    const posted = (await events(REPORT)).filter((e) => e.extra?.rollup === 'report');
    expect(posted.map((e) => e.partition_key)).toEqual([`${day}T03:00:00`]);
  });

  it("Airflow's own temporal mappers read our keys as the partitions we meant, across Berlin's DST changes", () => {
    // Berlin days and hours around 2026-03-29 (spring forward) and 2026-10-25 (fall back), keyed by
    // us as wall-clock time in Europe/Berlin, read by the mappers of the installed Airflow.
    const zone = 'Europe/Berlin';
    const dayStarts = [
      '2026-03-28T23:00:00Z',
      '2026-03-29T22:00:00Z',
      '2026-10-24T22:00:00Z',
      '2026-10-25T23:00:00Z',
    ];
    const hourStarts = [
      '2026-03-29T00:00:00Z',
      '2026-03-29T01:00:00Z',
      '2026-10-25T00:00:00Z',
      '2026-10-25T01:00:00Z',
      '2026-10-25T02:00:00Z',
    ];
    const keys = {
      days: dayStarts.map((s) => partitionKey(s, zone)),
      hours: hourStarts.map((s) => partitionKey(s, zone)),
    };
    const script = `
import json, sys
from airflow.partition_mappers.temporal import StartOfDayMapper, StartOfHourMapper, StartOfWeekMapper
keys = json.loads(sys.argv[1])
day, hour, week = StartOfDayMapper(timezone="${zone}"), StartOfHourMapper(timezone="${zone}"), StartOfWeekMapper(timezone="${zone}")
print(json.dumps({
  "days": [day.to_downstream(k) for k in keys["days"]],
  "day_dates": [day.to_partition_date(day.to_downstream(k)).isoformat() for k in keys["days"]],
  "weeks": [week.to_downstream(k) for k in keys["days"]],
  "hours": [hour.to_downstream(k) for k in keys["hours"]],
}))
`;
    const run = spawnSync(venvBin('airflow', 'python'), ['-c', script, JSON.stringify(keys)], {
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).toBe(0);
    const mapped = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, string[]>;
    expect(keys.days).toEqual([
      '2026-03-29T00:00:00',
      '2026-03-30T00:00:00',
      '2026-10-25T00:00:00',
      '2026-10-26T00:00:00',
    ]);
    expect(mapped.days).toEqual(['2026-03-29', '2026-03-30', '2026-10-25', '2026-10-26']);
    // The partition dates Airflow stores are the Berlin midnights we keyed (the instants we sent).
    expect(mapped.day_dates!.map((d) => new Date(d).toISOString().replace('.000Z', 'Z'))).toEqual(dayStarts);
    expect(mapped.weeks).toEqual([
      '2026-03-23 (W13)',
      '2026-03-30 (W14)',
      '2026-10-19 (W43)',
      '2026-10-26 (W44)',
    ]);
    // Hours: 01:00 CET, then 03:00 CEST (02:00 does not exist); in October 02:00 happens twice
    // (CEST, then CET): two of our hourly periods share the wall-clock key 02:00:00, and
    // StartOfHourMapper maps both to one partition. Hourly rollups in a zone with DST should
    // key in UTC (partition_timezone: UTC) when every hour must be its own partition.
    expect(keys.hours).toEqual([
      '2026-03-29T01:00:00',
      '2026-03-29T03:00:00',
      '2026-10-25T02:00:00',
      '2026-10-25T02:00:00',
      '2026-10-25T03:00:00',
    ]);
    expect(mapped.hours).toEqual([
      '2026-03-29T01',
      '2026-03-29T03',
      '2026-10-25T02',
      '2026-10-25T02',
      '2026-10-25T03',
    ]);
  });
});
