import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { TriggerPayload } from '../../src/core/runs/trigger.js';
import { type AirflowConfig, airflowTarget, triggerBody } from '../../src/targets/airflow/dag-runs.js';
import { renewalTime } from '../../src/targets/airflow/token.js';
import { startFakeAirflow, TRIGGER_FIELDS } from '../helpers/fake-airflow.js';

// The Airflow target against the fake Airflow 3 API server, both on one hand-driven clock, so
// token expiry and renewal are exercised without waiting for time to pass.
let clock = Date.parse('2026-11-02T12:00:00Z');
const now = () => clock;
const LIFETIME = 600; // [api_auth] jwt_expiration_time, seconds
const fake = await startFakeAirflow({
  now,
  jwtExpirationTime: LIFETIME,
  users: { coverage: 'pa55-word-for-airflow' },
  clients: { 'coverage-client': 'client-secret-value' },
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.requests.length = 0;
});

let hour = 0;
/** A payload for a fresh period each time, so runs never collide unless a test wants them to. */
function payload(generation = 1): TriggerPayload {
  const start = new Date(Date.UTC(2026, 10, 2, hour++));
  const end = new Date(start.getTime() + 3_600_000);
  const iso = (d: Date) => d.toISOString().replace('.000Z', 'Z');
  const key = iso(start).replace(/[-:]/g, '');
  return {
    rollup: 'r',
    idempotency_key: `r@${key}#${generation}`,
    generation,
    reason: 'covered',
    period: { start: iso(start), end: iso(end), key: iso(start).slice(0, 13) },
    upstreams: {},
    decided_at: '2026-11-02T12:00:00.000Z',
  } as unknown as TriggerPayload;
}

const config = (dag: string, auth: Partial<AirflowConfig>): AirflowConfig => ({
  url: fake.url,
  dag_id: dag,
  timeout: 5000,
  ...auth,
});
const password = { username: 'coverage', password: 'pa55-word-for-airflow' };
const posts = (dag: string) => fake.to(`/api/v2/dags/${dag}/dagRuns`).filter((r) => r.method === 'POST');
const tokenRequests = () => fake.to('/auth/token');

