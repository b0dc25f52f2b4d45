/**
 * examples/airflow/coverage_sensor.py in a real Airflow 3.3: the sensor, in reschedule
 * mode, waits on the built daemon's `GET /v1/assets/{asset}/coverage` while half of its data
 * interval is covered, logging the range still missing, and succeeds once the rest arrives. The
 * task log is read through Airflow's API.
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
import { startSuiteDaemon } from './helpers/daemon.js';

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - 2 * DAY_MS).toISOString().slice(0, 10);
const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00Z`;
const DAG = 'coverage_sensor';
const RUN = 'sensor_test_run';

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-sensor-'));
let airflow: RealAirflow;
let daemon: DaemonProcess;
let send: (start: string, end: string) => Promise<unknown>;

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
  send = (start, end) => producer.add('e', { asset: 'sensor.in', start, end, version: 'v1' });
  airflow = await startAirflow({
    name: 'sensor',
    dagFiles: [join(packageRoot(), 'examples', 'airflow', 'coverage_sensor.py')],
    dagIds: [DAG],
    env: { COVERAGE_ROLLUP_URL: `http://127.0.0.1:${port}`, COVERAGE_POKE_SECONDS: '2' },
  });
}, 600_000);

afterAll(async () => {
  await airflow?.stop(); // first: its scheduled run keeps asking the daemon
  const exit = await daemon?.stop(20_000);
  rmSync(dir, { recursive: true, force: true });
  for (const p of airflow?.processes ?? []) expect(p.running, p.name).toBe(false);
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

async function taskLog(task: string): Promise<string> {
  const answer = await airflow.api('GET', `/api/v2/dags/${DAG}/dagRuns/${RUN}/taskInstances/${task}/logs/1`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body.content as Array<Json | string>)
    .map((line) => (typeof line === 'string' ? line : String(line.event ?? '')))
    .join('\n');
}

describe('the coverage sensor DAG in Airflow 3.3', () => {
  it('waits in reschedule mode, logging the missing range, and succeeds once the range is covered', async () => {
    await send(at(5), at(5, 30));
    const created = await airflow.api('POST', `/api/v2/dags/${DAG}/dagRuns`, {
      dag_run_id: RUN,
      logical_date: at(5),
      data_interval_start: at(5),
      data_interval_end: at(6),
      conf: { asset: 'sensor.in' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const ti = `/api/v2/dags/${DAG}/dagRuns/${RUN}/taskInstances/covered`;
    // Between pokes the task gives its slot back: up_for_reschedule.
    await waitFor(async () => (await airflow.api('GET', ti)).body.state === 'up_for_reschedule', {
      timeout: 240_000,
      interval: 500,
      what: 'the sensor to reschedule',
    });
    const missing = `sensor.in [${at(5)}, ${at(6)}) not covered: ratio 0.5, missing 1 range(s): [${at(5, 30)}, ${at(6)})`;
    const waiting = await waitFor(
      async () => {
        const log = await taskLog('covered');
        return log.includes(missing) ? log : undefined;
      },
      { timeout: 120_000, interval: 1_000, what: 'the missing range in the task log' },
    );
    expect(waiting).toContain(missing);
    const run = await airflow.api('GET', `/api/v2/dags/${DAG}/dagRuns/${RUN}`);
    expect(run.body.state).toBe('running');

    await send(at(5, 30), at(6));
    await waitFor(
      async () => (await airflow.api('GET', `/api/v2/dags/${DAG}/dagRuns/${RUN}`)).body.state === 'success',
      { timeout: 240_000, interval: 1_000, what: 'the sensor DAG to succeed' },
    );
    const sensed = await airflow.api('GET', `${ti}/xcomEntries/return_value`);
    expect(sensed.body.value).toBe(1);
    expect(await taskLog('build_report')).toContain(
      'building the hourly report over fully covered data (ratio 1)',
    );
    // The poke that waited is in the same try's log as the one that succeeded.
    const done = await taskLog('covered');
    expect(done).toContain(missing);
  });
});
