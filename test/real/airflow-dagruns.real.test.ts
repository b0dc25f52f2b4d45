/**
 * The `airflow` target against a real Apache Airflow 3.3: the built daemon in a process
 * of its own triggers dag runs of examples/airflow/coverage_dagrun.py and of a DAG whose first
 * attempt fails on purpose, follows them to their outcome by Airflow's batch list, reopens a run
 * cleared in Airflow, keeps delivering after its JWT expired (a short `jwt_expiration_time`), and
 * counts a redelivery's 409 as delivered. Every outcome is read back from Airflow's API and from
 * the daemon's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TriggerPayload } from '../../src/core/trigger.js';
import { packageRoot } from '../../src/support/paths.js';
import { airflowTarget, dagRunId, triggerBody } from '../../src/targets/airflow.js';
import { TEST_TOKEN } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import type { DaemonProcess } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { type Json, type RealAirflow, startAirflow } from './helpers/airflow.js';
import { daemonApi, startSuiteDaemon } from './helpers/daemon.js';

const ROOT = packageRoot();
/** `[api_auth] jwt_expiration_time` of this Airflow, seconds: the suite outlives several tokens. */
const JWT_LIFETIME = 30;
/** Airflow's `[api_auth] jwt_leeway` default, seconds: a token is accepted this long past `exp`. */
const LEEWAY = 10;
/** A token request in the api-server's access log. */
const TOKEN_REQUEST = /method=POST path=\/auth\/token /g;
const DAY_MS = 86_400_000;
const day = new Date(Date.now() - 2 * DAY_MS).toISOString().slice(0, 10);
const compact = day.replaceAll('-', '');
const hourOf = (h: number) => `${day}T${String(h).padStart(2, '0')}`;
const startOf = (h: number) => `${hourOf(h)}:00:00Z`;
const span = (h: number) => ({ start: startOf(h), end: `${hourOf(h + 1)}:00:00Z` });
const keyOf = (rollup: string, h: number, generation = 1) =>
  `${rollup}@${compact}T${String(h).padStart(2, '0')}0000Z#${generation}`;

const gates = mkdtempSync(join(tmpdir(), 'coverage-rollup-gates-'));
let airflow: RealAirflow;
let daemon: DaemonProcess;
let send: (asset: string, h: number, version: string) => Promise<unknown>;
let staticTokenAt = 0;

beforeAll(async () => {
  airflow = await startAirflow({
    name: 'dagruns',
    dagFiles: [
      join(ROOT, 'examples', 'airflow', 'coverage_dagrun.py'),
      join(ROOT, 'test', 'real', 'airflow-dags', 'coverage_flaky.py'),
      join(ROOT, 'test', 'real', 'airflow-dags', 'coverage_partitioned.py'),
    ],
    dagIds: ['coverage_dagrun', 'coverage_flaky', 'coverage_partitioned'],
    jwtExpirationTime: JWT_LIFETIME,
    // The daemon's user has the role docs/targets/airflow.md asks for, no more.
    users: { 'coverage-rollup': 'user' },
    env: { CR_GATE_DIR: gates },
  });
  const db = await createTestDatabase();
  const prefix = createTestPrefix();
  const auth = { username: 'coverage-rollup', password: airflow.passwords['coverage-rollup']! };
  const run = { retries: 1, backoff: 'PT1S', timeout: 'PT10M' };
  const staticToken = await airflow.token();
  staticTokenAt = Date.now();
  const raw = {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port: 0 },
    api_tokens: [TEST_TOKEN],
    queue: { prefix, batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    shutdown_timeout: 'PT10S',
    scheduler: { run_check_every: 'PT0.5S' },
    rollups: [
      {
        id: 'af_runs',
        upstream: ['af.in'],
        every: 'hour',
        begin: day,
        rerun: 'on_update',
        run,
        target: { type: 'airflow', url: airflow.url, dag_id: 'coverage_dagrun', ...auth },
      },
      {
        id: 'af_retry',
        upstream: ['retry.in'],
        every: 'hour',
        begin: day,
        run,
        target: { type: 'airflow', url: airflow.url, dag_id: 'coverage_flaky', ...auth },
      },
      {
        id: 'af_part',
        upstream: ['part.in'],
        every: 'hour',
        begin: day,
        run,
        target: { type: 'airflow', url: airflow.url, dag_id: 'coverage_partitioned', ...auth },
      },
      {
        id: 'af_static',
        upstream: ['static.in'],
        every: 'hour',
        begin: day,
        run,
        target: { type: 'airflow', url: airflow.url, dag_id: 'coverage_flaky', token: staticToken },
      },
    ],
  };
  // One daemon for the whole file (processHarness ends its processes after every test).
  const started = await startSuiteDaemon('dagruns-daemon', gates, raw);
  daemon = started.daemon;
  const producer = started.producer;
  send = (asset, h, version) => producer.add('e', { asset, ...span(h), version });
}, 600_000);

