/**
 * The CLI finds its daemon: run in the directory a daemon records itself in (daemon.json in its
 * data directory), or given --url, `status`, `check`, `emit`, `retry` and `repair` act on that
 * daemon's rollups and database with no other flag; with neither, they say how to point them.
 * The built CLI against a daemon of this file (its API; the record written as `start` writes
 * it), and `start` itself writing, refreshing and removing its record.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { type DaemonRecord, RECORD_FORMAT, writeRecord } from '../../src/support/daemon-record.js';
import { createLogger } from '../../src/support/log.js';
import { TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { DAEMON_ENTRY, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const hourOf = (h: number) => `${day}T${String(h).padStart(2, '0')}`;
const span = (h: number) => ({ start: `${hourOf(h)}:00:00Z`, end: `${hourOf(h + 1)}:00:00Z` });

const LOCAL_TOKEN = 'local-token-of-this-machine-0123456789';
const sink = await startWebhookSink();
const db = await createTestDatabase();
const config = testConfig(db, createTestPrefix(), {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    {
      id: 'hook',
      upstream: ['hook.in'],
      every: 'hour',
      begin: day,
      run: { retries: 0, timeout: 'PT60S', outcome: 'callback' },
      target: { type: 'webhook', url: sink.url },
    },
  ],
});
const daemon = await startDaemon(config, createLogger(config.log_level), defineRollups(config), {
  localToken: LOCAL_TOKEN,
});

const root = mkdtempSync(join(tmpdir(), 'cr-cli-daemon-'));
/** Where a daemon "runs": its data directory holds the record `start` would write. */
const here = join(root, 'here');
/** A directory no daemon runs in. */
const elsewhere = join(root, 'elsewhere');
mkdirSync(join(here, '.coverage-rollup'), { recursive: true });
mkdirSync(elsewhere);
const record: DaemonRecord = {
  format: RECORD_FORMAT,
  pid: process.pid,
  started_at: new Date().toISOString(),
  config: null,
  url: daemon.url,
  token: LOCAL_TOKEN,
  database: 'postgres://test',
  database_url: null,
  redis_url: null,
  queue: {
    backend: config.queue.backend,
    name: config.queue.name,
    dead_letter: config.queue.dead_letter,
    prefix: config.queue.prefix,
    groups: 1,
  },
};
writeRecord(join(here, '.coverage-rollup'), record);

