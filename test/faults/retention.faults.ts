import { afterAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events/events.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { connect, connectOnce } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { databaseUrl, uniqueName } from '../helpers/env.js';
import { processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import {
  daemonConfig,
  type EventJob,
  intFromEnv,
  median,
  Producer,
  pending,
  prng,
  queueCounts,
  RedisServer,
  report,
  round,
  seedFromEnv,
  sleep,
} from './lib.js';

/**
 * Retention soak (npm run soak:retention): one daemon process (ingest, scheduler, retention loop)
 * takes a steady stream for SOAK_SECONDS (default 300) at SOAK_RATE events/s (default 400, which
 * this shared 2-core machine sustains: the log's size follows the rate it is fed) with
 * the log kept PT30S in PT10S partitions: ten retention windows, thirty partitions dropped under
 * load, as years of days would be. Checks:
 *   - database size flat (± 10 %) once past the first retention window;
 *   - the merged index equals PostgreSQL's range_agg over every event ever sent (kept in another
 *     database, which retention does not touch);
 *   - no partition dropped with an event a rollup cursor had not passed (an event trigger checks
 *     each partition at the moment of its DROP TABLE);
 *   - every fully covered period triggered exactly once, though some ids are re-sent after their
 *     original was dropped (new completions, no rerun under on_replay);
 *   - ingest commit latency (a probe committing one event every 20 ms) around drops vs. without.
 */

const procs = processHarness();
const SECONDS = intFromEnv('SOAK_SECONDS', 300);
const RATE = intFromEnv('SOAK_RATE', 400);
const SEED = seedFromEnv('SOAK_SEED');
const ASSETS = 10;
const WIDTH = 10;
/** A period is 100 slices of every asset. */
const EVERY = 1000;
const RETENTION_S = 30;
const PARTITION_S = 10;
const DUPLICATE_RATE = 0.01;
const LATE_RESEND_RATE = 0.002;
const PREFIX = 'soakret';

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

/** The oracle: every completion ever sent, in a database of its own that retention never touches. */
const oracleName = uniqueName('cr_oracle');
const admin = connectOnce(databaseUrl('postgres'));
await admin`create database ${admin(oracleName)}`;
const oracle = connect(databaseUrl(oracleName), { max: 2 });
await oracle`create table sent (asset text not null, lo int8 not null, hi int8 not null)`;
afterAll(async () => {
  await oracle.end({ timeout: 5 });
  await admin`drop database if exists ${admin(oracleName)} with (force)`;
  await admin.end();
});

/** At each DROP TABLE of a partition (already detached): its events no cursor had passed. */
const DROP_CHECK = `
  create table soak_drop_check (partition text, at timestamptz, unpassed int8, events int8);
  create function soak_check_drop() returns event_trigger language plpgsql as $$
  declare
    name text := substring(current_query() from 'events_p[0-9]+_[0-9]+');
    n int8;
    total int8;
  begin
    if name is null or to_regclass(name) is null then return; end if;
    execute format(
      'select count(*) from %I e join assets a on a.id = e.asset_id
       left join rollup_cursors c on c.rollup_id = ''soak'' and c.asset_name = a.name
       where a.name like ''soak.%%'' and e.seq > coalesce(c.seq, 0)', name) into n;
    execute format('select count(*) from %I', name) into total;
    insert into soak_drop_check values (name, clock_timestamp(), n, total);
  end $$;
  create event trigger soak_check_drop on ddl_command_start when tag in ('DROP TABLE')
    execute function soak_check_drop();`;

function p99(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
}

describe('retention soak', () => {
  it('keeps the database flat while partitions are dropped under load, losing nothing the scheduler needs', async () => {
    await db.sql.unsafe(DROP_CHECK);
    const proc = await procs.spawn({
      name: 'soak-retention',
      config: {
        ...daemonConfig({
          databaseUrl: db.url,
          redisUrl: redis.url,
          prefix: PREFIX,
          scheduler: true,
          assets: Array.from({ length: ASSETS }, (_, a) => ({ name: `soak.${a}`, domain: 'integer' })),
          rollups: [
            {
              id: 'soak',
              upstream: Array.from({ length: ASSETS }, (_, a) => `soak.${a}`),
              every: EVERY,
              begin: 0,
              target: { type: 'queue', queue: 'downstream' },
            },
          ],
        }),
        retention: {
          events: `PT${RETENTION_S}S`,
          partition: `PT${PARTITION_S}S`,
          prune_every: 'PT2S',
          history: 'PT1M',
        },
      },
      readyTimeout: 60_000,
    });
    const sql = connect(db.url, { max: 3, applicationName: 'soak-checker' });
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    const random = prng(SEED);
    const started = Date.now();
    const deadline = started + SECONDS * 1000;

    const samples: Array<{ t_s: number; db_mb: number; log_mb: number; partitions: number }> = [];
    const probes: Array<{ at: number; ms: number }> = [];
    let producing = true;
    const sampler = (async () => {
      while (producing) {
        const [row] = await sql<{ db: number; log: number; partitions: number }[]>`
          select pg_database_size(current_database()) as db,
            coalesce(sum(pg_total_relation_size(inhrelid)), 0)::int8 as log, count(*)::int as partitions
          from pg_inherits where inhparent = 'events'::regclass`;
        samples.push({
          t_s: round((Date.now() - started) / 1000, 1),
          db_mb: round(row!.db / 2 ** 20, 2),
          log_mb: round(row!.log / 2 ** 20, 2),
          partitions: row!.partitions,
        });
        await sleep(5000); // the sampling period, not a wait for a condition
      }
    })();
    const prober = (async () => {
      for (let i = 0; producing; i++) {
        const event = normalizeEvent(
          { asset: 'probe', start: i, end: i + 1, id: `probe-${i}` },
          { maxPayloadBytes: 65_536 },
        );
        const t = performance.now();
        await commitEvents(sql, [event]);
        probes.push({ at: Date.now(), ms: performance.now() - t });
        await sleep(20); // the probe's pace
      }
    })();

    // The stream: assets round-robin, slices in order; some ids re-sent at once (duplicates), some
    // re-sent well after their original left the log (new completions).
    const slice = new Array<number>(ASSETS).fill(0);
    const sentAt: Array<{ at: number; data: Record<string, unknown> }> = [];
    let produced = 0;
    let duplicates = 0;
    let lateResends = 0;
    let batch: EventJob[] = [];
    let oracleRows: Array<[string, number, number]> = [];
    for (let i = 0; Date.now() < deadline; i++) {
      const a = i % ASSETS;
      const k = slice[a]!++;
      const data = {
        asset: `soak.${a}`,
        start: k * WIDTH,
        end: (k + 1) * WIDTH,
        version: 'v1',
        id: `s${a}-${k}`,
      };
      batch.push({ jobId: `j${++produced}`, data });
      oracleRows.push([data.asset, data.start, data.end]);
      if (k % 50 === 0) sentAt.push({ at: Date.now(), data });
      if (random() < DUPLICATE_RATE) {
        duplicates++;
        batch.push({ jobId: `j${++produced}`, data: { ...data } });
      }
      const old = sentAt[0];
      if (
        old &&
        Date.now() - old.at > (RETENTION_S + 2 * PARTITION_S) * 1000 &&
        random() < LATE_RESEND_RATE
      ) {
        sentAt.shift();
        lateResends++;
        batch.push({ jobId: `j${++produced}`, data: { ...old.data } });
      }
      if (batch.length < 200) continue;
      await producer.add(batch);
      await oracle`insert into sent ${oracle(oracleRows.map(([asset, lo, hi]) => ({ asset, lo, hi })))}`;
      batch = [];
      oracleRows = [];
      const due = started + (produced / RATE) * 1000;
      if (Date.now() < due) await sleep(due - Date.now());
    }
    if (batch.length > 0) await producer.add(batch);
    if (oracleRows.length > 0)
      await oracle`insert into sent ${oracle(oracleRows.map(([asset, lo, hi]) => ({ asset, lo, hi })))}`;
    const queue = producer.queue;
    let calm = 0;
    await waitFor(
      async () => {
        calm = pending(await queueCounts(queue)) === 0 ? calm + 1 : 0;
        return calm >= 3;
      },
      { timeout: 10 * 60_000, interval: 500, what: 'the soak queue to drain' },
    );
    // Every period the stream covered is decided once the scheduler has caught up.
    const covered = Math.min(...slice) * WIDTH;
    const coveredPeriods = Math.floor(covered / EVERY);
    await waitFor(
      async () => {
        const [row] = await sql<{ n: number }[]>`
          select count(distinct period_lo)::int as n from triggers where rollup_id = 'soak' and period_lo < ${coveredPeriods * EVERY}`;
        return row!.n >= coveredPeriods;
      },
      { timeout: 5 * 60_000, interval: 500, what: 'every covered period to trigger' },
    );
    producing = false;
    await Promise.all([sampler, prober]);

    const oracleDigest = async (db2: typeof sql, from: string) =>
      (
        await db2.unsafe(`
          select md5(coalesce(string_agg(asset || ':' || r::text, ',' order by asset, lower(r)), '')) as d
          from (select asset, unnest(range_agg(int8range(lo, hi))) as r from ${from} group by asset) t`)
      )[0]!.d as string;
    const expected = await oracleDigest(oracle, 'sent');
    const actual = await oracleDigest(
      sql,
      `(select a.name as asset, lower(s.span) as lo, upper(s.span) as hi from segments s join assets a on a.id = s.asset_id where a.name like 'soak.%') x`,
    );
    const drops = await sql<{ partition: string; at: Date; unpassed: number; events: number }[]>`
      select * from soak_drop_check order by at`;
    const [decisions] = await sql<{ duplicated: number; lost: number; triggers: number; reruns: number }[]>`
      select
        (select count(*)::int from (select period_lo from triggers where rollup_id = 'soak' group by period_lo having count(*) > 1) d) as duplicated,
        ${coveredPeriods} - (select count(distinct period_lo)::int from triggers where rollup_id = 'soak' and period_lo < ${coveredPeriods * EVERY}) as lost,
        (select count(*)::int from triggers where rollup_id = 'soak') as triggers,
        (select count(*)::int from triggers where rollup_id = 'soak' and generation > 1) as reruns`;
    const [counts] = await sql<{ events_in_log: number; accepted: number }[]>`
      select (select count(*)::int from events) as events_in_log,
        (select coalesce(sum(event_count), 0)::int8 from assets where name like 'soak.%') as accepted`;
    const relations = await sql<{ relation: string; mb: number }[]>`
      select c.relname as relation, round(pg_total_relation_size(c.oid) / 1048576.0, 2)::float8 as mb
      from pg_class c where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
        and c.relispartition = false
      order by pg_total_relation_size(c.oid) desc limit 8`;
    const alive = proc.running;
    const dropMs = proc.logs('event log partition dropped (past retention)').map((l) => Number(l.ms));
    await producer.close();
    await sql.end({ timeout: 5 });
    const exit = await proc.stop(30_000);

    // Ingest latency: probes within 100 ms of a drop (each DROP TABLE follows its DETACH) vs. the rest.
    const dropTimes = drops.map((d) => d.at.getTime());
    const near = (t: number) => dropTimes.some((d) => t >= d - 2000 && t <= d + 100);
    const around = probes.filter((p) => near(p.at)).map((p) => p.ms);
    const away = probes.filter((p) => !near(p.at)).map((p) => p.ms);

    // Steady state: once the migration's first partition (it holds whatever the template's first
    // minute and the soak's first seconds wrote) is gone, and a retention window after it.
    const firstDrop = drops.find((d) => !d.partition.startsWith('events_p0_'))?.at.getTime() ?? started;
    const warmFrom = (firstDrop - started) / 1000 + RETENTION_S;
    const warm = samples.filter((s) => s.t_s >= warmFrom);
    const q = Math.max(1, Math.floor(warm.length / 4));
    const firstDb = median(warm.slice(0, q).map((s) => s.db_mb));
    const lastDb = median(warm.slice(-q).map((s) => s.db_mb));
    const firstLog = median(warm.slice(0, q).map((s) => s.log_mb));
    const lastLog = median(warm.slice(-q).map((s) => s.log_mb));
    const result = {
      command: `SOAK_SECONDS=${SECONDS} SOAK_RATE=${RATE} npm run soak:retention`,
      seed: SEED,
      retention: { events_s: RETENTION_S, partition_s: PARTITION_S, prune_every_s: 2 },
      events_sent: produced,
      duplicates_sent: duplicates,
      late_resends: lateResends,
      events_accepted: counts!.accepted,
      events_in_log_at_end: counts!.events_in_log,
      partitions_dropped: drops.length,
      dropped_with_unpassed_events: drops.filter((d) => d.unpassed > 0).length,
      index_equals_oracle: expected === actual,
      periods_covered: coveredPeriods,
      triggers: decisions!.triggers,
      triggers_lost: decisions!.lost,
      triggers_duplicated: decisions!.duplicated,
      reruns: decisions!.reruns,
      size: {
        db_mb_first_quarter: firstDb,
        db_mb_last_quarter: lastDb,
        db_growth: round(lastDb / firstDb, 3),
        log_mb_first_quarter: firstLog,
        log_mb_last_quarter: lastLog,
        log_growth: round(lastLog / firstLog, 3),
        log_mb_max_after_warmup: Math.max(...warm.map((s) => s.log_mb)),
      },
      warm_from_s: round(warmFrom, 1),
      drop_ms: {
        median: median(dropMs),
        max: Math.max(...dropMs),
      },
      ingest_commit_ms: {
        probes_near_drops: around.length,
        p99_near_drops: round(p99(around), 1),
        max_near_drops: round(Math.max(...around), 1),
        p99_elsewhere: round(p99(away), 1),
        max_elsewhere: round(Math.max(...away), 1),
      },
      largest_tables_at_end_mb: relations,
      samples,
    };
    report('soak-retention', result);

    expect(alive).toBe(true);
    expect(exit.code).toBe(0);
    expect(drops.length).toBeGreaterThanOrEqual(Math.floor(SECONDS / PARTITION_S) - 6);
    expect(result.dropped_with_unpassed_events).toBe(0);
    expect(result.index_equals_oracle).toBe(true);
    expect(decisions!.lost).toBe(0);
    expect(decisions!.duplicated).toBe(0);
    expect(decisions!.reruns).toBe(0);
    expect(Math.abs(result.size.db_growth - 1)).toBeLessThanOrEqual(0.1);
  });
});
