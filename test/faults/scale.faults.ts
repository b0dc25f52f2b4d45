import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { Queue } from 'bullmq';
import { Cluster, type Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { groupOf } from '../../src/core/events/routing.js';
import { type QueueGroup, queueGroups } from '../../src/queue/groups.js';
import { type RedisClient, redisConnection } from '../../src/queue/redis.js';
import { connect } from '../../src/store/pg/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { waitFor } from '../helpers/wait.js';
import {
  daemonConfig,
  type EventJob,
  intFromEnv,
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
 * 40 assets with holes, late fills and duplicates) ingested in every configuration of
 * layouts × process counts, each on a fresh database and queue prefix:
 *
 * - SCALE_LAYOUTS (default "redis:1,cluster:3"): `redis:N` is N queue groups on one Redis,
 *   `cluster:N` N groups on a local 3-master Redis Cluster (prefixes chosen so that the groups sit
 *   on different masters; the placement is checked with CLUSTER KEYSLOT / COUNTKEYSINSLOT).
 * - SCALE_PROCESSES (default "1,2,4"): daemon processes (scheduler.enabled: false).
 * - SCALE_CONSUME (default "all"): every process consumes every group, or "split": the groups are
 *   dealt out to the processes with `queue.consume` (more processes than groups: round robin).
 *
 * The stream is queued in full on paused queues (routed by asset, as producers do); the daemons
 * start, and once all are ready the queues are resumed, so start-up is not in the rates and every
 * process starts ingesting at once. Reports per configuration the rate (from the database's own
 * ingested_at span, and wall time from resume to drained), the daemons' CPU and Redis's CPU per
 * event, the segment count, a digest of the segments table and each group's placement. Fails
 * unless every configuration logged every event into the same digest, every daemon exited 0 and
 * the groups sat on distinct masters. Prints JSON and a markdown table.
 */

const procs = processHarness();
const N = intFromEnv('SCALE_EVENTS', 100_000);
const SEED = seedFromEnv('SCALE_SEED');
const COUNTS = (process.env.SCALE_PROCESSES ?? '1,2,4').split(',').map((s) => Number(s.trim()));
const CONSUME = process.env.SCALE_CONSUME ?? 'all';
const MASTERS = 3;
const ASSETS = 40;

interface Layout {
  readonly label: string;
  readonly cluster: boolean;
  readonly groups: number;
}

function parseLayouts(text: string): Layout[] {
  return text.split(',').map((raw) => {
    const label = raw.trim();
    const m = /^(redis|cluster):(\d+)$/.exec(label);
    if (!m || Number(m[2]) < 1)
      throw new Error(`SCALE_LAYOUTS: "${label}" is not redis:<groups> or cluster:<groups>`);
    return { label, cluster: m[1] === 'cluster', groups: Number(m[2]) };
  });
}

const LAYOUTS = parseLayouts(process.env.SCALE_LAYOUTS ?? 'redis:1,cluster:3');
if (COUNTS.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error(`SCALE_PROCESSES must list positive integers, got ${process.env.SCALE_PROCESSES}`);
if (CONSUME !== 'all' && CONSUME !== 'split')
  throw new Error(`SCALE_CONSUME must be "all" or "split", got ${CONSUME}`);

// Process counts outermost, so that drift in the machine's load hits every layout alike.
const runs = COUNTS.flatMap((processes) => LAYOUTS.map((layout) => ({ layout, processes })));
const databases: TestDatabase[] = [];
for (const _ of runs) databases.push(await createTestDatabase());
const redis = LAYOUTS.some((l) => !l.cluster) ? await RedisServer.start() : undefined;
const cluster = LAYOUTS.some((l) => l.cluster) ? await startRedisCluster({ masters: MASTERS }) : undefined;
afterAll(async () => {
  await redis?.destroy();
  await cluster?.stop();
});

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

const masters = (client: RedisClient): Redis[] =>
  client instanceof Cluster ? client.nodes('master') : [client];

/** CPU seconds every Redis master has used so far (INFO cpu). */
async function redisCpuSeconds(client: RedisClient): Promise<number> {
  const used = await Promise.all(
    masters(client).map(async (node) => {
      const info = await node.info('cpu');
      const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1]);
      return field('used_cpu_user') + field('used_cpu_sys');
    }),
  );
  return used.reduce((a, b) => a + b, 0);
}

/** The groups process `n` of `processes` consumes under SCALE_CONSUME=split. */
function dealt(n: number, processes: number, groups: number): number[] {
  if (processes >= groups) return [n % groups];
  return Array.from({ length: groups }, (_, g) => g).filter((g) => g % processes === n);
}

const nodeOf = (node: Redis) => `${node.options.host}:${node.options.port}`;

