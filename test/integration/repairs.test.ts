/**
 * Repair requests end to end: a daemon on real PostgreSQL and Redis asks for a hole on
 * a queue, asks again at `every`, sees the hole partly filled (the rest asked for again), filled
 * (repaired, then the downstream trigger), never filled (abandoned), and decided by a deadline
 * (cancelled). Time is real: periods are PT2S long and begin in a moment; every wait is on a
 * condition.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { formatTime } from '../../src/core/intervals/bounds.js';
import { requestsToFollow } from '../../src/store/repairs/follow.js';
import { packageRoot } from '../../src/support/paths.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const PERIOD_MS = 2000;
const begin = Math.ceil((Date.now() + 3000) / PERIOD_MS) * PERIOD_MS;

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (
  id: string,
  upstream: string,
  repair: Record<string, unknown>,
  policy: Record<string, unknown> = {},
) => ({
  id,
  upstream: [upstream],
  every: `PT${PERIOD_MS / 1000}S`,
  timezone: 'UTC',
  begin: new Date(begin).toISOString(),
  policy,
  target: { type: 'queue', queue: 'rp-runs' },
  repair: { target: { type: 'queue', queue: 'rp-repairs' }, ...repair },
});
const config = testConfig(db, prefix, {
  rollups: [
    rollup('rp_main', 'rp.main', { after: 'PT1S', every: 'PT3S', attempts: 20 }),
    rollup('rp_abandon', 'rp.abandon', { after: 'PT1S', every: 'PT1S', attempts: 2 }),
    rollup('rp_cancel', 'rp.cancel', { after: 'PT1S', every: 'PT30S' }, { deadline: 'PT3S' }),
    rollup('rp_quiet', 'rp.quiet', { after: 'PT1S', every: 'PT1H' }),
    // Answered by examples/repair_worker.mjs, on a queue of its own.
    {
      ...rollup('rp_worker', 'rp.worker', { after: 'PT1S', every: 'PT2S', attempts: 20 }),
      repair: {
        after: 'PT1S',
        every: 'PT2S',
        attempts: 20,
        target: { type: 'queue', queue: 'rp-backfills' },
      },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const repairs = testQueue('rp-repairs', prefix, config);
const runs = testQueue('rp-runs', prefix, config);
const hand = testQueue('rp-hand', prefix, config);

/** ISO as the daemon formats UTC points: no fraction for whole seconds, no trailing zeros. */
const iso = (ms: number) => formatTime(ms * 1000);
/** A period starting at least a second from now, so its first events arrive before it ends. */
const upcomingPeriod = () => {
  const start = Math.max(begin, Math.ceil((Date.now() + 1000) / PERIOD_MS) * PERIOD_MS);
  // The daemon's key of a duration period names seconds only when they are not zero (zone.ts).
  const key = iso(start).slice(0, start % 60_000 === 0 ? 16 : 19);
  return { start, end: start + PERIOD_MS, key };
};
const slice = (asset: string, start: number, end: number, id: string) =>
  producer.add('e', { asset, start: iso(start), end: iso(end), version: 'v1', id });

const countOf = async (rows: Promise<readonly { n: number }[]>) => (await rows)[0]!.n;

interface RequestRow {
  id: number;
  state: string;
  attempt: number;
}
const requestOf = async (rollupId: string, lo: number) => {
  const rows = await db.sql<RequestRow[]>`
    select id, state, attempt from repair_requests where rollup_id = ${rollupId} and period_lo = ${lo * 1000}`;
  expect(rows.length).toBeLessThanOrEqual(1); // one request per asset range
  return rows[0];
};
const job = (id: number, attempt: number) =>
  waitFor(() => repairs.getJob(`repair-${id}~a${attempt}`), {
    what: `repair-${id}~a${attempt}`,
    timeout: 30_000,
  });
const listing = async (query: string) => {
  const response = await daemon.http.inject({
    url: `/v1/repairs?${query}`,
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
  });
  expect(response.statusCode).toBe(200);
  return response.json() as {
    repairs: Array<{ id: number; state: string; attempt: number }>;
    counts: Record<string, number>;
  };
};
const stateOf = async (asset: string, id: number) =>
  (await listing(`asset=${encodeURIComponent(asset)}`)).repairs.find((r) => r.id === id)?.state;