describe('airflow target: JWT from POST /auth/token', () => {
  it('gets a token with username/password once and sends it as a bearer token', async () => {
    const target = airflowTarget(config('dag_a', password), now);
    expect(await target.deliver(payload())).toEqual({ ok: true });
    expect(await target.deliver(payload())).toEqual({ ok: true });
    const [tokenRequest, ...more] = tokenRequests();
    expect(more).toEqual([]);
    expect(tokenRequest!.body).toEqual({ username: 'coverage', password: 'pa55-word-for-airflow' });
    expect(tokenRequest!.status).toBe(201);
    const jwt = fake.issued.at(-1)!;
    expect(posts('dag_a').map((r) => [r.status, r.headers.authorization])).toEqual([
      [200, `Bearer ${jwt}`],
      [200, `Bearer ${jwt}`],
    ]);
  });

  it('concurrent deliveries share one token request', async () => {
    const target = airflowTarget(config('dag_b', password), now);
    const results = await Promise.all(Array.from({ length: 8 }, () => target.deliver(payload())));
    expect(results).toEqual(Array(8).fill({ ok: true }));
    expect(tokenRequests()).toHaveLength(1);
    expect(posts('dag_b')).toHaveLength(8);
  });

  it('renews the token before it expires, by its lifetime, never waiting for a 401', async () => {
    const target = airflowTarget(config('dag_c', password), now);
    await target.deliver(payload());
    const first = fake.issued.at(-1)!;
    const renewAt = renewalTime(first, clock)!;
    // 600 s tokens renew 60 s before expiry.
    expect(renewAt - clock).toBe((LIFETIME - 60) * 1000);
    clock = renewAt - 1;
    await target.deliver(payload());
    expect(tokenRequests()).toHaveLength(1);
    clock = renewAt;
    await target.deliver(payload());
    expect(tokenRequests()).toHaveLength(2);
    const second = fake.issued.at(-1)!;
    expect(second).not.toBe(first);
    expect(posts('dag_c').map((r) => [r.status, r.headers.authorization])).toEqual([
      [200, `Bearer ${first}`],
      [200, `Bearer ${first}`],
      [200, `Bearer ${second}`],
    ]);
    // Had it kept the first token past its expiry, Airflow would have refused it.
    clock = renewAt + 71_000; // past exp and Airflow's 10 s leeway
    const stale = await fetch(`${fake.url}/api/v2/dags/dag_c/dagRuns/x`, {
      headers: { authorization: `Bearer ${first}` },
    });
    expect(stale.status).toBe(401);
  });

  it('after a 401 (signing key rotated) renews once and resends within the same delivery', async () => {
    const target = airflowTarget(config('dag_d', password), now);
    await target.deliver(payload());
    fake.rotateKey();
    expect(await target.deliver(payload())).toEqual({ ok: true });
    expect(posts('dag_d').map((r) => r.status)).toEqual([200, 401, 200]);
    expect(tokenRequests()).toHaveLength(2);
  });

  it('renews only once: a renewed token refused again is a retried failure, not a loop', async () => {
    const target = airflowTarget(config('dag_e', password), now);
    await target.deliver(payload());
    fake.refuseTokens = true;
    let result: Awaited<ReturnType<typeof target.deliver>>;
    try {
      result = await target.deliver(payload());
    } finally {
      fake.refuseTokens = false;
    }
    expect(posts('dag_e').map((r) => r.status)).toEqual([200, 401, 401]);
    expect(tokenRequests()).toHaveLength(2);
    expect(result).toMatchObject({ ok: false, retry: true, error: expect.stringMatching(/^HTTP 401: /) });
  });

  it('a refused password is a retried failure that names the user and never the password', async () => {
    const target = airflowTarget(config('dag_f', { username: 'coverage', password: 'wrong-password' }), now);
    const result = await target.deliver(payload());
    expect(result).toMatchObject({ ok: false, retry: true });
    const { error } = result as { error: string };
    expect(error).toContain('user coverage: HTTP 401');
    expect(error).not.toContain('wrong-password');
    expect(posts('dag_f')).toEqual([]);
  });

  it('takes client_id/client_secret through the client_credentials grant', async () => {
    const target = airflowTarget(
      config('dag_g', { client_id: 'coverage-client', client_secret: 'client-secret-value' }),
      now,
    );
    expect(await target.deliver(payload())).toEqual({ ok: true });
    expect(tokenRequests().map((r) => r.body)).toEqual([
      {
        grant_type: 'client_credentials',
        client_id: 'coverage-client',
        client_secret: 'client-secret-value',
      },
    ]);
  });

  it('sends a static token as it is; once expired, it is a retried 401', async () => {
    const token = fake.mint('static', 60);
    const target = airflowTarget(config('dag_h', { token }), now);
    expect(await target.deliver(payload())).toEqual({ ok: true });
    clock += 71_000; // past exp and Airflow's 10 s leeway
    const result = await target.deliver(payload());
    expect(result).toMatchObject({ ok: false, retry: true, error: expect.stringMatching(/^HTTP 401: /) });
    expect(tokenRequests()).toEqual([]);
    expect(posts('dag_h').map((r) => [r.status, r.headers.authorization])).toEqual([
      [200, `Bearer ${token}`],
      [401, `Bearer ${token}`],
    ]);
  });
});