/**
 * On Cluster, the first prefix `<base>0`, `<base>1`, … whose groups' hash slots are served by as
 * many different masters as possible (a prefix picked blindly puts 3 groups on 3 masters only 2 in 9
 * times).
 */
async function spreadPrefix(
  client: Cluster,
  base: string,
  groupsOf: (prefix: string) => QueueGroup[],
): Promise<string> {
  for (let k = 0; k < 200; k++) {
    const prefix = `${base}${k}`;
    const groups = groupsOf(prefix);
    const owners = new Set<number>();
    for (const group of groups) {
      const slot = Number(await client.call('CLUSTER', 'KEYSLOT', group.prefix));
      owners.add((await cluster!.masterOf(slot)).port);
    }
    if (owners.size === Math.min(groups.length, MASTERS)) return prefix;
  }
  throw new Error(`no prefix ${base}<k> spreads its groups over ${MASTERS} masters`);
}

/** Where each group's keys are: its slot and the master holding keys in it (COUNTKEYSINSLOT). */
async function placement(client: RedisClient, groups: readonly QueueGroup[], queues: readonly Queue[]) {
  return Promise.all(
    groups.map(async (group, i) => {
      // A paused queue keeps its jobs in the wait list (BullMQ 6).
      const c = await queues[i]!.getJobCounts('waiting', 'prioritized');
      const jobs = (c.waiting ?? 0) + (c.prioritized ?? 0);
      if (!(client instanceof Cluster)) return { group: group.index, prefix: group.prefix, jobs };
      const slot = Number(await client.call('CLUSTER', 'KEYSLOT', group.prefix));
      const holders: string[] = [];
      for (const node of masters(client))
        if (Number(await node.call('CLUSTER', 'COUNTKEYSINSLOT', slot)) > 0) holders.push(nodeOf(node));
      return { group: group.index, prefix: group.prefix, jobs, slot, masters_holding_keys: holders };
    }),
  );
}

async function fill(queues: readonly Queue[], groups: number, jobs: readonly EventJob[]): Promise<void> {
  const byGroup = queues.map((): EventJob[] => []);
  for (const job of jobs) byGroup[groupOf(String(job.data.asset), groups)]!.push(job);
  await Promise.all(
    byGroup.map(async (list, g) => {
      for (let k = 0; k < list.length; k += 1000)
        await queues[g]!.addBulk(
          list.slice(k, k + 1000).map((j) => ({ name: 'e', data: j.data, opts: { jobId: j.jobId } })),
        );
    }),
  );
}

