import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// A local receiver standing in for a webhook endpoint: paths answer with the statuses listed for
// them, in order (the last one repeats). Airflow is the fake Airflow 3 API server (JWT auth, strict
// TriggerDAGRunPostBody, 409 on a duplicate run id or logical date).
interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}
const received: Received[] = [];
const statuses: Record<string, number[]> = {
  '/hooks/ok': [200],
  '/hooks/flaky': [503, 200],
  '/hooks/bad': [400],
};

const airflow = await startFakeAirflow({ users: { coverage: 'airflow-pa55word' } });
// A run created by an earlier delivery whose success was never recorded.
airflow.runs.set('dup_dag', [
  { dag_run_id: 'coverage_rollup__af_dup__20261102T100000Z__gen1', logical_date: '2026-11-02T10:00:00Z' },
]);
// A run of the DAG's own schedule holding the period's logical date.
airflow.runs.set('busy_dag', [
  { dag_run_id: 'scheduled__2026-11-02T10:00:00+00:00', logical_date: '2026-11-02T10:00:00+00:00' },
]);
airflow.failures.flaky_dag = [500];
const staticToken = airflow.mint('static-user', 86_400);

const server = createServer((req, res) => {
  let text = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => {
    text += chunk;
  });
  req.on('end', () => {
    const path = req.url ?? '';
    const method = req.method ?? '';
    const body = JSON.parse(text || '{}') as Record<string, unknown>;
    const seen = received.filter((r) => r.path === path).length;
    received.push({ method, path, headers: req.headers, body });
    const list = statuses[path] ?? [404];
    const status = list[Math.min(seen, list.length - 1)]!;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: status >= 400 ? 'nope' : 'ok' }));
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
// Registered before the daemon's, so it runs after the daemon stopped.
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await airflow.close();
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const hourly = (id: string, target: Record<string, unknown>) => ({
  id,
  upstream: [`t.${id}`],
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02',
  target,
});
const user = { url: airflow.url, username: 'coverage', password: 'airflow-pa55word' };
const config = testConfig(db, prefix, {
  rollups: [
    hourly('hook_ok', { type: 'webhook', url: `${base}/hooks/ok`, headers: { 'X-Team': 'data' } }),
    hourly('hook_flaky', { type: 'webhook', url: `${base}/hooks/flaky` }),
    hourly('hook_bad', { type: 'webhook', url: `${base}/hooks/bad` }),
    hourly('af_ok', { type: 'airflow', url: `${airflow.url}/`, dag_id: 'orders_hourly', token: staticToken }),
    hourly('af_dup', { type: 'airflow', dag_id: 'dup_dag', ...user }),
    hourly('af_flaky', { type: 'airflow', dag_id: 'flaky_dag', ...user }),
    hourly('af_busy', { type: 'airflow', dag_id: 'busy_dag', ...user }),
    { ...hourly('af_rerun', { type: 'airflow', dag_id: 'rerun_dag', ...user }), rerun: 'on_update' },
    hourly('af_renew', { type: 'airflow', dag_id: 'renew_dag', ...user }),
  ],
});
await startTestDaemon(config);
const producer = testProducer(config);

const HOUR_10 = '2026-11-02T10:00:00Z';
const lo = (iso: string) => Date.parse(iso) * 1000;
const coverHour = (rollup: string, start = HOUR_10, version = 'v1') =>
  producer.add('e', {
    asset: `t.${rollup}`,
    start,
    end: new Date(Date.parse(start) + 3_600_000).toISOString(),
    version,
  });

interface TriggerRow {
  idempotency_key: string;
  attempts: number;
  last_error: string | null;
  delivered_at: Date | null;
  failed_at: Date | null;
  payload: Record<string, unknown> & { period: { start: string; end: string } };
}
const triggerOf = async (rollup: string, start = HOUR_10) => {
  const [row] = await db.sql<TriggerRow[]>`
    select idempotency_key, attempts, last_error, delivered_at, failed_at, payload from triggers
    where rollup_id = ${rollup} and period_lo = ${lo(start)} and generation = 1`;
  return row;
};
const settled = (rollup: string, start = HOUR_10) =>
  waitFor(
    async () => {
      const row = await triggerOf(rollup, start);
      return row && (row.delivered_at !== null || row.failed_at !== null) ? row : undefined;
    },
    { what: `delivery of ${rollup} ${start}` },
  );
const requestsTo = (path: string) => received.filter((r) => r.path === path);