afterAll(async () => {
  const exit = await daemon?.stop(20_000);
  await airflow?.stop();
  rmSync(gates, { recursive: true, force: true });
  // No process of Airflow's is left: every group is gone.
  for (const p of airflow?.processes ?? []) expect(p.running, p.name).toBe(false);
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

const ours = (path: string) => daemonApi(daemon, path);
const period = (rollup: string, h: number) => ours(`/v1/rollups/${rollup}/periods/${hourOf(h)}`);
function untilRun(rollup: string, h: number, ok: (run: Json, answer: Json) => boolean, what: string) {
  return waitFor(
    async () => {
      const answer = await period(rollup, h);
      return answer.period?.run && ok(answer.period.run, answer) ? answer : undefined;
    },
    { what: `${rollup} ${hourOf(h)}: ${what}`, timeout: 240_000, interval: 250 },
  );
}
async function dagRun(dag: string, runId: string): Promise<Json> {
  const answer = await airflow.api('GET', `/api/v2/dags/${dag}/dagRuns/${encodeURIComponent(runId)}`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}
async function returned(dag: string, runId: string, task: string): Promise<Json> {
  const answer = await airflow.api(
    'GET',
    `/api/v2/dags/${dag}/dagRuns/${encodeURIComponent(runId)}/taskInstances/${task}/xcomEntries/return_value`,
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.value as Json;
}
const instant = (iso: string) => Date.parse(iso);

describe('the airflow target against Airflow 3.3', () => {
  it('first runs: each decision is a dag run over its period that Airflow runs to success', async () => {
    await send('af.in', 1, 'v1');
    await send('af.in', 2, 'v1');
    for (const h of [1, 2]) {
      const answer = await untilRun('af_runs', h, (r) => r.state === 'succeeded', 'succeeded');
      expect(answer.period.run).toMatchObject({ attempt: 1, error: null });
      const id = dagRunId(keyOf('af_runs', h));
      const run = await dagRun('coverage_dagrun', id);
      expect(run).toMatchObject({ dag_run_id: id, state: 'success', run_type: 'manual' });
      expect(instant(run.logical_date)).toBe(instant(startOf(h)));
      expect(instant(run.data_interval_start)).toBe(instant(span(h).start));
      expect(instant(run.data_interval_end)).toBe(instant(span(h).end));
      expect(run.conf).toMatchObject({
        rollup: 'af_runs',
        idempotency_key: keyOf('af_runs', h),
        generation: 1,
      });
      // What the task saw: ds, the data interval, the payload.
      const seen = await returned('coverage_dagrun', id, 'build');
      expect(seen).toMatchObject({
        ds: day,
        idempotency_key: keyOf('af_runs', h),
        generation: 1,
        attempt: 1,
      });
      expect(instant(seen.data_interval_start)).toBe(instant(span(h).start));
      expect(instant(seen.data_interval_end)).toBe(instant(span(h).end));
    }
  });

  it('a partitioned DAG (3.2+) gets the period start as partition_key, validated and kept by Airflow', async () => {
    await send('part.in', 4, 'v1');
    await untilRun('af_part', 4, (r) => r.state === 'succeeded', 'succeeded');
    const id = dagRunId(keyOf('af_part', 4));
    const run = await dagRun('coverage_partitioned', id);
    // The period start as CronPartitionTimetable's key_format (and the temporal mappers) read it.
    const key = `${hourOf(4)}:00:00`;
    expect(run).toMatchObject({ state: 'success', partition_key: key });
    expect(instant(run.data_interval_start)).toBe(instant(span(4).start));
    expect(await returned('coverage_partitioned', id, 'build')).toEqual({
      partition_key: key,
      ds: day,
    });
    // And Airflow refuses a partition_key for a DAG that is not partitioned, as the stand-in does.
    const refused = await airflow.api('POST', '/api/v2/dags/coverage_dagrun/dagRuns', {
      logical_date: null,
      partition_key: key,
    });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.detail).toMatch(/not a partitioned Dag/);
  });

  it('a rerun of a period (generation 2) is a dag run of its own with the same ds and data interval', async () => {
    await send('af.in', 1, 'v2');
    const answer = await untilRun(
      'af_runs',
      1,
      (r, a) => r.state === 'succeeded' && a.period.generation === 2,
      'generation 2 succeeded',
    );
    expect(answer.runs.map((r: Json) => [r.generation, r.attempt, r.state])).toEqual([
      [2, 1, 'succeeded'],
      [1, 1, 'succeeded'],
    ]);
    const first = await dagRun('coverage_dagrun', dagRunId(keyOf('af_runs', 1)));
    const rerun = await dagRun('coverage_dagrun', dagRunId(keyOf('af_runs', 1, 2)));
    expect(rerun.state).toBe('success');
    // Airflow keeps one run per logical date: the rerun's is a microsecond later.
    expect(rerun.logical_date).not.toBe(first.logical_date);
    expect(rerun.logical_date).toMatch(/:00:00\.000001Z$|:00:00\.000001\+00:00$/);
    const seen = await returned('coverage_dagrun', rerun.dag_run_id, 'build');
    expect(seen).toMatchObject({ ds: day, generation: 2 });
    expect(instant(seen.data_interval_start)).toBe(instant(span(1).start));
    expect(instant(seen.data_interval_end)).toBe(instant(span(1).end));
  });

  it('a run that fails in Airflow is retried as attempt 2, a dag run of its own, which succeeds', async () => {
    await send('retry.in', 3, 'v1');
    const key = keyOf('af_retry', 3);
    const answer = await untilRun(
      'af_retry',
      3,
      (r) => r.state === 'succeeded' && r.attempt === 2,
      'attempt 2 succeeded',
    );
    expect(answer.runs.map((r: Json) => [r.attempt, r.state])).toEqual([
      [2, 'succeeded'],
      [1, 'failed'],
    ]);
    expect((await dagRun('coverage_flaky', dagRunId(key))).state).toBe('failed');
    const second = await dagRun('coverage_flaky', dagRunId(key, 2));
    expect(second).toMatchObject({ state: 'success', conf: { attempt: 2, run_id: `${key}~a2` } });
    // Attempt 2's logical date is a tenth of a second after the period start; the interval is the period.
    expect(instant(second.logical_date)).toBe(instant(startOf(3)) + 100);
    expect(instant(second.data_interval_start)).toBe(instant(span(3).start));
    expect(await returned('coverage_flaky', second.dag_run_id, 'flaky')).toMatchObject({ attempt: 2 });
  });

  it('a run cleared in Airflow reopens, and succeeds again', async () => {
    const runId = dagRunId(keyOf('af_retry', 3), 2);
    const cleared = await airflow.api('POST', `/api/v2/dags/coverage_flaky/dagRuns/${runId}/clear`, {
      dry_run: false,
    });
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    // The cleared task waits for its gate: the daemon sees the run open again meanwhile.
    const reopened = await untilRun(
      'af_retry',
      3,
      (r) => r.attempt === 2 && r.state === 'running' && r.finished_at === null,
      'reopened',
    );
    expect(reopened.period.run.error).toBeNull();
    expect(['queued', 'running']).toContain((await dagRun('coverage_flaky', runId)).state);
    writeFileSync(join(gates, runId), '');
    await untilRun('af_retry', 3, (r) => r.attempt === 2 && r.state === 'succeeded', 'succeeded again');
    expect((await dagRun('coverage_flaky', runId)).state).toBe('success');
    expect(await returned('coverage_flaky', runId, 'flaky')).toMatchObject({ attempt: 2, try_number: 2 });
  });

  it('a redelivery is a 409 for its own dag_run_id and counts as delivered; one dag run only', async () => {
    const target = airflowTarget({
      url: airflow.url,
      dag_id: 'coverage_dagrun',
      username: 'coverage-rollup',
      password: airflow.passwords['coverage-rollup']!,
      timeout: 30_000,
    });
    const key = keyOf('direct', 5);
    const payload = {
      rollup: 'direct',
      idempotency_key: key,
      generation: 1,
      reason: 'covered',
      period: { ...span(5), key: hourOf(5) },
      upstreams: {},
      decided_at: new Date().toISOString(),
    } as unknown as TriggerPayload;
    expect(await target.deliver(payload)).toEqual({ ok: true });
    // The same POST again, as Airflow answers it.
    const again = await airflow.api('POST', '/api/v2/dags/coverage_dagrun/dagRuns', triggerBody(payload));
    expect(again.status).toBe(409);
    expect(await target.deliver(payload)).toEqual({ ok: true });
    const listed = await airflow.api('POST', '/api/v2/dags/~/dagRuns/list', {
      dag_ids: ['coverage_dagrun'],
      logical_date_gte: span(5).start,
      logical_date_lte: span(5).end,
    });
    expect(listed.body.dag_runs.map((r: Json) => r.dag_run_id)).toEqual([dagRunId(key)]);
    // A 409 for another run holding the logical date is refused, not counted as delivered.
    const other = { ...payload, idempotency_key: keyOf('other', 5) } as TriggerPayload;
    const refused = await target.deliver(other);
    expect(refused).toMatchObject({ ok: false, retry: false });
    expect((refused as { error: string }).error).toMatch(/^HTTP 409: .*another run holds logical date/);
    await target.close();
  });

  it('a token that expires during the suite: renewed by username/password, a static one is refused', async () => {
    // The daemon's first JWT was issued before its first delivery; once that is longer ago than
    // the lifetime plus Airflow's leeway ([api_auth] jwt_leeway, 10 s), the first token is dead,
    // and so is the static one minted before the daemon started.
    const first = (await period('af_runs', 1)).triggers.find((t: Json) => t.generation === 1);
    const firstDelivery = instant(first.delivered_at);
    const dead = Math.max(firstDelivery, staticTokenAt) + (JWT_LIFETIME + LEEWAY + 2) * 1000;
    await waitFor(() => Date.now() > dead, {
      timeout: (JWT_LIFETIME + LEEWAY + 60) * 1000,
      interval: 500,
      what: 'the first tokens to expire',
    });
    await send('af.in', 6, 'v1');
    await send('static.in', 6, 'v1');
    const done = await untilRun(
      'af_runs',
      6,
      (r) => r.state === 'succeeded',
      'succeeded with a renewed token',
    );
    expect(done.triggers[0]).toMatchObject({ last_error: null });
    expect(instant(done.triggers[0].delivered_at)).toBeGreaterThan(dead);
    const refused = await waitFor(
      async () => {
        const answer = await period('af_static', 6);
        const trigger = answer.triggers?.[0];
        return trigger?.last_error ? trigger : undefined;
      },
      { timeout: 60_000, interval: 250, what: 'the static token refused' },
    );
    expect(refused).toMatchObject({ delivered_at: null, last_error: expect.stringMatching(/^HTTP 401/) });
    // Renewed before expiry, never after a 401: Airflow refused no request of the daemon's but the
    // static token's (which goes to coverage_flaky, GET of the DAG then POST, and is never polled).
    const log = await airflow.accessLog();
    expect(log.match(TOKEN_REQUEST)?.length).toBeGreaterThan(1);
    const refusedPaths = [...log.matchAll(/path=(\S+) query=\S* status_code=401/g)].map((m) => m[1]);
    expect(refusedPaths.length).toBeGreaterThan(0);
    expect(refusedPaths.every((path) => path?.startsWith('/api/v2/dags/coverage_flaky'))).toBe(true);
  });
});