async function runOne(layout: Layout, processes: number, db: TestDatabase) {
  const url = layout.cluster ? cluster!.url : redis!.url;
  const client = redisConnection(url);
  client.on('error', () => {});
  const configFor = (prefix: string, consume?: number[]) =>
    daemonConfig({
      databaseUrl: db.url,
      redisUrl: url,
      prefix,
      scheduler: false,
      queue: { groups: layout.groups, ...(consume ? { consume } : {}) },
    });
  const groupsOf = (prefix: string) => queueGroups(parseConfig(configFor(prefix)).queue);
  const base = `scale-${layout.cluster ? 'c' : 'r'}${layout.groups}-p${processes}`;
  const prefix = client instanceof Cluster ? await spreadPrefix(client, base, groupsOf) : base;
  const groups = groupsOf(prefix);
  const queues = groups.map((g) => new Queue(g.name, { connection: client, prefix: g.prefix }));
  await Promise.all(queues.map((q) => q.pause()));
  const fillStarted = Date.now();
  await fill(queues, layout.groups, stream.jobs);
  const fillSeconds = (Date.now() - fillStarted) / 1000;
  const where = await placement(client, groups, queues);
  const sql = connect(db.url, { max: 2, applicationName: 'scale-checker' });

  const spawned = Date.now();
  const consumes = Array.from({ length: processes }, (_, n) =>
    CONSUME === 'split' ? dealt(n, processes, layout.groups) : undefined,
  );
  const daemons = await Promise.all(
    consumes.map((consume, n) =>
      procs.spawn({
        name: `scale-${layout.label.replace(':', '')}-${processes}-${n}`,
        config: configFor(prefix, consume),
        readyTimeout: 90_000,
      }),
    ),
  );
  const startupSeconds = (Date.now() - spawned) / 1000;
  const cpuAtStart = daemons.map((d) => cpuSeconds(d.pid));
  const redisCpuAtStart = await redisCpuSeconds(client);
  const resumed = Date.now();
  await Promise.all(queues.map((q) => q.resume()));
  await waitFor(
    async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from events`;
      if (row!.n < stream.uniqueIds) return false;
      const counts = await Promise.all(queues.map(queueCounts));
      return counts.every((c) => pending(c) === 0);
    },
    {
      timeout: 15 * 60_000,
      interval: 200,
      what: `${layout.label} × ${processes} processes to drain the stream`,
    },
  );
  const wallSeconds = (Date.now() - resumed) / 1000;
  const daemonCpu = daemons.reduce((sum, d, i) => sum + cpuSeconds(d.pid) - cpuAtStart[i]!, 0);
  const redisCpu = (await redisCpuSeconds(client)) - redisCpuAtStart;
  const [span] = await sql<{ first: Date; last: Date; events: number }[]>`
    select min(ingested_at) as first, max(ingested_at) as last, count(*)::int as events from events`;
  const [digest] = await sql.unsafe<{ digest: string; segments: number }[]>(SEGMENTS_DIGEST_SQL);
  const ingestSeconds = (span!.last.getTime() - span!.first.getTime()) / 1000;
  const exits = await Promise.all(daemons.map((d) => d.stop(30_000)));
  await Promise.all(queues.map((q) => q.close()));
  client.disconnect();
  await sql.end({ timeout: 5 });
  const perEvent = (seconds: number) => round((seconds * 1e6) / span!.events, 1);
  return {
    layout: layout.label,
    redis_masters: layout.cluster ? MASTERS : 1,
    groups: layout.groups,
    processes,
    consume: CONSUME === 'split' ? consumes : 'all',
    events_logged: span!.events,
    ingest_seconds: round(ingestSeconds, 1),
    events_per_second: round(span!.events / ingestSeconds, 0),
    wall_seconds_from_resume: round(wallSeconds, 1),
    events_per_second_wall: round(span!.events / wallSeconds, 0),
    daemon_cpu_seconds: round(daemonCpu, 1),
    daemon_cpu_us_per_event: perEvent(daemonCpu),
    redis_cpu_us_per_event: perEvent(redisCpu),
    startup_seconds: round(startupSeconds, 1),
    first_commit_after_resume_seconds: round((span!.first.getTime() - resumed) / 1000, 2),
    queue_fill_seconds: round(fillSeconds, 1),
    segments: digest!.segments,
    digest: digest!.digest,
    placement: where,
    exits: exits.map((e) => e.code),
  };
}

type Run = Awaited<ReturnType<typeof runOne>>;

/** Cluster layouts: each group's keys on exactly one master, the groups on min(groups, masters) masters. */
function spreadOverMasters(run: Run): boolean {
  if (run.redis_masters === 1) return true;
  const holders = run.placement.map((p) =>
    'masters_holding_keys' in p ? (p.masters_holding_keys ?? []) : [],
  );
  return (
    holders.every((h) => h.length === 1) && new Set(holders.flat()).size === Math.min(run.groups, MASTERS)
  );
}

function markdown(results: readonly Run[]): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const rows = results.map(
    (r) =>
      `| ${r.layout} | ${r.processes} | ${n(r.events_per_second)} | ${n(r.events_per_second_wall)} | ${r.daemon_cpu_seconds} | ${r.daemon_cpu_us_per_event} | ${r.redis_cpu_us_per_event} | ${r.segments} | \`${r.digest.slice(0, 12)}…\` |`,
  );
  return [
    '| layout | processes | events/s (database span) | events/s (wall) | daemon CPU s | daemon CPU µs/event | Redis CPU µs/event | segments | digest |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

describe('scale-out', () => {
  it('ingests the same stream into the identical index on one Redis and on Cluster, with 1, 2 and 4 processes', async () => {
    const results: Run[] = [];
    for (const [i, { layout, processes }] of runs.entries())
      results.push(await runOne(layout, processes, databases[i]!));
    const base = results[0]!;
    const checks = {
      identical_index: results.every((r) => r.digest === base.digest && r.segments === base.segments),
      every_event_logged: results.every((r) => r.events_logged === stream.uniqueIds),
      clean_exits: results.every((r) => r.exits.every((c) => c === 0)),
      groups_spread_over_masters: results.every(spreadOverMasters),
    };
    report('scale', {
      suite: 'bench:scale',
      ok: Object.values(checks).every(Boolean),
      seed: SEED,
      machine: { cpus: cpus().length, loadavg_1m_at_end: round(loadavg()[0]!, 2) },
      stream: {
        jobs: stream.jobs.length,
        unique_events: stream.uniqueIds,
        assets: ASSETS,
        holes: stream.holes,
        late_fills: stream.lateFills,
        duplicates: stream.duplicates,
      },
      runs: results,
      checks,
    });
    process.stdout.write(`\n${markdown(results)}\n\n`);
    expect(checks).toEqual({
      identical_index: true,
      every_event_logged: true,
      clean_exits: true,
      groups_spread_over_masters: true,
    });
  });
});