describe('webhook target', () => {
  it('POSTs the payload as JSON with the Idempotency-Key header and the configured headers', async () => {
    await coverHour('hook_ok');
    const row = await settled('hook_ok');
    expect(row).toMatchObject({ attempts: 1, last_error: null, failed_at: null });
    expect(row.delivered_at).not.toBeNull();
    const [request, ...more] = requestsTo('/hooks/ok');
    expect(more).toEqual([]);
    expect(request!.method).toBe('POST');
    expect(request!.headers['idempotency-key']).toBe('hook_ok@20261102T100000Z#1');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-team']).toBe('data');
    expect(request!.body).toEqual(row.payload);
    expect(Object.keys(request!.body).sort()).toEqual(
      [
        'attempt',
        'decided_at',
        'generation',
        'idempotency_key',
        'period',
        'reason',
        'rollup',
        'run_id',
        'upstreams',
      ].sort(),
    );
    expect(request!.body).toMatchObject({
      rollup: 'hook_ok',
      idempotency_key: 'hook_ok@20261102T100000Z#1',
      run_id: 'hook_ok@20261102T100000Z#1',
      attempt: 1,
      generation: 1,
      reason: 'covered',
      period: { start: '2026-11-02T10:00:00Z', end: '2026-11-02T11:00:00Z', key: '2026-11-02T10' },
    });
  });

  it('retries a 5xx with the same idempotency key and the same body', async () => {
    await coverHour('hook_flaky');
    const row = await settled('hook_flaky');
    expect(row).toMatchObject({ attempts: 2, last_error: null, failed_at: null });
    expect(row.delivered_at).not.toBeNull();
    const requests = requestsTo('/hooks/flaky');
    expect(requests).toHaveLength(2);
    expect(requests.map((r) => r.headers['idempotency-key'])).toEqual([
      'hook_flaky@20261102T100000Z#1',
      'hook_flaky@20261102T100000Z#1',
    ]);
    expect(requests[1]!.body).toEqual(requests[0]!.body);
  });

  it('records a 4xx (failed_at, last_error) and does not retry it', async () => {
    await coverHour('hook_bad');
    const row = await settled('hook_bad');
    expect(row.failed_at).not.toBeNull();
    expect(row.delivered_at).toBeNull();
    expect(row.attempts).toBe(1);
    expect(row.last_error).toMatch(/^HTTP 400: /);
    // Barrier: a later decision is delivered after the failure was recorded; still one request.
    await coverHour('hook_ok', '2026-11-02T11:00:00Z');
    const later = await settled('hook_ok', '2026-11-02T11:00:00Z');
    expect(later.delivered_at!.getTime()).toBeGreaterThanOrEqual(row.failed_at!.getTime());
    expect(requestsTo('/hooks/bad')).toHaveLength(1);
    expect(await triggerOf('hook_bad')).toMatchObject({ attempts: 1, delivered_at: null });
  });
});

