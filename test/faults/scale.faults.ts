import { readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/index/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import {
  daemonConfig,
  intFromEnv,
  Producer,
  pending,
  queueCounts,
  RedisServer,
  report,
  round,
  SEGMENTS_DIGEST_SQL,
  seedFromEnv,
} from './lib.js';
import { buildStream } from './stream.js';

/**
 * Scale-out on one machine (npm run bench:scale): the same stream (SCALE_EVENTS, default 100,000:
 * 40 assets with holes, late fills and duplicates) is queued in full, then ingested by 1, 2 and 4
 * daemon processes (SCALE_PROCESSES, default "1,2,4"; scheduler.enabled: false) sharing the queue,
 * each configuration on a fresh database and queue prefix of one Redis. Reports each rate (from the
 * database's own ingested_at span, and wall time from spawn to the last commit including start-up)
 * and checks the index is identical every time (a digest of the segments table).
 */

const procs = processHarness();
const N = intFromEnv('SCALE_EVENTS', 100_000);
const SEED = seedFromEnv('SCALE_SEED');
const COUNTS = (process.env.SCALE_PROCESSES ?? '1,2,4').split(',').map((s) => Number(s.trim()));
const ASSETS = 40;

const databases: TestDatabase[] = [];
for (const _ of COUNTS) databases.push(await createTestDatabase());
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

const DAY = 86_400_000;
const slices = Math.round(N / ASSETS / 1.02);
const stream = buildStream({
  seed: SEED,
  intAssets: ASSETS / 2,
  intSlices: slices,
  intWidth: 100,
  timeAssets: ASSETS / 2,
  timeSlices: slices,
  timeStartMs: Math.floor(Date.now() / DAY) * DAY - 30 * DAY,
  holesPerAsset: 3,
  lateFillRate: 0.005,
  duplicateRate: 0.02,
  reprocess: false,
});

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

describe('scale-out', () => {
  it('ingests the same stream with 1, 2 and 4 processes into the identical index', async () => {
    const runs: Array<Record<string, unknown>> = [];
    for (const [i, processes] of COUNTS.entries()) {
      const db = databases[i]!;
      const prefix = `scale${processes}`;
      const producer = new Producer(redis.url, 'asset-events', prefix);
      const fillStarted = Date.now();
      for (let k = 0; k < stream.jobs.length; k += 1000) await producer.add(stream.jobs.slice(k, k + 1000));
      const fillSeconds = (Date.now() - fillStarted) / 1000;
      const sql = connect(db.url, { max: 2, applicationName: 'scale-checker' });
      const queue = new Queue('asset-events', { connection: producer.connection, prefix });

      const spawned = Date.now();
      const daemons = await Promise.all(
        Array.from({ length: processes }, (_, n) =>
          procs.spawn({
            name: `scale-${processes}-${n}`,
            config: daemonConfig({ databaseUrl: db.url, redisUrl: redis.url, prefix, scheduler: false }),
            readyTimeout: 90_000,
          }),
        ),
      );
      await waitFor(
        async () => {
          const [row] = await sql<{ n: number }[]>`select count(*)::int as n from events`;
          return row!.n >= stream.uniqueIds && pending(await queueCounts(queue)) === 0;
        },
        { timeout: 15 * 60_000, interval: 200, what: `${processes} processes to drain the stream` },
      );
      const wallSeconds = (Date.now() - spawned) / 1000;
      const cpu = daemons.map((d) => cpuSeconds(d.pid));
      const [span] = await sql<{ first: Date; last: Date; events: number }[]>`
        select min(ingested_at) as first, max(ingested_at) as last, count(*)::int as events from events`;
      const [digest] = await sql.unsafe<{ digest: string; segments: number }[]>(SEGMENTS_DIGEST_SQL);
      const ingestSeconds = (span!.last.getTime() - span!.first.getTime()) / 1000;
      await Promise.all(daemons.map((d) => d.stop(30_000)));
      await producer.close();
      await sql.end({ timeout: 5 });
      runs.push({
        processes,
        events_logged: span!.events,
        ingest_seconds: round(ingestSeconds, 1),
        events_per_second: round(span!.events / ingestSeconds, 0),
        wall_seconds_from_spawn: round(wallSeconds, 1),
        events_per_second_wall: round(span!.events / wallSeconds, 0),
        daemon_cpu_seconds: round(
          cpu.reduce((a, b) => a + b, 0),
          1,
        ),
        queue_fill_seconds: round(fillSeconds, 1),
        segments: digest!.segments,
        digest: digest!.digest,
        exits: daemons.map((d) => d.exit?.code),
      });
    }
    const base = runs[0]!;
    const checks = {
      identical_index: runs.every((r) => r.digest === base.digest && r.segments === base.segments),
      every_event_logged: runs.every((r) => r.events_logged === stream.uniqueIds),
      clean_exits: runs.every((r) => (r.exits as Array<number | undefined>).every((c) => c === 0)),
    };
    report('scale', {
      suite: 'bench:scale',
      ok: Object.values(checks).every(Boolean),
      seed: SEED,
      machine: {
        cpus: (await import('node:os')).cpus().length,
        loadavg_1m: round((await import('node:os')).loadavg()[0]!, 2),
      },
      stream: {
        jobs: stream.jobs.length,
        unique_events: stream.uniqueIds,
        assets: ASSETS,
        holes: stream.holes,
        late_fills: stream.lateFills,
        duplicates: stream.duplicates,
      },
      runs,
      speedup: Object.fromEntries(
        runs.map((r) => [
          `${r.processes}`,
          round((r.events_per_second as number) / (base.events_per_second as number), 2),
        ]),
      ),
      checks,
    });
    expect(checks).toEqual({ identical_index: true, every_event_logged: true, clean_exits: true });
  });
});
