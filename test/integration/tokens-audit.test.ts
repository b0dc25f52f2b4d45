/**
 * Scoped tokens and the audit through the real HTTP server: a token for `team_a.*` writes
 * team_a's events, triggers, retries, repairs and run reports and is refused (403, naming the
 * scope and the name) team_b's, with nothing written; every write is in `GET /v1/audit` under the
 * token's name; /metrics and /readyz's detail follow the read gate unless metrics.public.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { hashedName } from '../../src/http/auth.js';
import { recordAudit } from '../../src/store/audit.js';
import { requestManualRun } from '../../src/store/periods/writes.js';
import { prune } from '../../src/store/upkeep/retention.js';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const TEAM_A = 'team-a-token-0123456789abcdef';
const READER = 'reader-token-0123456789abcdef';
const OPS = 'ops-token-0123456789abcdef';
const env = { TOKENS_TEST_TEAM_A: TEAM_A, TOKENS_TEST_READER: READER, TOKENS_TEST_OPS: OPS };
Object.assign(process.env, env);
afterAll(() => {
  for (const name of Object.keys(env)) delete process.env[name];
});

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const hour = (h: number) => ({
  start: `${day}T${String(h).padStart(2, '0')}:00:00Z`,
  end: `${day}T${String(h + 1).padStart(2, '0')}:00:00Z`,
});
const rollup = (id: string, upstream: string) => ({
  id,
  upstream: [upstream],
  every: 'hour',
  begin: day,
  target: { type: 'queue', queue: `${id}-runs` },
});

const db = await createTestDatabase();
const config = testConfig(db, createTestPrefix(), {
  tokens: [
    {
      name: 'team_a',
      token: { env: 'TOKENS_TEST_TEAM_A' },
      scopes: ['events', 'rollups'],
      assets: ['team_a.*'],
      rollups: ['team_a.*'],
    },
    { name: 'reader', token: { env: 'TOKENS_TEST_READER' }, scopes: ['read'] },
    { name: 'ops', token: { env: 'TOKENS_TEST_OPS' }, scopes: ['admin', 'read'] },
  ],
  rollups: [rollup('team_a.hourly', 'team_a.orders'), rollup('team_b.hourly', 'team_b.orders')],
});
const daemon = await startTestDaemon(config);

// biome-ignore lint/suspicious/noExplicitAny: answers are read as untyped JSON
type Json = Record<string, any>;
const call = async (token: string | null, method: string, url: string, body?: unknown) => {
  const response = await daemon.http.inject({
    method: method as 'GET',
    url,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return {
    status: response.statusCode,
    body: response.body.startsWith('{') ? (response.json() as Json) : {},
  };
};
const read = async (url: string) => (await call(READER, 'GET', url)).body;
const periodsOf = (id: string, h: number) =>
  `/v1/rollups/${id}/periods?start=${hour(h).start}&end=${hour(h).end}`;
const startedRun = (id: string, h: number) =>
  waitFor(
    async () => {
      const run = (await read(periodsOf(id, h))).periods?.[0]?.run;
      return run?.state === 'started' ? run : undefined;
    },
    { timeout: 90_000, what: `the run of ${id} hour ${h} started` },
  );
const covered = async (asset: string, h: number) =>
  (await read(`/v1/assets/${asset}/coverage?start=${hour(h).start}&end=${hour(h).end}`)).covered === true;
const entries = async () => (await call(OPS, 'GET', '/v1/audit?limit=1000')).body.entries as Json[];

describe('a token scoped to team_a.*', () => {
  it('writes team_a events and replay requirements; a batch with one team_b asset is refused whole', async () => {
    const refused = await call(TEAM_A, 'POST', '/v1/events', [
      { asset: 'team_a.orders', ...hour(3), id: 'a-3' },
      { asset: 'team_b.orders', ...hour(3), id: 'b-3' },
    ]);
    expect(refused).toMatchObject({
      status: 403,
      body: {
        code: 'forbidden',
        message: 'the token team_a lacks scope events for asset team_b.orders',
        scope: 'events',
        asset: 'team_b.orders',
      },
    });
    const accepted = await call(TEAM_A, 'POST', '/v1/events', {
      asset: 'team_a.orders',
      ...hour(0),
      id: 'a-0',
    });
    expect(accepted.status).toBeLessThan(300);
    const replay = (asset: string) =>
      call(TEAM_A, 'POST', `/v1/assets/${asset}/replay-requirements`, {
        ...hour(5),
        version: 'v2',
        id: `r-${asset}`,
      });
    expect(await replay('team_b.orders')).toMatchObject({
      status: 403,
      body: { scope: 'events', asset: 'team_b.orders' },
    });
    expect((await replay('team_a.orders')).status).toBeLessThan(300);
    await waitFor(() => covered('team_a.orders', 0), {
      timeout: 60_000,
      what: 'the accepted event ingested',
    });
    // Sent before the accepted one, on the same path: had it gone anywhere, it would be in by now.
    expect(await covered('team_a.orders', 3)).toBe(false);
  });

  it('reports and retries team_a runs, and neither of team_b', async () => {
    expect(
      (await call(TEST_TOKEN, 'POST', '/v1/events', { asset: 'team_b.orders', ...hour(0), id: 'b-0' }))
        .status,
    ).toBeLessThan(300);
    const [runA, runB] = await Promise.all([startedRun('team_a.hourly', 0), startedRun('team_b.hourly', 0)]);
    const report = (run: Json) =>
      call(TEAM_A, 'POST', '/v1/runs', {
        idempotency_key: run.run_id,
        attempt: 1,
        state: 'failed',
        error: 'boom',
      });
    expect(await report(runB)).toMatchObject({
      status: 403,
      body: { scope: 'rollups', rollup: 'team_b.hourly' },
    });
    expect(await report(runA)).toMatchObject({ status: 200, body: { effect: 'applied' } });
    // team_b's run failed too (by the api token), so only the scope can refuse its retry.
    expect(
      (
        await call(TEST_TOKEN, 'POST', '/v1/runs', {
          idempotency_key: runB.run_id,
          attempt: 1,
          state: 'failed',
        })
      ).status,
    ).toBe(200);
    const retry = (id: string) => call(TEAM_A, 'POST', `/v1/rollups/${id}/periods/${day}T00/retry`);
    expect(await retry('team_b.hourly')).toMatchObject({
      status: 403,
      body: { scope: 'rollups', rollup: 'team_b.hourly' },
    });
    expect(await retry('team_a.hourly')).toMatchObject({ status: 202, body: { run: { attempt: 2 } } });
  }, 120_000);

  // After a run started: a manual trigger before the lease holder has recorded the rollups fails
  // (500, periods_rollup_id_fkey), which is not what this file is about.
  it('triggers team_a rollups and not team_b', async () => {
    const trigger = (id: string) =>
      call(TEAM_A, 'POST', `/v1/rollups/${id}/periods/${hour(6).start}/trigger`);
    expect(await trigger('team_b.hourly')).toMatchObject({
      status: 403,
      body: { code: 'forbidden', scope: 'rollups', rollup: 'team_b.hourly' },
    });
    expect((await trigger('team_a.hourly')).status).toBe(202);
  });

  it('repairs team_a assets and not team_b', async () => {
    const repair = (asset: string) =>
      call(TEAM_A, 'POST', '/v1/repairs', {
        asset,
        ...hour(8),
        target: { type: 'queue', queue: 'team-repairs' },
      });
    expect(await repair('team_b.orders')).toMatchObject({
      status: 403,
      body: { scope: 'events', asset: 'team_b.orders' },
    });
    expect(await repair('team_a.orders')).toMatchObject({
      status: 200,
      body: { requested: { ranges: [hour(8)] } },
    });
  });

  it('may not read, nor list the audit', async () => {
    expect(await call(TEAM_A, 'GET', '/v1/assets')).toMatchObject({ status: 403, body: { scope: 'read' } });
    expect(await call(TEAM_A, 'GET', '/v1/audit')).toMatchObject({ status: 403, body: { scope: 'admin' } });
    expect((await call(null, 'GET', '/v1/audit')).status).toBe(401);
    expect(await call(READER, 'GET', '/v1/audit')).toMatchObject({ status: 403, body: { scope: 'admin' } });
  });
});

describe('the audit', () => {
  it("lists each write newest first under the token's name, and none of the refused ones", async () => {
    const mine = (await entries()).filter((e) => e.token === 'team_a');
    expect(mine.map((e) => [e.action, e.target_type, e.target])).toEqual([
      ['repair', 'asset', 'team_a.orders'],
      ['trigger', 'rollup', 'team_a.hourly'],
      ['retry', 'rollup', 'team_a.hourly'],
      ['run_report', 'run', expect.stringMatching(/^team_a\.hourly@/)],
    ]);
    expect(mine[0]!.detail).toMatchObject({
      repair: expect.any(Number),
      start: hour(8).start,
      end: hour(8).end,
    });
    expect(mine[2]!.detail).toMatchObject({ period: `${day}T00`, run_id: expect.stringMatching(/~a2$/) });
    expect(mine[3]!.detail).toMatchObject({
      rollup: 'team_a.hourly',
      state: 'failed',
      error: 'boom',
      effect: 'applied',
    });
    expect(mine[1]!.detail).toEqual({ period: `${day}T06` });
    expect(Date.parse(mine[0]!.at)).toBeGreaterThanOrEqual(Date.parse(mine[3]!.at));
  });

  it('names a token of api_tokens by a short hash of it, never the token', async () => {
    const api = (await entries()).filter((e) => e.action === 'run_report' && e.target.startsWith('team_b.'));
    expect(api.map((e) => e.token)).toEqual([hashedName('api', TEST_TOKEN)]);
    expect(JSON.stringify(await entries())).not.toContain(TEST_TOKEN);
  });

  it('pages newest first with a cursor', async () => {
    const all = await entries();
    const first = (await call(OPS, 'GET', '/v1/audit?limit=2')).body;
    expect(first.entries.map((e: Json) => e.id)).toEqual(all.slice(0, 2).map((e) => e.id));
    const second = (await call(OPS, 'GET', `/v1/audit?limit=2&cursor=${first.next_cursor}`)).body;
    expect(second.entries.map((e: Json) => e.id)).toEqual(all.slice(2, 4).map((e) => e.id));
    expect((await call(OPS, 'GET', `/v1/audit?limit=${all.length}`)).body.next_cursor).toBeNull();
    expect((await call(OPS, 'GET', '/v1/audit?cursor=bogus')).body.code).toBe('invalid_cursor');
  });

  it('records nothing for a write that rolled back', async () => {
    const before = (await entries()).length;
    const period = {
      start: Date.parse(hour(9).start) * 1000,
      end: Date.parse(hour(9).end) * 1000,
      key: `${day}T09`,
    };
    const failing = requestManualRun(daemon.sql, 'team_a.hourly', period, async (tx) => {
      await recordAudit(tx, {
        token: 'team_a',
        at: new Date(),
        action: 'trigger',
        target: { type: 'rollup', id: 'team_a.hourly' },
        detail: {},
      });
      throw new Error('the write fails after its entry');
    });
    await expect(failing).rejects.toThrow('the write fails after its entry');
    expect((await entries()).length).toBe(before);
  });

  it('is pruned with the history', async () => {
    const old = new Date(Date.now() - 40 * DAY_MS);
    const entry = {
      token: 'old',
      at: old,
      action: 'trigger',
      target: { type: 'rollup', id: 'x' } as const,
      detail: {},
    };
    await recordAudit(daemon.sql, entry);
    const options = {
      eventsMs: 30 * DAY_MS,
      partitionSeconds: 86_400,
      aheadSeconds: 2 * 86_400,
      readers: [],
    };
    const keep = await prune(daemon.sql, { ...options, historyMs: null });
    expect(keep.auditPruned).toBe(0);
    const pruned = await waitFor(async () => {
      const report = await prune(daemon.sql, { ...options, historyMs: 30 * DAY_MS });
      return report.ran ? report : undefined; // the daemon's own pass may hold the lock a moment
    });
    expect(pruned.auditPruned).toBe(1);
    expect((await entries()).some((e) => e.token === 'old')).toBe(false);
  });
});

describe('/metrics and /readyz with tokens set', () => {
  it('need a read token, and /readyz answers its status alone without one', async () => {
    expect((await call(null, 'GET', '/metrics')).status).toBe(401);
    expect((await call(TEAM_A, 'GET', '/metrics')).status).toBe(403);
    const metrics = await daemon.http.inject({
      url: '/metrics',
      headers: { authorization: `Bearer ${READER}` },
    });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.body).toContain('coverage_rollup_');
    expect(await call(null, 'GET', '/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
    expect(await call(TEAM_A, 'GET', '/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
    expect((await call(READER, 'GET', '/readyz')).body).toMatchObject({
      status: 'ready',
      scheduler: expect.any(Object),
    });
  });

  it('stay open with metrics.public: true', async () => {
    const open = await startTestDaemon({
      ...config,
      metrics: { public: true },
      scheduler: { ...config.scheduler, enabled: false },
    });
    const metrics = await open.http.inject({ url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    const ready = (await open.http.inject({ url: '/readyz' })).json() as Json;
    expect(ready).toMatchObject({ status: 'ready', postgres: 'ok', migrations: expect.any(Object) });
    // Reads are still gated.
    expect((await open.http.inject({ url: '/v1/assets' })).statusCode).toBe(401);
  });
});