describe('airflow target', () => {
  it('POSTs /api/v2/dags/{dag_id}/dagRuns with a deterministic dag_run_id, the period as data interval and the payload as conf', async () => {
    await coverHour('af_ok');
    const row = await settled('af_ok');
    expect(row).toMatchObject({ attempts: 1, last_error: null, failed_at: null });
    const [request, ...more] = airflow.to('/api/v2/dags/orders_hourly/dagRuns');
    expect(more).toEqual([]);
    expect(request!.method).toBe('POST');
    expect(request!.headers.authorization).toBe(`Bearer ${staticToken}`);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['idempotency-key']).toBe('af_ok@20261102T100000Z#1');
    expect(request!.body).toMatchObject({
      dag_run_id: 'coverage_rollup__af_ok__20261102T100000Z__gen1',
      logical_date: '2026-11-02T10:00:00Z',
      data_interval_start: '2026-11-02T10:00:00Z',
      data_interval_end: '2026-11-02T11:00:00Z',
      run_after: '2026-11-02T11:00:00Z',
      note: 'coverage-rollup covered trigger, generation 1',
    });
    expect(request!.body.conf).toEqual(row.payload);
    expect(airflow.to('/auth/token')).toEqual([]);
    // Airflow accepts letters, digits and _.~+- in run ids.
    expect(request!.body.dag_run_id).toMatch(/^[A-Za-z0-9_.~+-]+$/);
  });

  it('counts 409 as delivered when the run with its dag_run_id exists (an unrecorded earlier delivery)', async () => {
    await coverHour('af_dup');
    const row = await settled('af_dup');
    expect(row).toMatchObject({ attempts: 1, last_error: null, failed_at: null });
    expect(row.delivered_at).not.toBeNull();
    expect(airflow.to('/api/v2/dags/dup_dag/dagRuns').map((r) => r.method)).toEqual(['POST']);
    // The 409 is checked: the run with this id is there.
    expect(
      airflow.to('/api/v2/dags/dup_dag/dagRuns/coverage_rollup__af_dup__20261102T100000Z__gen1'),
    ).toHaveLength(1);
    expect(airflow.runs.get('dup_dag')).toHaveLength(1);
  });

  it('records a 409 for another run holding the logical date as a failure, not as delivered', async () => {
    await coverHour('af_busy');
    const row = await settled('af_busy');
    expect(row.delivered_at).toBeNull();
    expect(row.failed_at).not.toBeNull();
    expect(row.attempts).toBe(1);
    expect(row.last_error).toMatch(/^HTTP 409: .*another run holds logical date 2026-11-02T10:00:00Z/);
    expect(airflow.to('/api/v2/dags/busy_dag/dagRuns')).toHaveLength(1);
  });

  it('a rerun (generation 2) creates a second DAG run for the same data interval', async () => {
    await coverHour('af_rerun');
    await settled('af_rerun');
    await coverHour('af_rerun', HOUR_10, 'v2');
    const rerun = await waitFor(
      async () => {
        const [row] = await db.sql<TriggerRow[]>`
          select idempotency_key, attempts, last_error, delivered_at, failed_at, payload from triggers
          where rollup_id = 'af_rerun' and period_lo = ${lo(HOUR_10)} and generation = 2
            and (delivered_at is not null or failed_at is not null)`;
        return row;
      },
      { what: 'rerun delivery' },
    );
    expect(rerun).toMatchObject({ attempts: 1, last_error: null, failed_at: null });
    const runs = airflow.runs.get('rerun_dag')!;
    expect(
      runs.map((r) => [r.dag_run_id, r.logical_date, r.data_interval_start, r.data_interval_end]),
    ).toEqual([
      [
        'coverage_rollup__af_rerun__20261102T100000Z__gen1',
        '2026-11-02T10:00:00Z',
        HOUR_10,
        '2026-11-02T11:00:00Z',
      ],
      [
        'coverage_rollup__af_rerun__20261102T100000Z__gen2',
        '2026-11-02T10:00:00.000001Z',
        HOUR_10,
        '2026-11-02T11:00:00Z',
      ],
    ]);
    expect(runs[1]!.conf).toMatchObject({ generation: 2, reason: 'update' });
  });

  it('retries a 5xx with the same dag_run_id and key', async () => {
    await coverHour('af_flaky');
    const row = await settled('af_flaky');
    expect(row).toMatchObject({ attempts: 2, last_error: null, failed_at: null });
    const requests = airflow.to('/api/v2/dags/flaky_dag/dagRuns');
    expect(requests).toHaveLength(2);
    expect(requests.map((r) => r.body.dag_run_id)).toEqual([
      'coverage_rollup__af_flaky__20261102T100000Z__gen1',
      'coverage_rollup__af_flaky__20261102T100000Z__gen1',
    ]);
    expect(requests.map((r) => r.headers['idempotency-key'])).toEqual([
      'af_flaky@20261102T100000Z#1',
      'af_flaky@20261102T100000Z#1',
    ]);
    expect(requests.map((r) => r.status)).toEqual([500, 200]);
    expect(requests[0]!.headers.authorization).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
  });

  it('authenticates with a JWT from POST /auth/token, and after a 401 renews it and resends once', async () => {
    await coverHour('af_renew');
    await settled('af_renew');
    const tokensBefore = airflow.issued.length;
    const [first] = airflow.to('/api/v2/dags/renew_dag/dagRuns');
    expect(airflow.issued).toContain(first!.headers.authorization!.replace('Bearer ', ''));
    // Airflow restarted with a new jwt_secret: the cached token is refused from now on.
    airflow.rotateKey();
    await coverHour('af_renew', '2026-11-02T11:00:00Z');
    const row = await settled('af_renew', '2026-11-02T11:00:00Z');
    expect(row).toMatchObject({ attempts: 1, last_error: null, failed_at: null });
    expect(airflow.to('/api/v2/dags/renew_dag/dagRuns').map((r) => r.status)).toEqual([200, 401, 200]);
    expect(airflow.issued).toHaveLength(tokensBefore + 1);
    const tokenBodies = airflow.to('/auth/token').map((r) => r.body);
    expect(new Set(tokenBodies.map((b) => JSON.stringify(b)))).toEqual(
      new Set([JSON.stringify({ username: 'coverage', password: 'airflow-pa55word' })]),
    );
  });
});
