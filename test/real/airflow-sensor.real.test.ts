/**
 * airflow-provider-coverage-rollup in a real Airflow 3.3, installed from its built
 * wheel by tools/real/run.mjs, with the DAGs of examples/airflow/:
 * - Airflow lists the provider and its `coverage_rollup` connection type, and tests a connection
 *   of that type through the provider's hook;
 * - `coverage_sensor`: the CoverageSensor defers, its trigger waits in the real triggerer on the
 *   built daemon's waiting coverage call, logging the range still missing, and ends the task as soon
 *   as the covering commit lands (the figure: commit to task end);
 * - `coverage_sensor_reschedule`: the same sensor with deferrable=False pokes in reschedule mode;
 * - `coverage_sensor_resume` (test/real/airflow-dags/): deferred with end_from_trigger=False, the
 *   task resumes on a worker and returns its XCom;
 * - `coverage_announce`: the CoverageAnnounceOperator announces its data interval, read back over
 *   the daemon's coverage answer.
 * Task logs are read through Airflow's API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/support/paths.js';
import { TEST_TOKEN } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import type { DaemonProcess } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { type Json, type RealAirflow, startAirflow } from './helpers/airflow.js';
import { daemonApi, startSuiteDaemon } from './helpers/daemon.js';
import { report } from './helpers/producers.js';

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - 2 * DAY_MS).toISOString().slice(0, 10);
const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00Z`;
const POKE_SECONDS = 2;

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-sensor-'));
let airflow: RealAirflow;
let daemon: DaemonProcess;
let send: (asset: string, start: string, end: string) => Promise<unknown>;

beforeAll(async () => {
  const db = await createTestDatabase();
  const port = await freePort();
  const raw = {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port },
    api_tokens: [TEST_TOKEN],
    queue: { prefix: createTestPrefix(), batch_wait: 'PT0.002S' },
    shutdown_timeout: 'PT10S',
  };
  const started = await startSuiteDaemon('sensor-daemon', dir, raw);
  daemon = started.daemon;
  const producer = started.producer;
  send = (asset, start, end) => producer.add('e', { asset, start, end, version: 'v1' });
  const examples = join(packageRoot(), 'examples', 'airflow');
  airflow = await startAirflow({
    name: 'sensor',
    dagFiles: [
      join(examples, 'coverage_sensor.py'),
      join(examples, 'coverage_announce.py'),
      join(packageRoot(), 'test', 'real', 'airflow-dags', 'coverage_sensor_resume.py'),
    ],
    dagIds: ['coverage_sensor', 'coverage_sensor_reschedule', 'coverage_announce', 'coverage_sensor_resume'],
    env: {
      AIRFLOW_CONN_COVERAGE_ROLLUP_DEFAULT: JSON.stringify({
        conn_type: 'coverage_rollup',
        host: `http://127.0.0.1:${port}`,
        password: TEST_TOKEN,
      }),
      AIRFLOW__CORE__TEST_CONNECTION: 'Enabled',
      COVERAGE_POKE_SECONDS: String(POKE_SECONDS),
    },
  });
}, 600_000);

afterAll(async () => {
  await airflow?.stop(); // first: its scheduled runs keep asking the daemon
  const exit = await daemon?.stop(20_000);
  rmSync(dir, { recursive: true, force: true });
  for (const p of airflow?.processes ?? []) expect(p.running, p.name).toBe(false);
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

async function taskLog(dag: string, run: string, task: string): Promise<string> {
  const answer = await airflow.api('GET', `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/${task}/logs/1`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body.content as Array<Json | string>)
    .map((line) => (typeof line === 'string' ? line : String(line.event ?? '')))
    .join('\n');
}

async function startRun(dag: string, run: string, hour: number, conf: Json): Promise<void> {
  const created = await airflow.api('POST', `/api/v2/dags/${dag}/dagRuns`, {
    dag_run_id: run,
    logical_date: at(hour),
    data_interval_start: at(hour),
    data_interval_end: at(hour + 1),
    conf,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
}

async function runState(dag: string, run: string): Promise<string> {
  return (await airflow.api('GET', `/api/v2/dags/${dag}/dagRuns/${run}`)).body.state as string;
}

/** Milliseconds from the commit that covered [start, end) of `asset` to the end of the sensor task. */
async function commitToDone(asset: string, start: string, end: string, ti: string): Promise<number> {
  const q = new URLSearchParams({ start, end });
  const coverage = await daemonApi(daemon, `/v1/assets/${asset}/coverage?${q}`);
  expect(coverage.covered).toBe(true);
  const done = (await airflow.api('GET', ti)).body;
  expect(done.state).toBe('success');
  return Date.parse(done.end_date as string) - Date.parse(coverage.last_event_at as string);
}

