import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import { parsePartitionName } from '../../src/core/events/partitions.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { freshnessFacts } from '../../src/store/assets/freshness.js';
import { dropPartition, listPartitions } from '../../src/store/assets/partitions.js';
import { connect } from '../../src/store/pg/db.js';
import { migrate, readMigrations } from '../../src/store/upkeep/migrate.js';
import { prune, type RetentionOptions } from '../../src/store/upkeep/retention.js';
import { createLogger } from '../../src/support/log.js';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createEmptyDatabase, createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const log = createLogger('silent');
const HOUR = 3600;
const DAY_MS = 86_400_000;

function event(asset: string, startMinute: number, id?: string) {
  const at = (m: number) => new Date(Date.UTC(2025, 5, 1) + m * 60_000).toISOString();
  return normalizeEvent(
    { asset, start: at(startMinute), end: at(startMinute + 5), version: 'v1', ...(id ? { id } : {}) },
    { maxPayloadBytes: 65_536 },
  );
}

function options(overrides: Partial<RetentionOptions> = {}): RetentionOptions {
  return {
    eventsMs: DAY_MS,
    historyMs: null,
    partitionSeconds: HOUR,
    aheadSeconds: 2 * HOUR,
    readers: [{ rollup: 'hourly', asset: 'read.by.rollup' }],
    ...overrides,
  };
}

/** A time well past the migration's first partition (it ends a second after the template was made). */
function later(days: number): Date {
  return new Date(Math.ceil(Date.now() / DAY_MS) * DAY_MS + days * DAY_MS);
}