afterAll(async () => {
  await daemon.stop();
  await sink.close();
  rmSync(root, { recursive: true, force: true });
});

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The built CLI in `cwd`, with none of the configuration variables of the caller's shell. */
function cli(args: string[], cwd: string, extraEnv: Record<string, string> = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of [...CONFIG_ENV_VARS, 'COVERAGE_ROLLUP_TOKEN']) delete env[key];
  Object.assign(env, extraEnv);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [DAEMON_ENTRY, ...args],
      { cwd, env, timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** A failed run of the hook rollup's hour `h`: covered, delivered, reported failed (no retries). */
async function failedRun(h: number): Promise<void> {
  const answer = await daemon.http.inject({
    method: 'POST',
    url: '/v1/events',
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
    payload: [{ asset: 'hook.in', ...span(h), version: 'v1', id: `hook.in@${h}` }],
  });
  expect(answer.statusCode).toBeLessThan(300);
  const key = `hook@${day.replaceAll('-', '')}T${String(h).padStart(2, '0')}0000Z#1`;
  await waitFor(() => sink.calls.find((c) => c.key === key), {
    what: `hour ${h} delivered`,
    timeout: 30_000,
  });
  const reported = await daemon.http.inject({
    method: 'POST',
    url: '/v1/runs',
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
    payload: { idempotency_key: key, attempt: 1, state: 'failed', error: 'boom' },
  });
  expect(reported.statusCode).toBe(200);
}

const modes = [
  { name: "from the daemon's directory, with no flag", cwd: here, flags: [], env: {} },
  {
    name: 'with --url and COVERAGE_ROLLUP_TOKEN',
    cwd: elsewhere,
    flags: ['--url', daemon.url],
    env: { COVERAGE_ROLLUP_TOKEN: TEST_TOKEN },
  },
] as const;

describe.each(modes)('the CLI $name', ({ cwd, flags, env }) => {
  const run = (args: string[]) => cli([...args, ...flags], cwd, env);
  const asset = `found.${flags.length === 0 ? 'dir' : 'url'}`;

  it("emits into the daemon's index, and check answers from it", async () => {
    const window = ['--start', '2025-06-01T00:00:00Z', '--end', '2025-06-01T02:00:00Z'];
    const before = await run(['check', asset, ...window]);
    expect(before).toMatchObject({
      code: 1,
      stdout: `${asset}: not covered (no event for this asset has been ingested yet)\n`,
    });
    const emitted = await run([
      'emit',
      '--asset',
      asset,
      '--interval',
      '2025-06-01T00:00:00Z/PT1H',
      '--id',
      'e1',
    ]);
    expect(emitted.code, emitted.stderr).toBe(0);
    expect(emitted.stdout).toMatch(
      /^(committed 1 event\(s\) to the index|enqueued 1 event\(s\) through http)/,
    );
    // On Redis the daemon enqueues: the worker commits it a moment later.
    const half = await waitFor(
      async () => {
        const r = await run(['check', asset, ...window]);
        return r.code === 1 && r.stdout.includes('ratio 0.5') ? r : undefined;
      },
      { what: 'the event in the index' },
    );
    expect(half.stdout).toContain('missing:\n  2025-06-01T01:00:00Z .. 2025-06-01T02:00:00Z');
    const covered = await run([
      'check',
      asset,
      '--start',
      '2025-06-01T00:00:00Z',
      '--end',
      '2025-06-01T01:00:00Z',
    ]);
    expect(covered.code).toBe(0);
    const json = await run(['check', asset, ...window, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ asset, covered: false, ratio: 0.5, missing_count: 1 });
  });

  it('refuses what the daemon refuses, saying why, with nothing sent', async () => {
    const bad = await run([
      'emit',
      '--asset',
      asset,
      '--start',
      '2025-06-01T02:00:00Z',
      '--end',
      '2025-06-01T01:00:00Z',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('nothing sent; 1 invalid event(s)');
    const empty = await run([
      'check',
      asset,
      '--start',
      '2025-06-01T00:00:00Z',
      '--end',
      '2025-06-01T00:00:00Z',
    ]);
    expect(empty).toMatchObject({ code: 2, stderr: expect.stringContaining('the window is empty') });
    const known = await run(['check', 'never.seen', '--start', '1', '--end', '2', '--require-known']);
    expect(known).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('no asset named never.seen is known'),
    });
  });

  it("shows the daemon's assets and rollups in status", async () => {
    const status = await run(['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`daemon: ${daemon.url}`);
    expect(status.stdout).toMatch(/rollups \(1\):\n {2}hook {2}/);
    const json = JSON.parse((await run(['status', '--json'])).stdout);
    expect(json.rollups.map((r: { id: string }) => r.id)).toEqual(['hook']);
    // The database path's shape: the lease held by this daemon (it leads: the only instance).
    expect(json.leases).toEqual([expect.objectContaining({ name: 'scheduler', token: expect.any(Number) })]);
  });

  it("retries a failed run of the daemon's rollup, by key and by window", async () => {
    const [one, two] = flags.length === 0 ? [3, 4] : [5, 6];
    await failedRun(one);
    await failedRun(two);
    const byKey = await run(['retry', 'hook', '--period', hourOf(one)]);
    expect(byKey.code, byKey.stderr).toBe(0);
    expect(byKey.stdout).toContain(`${hourOf(one)}: attempt 2`);
    const byWindow = await run([
      'retry',
      'hook',
      '--failed',
      '--start',
      span(two).start,
      '--end',
      span(two).end,
      '--json',
    ]);
    expect(byWindow.code, byWindow.stderr).toBe(0);
    expect(JSON.parse(byWindow.stdout).retried).toEqual([
      expect.objectContaining({ period: hourOf(two), attempt: 2 }),
    ]);
    const refused = await run(['retry', 'hook', '--period', hourOf(20)]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain(`${hourOf(20)}: not retried`);
    const unknown = await run(['retry', 'clicks_hourly', '--period', hourOf(1)]);
    expect(unknown).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('no rollup clicks_hourly is configured'),
    });
  });
});

describe.each(modes)('repair $name', ({ cwd, flags, env }) => {
  it("asks for the daemon's missing ranges, once", async () => {
    const [from, to] = flags.length === 0 ? [10, 12] : [13, 15];
    const target = ['--target', '{type: queue, queue: backfills}'];
    const window = ['--start', span(from).start, '--end', span(to).start];
    const made = await cli(['repair', 'hook.in', ...window, ...target, ...flags, '--json'], cwd, env);
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout)).toMatchObject({
      asset: 'hook.in',
      requested: {
        ranges: [{ start: span(from).start, end: span(to).start, kind: 'missing' }],
        sent_to: 'queue backfills',
      },
    });
    const again = await cli(['repair', 'hook.in', ...window, ...target, ...flags], cwd, env);
    expect(again).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('every range is already requested by open repair'),
    });
    const unknown = await cli(['repair', 'no.such', ...window, ...target, ...flags], cwd, env);
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('asset no.such is unknown') });
  });
});

