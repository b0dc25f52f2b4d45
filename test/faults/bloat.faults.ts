import { loadavg } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { daemonConfig, intFromEnv, Producer, RedisServer, report, round, sleep } from './lib.js';

/**
 * Bloat soak (npm run soak:bloat): with autovacuum off, BLOAT_MINUTES (default 20) of
 * steady ingest (BLOAT_RATE events/s, default 100, over ten time assets, each event the wall-clock
 * slice since the asset's previous one) and triggering (a minutely rollup over all ten assets and
 * one over the first: each minute is marked and evaluated many times, then triggered and its run
 * delivered). The churn (assets, cursors, periods, counts, leases, runs) is updated in place, so
 * without vacuum its dead rows would grow the files. Every table except the event log and
 * segments (they grow with the data by design) is held to 2x the larger of its size at minute 2
 * and its packed size at the end: after the daemon stopped, each is rewritten (VACUUM FULL, then
 * VACUUM for its free-space and visibility maps, as any vacuumed table has) and measured again.
 * The packed size is the fair measure for tables that gain live rows by design (periods: one per
 * touched period; triggers, runs, run reports: one or more per decision), which their minute-2
 * size says nothing about; for the others (assets, cursors, counts, leases) it is below that.
 * So a table may be at most half dead or free space, or twice its minute-2 size. Sizes per
 * table (heap, TOAST, indexes and their maps), live and dead rows, at minute 2 and every minute
 * after, are reported as JSON with the load average.
 */

const procs = processHarness();
const MINUTES = intFromEnv('BLOAT_MINUTES', 20);
const RATE = intFromEnv('BLOAT_RATE', 100);
const BASELINE_MINUTE = Math.min(2, MINUTES / 2);
const ASSETS = 10;
/** Rollups, each triggering once a minute. */
const ROLLUPS = 2;
const MAX_GROWTH = 2;
const PREFIX = 'bloat';
/** Grow with the data by design: not held to the bound. */
const EXEMPT = /^(segments|events|events_p\d+_\d+)$/;

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

interface TableSize {
  bytes: number;
  live: number;
  dead: number;
}

async function tableSizes(sql: ReturnType<typeof connect>): Promise<Record<string, TableSize>> {
  const rows = await sql<{ name: string; bytes: number; live: number; dead: number }[]>`
    select c.relname::text as name, pg_total_relation_size(c.oid)::int8 as bytes,
      s.n_live_tup::int8 as live, s.n_dead_tup::int8 as dead
    from pg_class c join pg_stat_user_tables s on s.relid = c.oid
    where c.relnamespace = current_schema()::regnamespace and c.relkind = 'r'
    order by 1`;
  return Object.fromEntries(rows.map((r) => [r.name, { bytes: r.bytes, live: r.live, dead: r.dead }]));
}

describe('bloat soak', () => {
  it('keeps every table but the event log and segments within 2x of its minute-2 or packed size', async () => {
    const sql = connect(db.url, { max: 2, applicationName: 'bloat-checker' });
    const [{ autovacuum }] = await sql<
      [{ autovacuum: string }]
    >`select current_setting('autovacuum') as autovacuum`;
    const startMinute = Math.floor(Date.now() / 60_000) * 60_000;
    const begin = new Date(startMinute).toISOString();
    const assets = Array.from({ length: ASSETS }, (_, a) => `bloat.${a}`);
    const target = { type: 'queue', queue: 'bloat-runs' };
    const proc = await procs.spawn({
      name: 'bloat',
      config: {
        ...daemonConfig({
          databaseUrl: db.url,
          redisUrl: redis.url,
          prefix: PREFIX,
          scheduler: true,
          assets: assets.map((name) => ({ name })),
          rollups: [
            { id: 'bloat-all', upstream: assets, every: 'minute', begin, target },
            { id: 'bloat-0', upstream: [assets[0]], every: 'minute', begin, target },
          ],
        }),
      },
      readyTimeout: 60_000,
    });
    const producer = new Producer(redis.url, 'asset-events', PREFIX);

    const started = Date.now();
    const series: Array<{ minute: number; load: number[]; tables: Record<string, TableSize> }> = [];
    let baseline: Record<string, TableSize> | undefined;
    const lastEnd = new Map(assets.map((a) => [a, Date.now()]));
    let sent = 0;
    let nextSample = started + BASELINE_MINUTE * 60_000;
    const tickMs = (1000 * ASSETS) / RATE;
    while (Date.now() < started + MINUTES * 60_000) {
      const now = Date.now();
      await producer.add(
        assets.map((asset) => {
          const start = lastEnd.get(asset)!;
          lastEnd.set(asset, now);
          sent++;
          return {
            jobId: `b${sent}`,
            data: {
              asset,
              start: new Date(start).toISOString(),
              end: new Date(now).toISOString(),
              id: `b${sent}`,
            },
          };
        }),
      );
      if (Date.now() >= nextSample) {
        const tables = await tableSizes(sql);
        const minute = round((Date.now() - started) / 60_000, 1);
        baseline ??= tables;
        series.push({ minute, load: loadavg().map((l) => round(l, 2)), tables });
        nextSample += 60_000;
      }
      // A steady offer: the next tick is due tickMs after this one, not after the work above.
      const due = now + tickMs;
      if (Date.now() < due) await sleep(due - Date.now());
    }
    const end = await tableSizes(sql);
    const [decided] = await sql<{ triggers: number; runs: number }[]>`
      select (select count(*)::int from triggers) as triggers, (select count(*)::int from runs) as runs`;
    const alive = proc.running;
    await producer.close();
    const exit = await proc.stop(30_000);
    const held = Object.keys(end).filter((name) => !EXEMPT.test(name) && baseline?.[name] !== undefined);
    for (const name of held) {
      await sql`vacuum full ${sql(name)}`;
      await sql`vacuum ${sql(name)}`;
    }
    const packed = await tableSizes(sql);
    await sql.end({ timeout: 5 });

    const bound = Object.fromEntries(
      held.map((name) => [
        name,
        {
          kb: round(end[name]!.bytes / 1024, 0),
          minute2_kb: round(baseline![name]!.bytes / 1024, 0),
          packed_kb: round(packed[name]!.bytes / 1024, 0),
          live: end[name]!.live,
          minute2_live: baseline![name]!.live,
          growth_vs_minute2: round(end[name]!.bytes / baseline![name]!.bytes, 2),
          over_packed: round(end[name]!.bytes / packed[name]!.bytes, 2),
          within_bound:
            end[name]!.bytes <= MAX_GROWTH * Math.max(baseline![name]!.bytes, packed[name]!.bytes),
        },
      ]),
    );
    const over = Object.entries(bound).filter(([, b]) => !b.within_bound);
    const checks = {
      every_table_within_2x: over.length === 0,
      triggered_steadily: decided!.triggers >= (MINUTES - 2) * ROLLUPS,
      process_stayed_up: alive,
      clean_exit: exit.code === 0,
    };
    report('bloat', {
      suite: 'bloat',
      ok: Object.values(checks).every(Boolean),
      autovacuum,
      minutes: MINUTES,
      events_sent: sent,
      offered_rate_per_s: RATE,
      triggers: decided!.triggers,
      runs: decided!.runs,
      load_average_end: loadavg().map((l) => round(l, 2)),
      baseline_minute: BASELINE_MINUTE,
      tables: bound,
      over_bound: Object.fromEntries(over),
      baseline,
      end,
      checks,
      series,
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, true])));
  });
});