describe('event log partitions and retention', async () => {
  const db = await createTestDatabase();
  const { sql } = db;
  await sql`
    insert into rollups (id, definition, calendar_hash, definition_hash)
    values ('hourly', '{}', 'h', 'd')`;

  const segmentsOf = (asset: string) => sql`
    select lower(s.span) as lo, upper(s.span) as hi, s.version, s.state
    from segments s join assets a on a.id = s.asset_id where a.name = ${asset} order by lo`;

  it('makes partitions ahead, and events land in the one for their ingest time', async () => {
    const t = later(5);
    const report = await prune(sql, options(), t);
    expect(report.ran).toBe(true);
    const partitions = await listPartitions(sql);
    const newest = partitions.at(-1)!;
    expect(newest.hi).toBeGreaterThan(t.getTime() / 1000 + 2 * HOUR);
    // On the hourly grid beyond the catch-up partition.
    expect(newest.hi % HOUR).toBe(0);
    expect(newest.hi - newest.lo).toBe(HOUR);
    expect(report.created).toContain(newest.name);

    const at = new Date(t.getTime() + 90 * 60_000);
    await commitEvents(sql, [event('read.by.rollup', 0, 'ahead-1')], { ingestedAt: at });
    const [row] = await sql<{ part: string }[]>`
      select tableoid::regclass::text as part from events where event_id = 'ahead-1'`;
    const home = partitions.find((p) => p.name === row!.part)!;
    expect(home.lo * 1000).toBeLessThanOrEqual(at.getTime());
    expect(home.hi * 1000).toBeGreaterThan(at.getTime());
  });

  it('a commit with no partition for its time makes one rather than fail', async () => {
    const at = later(40);
    const [outcome] = await commitEvents(sql, [event('unread.asset', 0, 'far-1')], { ingestedAt: at });
    expect(outcome!.status).toBe('committed');
  });

  it('a cursor that has not passed a partition holds it back; once passed it is dropped and answers do not change', async () => {
    const t = later(60);
    await prune(sql, options(), t);
    await commitEvents(
      sql,
      [
        event('read.by.rollup', 10, 'held-1'),
        event('read.by.rollup', 15, 'held-2'),
        event('unread.asset', 10),
      ],
      { ingestedAt: t },
    );
    const [{ part }] = await sql<[{ part: string }]>`
      select tableoid::regclass::text as part from events where event_id = 'held-1'`;
    const before = await segmentsOf('read.by.rollup');
    const [asset] = await sql<
      [{ last_seq: number }]
    >`select last_seq from assets where name = 'read.by.rollup'`;

    const afterRetention = new Date(t.getTime() + DAY_MS + 2 * HOUR * 1000);
    // No cursor yet (the scheduler never ran): held.
    const held = await prune(sql, options(), afterRetention);
    expect(held.dropped.map((d) => d.partition)).not.toContain(part);
    expect(held.held).toContainEqual({
      partition: part,
      rollup: 'hourly',
      asset: 'read.by.rollup',
      cursor: 0,
      newest: asset.last_seq,
    });
    // A cursor short of the newest event still holds it.
    await sql`insert into rollup_cursors (rollup_id, asset_name, seq) values ('hourly', 'read.by.rollup', ${asset.last_seq - 1})`;
    expect((await prune(sql, options(), afterRetention)).held.map((h) => h.partition)).toContain(part);

    // Re-sent inside the window: a duplicate.
    const [dup] = await commitEvents(sql, [event('read.by.rollup', 10, 'held-1')], { ingestedAt: t });
    expect(dup!.status).toBe('duplicate');

    await sql`update rollup_cursors set seq = ${asset.last_seq} where rollup_id = 'hourly'`;
    const dry = await prune(sql, { ...options(), dryRun: true }, afterRetention);
    expect(dry.dropped.map((d) => d.partition)).toContain(part);
    expect((await listPartitions(sql)).map((p) => p.name)).toContain(part);

    const done = await prune(sql, options(), afterRetention);
    expect(done.held).toEqual([]);
    expect(done.dropped).toContainEqual({ partition: part, events: 3, ms: expect.any(Number) });
    expect((await listPartitions(sql)).map((p) => p.name)).not.toContain(part);
    expect(await sql`select to_regclass(${part}) as t`).toEqual([{ t: null }]);
    expect(await segmentsOf('read.by.rollup')).toEqual(before);

    // Re-sent after its original was dropped: a new completion with a new seq; the index is unchanged.
    const [again] = await commitEvents(sql, [event('read.by.rollup', 10, 'held-1')], {
      ingestedAt: afterRetention,
    });
    expect(again).toMatchObject({ status: 'committed', seq: asset.last_seq + 1 });
    expect(await segmentsOf('read.by.rollup')).toEqual(before);
  });

  it('a rollup written through the API holds back what it has not read, with no reader given', async () => {
    const t = later(90);
    await prune(sql, options(), t);
    await commitEvents(sql, [event('read.by.api', 10, 'api-held-1')], { ingestedAt: t });
    const [{ part }] = await sql<[{ part: string }]>`
      select tableoid::regclass::text as part from events where event_id = 'api-held-1'`;
    // Its upstream as one name, not a list: the config's spelling, stored as sent.
    await sql`
      insert into api_rollups (id, definition, written_by)
      values ('api_only', ${sql.json({ id: 'api_only', upstream: 'read.by.api', every: 'hour' })}, 'api')`;
    const afterRetention = new Date(t.getTime() + DAY_MS + 2 * HOUR * 1000);
    const held = await prune(sql, options(), afterRetention);
    expect(held.held).toContainEqual(
      expect.objectContaining({ partition: part, rollup: 'api_only', asset: 'read.by.api', cursor: 0 }),
    );
    await sql`delete from api_rollups where id = 'api_only'`;
    const done = await prune(sql, options(), afterRetention);
    expect(done.dropped.map((d) => d.partition)).toContain(part);
  });

  it('one instance prunes at a time', async () => {
    const other = connect(db.url, { max: 1 });
    try {
      await other`select pg_advisory_lock(hashtext('coverage-rollup.prune'))`;
      const report = await prune(sql, options(), later(61));
      expect(report.ran).toBe(false);
      expect(report.created).toEqual([]);
    } finally {
      await other.end();
    }
  });

  it('history retention compacts old delivered triggers and leaves the rest whole', async () => {
    await sql`insert into periods (rollup_id, lo, hi, key, state, generation) values
      ('hourly', 0, 10, 'p0', 'triggered', 1), ('hourly', 10, 20, 'p1', 'triggered', 1), ('hourly', 20, 30, 'p2', 'settling', 1)`;
    const payload = { rollup: 'hourly', period: { key: 'p' }, upstreams: { a: { ratio: 1, missing: [] } } };
    const target = { type: 'webhook', url: 'http://x.invalid/', headers: { authorization: 'secret' } };
    await sql`insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, decided_at, delivered_at)
      values
        ('hourly', 0, 1, 'old-delivered', 'covered', 1, ${sql.json(target)}, ${sql.json(payload)}, now() - interval '40 days', now() - interval '40 days'),
        ('hourly', 10, 1, 'new-delivered', 'covered', 1, ${sql.json(target)}, ${sql.json(payload)}, now(), now()),
        ('hourly', 20, 1, 'old-undelivered', 'covered', 1, ${sql.json(target)}, ${sql.json(payload)}, now() - interval '40 days', null)`;
    const periodsBefore = await sql`select * from periods where rollup_id = 'hourly' order by lo`;

    const dry = await prune(sql, { ...options(), historyMs: 30 * DAY_MS, dryRun: true });
    expect(dry.triggersCompacted).toBe(1);
    const report = await prune(sql, { ...options(), historyMs: 30 * DAY_MS });
    expect(report.triggersCompacted).toBe(1);
    const rows = await sql<
      { key: string; payload: Record<string, unknown>; target: Record<string, unknown> }[]
    >`
      select idempotency_key as key, payload, target from triggers order by key`;
    expect(rows).toEqual([
      { key: 'new-delivered', payload, target },
      {
        key: 'old-delivered',
        payload: { rollup: 'hourly', period: { key: 'p' } },
        target: { type: 'webhook' },
      },
      { key: 'old-undelivered', payload, target },
    ]);
    expect(await sql`select * from periods where rollup_id = 'hourly' order by lo`).toEqual(periodsBefore);
    expect((await prune(sql, { ...options(), historyMs: 30 * DAY_MS })).triggersCompacted).toBe(0);
  });

  it('history retention deletes superseded runs finished before it, with their reports; the current, open and watched ones stay', async () => {
    await sql`insert into rollups (id, definition, calendar_hash, definition_hash) values ('ran', '{}', 'h', 'd')`;
    // lo 0: attempts 1 and 2 failed 40 days ago, attempt 3 (current) succeeded then.
    // lo 10: generation 1 succeeded 40 days ago; generation 2 (current) is still started.
    // lo 20: attempt 1 failed two days ago (inside history), attempt 2 is current.
    // lo 30: generation 1 still running (open though superseded), generation 2 current.
    // lo 40: generation 1 finished 40 days ago but still watched (check_at); generation 2 current.
    // lo 50: one run, current, failed 40 days ago.
    const periods: Array<[number, number, number, string]> = [
      [0, 1, 3, 'succeeded'],
      [10, 2, 1, 'started'],
      [20, 1, 2, 'succeeded'],
      [30, 2, 1, 'pending'],
      [40, 2, 1, 'succeeded'],
      [50, 1, 1, 'failed'],
    ];
    for (const [lo, generation, attempt, state] of periods)
      await sql`insert into periods (rollup_id, lo, hi, key, state, generation, run_attempt, run_state)
        values ('ran', ${lo}, ${lo + 10}, ${String(lo)}, 'triggered', ${generation}, ${attempt}, ${state})`;
    const runs: Array<[number, number, number, string, number | null, boolean]> = [
      // lo, generation, attempt, state, finished (days ago), watched
      [0, 1, 1, 'failed', 40, false],
      [0, 1, 2, 'failed', 40, false],
      [0, 1, 3, 'succeeded', 40, false],
      [10, 1, 1, 'succeeded', 40, false],
      [10, 2, 1, 'started', null, false],
      [20, 1, 1, 'failed', 2, false],
      [20, 1, 2, 'succeeded', 1, false],
      [30, 1, 1, 'running', null, false],
      [30, 2, 1, 'pending', null, false],
      [40, 1, 1, 'succeeded', 40, true],
      [40, 2, 1, 'succeeded', 1, false],
      [50, 1, 1, 'failed', 40, false],
    ];
    for (const [lo, generation, attempt] of runs)
      if (attempt === 1)
        await sql`insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, decided_at, delivered_at)
          values ('ran', ${lo}, ${generation}, ${`ran@${lo}#${generation}`}, 'covered', 1, '{"type": "queue"}', '{}',
            now() - interval '41 days', now() - interval '41 days')`;
    for (const [lo, generation, attempt, state, daysAgo, watched] of runs) {
      const finished = daysAgo === null ? null : new Date(Date.now() - daysAgo * DAY_MS);
      await sql`insert into runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, created_at, started_at, finished_at, check_at)
        values ('ran', ${lo}, ${generation}, ${attempt}, ${`ran@${lo}#${generation}~a${attempt}`}, ${state},
          ${attempt === 1 ? 'trigger' : 'retry'}, now() - interval '41 days', now() - interval '41 days', ${finished},
          ${watched ? new Date() : null})`;
      // Two reports each: what was started and how it ended (or that it is still on).
      await sql`insert into run_reports (rollup_id, period_lo, generation, attempt, source, state, effect, at)
        values ('ran', ${lo}, ${generation}, ${attempt}, 'scheduler', 'started', 'applied', now() - interval '41 days'),
          ('ran', ${lo}, ${generation}, ${attempt}, 'queue', ${state}, 'applied', coalesce(${finished}, now()))`;
    }
    const left = () => sql<{ lo: number; generation: number; attempt: number; reports: number }[]>`
      select r.period_lo as lo, r.generation, r.attempt,
        (select count(*)::int from run_reports x where (x.rollup_id, x.period_lo, x.generation, x.attempt)
          = (r.rollup_id, r.period_lo, r.generation, r.attempt)) as reports
      from runs r where r.rollup_id = 'ran' order by 1, 2, 3`;
    const gone = (lo: number, generation: number, attempt: number) =>
      (lo === 0 && attempt < 3) || (lo === 10 && generation === 1);
    const all = runs.map(([lo, generation, attempt]) => ({ lo, generation, attempt, reports: 2 }));
    expect(await left()).toEqual(all);

    const history = { ...options(), historyMs: 30 * DAY_MS };
    const dry = await prune(sql, { ...history, dryRun: true });
    expect(dry.runsPruned).toEqual({ runs: 3, reports: 6 });
    expect(await left()).toEqual(all);
    // The CLI says what it would delete.
    const cli = await pruneCli(db.url, ['--dry-run']);
    expect(cli.stdout).toContain(
      'would delete 3 superseded run(s) past history retention, with 6 run report(s)',
    );
    expect(cli.code).toBe(0);

    expect((await prune(sql, history)).runsPruned).toEqual({ runs: 3, reports: 6 });
    expect(await left()).toEqual(all.filter((r) => !gone(r.lo, r.generation, r.attempt)));
    // Every period still shows its run; nothing else goes on a second pass, nor without history.
    const current = await sql`
      select p.lo from periods p join runs r on (r.rollup_id, r.period_lo, r.generation, r.attempt)
        = (p.rollup_id, p.lo, p.generation, p.run_attempt) where p.rollup_id = 'ran' order by p.lo`;
    expect(current.map((r) => r.lo)).toEqual(periods.map(([lo]) => lo));
    expect((await prune(sql, history)).runsPruned).toEqual({ runs: 0, reports: 0 });
    expect((await prune(sql, options())).runsPruned).toEqual({ runs: 0, reports: 0 });
  });

  it('history retention deletes repair requests decided before it, with their waiters and attempts; open and partial ones stay', async () => {
    // id, state, finished (days ago; null while open), attempts made, waiting periods
    const requests: Array<[string, number | null, number, number]> = [
      ['repaired', 40, 2, 1],
      ['abandoned', 40, 3, 2],
      ['cancelled', 40, 1, 1],
      ['repaired', 2, 1, 1], // decided inside history: stays
      ['open', null, 2, 1], // requested 40 days ago, still open: stays
      ['partial', null, 4, 2],
    ];
    const ids: number[] = [];
    for (const [i, [state, daysAgo, attempts, waiting]] of requests.entries()) {
      const finished = daysAgo === null ? null : new Date(Date.now() - daysAgo * DAY_MS);
      const [row] = await sql<{ id: number }[]>`
        insert into repair_requests (asset, domain, rollup_id, period_lo, period, state, span, ranges, ranges_total,
          missing_total, attempt, attempts, every_ms, target, requested_at, next_at, finished_at)
        values ('repair.asset', 'time', 'hourly', ${i * 10}, null, ${state}, ${`{[${i * 10},${i * 10 + 10})}`}::int8multirange,
          '[]', 1, 10, ${attempts}, 5, 3600000, '{"type": "queue", "queue": "q"}', now() - interval '41 days',
          ${finished === null ? new Date() : null}, ${finished})
        returning id`;
      ids.push(row!.id);
      for (let a = 1; a <= attempts; a++)
        await sql`insert into repair_attempts (request_id, attempt, idempotency_key, payload, created_at, delivered_at)
          values (${row!.id}, ${a}, ${`repair-${row!.id}~a${a}`}, '{}', now() - interval '41 days', now() - interval '41 days')`;
      for (let w = 0; w < waiting; w++)
        await sql`insert into repair_waiters (request_id, rollup_id, period_lo, period_key)
          values (${row!.id}, ${`r${w}`}, ${i * 10}, ${String(i * 10)})`;
    }
    const left = async () => {
      const rows = await sql<{ id: number; attempts: number; waiters: number }[]>`
        select r.id, (select count(*)::int from repair_attempts t where t.request_id = r.id) as attempts,
          (select count(*)::int from repair_waiters w where w.request_id = r.id) as waiters
        from repair_requests r order by r.id`;
      return rows;
    };
    const all = requests.map(([, , attempts, waiters], i) => ({ id: ids[i]!, attempts, waiters }));
    expect(await left()).toEqual(all);

    const history = { ...options(), historyMs: 30 * DAY_MS };
    const dry = await prune(sql, { ...history, dryRun: true });
    expect(dry.repairsPruned).toEqual({ requests: 3, waiters: 4, attempts: 6 });
    expect(await left()).toEqual(all);
    const cli = await pruneCli(db.url, ['--dry-run']);
    expect(cli.stdout).toContain(
      'would delete 3 decided repair request(s) past history retention, with 4 waiter(s) and 6 attempt(s)',
    );
    expect(cli.code).toBe(0);

    expect((await prune(sql, history)).repairsPruned).toEqual({ requests: 3, waiters: 4, attempts: 6 });
    expect(await left()).toEqual(all.slice(3));
    expect((await prune(sql, history)).repairsPruned).toEqual({ requests: 0, waiters: 0, attempts: 0 });
    expect((await prune(sql, options())).repairsPruned).toEqual({ requests: 0, waiters: 0, attempts: 0 });
    // As the CLI prints a round that deleted nothing.
    const after = await pruneCli(db.url, []);
    expect(after.stdout).toContain(
      'delete 0 decided repair request(s) past history retention, with 0 waiter(s) and 0 attempt(s)',
    );
  });
});

/** `coverage-rollup prune` as a user runs it (the built CLI), with history retention of 30 days. */
function pruneCli(url: string, args: string[]): Promise<{ code: number; stdout: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'crprune-'));
  const config = join(dir, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      database_url: url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      retention: { history: 'P30D' },
    }),
  );
  const env = { ...process.env };
  for (const key of CONFIG_ENV_VARS) delete env[key]; // the config file decides, never the caller's shell
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [DAEMON_ENTRY, 'prune', ...args, '--config', config],
      { env, timeout: 30_000 },
      (error, stdout) => {
        rmSync(dir, { recursive: true, force: true });
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout });
      },
    );
  });
}

describe('migrating a populated event log', () => {
  const migrations = readMigrations();
  const PARTITIONED = migrations.findIndex((m) => m.name === 'partitioned_events') + 1;
  const COMPACT = migrations.findIndex((m) => m.name === 'compact_events') + 1;
  const SEQ_BUCKETS = migrations.findIndex((m) => m.name === 'event_seq_buckets') + 1;

  it('moves every event into the partitioned log, keys and all, and keeps idempotency', async () => {
    const db = await createEmptyDatabase();
    const { sql } = db;
    await migrate(sql, log, migrations.slice(0, PARTITIONED - 1));
    await sql`insert into assets (name, domain, last_seq, event_count) values ('old.asset', 'time', 3, 3)`;
    await sql`
      insert into events (asset_id, seq, key, kind, lo, hi, start_text, end_text, version, event_id, produced_at, extra)
      values
        (1, 1, 'id:first', 'completion', 0, 10, '1970-01-01T00:00:00Z', 'x', 'v1', 'first', null, '{}'),
        (1, 2, 'sha256:00112233445566778899aabbccddeeff', 'completion', 10, 20, 'a', 'b', null, null, 'p', '{"k": 1}'),
        (1, 3, 'id:third', 'replay_requirement', 0, 20, 'c', 'd', 'v2', 'third', null, '{}')`;
    await migrate(sql, log, migrations.slice(0, PARTITIONED));

    const rows = await sql`
      select seq, event_key(event_id, digest) as key, replay, lo, hi, start_text, end_text, version, produced_at, extra
      from events order by seq`;
    expect(rows).toEqual([
      {
        seq: 1,
        key: 'id:first',
        replay: false,
        lo: 0,
        hi: 10,
        start_text: '1970-01-01T00:00:00Z',
        end_text: 'x',
        version: 'v1',
        produced_at: null,
        extra: null,
      },
      {
        seq: 2,
        key: 'sha256:00112233445566778899aabbccddeeff',
        replay: false,
        lo: 10,
        hi: 20,
        start_text: 'a',
        end_text: 'b',
        version: null,
        produced_at: 'p',
        extra: { k: 1 },
      },
      {
        seq: 3,
        key: 'id:third',
        replay: true,
        lo: 0,
        hi: 20,
        start_text: 'c',
        end_text: 'd',
        version: 'v2',
        produced_at: null,
        extra: null,
      },
    ]);
    expect((await listPartitions(sql)).map((p) => p.lo)).toEqual([0]);

    // And on through the later migrations.
    await migrate(sql, log);
    const resent = normalizeEvent(
      { asset: 'old.asset', start: '1970-01-01T00:00:00Z', end: '1970-01-01T00:00:00.00001Z', id: 'first' },
      { maxPayloadBytes: 65_536 },
    );
    const [outcome] = await commitEvents(sql, [resent]);
    expect(outcome!.status).toBe('duplicate');
    const [fresh] = await commitEvents(sql, [{ ...resent, id: 'fourth', key: 'id:fourth' }]);
    expect(fresh).toMatchObject({ status: 'committed', seq: 4 });
  });

  it('keeps every field of a logged event as sent in its compact form, in the same partitions', async () => {
    const db = await createEmptyDatabase();
    const { sql } = db;
    await migrate(sql, log, migrations.slice(0, COMPACT - 1));
    await sql`insert into assets (name, domain, last_seq, event_count) values ('old.asset', 'time', 7, 7)`;
    // Two more partitions after the first (which ends at the first migration), as if made ahead.
    const lo = (await listPartitions(sql))[0]!.hi;
    await sql`select create_event_partition(${lo}, ${lo + 3600})`;
    await sql`select create_event_partition(${lo + 3600}, ${lo + 7200})`;
    const inThird = new Date((lo + 3660) * 1000);
    const hex = '948b3fa0e6a45bfaa4a6be8bd3744adffc5f54f6';
    await sql`
      insert into events (asset_id, seq, lo, hi, ingested_at, replay, event_id, digest, version, produced_at,
        start_text, end_text, extra)
      values
        (1, 1, 0, 10, now() - interval '1 hour', false, ${hex}::text, null, 'v1', '2025-01-01T00:05:07.000Z', null, null, '{"job": "load", "attempt": 1}'),
        (1, 2, 10, 20, now() - interval '1 hour', false, 'spark-batch-8812', null, null, '2025-01-01T00:05:07Z', 'a', null, null),
        (1, 3, 20, 30, now() - interval '1 hour', false, null, decode('00112233445566778899aabbccddeeff', 'hex'), null, '2025-01-01T00:05:07+00:00', null, null, null),
        (1, 4, 30, 40, ${inThird}::timestamptz, true, '0042', null, 'v2', '2025-01-01T00:05:07.120Z', null, 'b', '{"z": [1, {"a": null}], "a": "é"}'),
        (1, 5, 40, 50, ${inThird}::timestamptz, false, 'ABCDEF', null, null, '2025-01-01T24:00:00Z', null, null, null),
        (1, 6, 50, 60, ${inThird}::timestamptz, false, '042', null, null, '2025-01-01T00:05:07.123456Z', null, null, null),
        (1, 7, 60, 70, ${inThird}::timestamptz, false, 'x7', null, null, null, null, null, null)`;
    const before = await listPartitions(sql);
    const asSent = sql`
      select seq, lo, hi, ingested_at, replay, version, start_text, end_text,
        event_key(event_id, event_id_hex, digest) as key, coalesce(event_id, encode(event_id_hex, 'hex')) as id,
        event_produced_at(produced_at, produced_at_digits, produced_at_text) as produced_at,
        extra::jsonb as extra, tableoid::regclass::text as partition
      from events order by seq`;
    const old = await sql`
      select seq, lo, hi, ingested_at, replay, version, start_text, end_text,
        event_key(event_id, digest) as key, event_id as id, produced_at, extra,
        tableoid::regclass::text as partition
      from events order by seq`;
    await migrate(sql, log);

    expect(await asSent).toEqual(old);
    expect(await listPartitions(sql)).toEqual(before);
    const forms = await sql`
      select seq, event_id, encode(event_id_hex, 'hex') as hex, produced_at_digits as digits,
        produced_at_text as text, extra::text as extra
      from events order by seq`;
    expect(forms).toEqual([
      { seq: 1, event_id: null, hex, digits: 3, text: null, extra: '{"job": "load", "attempt": 1}' },
      { seq: 2, event_id: 'spark-batch-8812', hex: null, digits: 0, text: null, extra: null },
      { seq: 3, event_id: null, hex: null, digits: null, text: '2025-01-01T00:05:07+00:00', extra: null },
      {
        seq: 4,
        event_id: null,
        hex: '0042',
        digits: 3,
        text: null,
        extra: '{"a": "é", "z": [1, {"a": null}]}',
      },
      { seq: 5, event_id: 'ABCDEF', hex: null, digits: null, text: '2025-01-01T24:00:00Z', extra: null },
      { seq: 6, event_id: '042', hex: null, digits: 6, text: null, extra: null },
      { seq: 7, event_id: 'x7', hex: null, digits: null, text: null, extra: null },
    ]);

    // Idempotency holds across the migration, for ids in either form.
    const again = (id: string) =>
      normalizeEvent({ asset: 'old.asset', start: 0, end: 10, id }, { maxPayloadBytes: 65_536 });
    await sql`update assets set domain = 'integer'`;
    const outcomes = await commitEvents(sql, [
      again(hex),
      again('0042'),
      again('spark-batch-8812'),
      again('ab'),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['duplicate', 'duplicate', 'duplicate', 'committed']);
  });

  it('keys the seq index by buckets of 8 on every partition without touching a row, and reads follow it', async () => {
    const db = await createEmptyDatabase();
    const { sql } = db;
    await migrate(sql, log, migrations.slice(0, SEQ_BUCKETS - 1));
    await sql`
      insert into assets (name, domain, last_seq, event_count)
      values ('old.asset', 'integer', 20, 20), ('other.asset', 'integer', 3, 3)`;
    await sql`insert into rollups (id, definition, calendar_hash, definition_hash) values ('r', '{}', 'h', 'd')`;
    await sql`insert into rollup_cursors (rollup_id, asset_name, seq) values ('r', 'old.asset', 13)`;
    // The first partition (it ends with the first migration), two more made ahead and a fourth
    // whose DETACH CONCURRENTLY was interrupted.
    const lo = (await listPartitions(sql))[0]!.hi;
    const named = (k: number) => `events_p${lo + k * 3600}_${lo + (k + 1) * 3600}`;
    const [third, pending] = [named(1), named(2)];
    for (let k = 0; k < 3; k++)
      await sql`select create_event_partition(${lo + k * 3600}, ${lo + (k + 1) * 3600})`;
    const at = (partition: number) => new Date((lo + partition * 3600 + 60) * 1000);
    // old.asset's seq 1-6 in the first partition, 7-13 in the second, 14-20 in the third (buckets
    // 0-7, 8-15, 16-23 straddle them), in every form a field takes: an id as text, as hex bytes
    // or none (the content digest), produced_at compact, as text or none, bounds as sent or not,
    // extra or none, completions and replays.
    await sql`
      insert into events (asset_id, seq, lo, hi, ingested_at, produced_at, produced_at_digits, replay,
        event_id, event_id_hex, digest, version, produced_at_text, start_text, end_text, extra)
      select 1, s, s * 10, s * 10 + 10,
        case when s <= 6 then now() - interval '1 hour' when s <= 13 then ${at(0)}::timestamptz else ${at(1)}::timestamptz end,
        case when s % 3 = 0 then timestamptz '2025-01-01T00:05:07.12Z' end, case when s % 3 = 0 then 3 end,
        s % 5 = 0,
        case when s % 4 = 1 then 'spark-batch-' || s end,
        case when s % 4 = 2 then decode(lpad(to_hex(s), 40, '0'), 'hex') end,
        case when s % 4 in (0, 3) then decode(md5(s::text), 'hex') end,
        case when s % 5 = 0 then 'v2' when s % 2 = 0 then 'v1' end,
        case when s % 3 = 1 then '2025-01-01T00:05:07+00:00' end,
        case when s % 7 = 0 then '0' || s * 10 end, case when s % 7 = 0 then '+' || s * 10 + 10 end,
        case when s % 2 = 0 then json '{"job": "load", "attempt": 1}' end
      from generate_series(1, 20) s`;
    await sql`
      insert into events (asset_id, seq, lo, hi, ingested_at, replay, event_id)
      values (2, 1, 1, 2, ${at(0)}, false, 'o1'), (2, 2, 2, 3, ${at(1)}, false, 'o2'), (2, 3, 3, 4, ${at(2)}, false, 'o3')`;
    // Interrupted: a transaction that still sees the log holds the detach back, and it is cancelled.
    const holder = await sql.reserve();
    await holder`begin`;
    await holder`select count(*) from events`;
    const detach = sql`alter table events detach partition ${sql(pending)} concurrently`.execute();
    await waitFor(
      async () =>
        (
          await sql`select 1 from pg_stat_activity where query like 'alter table events detach%' and wait_event_type = 'Lock'`
        ).length === 1,
      { what: 'the detach to wait for the open transaction' },
    );
    detach.cancel();
    await expect(detach).rejects.toThrow(/cancel/);
    await holder`rollback`;
    holder.release();
    const before = await listPartitions(sql);
    expect(before.filter((p) => p.detaching).length).toBe(1);
    const everything = () => sql`
      select e.*, tableoid::regclass::text as partition, extra::text as extra from events e order by asset_id, seq`;
    const old = await everything();
    expect(old.length).toBe(22);

    await migrate(sql, log);

    expect(await everything()).toEqual(old);
    expect(await listPartitions(sql)).toEqual(before);
    const indexes = await sql<{ partition: string; def: string }[]>`
      select c.relname as partition, pg_get_indexdef(x.indexrelid) as def
      from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_index x on x.indrelid = c.oid
      where i.inhparent = 'events'::regclass and not i.inhdetachpending and x.indkey[0] <> 0
        and pg_get_indexdef(x.indexrelid) like '%(asset_id,%'
      order by 1`;
    expect(indexes.map((i) => i.partition)).toEqual(
      before
        .filter((p) => !p.detaching)
        .map((p) => p.name)
        .sort(),
    );
    for (const i of indexes) expect(i.def).toMatch(/\(asset_id, \(\(seq >> 3\)\)\)$/);

    // What reads the log by seq: the newest event's time, retention's holds (cursor 13: the
    // second partition's 7-13 are passed, though 8-13 share a bucket with 14 and 15), the commit.
    expect((await freshnessFacts(sql, ['old.asset'])).get('old.asset')!.lastEventAt).toBe(at(1).getTime());
    const report = await prune(
      sql,
      options({ readers: [{ rollup: 'r', asset: 'old.asset' }], dryRun: true }),
      new Date((lo + 4 * 3600) * 1000 + DAY_MS),
    );
    expect(report.held).toEqual([
      { partition: third, rollup: 'r', asset: 'old.asset', cursor: 13, newest: 20 },
    ]);
    expect(report.dropped.map((d) => d.partition)).toEqual(
      before.filter((p) => p.name !== third).map((p) => p.name),
    );
    // The interrupted detach is finished and its partition dropped as before.
    await dropPartition(sql, before.find((p) => p.detaching)!);
    expect(await listPartitions(sql)).toEqual(before.filter((p) => p.name !== pending));
    const again = (id: string) =>
      normalizeEvent({ asset: 'old.asset', start: 0, end: 10, id }, { maxPayloadBytes: 65_536 });
    expect(await commitEvents(sql, [again('spark-batch-17')], { ingestedAt: at(1) })).toEqual([
      { status: 'duplicate', assetId: 1 },
    ]);
    expect(await commitEvents(sql, [again('new')], { ingestedAt: at(1) })).toEqual([
      { status: 'committed', assetId: 1, seq: 21 },
    ]);
  });
});

describe('the daemon keeps retention', async () => {
  const db = await createTestDatabase();
  const config = testConfig(db, createTestPrefix(), {
    scheduler: { enabled: false },
    rollups: [
      {
        id: 'never-scheduled',
        upstream: 'held.asset',
        every: 100,
        begin: 0,
        target: { type: 'queue', queue: 'downstream' },
      },
    ],
    retention: { events: 'PT1S', partition: 'PT1S', prune_every: 'PT1S' },
  });
  const daemon = await startTestDaemon(config);

  it('drops what no rollup reads, and says on /readyz and /metrics what a stopped scheduler holds back', async () => {
    const normalize = (asset: string) =>
      normalizeEvent({ asset, start: 0, end: 10, id: 'only' }, { maxPayloadBytes: 65_536 });
    await commitEvents(db.sql, [normalize('held.asset')]);
    // The unread asset's event goes into a later partition than the held one.
    const [{ part }] = await db.sql<[{ part: string }]>`select tableoid::regclass::text as part from events`;
    const heldUntil = parsePartitionName(part)!.hi * 1000;
    await waitFor(() => Date.now() >= heldUntil, { what: 'the held partition to end' });
    await commitEvents(db.sql, [normalize('unread.asset')]);
    const readiness = await waitFor(
      async () => {
        const body = (await (await fetch(`${daemon.url}/readyz`)).json()) as {
          retention: { held_back: boolean; held_by?: Array<Record<string, unknown>> };
        };
        return body.retention.held_back ? body : null;
      },
      { timeout: 30_000, what: '/readyz to report retention held back' },
    );
    expect(readiness.retention.held_by).toEqual([
      expect.objectContaining({ rollup: 'never-scheduled', asset: 'held.asset', cursor: 0 }),
    ]);
    await waitFor(
      async () => {
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from events e join assets a on a.id = e.asset_id where a.name = 'unread.asset'`;
        return row!.n === 0;
      },
      { timeout: 30_000, what: 'the unread asset’s partition to be dropped' },
    );
    const [held] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from events e join assets a on a.id = e.asset_id where a.name = 'held.asset'`;
    expect(held!.n).toBe(1);
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(metrics).toMatch(/^coverage_rollup_retention_held_partitions [1-9]/m);
    expect(metrics).toMatch(/^coverage_rollup_pruned_total\{what="partitions"\} [1-9]/m);
    expect(metrics).toMatch(/^coverage_rollup_event_log_partitions [1-9]/m);
  });
});
