/**
 * Rollups that change while the daemons run: PUT/DELETE through the API and a reload of the config
 * file, on a leader and its standby (two daemons on one database), through HTTP and the scheduler.
 */

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS, loadConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { hashedName } from '../../src/http/auth.js';
import { createLogger } from '../../src/support/log.js';
import { TEST_TOKEN, testConfigInput } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

// Deliveries of the first period's trigger are held until `release` is called (a pass in flight).
let hold: Promise<void> | undefined;
// Paths answered 503 (a delivery retried later, its run left pending).
const failing = new Set<string>();
const sink = await startWebhookSink((path) => (failing.has(path) ? 503 : 200));
afterAll(() => sink.close());

const db = await createTestDatabase();
const prefix = createTestPrefix();
const dir = mkdtempSync(join(tmpdir(), 'catalog-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'config.json');

const hook = (id: string) => ({ type: 'webhook', url: `${sink.url}/${id}` });
const hourly = (id: string, upstream: string, extra: Record<string, unknown> = {}) => ({
  id,
  upstream: [upstream],
  every: 'hour',
  begin: '2026-11-01',
  target: hook(id),
  ...extra,
});

/** file_cb stays in every later file (as delivery, once switched), unless a list names it. */
function writeConfig(listed: readonly unknown[], extra: Record<string, unknown> = {}): void {
  const named = listed.some((r) => (r as { id?: string }).id === 'file_cb');
  const rollups = named ? listed : [...listed, hourly('file_cb', 'cat.cb')];
  const raw = testConfigInput(db, prefix, { rollups, ...extra });
  writeFileSync(file, JSON.stringify(raw));
}

writeConfig([
  hourly('file_a', 'cat.a'),
  hourly('file_cal', 'cat.cal'),
  hourly('file_cb', 'cat.cb', { run: { outcome: 'callback' } }),
]);

async function start(): Promise<Daemon> {
  const config = loadConfig({ path: file });
  const daemon = await startDaemon(config, createLogger(config.log_level), defineRollups(config), {
    configFile: { path: file },
  });
  afterAll(() => daemon.stop());
  return daemon;
}

const leader = await start();
await waitFor(() => leader.scheduler !== undefined && leaderHolds(leader), {
  what: 'the first daemon to lead',
});
const standby = await start();

async function leaderHolds(d: Daemon): Promise<boolean> {
  const ready = (await (await fetch(`${d.url}/readyz`)).json()) as { scheduler?: { role?: string } };
  return ready.scheduler?.role === 'leader';
}

async function call(d: Daemon, method: string, path: string, body?: unknown) {
  const response = await fetch(`${d.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TEST_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  // biome-ignore lint/suspicious/noExplicitAny: the answers' shapes are what the assertions check
  return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, any>) };
}

const ids = async (d: Daemon) =>
  ((await call(d, 'GET', '/v1/rollups?limit=1000')).body.rollups as Array<{ id: string; source: string }>)
    .map((r) => `${r.id}:${r.source}`)
    .sort();

const emit = async (asset: string, start: string, end: string) => {
  const answer = await call(leader, 'POST', '/v1/events', { asset, start, end });
  expect(answer.status).toBeLessThan(300);
};

const delivered = (id: string) => sink.calls.filter((c) => c.path === `/hook/${id}`);

describe('rollups through the API', () => {
  it('a rollup PUT through the API triggers on events, on the running leader, without a restart', async () => {
    const put = await call(standby, 'PUT', '/v1/rollups/api_a', hourly('api_a', 'cat.api'));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body).toMatchObject({
      id: 'api_a',
      source: 'api',
      dry_run: false,
      change: 'added',
      periods: { action: 'created' },
      // The token's name as the audit records it: a token of api_tokens by a short hash of it.
      written_by: hashedName('api', TEST_TOKEN),
    });
    // Both instances list it, from the API.
    for (const d of [leader, standby])
      await waitFor(async () => (await ids(d)).includes('api_a:api'), { what: 'api_a listed' });
    await emit('cat.api', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    const [call1] = await waitFor(() => (delivered('api_a').length > 0 ? delivered('api_a') : null), {
      what: 'api_a delivered',
    });
    expect(call1!.body).toMatchObject({
      rollup: 'api_a',
      reason: 'covered',
      period: { key: '2026-11-02T10' },
    });
    const definition = await call(leader, 'GET', '/v1/rollups/api_a/definition');
    expect(definition.body).toMatchObject({
      id: 'api_a',
      source: 'api',
      written_by: hashedName('api', TEST_TOKEN),
    });
    expect(definition.body.definition).toMatchObject({ every: 'hour', upstream: ['cat.api'] });
  });

  it('answers 409 naming the config file for a file rollup, and never changes it', async () => {
    const put = await call(leader, 'PUT', '/v1/rollups/file_a', hourly('file_a', 'other.asset'));
    expect(put.status).toBe(409);
    expect(put.body.code).toBe('rollup_in_config_file');
    expect(put.body.message).toContain(file);
    const del = await call(leader, 'DELETE', '/v1/rollups/file_a');
    expect(del.status).toBe(409);
    const definition = await call(leader, 'GET', '/v1/rollups/file_a/definition');
    expect(definition.body).toMatchObject({ source: 'file', definition: { upstream: ['cat.a'] } });
  });

  it("refuses a bad rollup with every problem, in the config's words, and a literal secret", async () => {
    const bad = await call(leader, 'PUT', '/v1/rollups/bad', {
      ...hourly('bad', 'x'),
      every: 'fortnight',
      rerun: 'sometimes',
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.join('\n')).toMatch(/rollups\[bad\]\.every/);
    expect(bad.body.errors.join('\n')).toMatch(/rollups\[bad\]\.rerun/);
    const secret = await call(leader, 'PUT', '/v1/rollups/secret', {
      ...hourly('secret', 'x'),
      target: { type: 'webhook', url: sink.url, headers: { Authorization: 'Bearer s3cr3t' } },
    });
    expect(secret.status).toBe(422);
    expect(JSON.stringify(secret.body)).not.toContain('s3cr3t');
    // A cycle across the API and the file: the whole catalog is checked.
    const cycle = await call(leader, 'PUT', '/v1/rollups/loop', {
      ...hourly('loop', 'cat.loop.out'),
      output: 'cat.loop.out',
    });
    expect(cycle.status).toBe(422);
    expect(cycle.body.errors.join('\n')).toMatch(/cycle|its own runs/);
    const [{ n }] = await db.sql<
      [{ n: number }]
    >`select count(*)::int as n from api_rollups where id in ('bad', 'secret', 'loop')`;
    expect(n).toBe(0);
  });

  it('dry_run answers what would change and changes nothing', async () => {
    const dry = await call(leader, 'PUT', '/v1/rollups/api_dry?dry_run=true', hourly('api_dry', 'cat.dry'));
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      dry_run: true,
      change: 'added',
      periods: { action: 'created' },
      written_by: null,
    });
    const changed = await call(
      leader,
      'PUT',
      '/v1/rollups/api_a?dry_run=1',
      hourly('api_a', 'cat.api', { every: 'day' }),
    );
    expect(changed.body).toMatchObject({ dry_run: true, change: 'changed', periods: { action: 'rebuilt' } });
    expect((await call(leader, 'GET', '/v1/rollups/api_dry/definition')).status).toBe(404);
    expect((await call(leader, 'GET', '/v1/rollups/api_a/definition')).body.definition.every).toBe('hour');
    const [{ n }] = await db.sql<
      [{ n: number }]
    >`select count(*)::int as n from api_rollups where id = 'api_dry'`;
    expect(n).toBe(0);
  });

  it('a deleted rollup never delivers again, its history stays, and both instances drop it', async () => {
    const del = await call(standby, 'DELETE', '/v1/rollups/api_a');
    expect(del.status).toBe(200);
    for (const d of [leader, standby])
      await waitFor(async () => !(await ids(d)).includes('api_a:api'), { what: 'api_a gone' });
    const before = delivered('api_a').length;
    // A barrier: a file rollup's trigger from a later event proves the leader's passes ran past it.
    await emit('cat.api', '2026-11-02T11:00:00Z', '2026-11-02T12:00:00Z');
    await emit('cat.a', '2026-11-02T11:00:00Z', '2026-11-02T12:00:00Z');
    await waitFor(() => delivered('file_a').length > 0, { what: 'file_a delivered' });
    expect(delivered('api_a').length).toBe(before);
    const [{ n }] = await db.sql<
      [{ n: number }]
    >`select count(*)::int as n from triggers where rollup_id = 'api_a'`;
    expect(n).toBe(1);
  });
});

describe('a removed rollup', () => {
  it('never delivers the runs it left pending, once removed', async () => {
    failing.add('/hook/api_retry');
    const put = await call(leader, 'PUT', '/v1/rollups/api_retry', hourly('api_retry', 'cat.retry'));
    expect(put.status).toBe(200);
    await emit('cat.retry', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    await waitFor(() => delivered('api_retry').length > 0, { what: 'a refused delivery' });
    expect((await call(standby, 'DELETE', '/v1/rollups/api_retry')).status).toBe(200);
    await waitFor(async () => !(await ids(leader)).includes('api_retry:api'));
    failing.delete('/hook/api_retry');
    const tried = delivered('api_retry').length;
    // The run stays pending and due; a later decision of another rollup is the barrier.
    await emit('cat.a', '2026-11-02T14:00:00Z', '2026-11-02T15:00:00Z');
    await waitFor(
      () => delivered('file_a').some((c) => (c.body.period as { key: string }).key === '2026-11-02T14'),
      {
        what: 'file_a 14:00 delivered',
      },
    );
    const [run] = await db.sql<{ state: string; due_at: Date }[]>`
      select state, due_at from runs where rollup_id = 'api_retry'`;
    expect(run!.state).toBe('pending');
    await waitFor(
      async () => {
        const [{ now }] = await db.sql<[{ now: Date }]>`select now()`;
        return now.getTime() > run!.due_at.getTime() + 500;
      },
      { what: 'the pending run to be overdue' },
    );
    await emit('cat.a', '2026-11-02T15:00:00Z', '2026-11-02T16:00:00Z');
    await waitFor(() =>
      delivered('file_a').some((c) => (c.body.period as { key: string }).key === '2026-11-02T15'),
    );
    expect(delivered('api_retry').length).toBe(tried);
  });
});

describe('reload', () => {
  it('a webhook rollup switched to run.outcome delivery ends the runs it left waiting for a callback', async () => {
    await emit('cat.cb', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    const started = async () =>
      (await db.sql<{ state: string }[]>`select state from runs where rollup_id = 'file_cb'`)[0]?.state;
    await waitFor(async () => (await started()) === 'started', {
      what: 'file_cb started, waiting for its callback',
    });
    writeConfig([hourly('file_a', 'cat.a'), hourly('file_cal', 'cat.cal'), hourly('file_cb', 'cat.cb')]);
    const answer = await call(leader, 'POST', '/v1/admin/reload');
    expect(answer.body.rollups.changed).toEqual(['file_cb']);
    await waitFor(async () => (await started()) === 'succeeded', { what: 'file_cb succeeded on delivery' });
    expect(delivered('file_cb')).toHaveLength(1);
  });

  it('a bad file changes nothing, answers every problem and counts the failure', async () => {
    writeConfig([hourly('file_a', 'cat.a'), { ...hourly('broken', 'x'), every: 'sometimes', colour: 'red' }]);
    const answer = await call(leader, 'POST', '/v1/admin/reload');
    expect(answer.status).toBe(422);
    expect(answer.body.code).toBe('invalid_configuration');
    expect(answer.body.errors.join('\n')).toMatch(/rollups\[broken\]\.every/);
    expect(answer.body.errors.join('\n')).toMatch(/rollups\[broken\]\.colour/);
    expect(await ids(leader)).toContain('file_cal:file');
    expect(await ids(leader)).not.toContain('broken:file');
    const metrics = await (await fetch(`${leader.url}/metrics`)).text();
    expect(metrics).toMatch(/coverage_rollup_config_reloads_total\{result="failed"\} 1/);
  });

  it('adds and removes rollups on the leader and its standby, from a reload sent to either', async () => {
    writeConfig([hourly('file_a', 'cat.a'), hourly('file_cal', 'cat.cal'), hourly('file_b', 'cat.b')]);
    const added = await call(standby, 'POST', '/v1/admin/reload');
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    expect(added.body.rollups).toMatchObject({ added: ['file_b'], changed: [], removed: [] });
    for (const d of [leader, standby])
      await waitFor(async () => (await ids(d)).includes('file_b:file'), { what: 'file_b on both' });
    await emit('cat.b', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    await waitFor(() => delivered('file_b').length > 0, { what: 'file_b delivered' });

    writeConfig([hourly('file_a', 'cat.a'), hourly('file_cal', 'cat.cal')]);
    const removed = await call(leader, 'POST', '/v1/admin/reload');
    expect(removed.body.rollups).toMatchObject({ added: [], changed: [], removed: ['file_b'] });
    for (const d of [leader, standby])
      await waitFor(async () => !(await ids(d)).includes('file_b:file'), { what: 'file_b gone from both' });
    const before = delivered('file_b').length;
    await emit('cat.b', '2026-11-02T11:00:00Z', '2026-11-02T12:00:00Z');
    await emit('cat.a', '2026-11-02T12:00:00Z', '2026-11-02T13:00:00Z');
    await waitFor(
      () => delivered('file_a').some((c) => (c.body.period as { key: string }).key === '2026-11-02T12'),
      {
        what: 'file_a 12:00 delivered',
      },
    );
    expect(delivered('file_b').length).toBe(before);
  });

  it('a calendar change rebuilds the untriggered periods on the new calendar, from the index', async () => {
    // Half of one hour: a waiting period, stored.
    await emit('cat.cal', '2026-11-03T10:00:00Z', '2026-11-03T10:30:00Z');
    await waitFor(
      async () =>
        (await db.sql`select 1 from periods where rollup_id = 'file_cal' and key = '2026-11-03T10'`).length >
        0,
      { what: 'the hour period stored' },
    );
    writeConfig([hourly('file_a', 'cat.a'), hourly('file_cal', 'cat.cal', { every: 'day' })]);
    const answer = await call(leader, 'POST', '/v1/admin/reload');
    expect(answer.body.rollups.changed).toEqual(['file_cal']);
    await waitFor(
      async () => {
        const rows = await db.sql<{ key: string; ratio: number }[]>`
          select key, ratio from periods where rollup_id = 'file_cal' and generation = 0 order by lo`;
        return (
          rows.length > 0 &&
          rows.every((r) => r.key.length === 10) &&
          rows.some((r) => r.key === '2026-11-03' && r.ratio > 0)
        );
      },
      { what: 'file_cal periods rebuilt as days' },
    );
    const periods = await call(leader, 'GET', '/v1/rollups/file_cal/periods?start=2026-11-03&end=2026-11-04');
    expect(periods.body.periods).toEqual([expect.objectContaining({ key: '2026-11-03', state: 'waiting' })]);
    expect(periods.body.periods[0].ratio).toBeCloseTo(1 / 48, 6);
  });

  it('a reload during a scheduler pass (a delivery in flight) applies at the next pass, nothing decided twice', async () => {
    let release!: () => void;
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = await startSlowSink(() => hold!);
    const put = await call(leader, 'PUT', '/v1/rollups/api_slow', {
      ...hourly('api_slow', 'cat.slow'),
      target: { type: 'webhook', url: slow.url },
    });
    expect(put.status).toBe(200);
    await emit('cat.slow', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    await waitFor(() => slow.arrived > 0, { what: 'the held delivery to arrive' });
    // The pass is delivering (its request is held): reload adds a rollup meanwhile.
    writeConfig([
      hourly('file_a', 'cat.a'),
      hourly('file_cal', 'cat.cal', { every: 'day' }),
      hourly('file_mid', 'cat.mid'),
    ]);
    const answer = await call(standby, 'POST', '/v1/admin/reload');
    expect(answer.body.rollups.added).toEqual(['file_mid']);
    await emit('cat.mid', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    release();
    await waitFor(() => delivered('file_mid').length > 0, { what: 'file_mid delivered after the pass' });
    await waitFor(async () => {
      const [run] = await db.sql<{ state: string }[]>`select state from runs where rollup_id = 'api_slow'`;
      return run?.state === 'succeeded';
    });
    const triggers = await db.sql`select generation from triggers where rollup_id = 'api_slow'`;
    expect(triggers).toHaveLength(1);
    await slow.close();
  });

  it('a PUT racing a reload loses nothing: both instances end with the same catalog', async () => {
    writeConfig([
      hourly('file_a', 'cat.a'),
      hourly('file_cal', 'cat.cal', { every: 'day' }),
      hourly('file_mid', 'cat.mid'),
      hourly('file_race', 'cat.race'),
    ]);
    const puts = Array.from({ length: 6 }, (_, i) =>
      call(i % 2 === 0 ? leader : standby, 'PUT', `/v1/rollups/race_${i}`, hourly(`race_${i}`, 'cat.race')),
    );
    const [reloaded, ...written] = await Promise.all([call(leader, 'POST', '/v1/admin/reload'), ...puts]);
    expect(reloaded.status).toBe(200);
    for (const w of written) expect(w.status).toBe(200);
    const expected = [
      'api_slow:api',
      'file_a:file',
      'file_cal:file',
      'file_cb:file',
      'file_mid:file',
      'file_race:file',
      ...Array.from({ length: 6 }, (_, i) => `race_${i}:api`),
    ].sort();
    for (const d of [leader, standby])
      await waitFor(async () => JSON.stringify(await ids(d)) === JSON.stringify(expected), {
        what: 'the same catalog on both instances',
      });
    // And the leader's scheduler runs them all: one event, a trigger each.
    await emit('cat.race', '2026-11-02T10:00:00Z', '2026-11-02T11:00:00Z');
    for (const id of ['file_race', ...Array.from({ length: 6 }, (_, i) => `race_${i}`)])
      await waitFor(() => delivered(id).length > 0, { what: `${id} delivered` });
  });
});

describe('coverage-rollup reload', () => {
  const reload = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, COVERAGE_ROLLUP_TOKEN: TEST_TOKEN };
      for (const key of CONFIG_ENV_VARS) delete env[key];
      execFile(
        process.execPath,
        [DAEMON_ENTRY, 'reload', '--url', standby.url, ...args],
        { env, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
      );
    });

  it('says what changed, and exits 1 with every problem for a bad file', async () => {
    const same = await reload();
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toMatch(/^reloaded: 0 added; 0 changed; 0 removed; \d+ unchanged\n$/);
    writeConfig([{ ...hourly('file_a', 'cat.a'), every: 'fortnight' }]);
    const bad = await reload();
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('nothing changed');
    expect(bad.stderr).toMatch(/rollups\[file_a\]\.every: "fortnight"/);
    expect(await ids(standby)).toContain('file_race:file');
  });
});

/** A webhook endpoint whose answers wait for `gate()`. */
async function startSlowSink(gate: () => Promise<void>) {
  const { createServer } = await import('node:http');
  const state = { arrived: 0 };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.arrived++;
      void gate().then(() => res.writeHead(200).end());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/slow`,
    get arrived() {
      return state.arrived;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
