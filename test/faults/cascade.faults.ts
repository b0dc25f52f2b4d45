import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/store/pg/db.js';
import { chainLevel, chainSettled } from '../helpers/chain.js';
import { createTestDatabase } from '../helpers/db.js';
import { type DaemonProcess, logTime, processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { daemonConfig, errorLines, Producer, RedisServer, report, round } from './lib.js';

/**
 * The cascade guarantee under a leader kill (npm run test:cascade): two scheduling daemon
 * processes over raw -> hourly -> daily -> monthly (`rerun: on_replay`), downstream BullMQ workers
 * in this process that complete every job at once. After the month is built, each round reprocesses
 * one raw hour and SIGKILLs the lease holder at a different moment of the cascade (the hour owing
 * its rerun, the hourly rerun decided, the daily rerun decided, the monthly rerun decided); the
 * standby takes over and the killed process comes back as the next standby. Every round must add
 * exactly one rerun per level, in order, each decided after the level below succeeded. Prints a
 * JSON report (test-artifacts/faults/cascade.json).
 */

const procs = processHarness();
const LEASE = { ttl: 'PT3S', renew_every: 'PT1S', retry_every: 'PT0.3S' };
const ACQUIRED = 'acquired the scheduler lease';
const PREFIX = 'cascade';
const HOUR = 3_600_000;
const MONTH = '2026-11-01T00:00:00Z';

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

const level = (id: string, upstream: string, every: string) => chainLevel(id, upstream, every);
const config = {
  ...daemonConfig({
    databaseUrl: db.url,
    redisUrl: redis.url,
    prefix: PREFIX,
    scheduler: true,
    lease: LEASE,
    rollups: [
      level('hourly', 'raw', 'hour'),
      level('daily', 'agg.hourly', 'day'),
      level('monthly', 'agg.daily', 'month'),
    ],
  }),
  scheduler: { enabled: true, run_check_every: 'PT0.2S' },
};

const ms = (iso: string) => Date.parse(iso);
/** A connection whose errors (Redis going away at the end) are not unhandled. */
const quiet = (r: Redis) => r.on('error', () => {});
const iso = (t: number) => new Date(t).toISOString();
const key = (rollup: string, start: string, generation: number) =>
  `${rollup}@${iso(ms(start)).replace(/[-:]/g, '').replace('.000', '')}#${generation}`;

/** The moments of a cascade at which the leader is killed, one per round. */
const MOMENTS = [
  { name: 'hour owes its rerun', rollup: 'hourly', state: 'rerun_pending' },
  { name: 'hourly rerun decided', rollup: 'hourly', decided: true },
  { name: 'daily rerun decided', rollup: 'daily', decided: true },
  { name: 'monthly rerun decided', rollup: 'monthly', decided: true },
] as const;

describe('the cascade guarantee under a leader kill', () => {
  it('adds exactly one rerun per level per reprocessed hour, in order, whatever moment the leader dies', async () => {
    const started = Date.now();
    const sql = connect(db.url, { max: 4, applicationName: 'cascade-checker' });
    const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
    connection.on('error', () => {});
    const workers = ['hourly', 'daily', 'monthly'].map(
      (id) =>
        new Worker(`${id}-runs`, async (_job: Job) => {}, {
          connection: quiet(connection.duplicate()),
          prefix: PREFIX,
          concurrency: 100,
        }),
    );
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    let jobs = 0;
    const send = (events: ReadonlyArray<Record<string, unknown>>) =>
      producer.add(events.map((data) => ({ jobId: `job-${++jobs}`, data })));
    let starts = 0;
    const spawn = () => procs.spawn({ name: `scheduler-${++starts}`, config, readyTimeout: 90_000 });
    const running: DaemonProcess[] = [await spawn(), await spawn()];
    const leader = async () =>
      waitFor(
        () => {
          const live = running.filter((p) => p.running && p.logs(ACQUIRED).length > 0);
          return live.sort(
            (a, b) => logTime(b.logs(ACQUIRED).at(-1)!) - logTime(a.logs(ACQUIRED).at(-1)!),
          )[0];
        },
        { timeout: 30_000, what: 'a lease holder' },
      );

    const decisions = async () =>
      await sql<{ k: string; rollup_id: string; generation: number; decided_at: Date }[]>`
          select idempotency_key as k, rollup_id, generation, decided_at from triggers order by decided_at`;
    const runSucceeded = (k: string) =>
      waitFor(
        async () => {
          const [row] = await sql<{ finished_at: Date }[]>`
            select r.finished_at from runs r join triggers t using (rollup_id, period_lo, generation)
            where t.idempotency_key = ${k} and r.state = 'succeeded'`;
          return row?.finished_at;
        },
        { timeout: 180_000, interval: 100, what: `${k} succeeded` },
      );
    const settled = () =>
      waitFor(() => chainSettled(sql), { timeout: 120_000, interval: 200, what: 'the chain to settle' });

    // ---- the month, built bottom up ----
    await send(
      Array.from({ length: 30 }, (_, d) => ({
        asset: 'raw',
        start: iso(ms(MONTH) + d * 24 * HOUR),
        end: iso(ms(MONTH) + (d + 1) * 24 * HOUR),
        version: 'v1',
        id: `raw-day-${d}`,
      })),
    );
    await runSucceeded(key('monthly', MONTH, 1));
    await settled();
    const built = (Date.now() - started) / 1000;

    const rounds: Array<Record<string, unknown>> = [];
    for (const [i, moment] of MOMENTS.entries()) {
      const before = (await decisions()).length;
      const hour = iso(ms('2026-11-03T00:00:00Z') + i * 5 * 24 * HOUR + (3 + i) * HOUR); // a different day each round
      const day = `${hour.slice(0, 10)}T00:00:00Z`;
      const victim = await leader();
      const t0 = Date.now();
      await send([
        {
          type: 'replay_requirement',
          asset: 'raw',
          start: hour,
          end: iso(ms(hour) + HOUR),
          version: `v${i + 2}`,
        },
      ]);
      const reprocessed = () =>
        send([
          { asset: 'raw', start: hour, end: iso(ms(hour) + HOUR), version: `v${i + 2}`, id: `raw-re-${i}` },
        ]);
      // Killed while the hour owes its rerun: the rebuilt data arrives only after the kill.
      if (!('state' in moment)) await reprocessed();
      const period = moment.rollup === 'hourly' ? hour : moment.rollup === 'daily' ? day : MONTH;
      const generation = moment.rollup === 'monthly' ? i + 2 : 2;
      await waitFor(
        async () => {
          if ('state' in moment) {
            const [p] = await sql<{ state: string }[]>`
              select state from periods where rollup_id = ${moment.rollup} and lo = ${ms(period) * 1000}`;
            return p?.state === moment.state;
          }
          const [t] =
            await sql`select 1 from triggers where idempotency_key = ${key(moment.rollup, period, generation)}`;
          return t !== undefined;
        },
        { timeout: 120_000, interval: 20, what: `the moment "${moment.name}"` },
      );
      await victim.kill();
      running.splice(running.indexOf(victim), 1);
      if ('state' in moment) await reprocessed();
      running.push(await spawn());

      const monthKey = key('monthly', MONTH, i + 2);
      await runSucceeded(monthKey);
      await settled();
      const added = (await decisions()).slice(before);
      const expected = [key('hourly', hour, 2), key('daily', day, 2), monthKey];
      expect(added.map((d) => d.k)).toEqual(expected);
      const hourDone = await runSucceeded(expected[0]!);
      const dayDone = await runSucceeded(expected[1]!);
      expect(added[1]!.decided_at.getTime()).toBeGreaterThanOrEqual(hourDone.getTime());
      expect(added[2]!.decided_at.getTime()).toBeGreaterThanOrEqual(dayDone.getTime());
      rounds.push({
        killed_at: moment.name,
        reprocessed_hour: hour,
        reruns: added.map((d) => d.k),
        seconds_to_monthly_success: round((Date.now() - t0) / 1000, 1),
      });
    }

    const counts = await sql<{ rollup_id: string; generation: number; n: number }[]>`
      select rollup_id, generation, count(*)::int as n from triggers group by 1, 2 order by 1, 2`;
    const errors = errorLines(running);
    report('cascade', {
      suite: 'cascade',
      built_month_seconds: round(built, 1),
      rounds,
      triggers: counts.map((c) => `${c.rollup_id}#${c.generation}: ${c.n}`),
      processes_started: starts,
      error_log_lines: errors.length,
      seconds: round((Date.now() - started) / 1000, 1),
    });
    expect(counts.map((c) => `${c.rollup_id}#${c.generation}:${c.n}`)).toEqual([
      'daily#1:30',
      `daily#2:${MOMENTS.length}`,
      'hourly#1:720',
      `hourly#2:${MOMENTS.length}`,
      'monthly#1:1',
      ...MOMENTS.map((_, i) => `monthly#${i + 2}:1`),
    ]);

    await procs.stopAll();
    for (const w of workers) await w.close();
    connection.disconnect();
    await producer.close();
    await sql.end();
  });
});