describe('airflow-provider-coverage-rollup in Airflow 3.3', () => {
  it('is listed with its connection type, whose hook tests a connection', async () => {
    const providers = await airflow.api('GET', '/api/v2/providers?limit=100');
    const ours = (providers.body.providers as Json[]).find(
      (p) => p.package_name === 'airflow-provider-coverage-rollup',
    );
    expect(ours, JSON.stringify(providers.body)).toMatchObject({ version: '0.1.0' });
    const tested = await airflow.api('POST', '/api/v2/connections/test', {
      connection_id: 'probe',
      conn_type: 'coverage_rollup',
      host: daemon.url,
      password: TEST_TOKEN,
    });
    expect(tested.body, JSON.stringify(tested.body)).toMatchObject({ status: true });
    const refused = await airflow.api('POST', '/api/v2/connections/test', {
      connection_id: 'probe',
      conn_type: 'coverage_rollup',
      host: 'http://127.0.0.1:9',
    });
    expect(refused.body.status).toBe(false);
  });

  it('defers, logs the missing range from the triggerer, and ends within moments of the covering commit', async () => {
    const [dag, run, asset] = ['coverage_sensor', 'deferred_run', 'sensor.deferred'];
    await send(asset, at(5), at(5, 30));
    await startRun(dag, run, 5, { asset });
    const ti = `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/covered`;
    // Deferred: no worker slot held; the trigger waits in the triggerer.
    await waitFor(async () => (await airflow.api('GET', ti)).body.state === 'deferred', {
      timeout: 240_000,
      interval: 500,
      what: 'the sensor to defer',
    });
    const missing = `${asset} [${at(5)}, ${at(6)}) not covered: ratio 0.5, missing 1 range(s): [${at(5, 30)}, ${at(6)})`;
    const waiting = await waitFor(
      async () => {
        const log = await taskLog(dag, run, 'covered');
        // Once from the task's first look, once from the trigger as its wait begins.
        return log.split(missing).length > 2 ? log : undefined;
      },
      { timeout: 120_000, interval: 1_000, what: 'the missing range logged by the task and the trigger' },
    );
    expect(waiting).toContain(missing);
    expect(await runState(dag, run)).toBe('running');

    await send(asset, at(5, 30), at(6));
    await waitFor(async () => (await runState(dag, run)) === 'success', {
      timeout: 240_000,
      interval: 500,
      what: 'the deferred sensor DAG to succeed',
    });
    const ms = await commitToDone(asset, at(5), at(6), ti);
    // Ended by the trigger, not by a poke: well within a second on a quiet machine (the figure),
    // bounded here for a loaded one.
    expect(ms).toBeLessThan(10_000);
    expect(await taskLog(dag, run, 'build_report')).toContain(
      `building the report of [${day} 05:00:00+00:00, ${day} 06:00:00+00:00) over fully covered data`,
    );
    expect(await taskLog(dag, run, 'covered')).toContain(`${asset} [${at(5)}, ${at(6)}) covered (ratio 1)`);
    report(`deferred CoverageSensor: covering commit to task end ${ms} ms`);
  });

  it('with deferrable=False, waits in reschedule mode, logging the missing range, and succeeds once covered', async () => {
    const [dag, run, asset] = ['coverage_sensor_reschedule', 'reschedule_run', 'sensor.reschedule'];
    await send(asset, at(5), at(5, 30));
    await startRun(dag, run, 5, { asset });
    const ti = `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/covered`;
    // Between pokes the task gives its slot back: up_for_reschedule.
    await waitFor(async () => (await airflow.api('GET', ti)).body.state === 'up_for_reschedule', {
      timeout: 240_000,
      interval: 500,
      what: 'the sensor to reschedule',
    });
    const missing = `${asset} [${at(5)}, ${at(6)}) not covered: ratio 0.5, missing 1 range(s): [${at(5, 30)}, ${at(6)})`;
    await waitFor(async () => (await taskLog(dag, run, 'covered')).includes(missing), {
      timeout: 120_000,
      interval: 1_000,
      what: 'the missing range in the task log',
    });
    expect(await runState(dag, run)).toBe('running');

    await send(asset, at(5, 30), at(6));
    await waitFor(async () => (await runState(dag, run)) === 'success', {
      timeout: 240_000,
      interval: 1_000,
      what: 'the rescheduling sensor DAG to succeed',
    });
    const ms = await commitToDone(asset, at(5), at(6), ti);
    const sensed = await airflow.api('GET', `${ti}/xcomEntries/return_value`);
    expect(sensed.body.value).toEqual({ asset, start: at(5), end: at(6), ratio: 1 });
    expect(await taskLog(dag, run, 'covered')).toContain(missing);
    report(
      `CoverageSensor in reschedule mode (poke every ${POKE_SECONDS} s): covering commit to task end ${ms} ms`,
    );
  });

  it('with end_from_trigger=False, resumes on a worker when covered and returns its XCom', async () => {
    const [dag, run, asset] = ['coverage_sensor_resume', 'resume_run', 'sensor.resume'];
    await send(asset, at(5), at(5, 30));
    await startRun(dag, run, 5, { asset });
    const ti = `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/covered`;
    await waitFor(async () => (await airflow.api('GET', ti)).body.state === 'deferred', {
      timeout: 240_000,
      interval: 500,
      what: 'the sensor to defer',
    });
    await send(asset, at(5, 30), at(6));
    await waitFor(async () => (await runState(dag, run)) === 'success', {
      timeout: 240_000,
      interval: 500,
      what: 'the resumed sensor DAG to succeed',
    });
    const ms = await commitToDone(asset, at(5), at(6), ti);
    const sensed = await airflow.api('GET', `${ti}/xcomEntries/return_value`);
    expect(sensed.body.value).toEqual({ asset, start: at(5), end: at(6), ratio: 1 });
    expect(await taskLog(dag, run, 'read')).toContain(`the sensor returned ratio 1.0 for ${asset}`);
    report(`deferred CoverageSensor resumed on a worker: covering commit to task end ${ms} ms`);
  });

  it('announces the data interval a task wrote', async () => {
    const [dag, run, asset] = ['coverage_announce', 'announce_run', 'announced.hourly'];
    await startRun(dag, run, 7, { asset, version: 'v7' });
    await waitFor(async () => (await runState(dag, run)) === 'success', {
      timeout: 240_000,
      interval: 1_000,
      what: 'the announcing DAG to succeed',
    });
    const q = new URLSearchParams({ start: at(7), end: at(8) });
    const coverage = await waitFor(
      async () => {
        const answer = await daemonApi(daemon, `/v1/assets/${asset}/coverage?${q}`);
        return answer.covered ? answer : undefined;
      },
      { timeout: 60_000, interval: 200, what: 'the announced hour covered' },
    );
    expect(coverage.batches).toEqual([{ start: at(7), end: at(8), state: 'complete', version: 'v7' }]);
    const announced = await airflow.api(
      'GET',
      `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/announce/xcomEntries/return_value`,
    );
    expect(announced.body.value).toMatchObject({ accepted: 1 });
    expect(await taskLog(dag, run, 'announce')).toContain(`announced ${asset} [`);
  });
});
