/**
 * The one-shot commands as a user runs them: the BUILT CLI (`node dist/src/cli/main.js`, built by
 * global-setup.ts) with a config file, against this file's own database and queue prefix.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { testProducer } from '../helpers/daemon.js';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { ingestConfig } from './ingest-harness.js';

const dir = mkdtempSync(join(tmpdir(), 'crcli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const prefix = createTestPrefix();
let db: TestDatabase;
let configPath: string;
let producer: ReturnType<typeof testProducer>;

function writeConfig(name: string, config: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

beforeAll(async () => {
  db = await createTestDatabase();
  configPath = writeConfig('config.json', {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'silent',
    queue: { prefix },
  });
  producer = testProducer(ingestConfig(db, prefix));
  const events = [
    { asset: 'cli.orders', start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z', version: 'v1' },
    { asset: 'cli.orders', start: '2025-06-01T11:30:00Z', end: '2025-06-01T12:00:00Z', version: 'v1' },
  ].map((e) => normalizeEvent(e, { maxPayloadBytes: 65_536 }));
  await commitEvents(db.sql, events);
});

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: string[], options: { config?: string; stdin?: string } = {}): Promise<Run> {
  const env = { ...process.env };
  for (const key of CONFIG_ENV_VARS) delete env[key]; // the config file decides, never the caller's shell
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [DAEMON_ENTRY, ...args, '--config', options.config ?? configPath],
      { env, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end(options.stdin ?? '');
  });
}

async function queued(): Promise<unknown[]> {
  const jobs = await producer.getJobs(['waiting']);
  return jobs.map((j) => j.data);
}

describe('coverage-rollup check', () => {
  const window = ['--start', '2025-06-01T10:00:00Z'];

  it('exits 0 for a covered window and 1 for a gap, printing what is missing', async () => {
    const covered = await cli(['check', 'cli.orders', ...window, '--end', '2025-06-01T11:00:00Z']);
    expect(covered).toMatchObject({ code: 0, stdout: expect.stringContaining('covered, ratio 1') });
    const gap = await cli(['check', 'cli.orders', ...window, '--end', '2025-06-01T12:00:00Z']);
    expect(gap.code).toBe(1);
    expect(gap.stdout).toContain('NOT covered');
    expect(gap.stdout).toContain('2025-06-01T11:00:00Z .. 2025-06-01T11:30:00Z');
  });

  it('prints the ratio as docs/cli.md says: four decimals, never 1 while anything is missing', async () => {
    // One millisecond missing of an hour: 0.9999997 (six decimals would print 1).
    const run = await cli(['check', 'cli.orders', ...window, '--end', '2025-06-01T11:00:00.001Z']);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('NOT covered, ratio 0.9999;');
    const json = await cli(['check', 'cli.orders', ...window, '--end', '2025-06-01T11:00:00.001Z', '--json']);
    expect(JSON.parse(json.stdout).ratio).toBeCloseTo(3_600_000 / 3_600_001, 12); // JSON stays exact
  });

  it('prints the coverage answer with --json', async () => {
    const run = await cli(['check', 'cli.orders', ...window, '--end', '2025-06-01T12:00:00Z', '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({
      asset: 'cli.orders',
      covered: false,
      ratio: 0.75,
      missing: [{ start: '2025-06-01T11:00:00Z', end: '2025-06-01T11:30:00Z' }],
    });
  });

  it('exits 1 for an asset never seen and 2 for a bad window or usage', async () => {
    expect((await cli(['check', 'cli.nothing', ...window, '--end', '2025-06-01T11:00:00Z'])).code).toBe(1);
    const bad = await cli(['check', 'cli.orders', ...window, '--end', 'later']);
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining('"later"') });
    const noEnd = await cli(['check', 'cli.orders', ...window]);
    expect(noEnd).toMatchObject({ code: 2, stderr: expect.stringContaining('check: give --end\n') });
  });

  it('refuses --version inside a command instead of printing the version and exiting 0', async () => {
    const run = await cli(['check', 'cli.nothing', '--version', ...window, '--end', '2025-06-01T11:00:00Z']);
    expect(run).toMatchObject({ code: 2, stderr: expect.stringContaining('--data-version') });
    expect(await cli(['--version'])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^coverage-rollup \d/),
    });
  });
});

describe('coverage-rollup check: bounded output, freshness, footguns', () => {
  // cli.holey: 300 one-minute holes, every other minute from 2026-01-01; cli.recent: complete up
  // to an hour ago.
  const T0 = Date.UTC(2026, 0, 1);
  const at = (minute: number) => new Date(T0 + minute * 60_000).toISOString().replace('.000Z', 'Z');
  const year = ['--start', at(0), '--end', '2027-01-01T00:00:00Z'];
  const hourAgo = Date.now() - 3_600_000;
  const recent = [
    '--start',
    new Date(hourAgo - 3_600_000).toISOString(),
    '--end',
    new Date(hourAgo).toISOString(),
  ];

  beforeAll(async () => {
    const events = Array.from({ length: 300 }, (_, k) => ({
      asset: 'cli.holey',
      start: at(2 * k),
      end: at(2 * k + 1),
      version: 'v1',
    }));
    events.push({
      asset: 'cli.recent',
      start: new Date(hourAgo - 7_200_000).toISOString(),
      end: new Date(hourAgo).toISOString(),
      version: 'v1',
    });
    await commitEvents(
      db.sql,
      events.map((e) => normalizeEvent(e, { maxPayloadBytes: 65_536 })),
    );
  });

  it('prints a summary line and at most --limit gaps (20 by default)', async () => {
    const run = await cli(['check', 'cli.holey', ...year]);
    expect(run.code).toBe(1);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      `cli.holey [${at(0)}, 2027-01-01T00:00:00Z): NOT covered, ratio 0.0006; ` + // 300 / 525,600 at four decimals
        `300 missing ranges (${(525_600 - 300) * 60} s), first ${at(1)} .. ${at(2)}, last ${at(599)} .. 2027-01-01T00:00:00Z; ` +
        '0 replay-required ranges',
    );
    expect(lines[1]).toMatch(
      // Lag in status's units: 2h 5m, 0.4s, never raw seconds.
      new RegExp(`^covered until ${at(599)}, lag (\\d+(\\.\\d+)?[dhms]( \\d+[hms])?); last event at \\d{4}-`),
    );
    expect(lines.filter((l) => /^ {2}\S+ \.\. \S+$/.test(l))).toHaveLength(20);
    expect(run.stdout).toContain('  ... 280 more (--limit N prints up to 1000; --order newest)');
    const five = await cli(['check', 'cli.holey', ...year, '--limit', '5', '--order', 'newest']);
    expect(five.stdout).toContain(
      `missing:\n  ${at(599)} .. 2027-01-01T00:00:00Z\n  ${at(597)} .. ${at(598)}\n`,
    );
    expect(five.stdout).toContain('  ... 295 more');
    expect(five.stdout.split('\n')[0]).toContain(
      `first ${at(1)} .. ${at(2)}, last ${at(599)} .. 2027-01-01T00:00:00Z`,
    );
  });

  it('bounds --json like HTTP: 200 entries per list by default, with exact totals', async () => {
    const run = await cli(['check', 'cli.holey', ...year, '--json']);
    const answer = JSON.parse(run.stdout);
    expect(answer.missing).toHaveLength(200);
    expect(answer).toMatchObject({
      missing_count: 300,
      missing_total: (525_600 - 300) * 60,
      truncated: true,
    });
    const small = JSON.parse((await cli(['check', 'cli.holey', ...year, '--json', '--limit', '2'])).stdout);
    expect(small.missing).toEqual([
      { start: at(1), end: at(2) },
      { start: at(3), end: at(4) },
    ]);
  });

  it('--max-lag exits 1 when the asset is stale, saying why, and 0 when it is fresh', async () => {
    const stale = await cli(['check', 'cli.recent', ...recent, '--max-lag', 'PT20M']);
    expect(stale.code).toBe(1);
    expect(stale.stdout).toContain('covered, ratio 1');
    expect(stale.stderr).toMatch(
      /cli\.recent is stale: covered until \S+, PT1H(\d+M)?(\d+S)? ago, more than max_lag PT20M/,
    );
    const fresh = await cli(['check', 'cli.recent', ...recent, '--max-lag', 'PT2H']);
    expect(fresh).toMatchObject({ code: 0, stderr: '' });
    expect((await cli(['check', 'cli.recent', ...recent])).code).toBe(0);
    const json = JSON.parse(
      (await cli(['check', 'cli.recent', ...recent, '--max-lag', 'PT20M', '--json'])).stdout,
    );
    expect(json).toMatchObject({ covered: true, max_lag: 'PT20M', stale: true });
    const bad = await cli(['check', 'cli.recent', ...recent, '--max-lag', '20m']);
    expect(bad).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--max-lag must be an ISO 8601 duration'),
    });
  });

  it('refuses an empty window with exit 2, for known and unknown assets alike', async () => {
    for (const asset of ['cli.orders', 'cli.nothing']) {
      const run = await cli([
        'check',
        asset,
        '--start',
        '2025-06-01T10:00:00Z',
        '--end',
        '2025-06-01T12:00:00+02:00',
      ]);
      expect(run, asset).toMatchObject({
        code: 2,
        stdout: '',
        stderr: expect.stringContaining('the window is empty'),
      });
    }
  });

  it('--require-known makes an asset the index does not know an error (2) rather than not covered (1)', async () => {
    const window = ['--start', '2025-06-01T10:00:00Z', '--end', '2025-06-01T11:00:00Z'];
    expect((await cli(['check', 'cli.misspelt', ...window])).code).toBe(1);
    const run = await cli(['check', 'cli.misspelt', ...window, '--require-known']);
    expect(run).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('no asset named cli.misspelt is known'),
    });
    expect((await cli(['check', 'cli.orders', ...window, '--require-known'])).code).toBe(0);
  });
});

describe('a command against a database the daemon never migrated', () => {
  it('says what to run instead of PostgreSQL\'s "relation does not exist"', async () => {
    const empty = await createEmptyDatabase(); // dropped after the file
    const config = writeConfig('unmigrated.json', {
      database_url: empty.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
    });
    for (const args of [
      ['check', 'cli.orders', '--start', '2025-06-01T10:00:00Z', '--end', '2025-06-01T11:00:00Z'],
      ['status'],
    ]) {
      const run = await cli(args, { config });
      expect(run.code, args[0]).toBe(2);
      expect(run.stderr, args[0]).toContain('has no coverage-rollup tables; run coverage-rollup migrate');
    }
  });
});

describe('coverage-rollup status', () => {
  it('shows each asset covered_until, lag and last event', async () => {
    const run = await cli(['status', '--json']);
    expect(run.code).toBe(0);
    const assets = JSON.parse(run.stdout).assets as Array<Record<string, unknown>>;
    expect(assets.find((a) => a.asset === 'cli.orders')).toMatchObject({
      covered_until: '2025-06-01T12:00:00Z',
      lag_seconds: expect.any(Number),
      last_event_at: expect.stringMatching(/^\d{4}-/),
      max_lag: null,
      stale: null,
    });
    const text = await cli(['status']);
    expect(text.stdout).toMatch(
      /^ {4}covered until 2025-06-01T12:00:00Z, lag \d+d( \d+h)?, last event at \d{4}-/m,
    );
  });

  it('lists stale assets first and lags in human units, in the status page order', async () => {
    const now = Date.now();
    const iso = (ms: number) => new Date(ms - (ms % 60_000)).toISOString();
    await commitEvents(
      db.sql,
      [
        { asset: 'cli.a-fresh', start: iso(now - 3_600_000), end: iso(now) },
        { asset: 'cli.z-stale', start: iso(now - 3 * 3_600_000), end: iso(now - 2 * 3_600_000) },
      ].map((e) => normalizeEvent(e, { maxPayloadBytes: 65_536 })),
    );
    const config = writeConfig('status-stale.json', {
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
      assets: ['cli.a-fresh', 'cli.z-stale'].map((name) => ({ name, freshness: { max_lag: 'PT1H' } })),
    });
    const text = (await cli(['status'], { config })).stdout;
    const order = [...text.matchAll(/^ {2}(cli\.\S+)/gm)].map((m) => m[1]);
    expect(order[0]).toBe('cli.z-stale');
    expect(order.indexOf('cli.z-stale')).toBeLessThan(order.indexOf('cli.a-fresh'));
    expect(text).toMatch(/lag 2h( \d+m)?, last event at \S+ {2}STALE/);
  });

  it('names asset fields as /v1/assets does, and counts in words that agree with the number', async () => {
    await commitEvents(db.sql, [
      normalizeEvent({ asset: 'cli.single', start: 5, end: 9 }, { maxPayloadBytes: 65_536 }),
    ]);
    const run = await cli(['status', '--json']);
    const assets = JSON.parse(run.stdout).assets as Array<Record<string, unknown>>;
    const orders = assets.find((a) => a.asset === 'cli.orders')!;
    expect(Object.keys(orders).sort()).toEqual(
      [
        'asset',
        'domain',
        'zone',
        'event_count',
        'segment_count',
        'covered_extent',
        'updated_at',
        'covered_until',
        'lag_seconds',
        'last_event_at',
        'max_lag',
        'stale',
        'stale_reason',
      ].sort(),
    );
    expect(orders).toMatchObject({
      event_count: 2,
      segment_count: 2,
      covered_extent: { start: '2025-06-01T10:00:00Z', end: '2025-06-01T12:00:00Z' },
    });
    const text = (await cli(['status'])).stdout;
    expect(text).toContain(
      '  cli.orders  time  2 events  2 segments  [2025-06-01T10:00:00Z, 2025-06-01T12:00:00Z)',
    );
    expect(text).toContain('  cli.single  integer  1 event  1 segment  [5, 9)');
  });

  it('counts every period of each configured rollup by state, as /v1/rollups does, worst first', async () => {
    const hour = 3_600_000;
    const begin = new Date(Math.floor(Date.now() / hour) * hour - 2 * hour).toISOString();
    const hourly = (id: string, policy?: object) => ({
      id,
      upstream: ['cli.orders'],
      every: 'hour',
      begin,
      ...(policy ? { policy } : {}),
      target: { type: 'queue', queue: 'q' },
    });
    const config = writeConfig('status-rollups.json', {
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
      rollups: [
        hourly('cli_r10'),
        hourly('cli_hourly'),
        hourly('cli_r2'),
        hourly('cli_late', { deadline: 'PT1H', on_deadline: 'miss' }),
      ],
    });
    const run = await cli(['status', '--json'], { config });
    const rollups = JSON.parse(run.stdout).rollups as Array<{ id: string; periods: Record<string, number> }>;
    // The status page's order: missed periods first, then ids with digits compared as numbers.
    expect(rollups.map((r) => r.id)).toEqual(['cli_late', 'cli_hourly', 'cli_r2', 'cli_r10']);
    const rollup = rollups[1];
    expect(rollup).toEqual({
      id: 'cli_hourly',
      periods: { waiting: expect.any(Number), settling: 0, triggered: 0, rerun_pending: 0, missed: 0 },
      failed_runs: 0,
      last_trigger: null,
      undelivered: 0,
    });
    // Nothing is stored for them (periods are sparse), yet each hour since begin is counted.
    expect(rollup!.periods.waiting).toBeGreaterThanOrEqual(3);
    const text = (await cli(['status'], { config })).stdout;
    expect(text).toMatch(/^ {2}cli_hourly {2}\d+ waiting {2}last trigger none {2}undelivered 0$/m);
  });
});

describe('coverage-rollup start: a rollup graph with a cycle', () => {
  it('is refused at load with exit 2, naming the cycle, before anything starts', async () => {
    const rollup = (id: string, upstream: string) => ({
      id,
      upstream: [upstream],
      every: 'hour',
      begin: '2026-11-01',
      output: `agg.${id}`,
      target: { type: 'queue', queue: `${id}-runs` },
    });
    const config = writeConfig('cycle.json', {
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
      rollups: [rollup('hourly', 'agg.daily'), rollup('daily', 'agg.hourly')],
    });
    const run = await cli(['start'], { config });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('rollup cycle: hourly -> agg.hourly -> daily -> agg.daily -> hourly');
    // Nothing was started: its output assets were never registered.
    const [row] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from assets where name in ('agg.hourly', 'agg.daily')`;
    expect(row!.n).toBe(0);
  });

  it('refuses a bad rollup period before it logs a line, naming the file and the field once', async () => {
    const config = writeConfig('bad-every.json', {
      database_url: 'postgres://127.0.0.1:1/never_reached',
      redis_url: REDIS_URL,
      queue: { prefix },
      rollups: [
        {
          id: 'r1',
          upstream: ['a'],
          every: 'fortnight',
          begin: '2026-11-01',
          target: { type: 'queue', queue: 'q' },
        },
      ],
    });
    const run = await cli(['start'], { config });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `invalid configuration (${config}):\n  rollups[r1].every: "fortnight" is neither`,
    );
    expect(run.stdout).toBe(''); // not even "starting coverage-rollup"
  });
});

describe('help', () => {
  it('gives each command its own help, with its options and exit codes', async () => {
    const check = await cli(['check', '--help']);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain('Usage: coverage-rollup check ASSET --start S --end E');
    expect(check.stdout).toContain('Exit codes: 0 covered, 1 not covered');
    expect((await cli(['emit', '--help'])).stdout).toContain('--data-version V');
    expect((await cli(['--help'])).stdout).toContain('Commands:');
  });

  it("answers an unknown option with the command's own options and its --help, not parseArgs' text", async () => {
    const typo = await cli(['check', 'cli.orders', '--strat', '2025-06-01T10:00:00Z']);
    expect(typo.code).toBe(2);
    expect(typo.stderr.trim()).toBe(
      'coverage-rollup check: unknown option --strat (did you mean --start?); its options are --start S, ' +
        '--end E, --limit N, --order oldest|newest, --max-lag D, --require-known, --json, --url URL, --config FILE, ' +
        '--help; see coverage-rollup check --help',
    );
    expect(typo.stderr).not.toContain('positional argument');
    const elsewhere = await cli(['status', '--start', 'x']);
    expect(elsewhere).toMatchObject({ code: 2, stdout: '' });
    expect(elsewhere.stderr).toContain(
      'coverage-rollup status: --start is not an option of status; its options are --json, --url URL',
    );
    const missing = await cli(['emit', '--asset']);
    expect(missing).toMatchObject({
      code: 2,
      stderr: 'coverage-rollup emit: --asset needs a value; see coverage-rollup emit --help\n',
    });
    expect((await cli(['--bogus'])).stderr).toContain(
      'coverage-rollup: unknown option --bogus; the options are --config FILE, --help, --version',
    );
  });
});

describe('coverage-rollup emit', () => {
  it('enqueues one event from flags', async () => {
    const run = await cli([
      'emit',
      '--asset',
      'cli.emitted',
      '--interval',
      '2025-06-01T10:00:00Z/PT5M',
      '--data-version',
      'v2',
      '--id',
      'e-1',
    ]);
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining('enqueued 1 event') });
    expect(await queued()).toContainEqual({
      asset: 'cli.emitted',
      interval: '2025-06-01T10:00:00Z/PT5M',
      version: 'v2',
      id: 'e-1',
    });
    await producer.drain();
  });

  it('enqueues nothing when one line of the file is bad, naming its line number', async () => {
    const file = join(dir, 'events.jsonl');
    const good = JSON.stringify({ asset: 'cli.file', start: 1, end: 2 });
    writeFileSync(file, `${good}\n\n\n${JSON.stringify({ asset: 'cli.file', start: 9, end: 5 })}\n`);
    const run = await cli(['emit', '--file', file]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('line 4: end_before_start');
    writeFileSync(file, `${good}\n\n{bad\n`);
    expect((await cli(['emit', '--file', file])).stderr).toContain('line 3 of');
    expect(await queued()).toEqual([]);
  });

  it('reads JSON lines from stdin', async () => {
    const lines = [1, 2, 3].map((i) => JSON.stringify({ asset: 'cli.stdin', start: i, end: i + 1 }));
    const run = await cli(['emit', '--file', '-'], { stdin: `${lines.join('\n')}\n` });
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining('enqueued 3 event') });
    expect(await queued()).toHaveLength(3);
    await producer.drain();
  });

  it("refuses an event whose bounds contradict the asset's recorded domain", async () => {
    const run = await cli(['emit', '--asset', 'cli.orders', '--start', '1', '--end', '5']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('domain_mismatch: asset cli.orders holds time bounds');
    expect(await queued()).toEqual([]);
  });

  it('still enqueues when PostgreSQL cannot be reached, saying it skipped that check', async () => {
    const offline = writeConfig('offline.json', {
      database_url: 'postgres://127.0.0.1:1/nowhere',
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix },
    });
    const run = await cli(['emit', '--asset', 'cli.orders', '--start', '1', '--end', '5'], {
      config: offline,
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('could not read asset domains from PostgreSQL');
    expect(await queued()).toHaveLength(1);
    await producer.drain();
  });

  it('fails with exit 2 and the reason when Redis cannot be reached, rather than wait forever', async () => {
    const noRedis = writeConfig('no-redis.json', {
      database_url: db.url,
      redis_url: 'redis://127.0.0.1:1',
      log_level: 'silent',
      queue: { prefix },
    });
    const run = await cli(['emit', '--asset', 'cli.x', '--start', '1', '--end', '2'], { config: noRedis });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('could not enqueue on Redis');
    expect(run.stderr).toContain('0 of 1 event(s) were enqueued');
  });

  it('refuses contradictory or missing flags rather than picking one', async () => {
    const cases = [
      [['emit', '--file', '-', '--asset', 'cli.x'], '--file takes its events from the file'],
      [
        ['emit', '--interval', '2025-06-01T10:00:00Z/PT5M', '--start', '2025-06-01T10:00:00Z'],
        'either --interval',
      ],
      [['emit'], 'give an event'],
      [['emit', '--asset', 'cli.x', '--start', '1', '--end', '2', '--version', 'v1'], '--data-version'],
      [
        ['emit', '--asset', 'cli.x', '--start', '1', '--end', '2', '--end', '3'],
        '--end is given more than once',
      ],
      [
        ['emit', '--asset', 'cli.x', '--start', '1', '--end', '2', '--replay'],
        '--replay needs --data-version',
      ],
      [['chek', 'cli.x'], 'unknown command "chek" (did you mean check?)'],
    ] as const;
    for (const [args, message] of cases) {
      const run = await cli([...args]);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toContain(message);
    }
    expect(await queued()).toEqual([]);
  });
});

describe('coverage-rollup emit where the queue is in the index database (queue.backend: postgres)', () => {
  const pgConfig = () =>
    writeConfig('pg.json', {
      database_url: db.url,
      log_level: 'silent',
      queue: { prefix, backend: 'postgres' },
    });
  const check = ['check', 'cli.direct', '--start', '0', '--end', '20'];

  it('commits into the index before it exits: check answers covered at once, a re-send is a duplicate', async () => {
    const config = pgConfig();
    expect((await cli(check, { config })).code).toBe(1);
    const lines = [0, 10].map((i) =>
      JSON.stringify({ asset: 'cli.direct', start: i, end: i + 10, id: `d-${i}` }),
    );
    const run = await cli(['emit', '--file', '-'], { config, stdin: `${lines.join('\n')}\n` });
    expect(run).toEqual({ code: 0, stdout: 'committed 2 event(s) to the index\n', stderr: '' });
    expect((await cli(check, { config })).code).toBe(0);
    const again = await cli(['emit', '--asset', 'cli.direct', '--start', '0', '--end', '10', '--id', 'd-0'], {
      config,
    });
    expect(again.stdout).toBe('committed 1 event(s) to the index (1 already there: duplicates)\n');
    const [{ event_count }] = await db.sql<[{ event_count: number }]>`
      select event_count from assets where name = 'cli.direct'`;
    expect(event_count).toBe(2);
  });

  it('commits nothing when one line is bad, naming it as the queue path does', async () => {
    const file = join(dir, 'direct.jsonl');
    const good = JSON.stringify({ asset: 'cli.direct.bad', start: 1, end: 2 });
    writeFileSync(file, `${good}\n\n${JSON.stringify({ asset: 'cli.orders', start: 1, end: 5 })}\n`);
    const run = await cli(['emit', '--file', file], { config: pgConfig() });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      'nothing committed; 1 invalid event(s):\nline 3: domain_mismatch: asset cli.orders',
    );
    expect(await db.sql`select 1 from assets where name = 'cli.direct.bad'`).toEqual([]);
  });
});