describe('the CLI with no daemon to find', () => {
  it('says how to point it: the directory, --url, --config or DATABASE_URL', async () => {
    for (const args of [
      ['status'],
      ['check', 'a', '--start', '1', '--end', '2'],
      ['emit', '--asset', 'a', '--start', '1', '--end', '2'],
      ['retry', 'hook', '--period', hourOf(1)],
      ['repair', 'hook.in', '--start', span(1).start, '--end', span(2).start],
    ]) {
      const run = await cli(args, elsewhere);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toContain('no coverage-rollup daemon found (no daemon is recorded in');
      for (const way of [
        'COVERAGE_ROLLUP_DATA_DIR',
        '--url http://HOST:PORT',
        '--config FILE',
        'DATABASE_URL',
      ])
        expect(run.stderr).toContain(way);
    }
    // Usage errors still come first.
    expect((await cli(['check'], elsewhere)).stderr).toContain('give the asset');
  });

  it('says so when the recorded daemon is gone, and when --url does not answer', async () => {
    const gone = join(root, 'gone');
    mkdirSync(join(gone, '.coverage-rollup'), { recursive: true });
    writeRecord(join(gone, '.coverage-rollup'), { ...record, pid: 2 ** 22 + 12_345 });
    const stale = await cli(['status'], gone);
    expect(stale.code).toBe(2);
    expect(stale.stderr).toContain(`(pid ${2 ** 22 + 12_345}) is no longer running`);
    const closed = await cli(['status', '--url', 'http://127.0.0.1:9'], elsewhere);
    expect(closed).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('no daemon answers at http://127.0.0.1:9'),
    });
    const bad = await cli(['status', '--url', 'localhost:8080'], elsewhere);
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining('--url must start with http://') });
  });

  it('names the token when --url reaches a daemon that refuses the write', async () => {
    const run = await cli(
      ['emit', '--asset', 'a', '--start', '1', '--end', '2', '--url', daemon.url],
      elsewhere,
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('COVERAGE_ROLLUP_TOKEN');
  });
});

describe('coverage-rollup start records itself in its data directory', () => {
  const processes = processHarness();
  const dataDir = join(root, 'started');

  it('writes daemon.json at ready (its URL, config, queue; readable by its user only), and removes it at a clean stop', async () => {
    const p = await processes.spawn({
      name: 'recorded',
      config: {
        database_url: db.url,
        redis_url: REDIS_URL,
        http: { host: '127.0.0.1', port: 0 },
        data_dir: dataDir,
        queue: { prefix: createTestPrefix() },
        log_level: 'info',
      },
    });
    const path = join(dataDir, 'daemon.json');
    await waitFor(() => existsSync(path), { what: 'the record' });
    const written = JSON.parse(readFileSync(path, 'utf8')) as DaemonRecord;
    expect(written).toMatchObject({ format: 1, pid: p.pid, config: p.configPath, url: p.url });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(written.database).not.toContain(new URL(db.url).password || '\u0000');
    const status = await cli(['status'], elsewhere, { COVERAGE_ROLLUP_DATA_DIR: dataDir });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`daemon: ${p.url}`);
    // prune works on a database: the recorded daemon's config names it (no embedded server made).
    const prune = await cli(['prune', '--dry-run', '--json'], elsewhere, {
      COVERAGE_ROLLUP_DATA_DIR: dataDir,
    });
    expect(prune.code, prune.stderr).toBeLessThanOrEqual(1);
    expect(JSON.parse(prune.stdout)).toMatchObject({ dryRun: true, ran: true });
    expect(existsSync(join(dataDir, 'server.json'))).toBe(false);
    expect((await p.stop()).code).toBe(0);
    expect(existsSync(path)).toBe(false);
  });

  it('leaves a record a kill -9 ends as stale: commands say its daemon is gone', async () => {
    const p = await processes.spawn({
      name: 'killed',
      config: {
        database_url: db.url,
        redis_url: REDIS_URL,
        http: { host: '127.0.0.1', port: 0 },
        data_dir: dataDir,
        queue: { prefix: createTestPrefix() },
      },
    });
    await waitFor(() => existsSync(join(dataDir, 'daemon.json')), { what: 'the record' });
    await p.kill();
    const status = await cli(['status'], elsewhere, { COVERAGE_ROLLUP_DATA_DIR: dataDir });
    expect(status.code).toBe(2);
    expect(status.stderr).toContain(`(pid ${p.pid}) is no longer running`);
  });
});