describe('repair requests', () => {
  it('requests a hole, re-sends it, asks only for the rest once partly filled, and sees it repaired and triggered', async () => {
    const p = upcomingPeriod();
    const mid = p.start + 1000;
    await slice('rp.main', p.start, mid, 'main-1');
    const request = await waitFor(() => requestOf('rp_main', p.start), {
      what: 'the request',
      timeout: 30_000,
    });
    const first: Job = await job(request.id, 1);
    expect(first.name).toBe('repair');
    expect(first.data).toEqual({
      type: 'repair',
      asset: 'rp.main',
      ranges: [{ start: iso(mid), end: iso(p.end), kind: 'missing', required_version: null }],
      ranges_total: 1,
      missing_total: 1,
      rollup: 'rp_main',
      period: { start: iso(p.start), end: iso(p.end), key: p.key },
      idempotency_key: `repair-${request.id}~a1`,
      attempt: 1,
      requested_at: expect.any(String),
    });

    // Not covered at `every`: attempt 2, the same range.
    const second = await job(request.id, 2);
    expect(second.data).toMatchObject({
      attempt: 2,
      idempotency_key: `repair-${request.id}~a2`,
      ranges: first.data.ranges,
    });

    // Half of the hole arrives: partial, and the next attempt asks only for the rest.
    await slice('rp.main', mid, mid + 500, 'main-2');
    await waitFor(async () => (await stateOf('rp.main', request.id)) === 'partial', { what: 'partial' });
    const { attempt } = (await requestOf('rp_main', p.start))!;
    const next = await job(request.id, attempt + 1);
    expect(next.data.ranges).toEqual([
      { start: iso(mid + 500), end: iso(p.end), kind: 'missing', required_version: null },
    ]);

    // The rest arrives: repaired (learnt from the index), and the period is triggered.
    await slice('rp.main', mid + 500, p.end, 'main-3');
    await waitFor(async () => (await stateOf('rp.main', request.id)) === 'repaired', { what: 'repaired' });
    const run = await waitFor(
      async () =>
        (await runs.getJobs(['waiting', 'active', 'completed', 'delayed'])).find(
          (j) => j.data.rollup === 'rp_main' && j.data.period?.start === iso(p.start),
        ),
      { what: 'the downstream trigger' },
    );
    expect(run.data).toMatchObject({ rollup: 'rp_main', reason: 'covered', generation: 1 });
    // Nothing more is asked once repaired.
    const final = (await requestOf('rp_main', p.start))!;
    const n = await countOf(db.sql<{ n: number }[]>`
      select count(*)::int as n from repair_attempts where request_id = ${request.id}`);
    expect(n).toBe(final.attempt);

    const detail = await daemon.http.inject({
      url: `/v1/rollups/rp_main/periods/${encodeURIComponent(p.key)}`,
      headers: { authorization: `Bearer ${TEST_TOKEN}` },
    });
    expect(detail.statusCode).toBe(200);
    expect(detail.json().repairs).toEqual([
      expect.objectContaining({ id: request.id, state: 'repaired', asset: 'rp.main', rollup: 'rp_main' }),
    ]);
    const metrics = (await daemon.http.inject({ url: '/metrics' })).body;
    expect(metrics).toMatch(/^coverage_rollup_repairs\{state="repaired"\} [1-9]/m);
    expect(metrics).toMatch(/^coverage_rollup_repair_seconds_count [1-9]/m);
  });

  it('abandons a request after its attempts, and never asks for that range again', async () => {
    const p = upcomingPeriod();
    await slice('rp.abandon', p.start, p.start + 1000, 'abandon-1');
    const request = await waitFor(() => requestOf('rp_abandon', p.start), {
      what: 'the request',
      timeout: 30_000,
    });
    await job(request.id, 1);
    await job(request.id, 2);
    await waitFor(async () => (await stateOf('rp.abandon', request.id)) === 'abandoned', {
      what: 'abandoned',
    });
    // Scans go on (later empty periods get their own requests); none asks for this hole again.
    await waitFor(
      async () => {
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from repair_requests where rollup_id = 'rp_abandon' and period_lo > ${p.start * 1000}
            and requested_at > (select finished_at from repair_requests where id = ${request.id})`;
        return row!.n > 0;
      },
      { what: 'a later scan', timeout: 30_000 },
    );
    const n = await countOf(db.sql<{ n: number }[]>`
      select count(*)::int as n from repair_requests
      where asset = 'rp.abandon' and span && int8multirange(int8range(${(p.start + 1000) * 1000}, ${p.end * 1000}))`);
    expect(n).toBe(1);
    expect(await repairs.getJob(`repair-${request.id}~a3`)).toBeUndefined();
    const abandoned = await listing('state=abandoned&asset=rp.abandon');
    expect(abandoned.repairs.map((r) => r.id)).toContain(request.id);
    expect(abandoned.repairs.every((r) => r.state === 'abandoned')).toBe(true);
    expect(abandoned.counts.abandoned).toBeGreaterThanOrEqual(1);
  });

  it('cancels a request when the deadline decides its period', async () => {
    const p = upcomingPeriod();
    await slice('rp.cancel', p.start, p.start + 1000, 'cancel-1');
    const request = await waitFor(() => requestOf('rp_cancel', p.start), {
      what: 'the request',
      timeout: 30_000,
    });
    await job(request.id, 1);
    await waitFor(async () => (await stateOf('rp.cancel', request.id)) === 'cancelled', {
      what: 'cancelled',
    });
    const [period] = await db.sql<{ state: string; reason: string }[]>`
      select state, reason from periods where rollup_id = 'rp_cancel' and lo = ${p.start * 1000}`;
    expect(period).toEqual({ state: 'triggered', reason: 'deadline' });
    const n = await countOf(db.sql<{ n: number }[]>`
      select count(*)::int as n from repair_attempts where request_id = ${request.id}`);
    expect(n).toBe(1);
  });

  it('leaves a request made from the index alone until its asset has newer events', async () => {
    const p = upcomingPeriod();
    await slice('rp.quiet', p.start, p.start + 1000, 'quiet-1');
    const request = await waitFor(() => requestOf('rp_quiet', p.start), {
      what: 'the request',
      timeout: 30_000,
    });
    // It has seen the events its ranges were read from: the look at every open request (every 5
    // minutes, store/repairs/follow.ts requestsToFollow) has nothing to learn about it. Made as
    // unseen (seen_seq 0), every request of a first start was followed again there, 200 per
    // pass, back to back (bench:repairs, 10,000 open: 50 passes of about 60 ms).
    const [seen] = await db.sql<{ seen_seq: number; last_seq: number }[]>`
      select r.seen_seq, a.last_seq from repair_requests r join assets a on a.name = r.asset
      where r.id = ${request.id}`;
    expect(seen!.seen_seq).toBe(seen!.last_seq);
    const looked = await requestsToFollow(db.sql, new Date(), 10_000, { kind: 'all' });
    expect(looked.map((r) => r.id)).not.toContain(request.id);
    // A newer event on its asset: followed (half the hole covered, partial).
    await slice('rp.quiet', p.start + 1000, p.start + 1500, 'quiet-2');
    await waitFor(async () => (await stateOf('rp.quiet', request.id)) === 'partial', { what: 'partial' });
  });

  it('pages the listing newest first and refuses a bad state', async () => {
    const all = await listing('limit=1000');
    const ids = all.repairs.map((r) => r.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    const first = (await listing('limit=2')) as Awaited<ReturnType<typeof listing>> & {
      next_cursor: string | null;
    };
    expect(first.repairs.map((r) => r.id)).toEqual(ids.slice(0, 2));
    const second = await listing(`limit=2&cursor=${first.next_cursor}`);
    expect(second.repairs.map((r) => r.id)).toEqual(ids.slice(2, 4));
    const response = await daemon.http.inject({
      url: '/v1/repairs?state=bogus',
      headers: { authorization: `Bearer ${TEST_TOKEN}` },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe('invalid_state');
  });

  it('examples/repair_worker.mjs answers a request by producing the slices: partial at first, then repaired and triggered', async () => {
    const output: string[] = [];
    const child: ChildProcess = spawn(
      process.execPath,
      [join(packageRoot(), 'examples', 'repair_worker.mjs')],
      {
        cwd: packageRoot(),
        env: {
          ...process.env,
          REDIS_URL,
          REPAIR_QUEUE: 'rp-backfills',
          EVENTS_QUEUE: config.queue.name,
          PREFIX: prefix,
          PARTIAL_ATTEMPTS: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    onTestFinished(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    });
    const p = upcomingPeriod();
    await slice('rp.worker', p.start, p.start + 1000, 'worker-1');
    const request = await waitFor(() => requestOf('rp_worker', p.start), {
      what: 'the request',
      timeout: 30_000,
    });
    await waitFor(async () => (await stateOf('rp.worker', request.id)) === 'repaired', {
      what: `repaired\n${output.join('')}`,
      timeout: 30_000,
    });
    // Attempt 1 made half of the hole: the request went partial and attempt 2 asked for the rest.
    const attempts = await db.sql<{ attempt: number; ranges: Array<{ start: string; end: string }> }[]>`
      select attempt, payload->'ranges' as ranges from repair_attempts where request_id = ${request.id} order by attempt`;
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2]);
    expect(attempts[0]!.ranges).toMatchObject([{ start: iso(p.start + 1000), end: iso(p.end) }]);
    expect(attempts[1]!.ranges).toMatchObject([{ start: iso(p.start + 1500), end: iso(p.end) }]);
    expect(output.join('')).toContain(`repair-${request.id}~a2`);
    await waitFor(
      async () =>
        (await runs.getJobs(['waiting', 'active', 'completed', 'delayed'])).find(
          (j) => j.data.rollup === 'rp_worker' && j.data.period?.start === iso(p.start),
        ),
      { what: 'the downstream trigger' },
    );
  });

  it('coverage-rollup repair ASSET --start --end asks by hand for what is missing, once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'crrepair-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'config.json');
    writeFileSync(
      path,
      JSON.stringify({ database_url: db.url, redis_url: REDIS_URL, log_level: 'silent', queue: { prefix } }),
    );
    const cli = (args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        const env = { ...process.env };
        for (const key of CONFIG_ENV_VARS) delete env[key];
        execFile(
          process.execPath,
          [DAEMON_ENTRY, ...args, '--config', path],
          { env, timeout: 30_000 },
          (error, stdout, stderr) =>
            resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
        );
      });
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    await slice('rp.hand', t0, t0 + 60_000, 'hand-1');
    await waitFor(() => db.sql`select 1 from assets where name = 'rp.hand'`.then((r) => r.length > 0), {
      what: 'ingested',
    });
    const args = [
      'repair',
      'rp.hand',
      '--start',
      iso(t0),
      '--end',
      iso(t0 + 180_000),
      '--target',
      '{type: queue, queue: rp-hand}',
    ];
    const made = await cli([...args, '--json']);
    expect(made.stderr).toBe('');
    expect(made.code).toBe(0);
    const answer = JSON.parse(made.stdout) as {
      requested: { id: number; idempotency_key: string; ranges: unknown[] };
    };
    expect(answer.requested.ranges).toEqual([
      { start: iso(t0 + 60_000), end: iso(t0 + 180_000), kind: 'missing', required_version: null },
    ]);
    const job = await waitFor(() => hand.getJob(answer.requested.idempotency_key), {
      what: 'the request by hand',
    });
    expect(job.data).toMatchObject({
      type: 'repair',
      asset: 'rp.hand',
      rollup: null,
      period: null,
      attempt: 1,
    });
    // Asked again: the open request already holds the range.
    const again = await cli(args);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`already requested by open repair ${answer.requested.id}`);
    // Filled: repaired, learnt from the index.
    await slice('rp.hand', t0 + 60_000, t0 + 180_000, 'hand-2');
    await waitFor(async () => (await stateOf('rp.hand', answer.requested.id)) === 'repaired', {
      what: 'repaired',
    });
    const covered = await cli(args);
    expect(covered.stdout).toContain('is covered; nothing to request');
    // In text, the request names where it went: the queue, not only "queue".
    const later = [
      '--start',
      iso(t0 + 180_000),
      '--end',
      iso(t0 + 240_000),
      '--target',
      '{type: queue, queue: rp-hand}',
    ];
    const text = await cli(['repair', 'rp.hand', ...later]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(
      /^rp\.hand: repair \d+ requested \(repair-\d+~a1\), 1 of 1 range, to be delivered to queue rp-hand:\n/,
    );
    const refused = await cli([
      'repair',
      'rp.hand',
      '--start',
      iso(t0),
      '--end',
      iso(t0 + 1000),
      '--target',
      '{type: dagster}',
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--target');
    const typo = await cli(['repair', 'rp.hnad', ...later]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('asset rp.hnad is unknown');
    // Data after now cannot exist yet: a window ending later is cut at now, one starting later refused.
    const target = ['--target', '{type: queue, queue: rp-hand}'];
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    const ahead = await cli([
      'repair',
      'rp.hand',
      '--start',
      tomorrow,
      '--end',
      new Date(Date.now() + 2 * 86_400_000).toISOString(),
      ...target,
    ]);
    expect(ahead.code).toBe(2);
    expect(ahead.stderr).toContain('--start is in the future');
    const before = Date.now();
    const open = await cli([
      'repair',
      'rp.hand',
      '--start',
      iso(t0 + 240_000),
      '--end',
      tomorrow,
      ...target,
      '--json',
    ]);
    expect(open.code, open.stderr).toBe(0);
    const body = JSON.parse(open.stdout) as { cut_at: string; requested: { ranges: Array<{ end: string }> } };
    expect(Date.parse(body.cut_at)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(body.cut_at)).toBeLessThanOrEqual(Date.now());
    expect(body.requested.ranges.at(-1)!.end).toBe(body.cut_at);
  });
});
