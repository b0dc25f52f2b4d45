/**
 * Runs on Airflow and webhook targets: dag run states polled from Airflow's batch list
 * (queued, running, success, failed, and back to queued when cleared: the run reopens), a retry as
 * a new dag run of its own; a webhook run reported through the callback `POST /v1/runs`, including
 * a report for a superseded generation; and the manual retry from the CLI.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { dagRunId } from '../../src/targets/airflow.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are read as untyped JSON
type Json = Record<string, any>;

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const compact = day.replaceAll('-', '');
const hourOf = (h: number) => `${day}T${String(h).padStart(2, '0')}`;
const span = (h: number) => ({ start: `${hourOf(h)}:00:00Z`, end: `${hourOf(h + 1)}:00:00Z` });

const airflow = await startFakeAirflow();
const sink = await startWebhookSink();
afterAll(async () => {
  await airflow.close();
  await sink.close();
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const fast = { retries: 1, backoff: 'PT0.2S', timeout: 'PT60S' };
const config = testConfig(db, prefix, {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    {
      id: 'af',
      upstream: ['af.in'],
      every: 'hour',
      begin: day,
      run: fast,
      target: { type: 'airflow', url: airflow.url, dag_id: 'af_dag', token: airflow.mint('svc', 86_400) },
    },
    {
      id: 'hook',
      upstream: ['hook.in'],
      every: 'hour',
      begin: day,
      run: fast,
      target: { type: 'webhook', url: sink.url },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const cover = (id: string, h: number) => producer.add('e', { asset: `${id}.in`, ...span(h), version: 'v1' });

const period = async (id: string, h: number): Promise<Json> =>
  (await daemon.http.inject({ url: `/v1/rollups/${id}/periods/${hourOf(h)}` })).json();
const untilRun = (id: string, h: number, ok: (run: Json) => boolean, what: string) =>
  waitFor(
    async () => {
      const answer = await period(id, h);
      return answer.period?.run && ok(answer.period.run) ? answer : undefined;
    },
    { what, timeout: 30_000 },
  );
const report = (body: Record<string, unknown>) =>
  daemon.http.inject({
    method: 'POST',
    url: '/v1/runs',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

describe('airflow target runs', () => {
  it('follows a dag run through queued, running and success, reopens it when cleared, and retries a failure as a new dag run', async () => {
    await cover('af', 1);
    const key = `af@${compact}T010000Z#1`;
    const first = dagRunId(key);
    await waitFor(() => airflow.runs.get('af_dag')?.find((r) => r.dag_run_id === first), { what: 'dag run' });
    // Airflow says queued: the run is running as far as anyone downstream is concerned.
    await untilRun('af', 1, (r) => r.state === 'running', 'running while queued');
    airflow.setState('af_dag', first, 'running');
    airflow.setState('af_dag', first, 'success');
    const done = await untilRun('af', 1, (r) => r.state === 'succeeded', 'succeeded');
    expect(done.period.run.finished_at).not.toBeNull();

    // Cleared in Airflow: back to queued, so the run is open again.
    airflow.setState('af_dag', first, 'queued');
    const reopened = await untilRun('af', 1, (r) => r.state === 'running', 'reopened');
    expect(reopened.period.run).toMatchObject({ attempt: 1, finished_at: null, error: null });

    // It fails this time: retried after the backoff as attempt 2, a dag run of its own.
    airflow.setState('af_dag', first, 'failed');
    const second = dagRunId(key, 2);
    expect(second).toBe(`${first}_a2`);
    await waitFor(() => airflow.runs.get('af_dag')?.find((r) => r.dag_run_id === second), {
      what: 'retry dag run',
    });
    airflow.setState('af_dag', second, 'success');
    const retried = await untilRun(
      'af',
      1,
      (r) => r.state === 'succeeded' && r.attempt === 2,
      'retry succeeded',
    );
    expect(retried.runs.map((r: Json) => [r.attempt, r.state])).toEqual([
      [2, 'succeeded'],
      [1, 'failed'],
    ]);
    const runs = airflow.runs.get('af_dag')!.filter((r) => r.dag_run_id.startsWith(first));
    expect(runs).toHaveLength(2); // one dag run per attempt, whatever the number of polls
    expect(runs[1]!.conf).toMatchObject({ attempt: 2, run_id: `${key}~a2`, idempotency_key: key });
    // Every poll was a batch list, never one request per run.
    const lists = airflow.to('/api/v2/dags/~/dagRuns/list');
    expect(lists.length).toBeGreaterThan(0);
    expect(lists.every((r) => r.status === 200)).toBe(true);
    // (one GET of the DAG itself, asked once whether it is partitioned)
    expect(airflow.requests.filter((r) => r.method === 'GET' && r.path.includes('/dagRuns'))).toHaveLength(0);
  });
});

describe('webhook target runs and the callback', () => {
  it('takes running, succeeded (with its version) and failed from POST /v1/runs; repeats change nothing', async () => {
    await cover('hook', 2);
    const key = `hook@${compact}T020000Z#1`;
    await untilRun('hook', 2, (r) => r.state === 'started', 'started (delivered)');
    expect(sink.calls.find((c) => c.key === key)?.body).toMatchObject({ attempt: 1, run_id: key });

    const running = await report({ idempotency_key: key, attempt: 1, state: 'running' });
    expect(running.json()).toMatchObject({ effect: 'applied', current: true, run: { state: 'running' } });
    const ok = { idempotency_key: key, attempt: 1, state: 'succeeded', version: 'v9' };
    expect((await report(ok)).json()).toMatchObject({ effect: 'applied', run: { state: 'succeeded' } });
    expect((await report(ok)).json()).toMatchObject({ effect: 'unchanged' });
    // A finished run does not move: a late failure is recorded and refused.
    const late = await report({ idempotency_key: key, attempt: 1, state: 'failed', error: 'late' });
    expect(late.json()).toMatchObject({ effect: 'refused', run: { state: 'succeeded', error: null } });
    const detail = await period('hook', 2);
    expect(detail.runs[0]).toMatchObject({ state: 'succeeded', version: 'v9' });
    expect(detail.runs[0].reports.map((r: Json) => [r.source, r.state, r.effect])).toEqual([
      ['scheduler', 'started', 'applied'],
      ['callback', 'running', 'applied'],
      ['callback', 'succeeded', 'applied'],
      ['callback', 'succeeded', 'unchanged'],
      ['callback', 'failed', 'refused'],
    ]);
  });

  it('refuses bad reports with clear 400s, unknown runs with 404, and writes without a token', async () => {
    const bad = await report({ idempotency_key: 'x', attempt: 0, state: 'running' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_attempt' });
    const state = await report({ idempotency_key: 'x', attempt: 1, state: 'done' });
    expect(state.json()).toMatchObject({
      code: 'invalid_state',
      message: expect.stringContaining('running'),
    });
    const extra = await report({ idempotency_key: 'x', attempt: 1, state: 'running', status: 'ok' });
    expect(extra.statusCode).toBe(400);
    const unknown = await report({ idempotency_key: 'nope@1#1', attempt: 1, state: 'running' });
    expect(unknown.statusCode).toBe(404);
    const anonymous = await daemon.http.inject({ method: 'POST', url: '/v1/runs', payload: {} });
    expect(anonymous.statusCode).toBe(401);
  });

  it('a failure reported by callback is retried as attempt 2 with its own Idempotency-Key; a report for a superseded generation changes nothing else', async () => {
    await cover('hook', 3);
    const key = `hook@${compact}T030000Z#1`;
    await untilRun('hook', 3, (r) => r.state === 'started', 'started');
    const failed = await report({
      idempotency_key: key,
      attempt: 1,
      state: 'failed',
      error: 'out of memory',
    });
    expect(failed.json().run).toMatchObject({
      state: 'failed',
      error: 'out of memory',
      next_retry_at: expect.any(String),
    });
    await waitFor(() => sink.calls.find((c) => c.key === `${key}~a2`), { what: 'attempt 2 delivered' });
    expect(sink.calls.find((c) => c.key === `${key}~a2`)!.body).toMatchObject({
      attempt: 2,
      idempotency_key: key,
    });
    await untilRun('hook', 3, (r) => r.attempt === 2 && r.state === 'started', 'attempt 2 started');

    // A manual trigger makes generation 2; attempt 2 of generation 1 is now superseded.
    const trigger = await daemon.http.inject({
      method: 'POST',
      url: `/v1/rollups/hook/periods/${encodeURIComponent(span(3).start)}/trigger`,
      headers: { authorization: `Bearer ${TEST_TOKEN}` },
    });
    expect(trigger.statusCode).toBe(202);
    await untilRun('hook', 3, (r) => r.generation === 2, 'generation 2');
    const stale = await report({ idempotency_key: key, attempt: 2, state: 'failed', error: 'too late' });
    expect(stale.json()).toMatchObject({ effect: 'stale', current: false });
    const after = await period('hook', 3);
    expect(after.period.run).toMatchObject({ generation: 2, attempt: 1 });
    expect(after.period.run.state).not.toBe('failed');
    // The old attempt failed on its own row, and schedules no retry.
    const old = after.runs.find((r: Json) => r.generation === 1 && r.attempt === 2);
    expect(old).toMatchObject({ state: 'failed', next_retry_at: null });
    expect(after.runs.filter((r: Json) => r.generation === 1)).toHaveLength(2);
  });
});

describe('coverage-rollup retry', () => {
  const dir = mkdtempSync(join(tmpdir(), 'crretry-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'config.json');
  writeFileSync(
    path,
    JSON.stringify({
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
      rollups: [
        {
          id: 'hook',
          upstream: ['hook.in'],
          every: 'hour',
          begin: day,
          target: { type: 'webhook', url: sink.url },
        },
      ],
    }),
  );
  const cli = (args: string[]) => {
    const env = { ...process.env };
    for (const name of CONFIG_ENV_VARS) delete env[name];
    return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [DAEMON_ENTRY, ...args, '--config', path],
        { env, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
      );
    });
  };

  it('retries one period by key, and every failed period of a window, each as a new attempt', async () => {
    for (const h of [5, 6, 7]) await cover('hook', h);
    for (const h of [5, 6, 7]) await untilRun('hook', h, (r) => r.state === 'started', `hour ${h} started`);
    // Two of them fail for good (attempt 2 fails too), one succeeds.
    for (const h of [5, 6]) {
      const key = `hook@${compact}T0${h}0000Z#1`;
      await report({ idempotency_key: key, attempt: 1, state: 'failed', error: 'boom' });
      await untilRun('hook', h, (r) => r.attempt === 2 && r.state === 'started', `hour ${h} attempt 2`);
      await report({ idempotency_key: key, attempt: 2, state: 'failed', error: 'boom again' });
      await untilRun(
        'hook',
        h,
        (r) => r.state === 'failed' && r.next_retry_at === null,
        `hour ${h} failed for good`,
      );
    }
    await report({ idempotency_key: `hook@${compact}T070000Z#1`, attempt: 1, state: 'succeeded' });

    const one = await cli(['retry', 'hook', '--period', hourOf(5)]);
    expect(one).toMatchObject({ code: 0, stdout: expect.stringContaining(`${hourOf(5)}: attempt 3`) });
    await untilRun('hook', 5, (r) => r.attempt === 3, 'attempt 3');
    const refused = await cli(['retry', 'hook', '--period', hourOf(7)]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('succeeded');

    const window = await cli([
      'retry',
      'hook',
      '--failed',
      '--start',
      span(0).start,
      '--end',
      span(23).start,
      '--json',
    ]);
    expect(window.code).toBe(0);
    expect(JSON.parse(window.stdout).retried).toEqual([
      { period: hourOf(6), run_id: `hook@${compact}T060000Z#1~a3`, attempt: 3 },
    ]);
    await waitFor(() => sink.calls.find((c) => c.key === `hook@${compact}T060000Z#1~a3`), {
      what: 'delivered',
    });
    const usage = await cli(['retry', 'hook']);
    expect(usage.code).toBe(2);
    const help = await cli(['retry', '--help']);
    expect(help.stdout).toContain('--failed');
  });
});
