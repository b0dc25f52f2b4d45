import { loadavg } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/index/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { daemonConfig, intFromEnv, Producer, RedisServer, report, round, sleep } from './lib.js';

/**
 * Bloat soak (npm run soak:bloat, SPEC §13): with autovacuum off, BLOAT_MINUTES (default 20) of
 * steady ingest (BLOAT_RATE events/s, default 100, over ten time assets, each event the wall-clock
 * slice since the asset's previous one) and triggering (a minutely rollup over all ten assets and
 * one over the first: each minute is marked and evaluated many times, then triggered and its run
 * delivered). Every table except the event log and segments must stay within 2x of its size at
 * minute 2: the churn (assets, cursors, periods, counts, leases, runs) is updated in place, so
 * without vacuum its dead rows would grow the files. Decisions add rows (two triggers and runs a
 * minute), a growth the bound leaves room for at this rate; live rows are reported beside sizes. Sizes per table (heap plus indexes), live and
 * dead rows, at minute 2 and every minute after, are reported as JSON with the load average.
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
/** Grow with the data by design (SPEC §4, §13): not held to the bound. */
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
  it('keeps every table but the event log and segments within 2x of its minute-2 size', async () => {
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
    await sql.end({ timeout: 5 });
    const exit = await proc.stop(30_000);

    const growth = Object.fromEntries(
      Object.entries(end)
        .filter(([name]) => !EXEMPT.test(name) && baseline?.[name] !== undefined)
        .map(([name, size]) => [name, round(size.bytes / baseline![name]!.bytes, 2)]),
    );
    const over = Object.entries(growth).filter(([, g]) => g > MAX_GROWTH);
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
      growth_vs_baseline: growth,
      over_2x: Object.fromEntries(over),
      baseline,
      end,
      checks,
      series,
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, true])));
  });
});