describe('airflow target: the trigger body', () => {
  it('is TriggerDAGRunPostBody exactly, with run_after at the end of the data interval', async () => {
    const target = airflowTarget(config('dag_i', password), now);
    const p = payload();
    await target.deliver(p);
    const [post] = posts('dag_i');
    // partition_key only for a partitioned DAG: Airflow 3.0 and 3.1 do not know the field.
    expect(Object.keys(post!.body).sort()).toEqual(
      TRIGGER_FIELDS.filter((f) => f !== 'partition_key').sort(),
    );
    expect(post!.body).toEqual({
      dag_run_id: `coverage_rollup__r__${p.period.start.toString().replace(/[-:]/g, '')}__gen1`,
      logical_date: p.period.start,
      data_interval_start: p.period.start,
      data_interval_end: p.period.end,
      run_after: p.period.end,
      conf: p,
      note: 'coverage-rollup covered trigger, generation 1',
    });
    expect(triggerBody(p)).toEqual(post!.body);
  });

  it('a partitioned DAG gets the period key as partition_key; the DAG is asked once', async () => {
    const partitioned = await startFakeAirflow({
      now,
      users: { coverage: 'pa55-word-for-airflow' },
      partitionedDags: ['dag_p'],
    });
    try {
      const target = airflowTarget({ ...config('dag_p', password), url: partitioned.url }, now);
      const p = payload();
      expect(await target.deliver(p)).toEqual({ ok: true });
      expect(await target.deliver(payload())).toEqual({ ok: true });
      const [post] = partitioned.to('/api/v2/dags/dag_p/dagRuns');
      // The period start as Airflow's partitioned timetables and temporal mappers read it.
      const key = String(p.period.start).replace('Z', '');
      expect(post!.body).toEqual({ ...triggerBody(p), partition_key: key });
      expect(triggerBody(p, key)).toEqual(post!.body);
      expect(partitioned.to('/api/v2/dags/dag_p')).toHaveLength(1);
      // Airflow refuses a partition_key for a DAG that is not partitioned (400).
      const jwt = partitioned.mint('coverage', 60);
      const refused = await fetch(`${partitioned.url}/api/v2/dags/dag_q/dagRuns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify(triggerBody(payload(), '2026-11-02T10:00:00')),
      });
      expect(refused.status).toBe(400);
    } finally {
      await partitioned.close();
    }
  });

  it('observes every run when Airflow caps pages below 100 ([api] maximum_page_limit)', async () => {
    const capped = await startFakeAirflow({
      now,
      users: { coverage: 'pa55-word-for-airflow' },
      maximumPageLimit: 2,
    });
    try {
      const target = airflowTarget({ ...config('dag_m', password), url: capped.url }, now);
      const payloads = Array.from({ length: 5 }, () => payload());
      for (const p of payloads) expect(await target.deliver(p)).toEqual({ ok: true });
      const observed = await target.observe!(payloads.map((p) => ({ runId: p.idempotency_key, payload: p })));
      expect(observed).toBeInstanceOf(Map);
      const states = [...(observed as Map<string, { state?: string } | null>).values()].map((r) => r?.state);
      // All five found on three pages of two: none taken for lost.
      expect(states).toEqual(Array(5).fill('running'));
      expect(capped.to('/api/v2/dags/~/dagRuns/list').map((r) => r.body.page_offset)).toEqual([0, 2, 4]);
    } finally {
      await capped.close();
    }
  });

  it('the fake refuses a field Airflow does not know with 422, as Airflow does', async () => {
    const jwt = fake.mint('coverage', 60);
    const response = await fetch(`${fake.url}/api/v2/dags/dag_j/dagRuns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...triggerBody(payload()), execution_date: '2026-11-02T10:00:00Z' }),
    });
    expect(response.status).toBe(422);
    expect(await response.json()).toMatchObject({
      detail: [{ type: 'extra_forbidden', loc: ['body', 'execution_date'] }],
    });
  });

  it('a 422 (a body this Airflow does not accept) is a final failure with the detail', async () => {
    const older = await startFakeAirflow({
      now,
      users: { coverage: 'pa55-word-for-airflow' },
      fields: TRIGGER_FIELDS.filter((f) => f !== 'note'),
    });
    try {
      const target = airflowTarget({ ...config('dag_k', password), url: older.url }, now);
      const result = await target.deliver(payload());
      expect(result).toMatchObject({ ok: false, retry: false });
      expect((result as { error: string }).error).toMatch(/^HTTP 422: .*extra_forbidden.*"note"/);
    } finally {
      await older.close();
    }
  });

  it('a redelivery is a 409 for its own dag_run_id and counts as delivered', async () => {
    const target = airflowTarget(config('dag_l', password), now);
    const p = payload();
    expect(await target.deliver(p)).toEqual({ ok: true });
    expect(await target.deliver(p)).toEqual({ ok: true });
    expect(posts('dag_l').map((r) => r.status)).toEqual([200, 409]);
    expect(fake.runs.get('dag_l')).toHaveLength(1);
    const [lookup] = fake.to(`/api/v2/dags/dag_l/dagRuns/${triggerBody(p).dag_run_id}`);
    expect(lookup).toMatchObject({ method: 'GET', status: 200 });
  });
});
