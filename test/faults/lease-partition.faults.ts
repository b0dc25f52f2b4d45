import { loadavg } from 'node:os';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/store/pg/db.js';
import { BlackholeProxy, type ChunkWatcher } from '../helpers/blackhole-proxy.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { commitAfterInsertInto } from '../helpers/pg-wire.js';
import { type DaemonProcess, type LogLine, logTime, processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.js';
import {
  countLogs,
  daemonConfig,
  drainQueue,
  errorLines,
  intFromEnv,
  Producer,
  queueCounts,
  RedisServer,
  recordDecisionCommits,
  recordLeaseHistory,
  report,
  round,
  settleScheduler,
  sleep,
} from './lib.js';
import { midnightDaysAgo, SliceStream } from './slices.js';

/**
 * A silent partition of the scheduler lease holder (npm run test:lease-partition). Two daemons,
 * both with the scheduler on; A starts first and holds the lease. Each reaches PostgreSQL and
 * Redis through proxies of its own (test/helpers/blackhole-proxy.ts) that, when cut, forward no
 * byte either way and close nothing. Events stream into six time assets (LEASE_PARTITION_RATE per
 * second, default 40) under two hourly rollups: one delivers to a BullMQ queue (Redis), the other
 * to a webhook. Lease TTL 4 s, renewal every 1 s.
 *
 * Case 1, PostgreSQL: A's PostgreSQL traffic is cut for 2 × TTL at the precise moment A sends the
 * COMMIT of a decision (the watcher reads the wire protocol), so a decision transaction is in
 * flight, fence check passed and lease row locked, with its commit waiting in the partition.
 * Expected: A stops deciding by its own clock before its lease expires in the database; B takes
 * over within TTL + 2 s of the cut (ending A's silent session that locks the lease row); the
 * in-flight decision never commits, not even when its COMMIT arrives at the heal; A rejoins as
 * standby.
 *
 * Case 2, Redis (fresh database and Redis): A's Redis traffic is cut for 2 × TTL at the moment A
 * sends a delivery to the target queue. The lease lives in PostgreSQL, which A still reaches, so
 * A keeps the lease and B never takes it; the queue delivery in flight fails or waits and is
 * delivered after the heal under the same job id; nothing is lost and nothing is delivered twice.
 *
 * Both: 0 decisions committed under a stale token (by a record made at each commit), 0 duplicate
 * deliveries (webhook POSTs and queue jobs per idempotency key), 0 missed triggers (every hour the
 * oracle covers triggered exactly once), the index equal to range_agg over every slice sent.
 */

const procs = processHarness();
const RATE = intFromEnv('LEASE_PARTITION_RATE', 40);
const TTL_MS = 4000;
const LEASE = { ttl: 'PT4S', renew_every: 'PT1S', retry_every: 'PT0.5S' };
const CUT_MS = 2 * TTL_MS;
const TAKEOVER_LIMIT_MS = TTL_MS + 2000;
/** A queue delivery's bound, well inside the cut, so a silent Redis costs a pass this much. */
const QUEUE_TIMEOUT = 'PT1S';
const PREFIX = 'lease-partition';
const TARGET_QUEUE = 'downstream';
const ACQUIRED = 'acquired the scheduler lease';
const LOST = 'lost the scheduler lease; stopped triggering';
const ENDED = 'ended sessions of an expired former holder that blocked takeover';
const ASSETS = Array.from({ length: 6 }, (_, i) => `lp.t${i}`);
const START_MS = midnightDaysAgo(3);

type Kind = 'postgres' | 'redis';

interface Setup {
  readonly db: TestDatabase;
  readonly redis: RedisServer;
  readonly sink: WebhookSink;
  /** A's proxies (only the one of the case's kind is ever cut) and B's, which stay whole. */
  readonly aPg: BlackholeProxy;
  readonly aRedis: BlackholeProxy;
  readonly bPg: BlackholeProxy;
  readonly bRedis: BlackholeProxy;
}

/** A proxy in front of a service given by URL; closed after the file. */
async function proxyTo(url: string, watch?: () => ChunkWatcher): Promise<BlackholeProxy> {
  const u = new URL(url);
  const proxy = await BlackholeProxy.start(
    { host: u.hostname, port: Number(u.port) },
    watch ? { watch } : {},
  );
  afterAll(() => proxy.close());
  return proxy;
}

/**
 * A database, a Redis, a webhook receiver and four proxies of the case's own. A's proxy of the
 * case's kind watches for the moment to cut: a decision's COMMIT, or a delivery to the target queue.
 */
async function setup(kind: Kind): Promise<Setup> {
  const db = await createTestDatabase();
  const redis = await RedisServer.start();
  const sink = await startWebhookSink();
  afterAll(async () => {
    await sink.close();
    await redis.destroy();
  });
  const deliveryKey = Buffer.from(`${PREFIX}:${TARGET_QUEUE}:`);
  return {
    db,
    redis,
    sink,
    aPg: await proxyTo(db.url, kind === 'postgres' ? commitAfterInsertInto('triggers') : undefined),
    aRedis: await proxyTo(
      redis.url,
      kind === 'redis' ? () => (chunk: Buffer) => chunk.includes(deliveryKey) : undefined,
    ),
    bPg: await proxyTo(db.url),
    bRedis: await proxyTo(redis.url),
  };
}

// Sequential: concurrent clones of one template contend for its lock.
const pgCase = await setup('postgres');
const redisCase = await setup('redis');

const rollupsFor = (sink: WebhookSink) => [
  {
    id: 'hourly-queue',
    upstream: ASSETS.slice(0, 3),
    every: 'hour',
    begin: new Date(START_MS).toISOString(),
    rerun: 'on_update',
    target: { type: 'queue', queue: TARGET_QUEUE, timeout: QUEUE_TIMEOUT },
  },
  {
    id: 'hourly-hook',
    upstream: ASSETS.slice(3),
    every: 'hour',
    begin: new Date(START_MS).toISOString(),
    rerun: 'on_update',
    target: { type: 'webhook', url: sink.url, timeout: 'PT2S' },
  },
];

/** The 'scheduler' part of /readyz (answered 503 too while a dependency is down). */
async function leaseRole(p: DaemonProcess): Promise<string | null> {
  try {
    const body = (await (await fetch(`${p.url}/readyz`)).json()) as {
      postgres?: string;
      scheduler?: { role?: string };
    };
    return body.postgres === 'ok' ? (body.scheduler?.role ?? null) : null;
  } catch {
    return null;
  }
}

interface Observed {
  readonly checks: Record<string, number>;
  readonly figures: Record<string, unknown>;
}

/** Runs one case end to end and returns its checks (all 0 when it passed) and figures. */
async function runCase(kind: Kind, { db, redis, sink, aPg, aRedis, bPg, bRedis }: Setup): Promise<Observed> {
  const started = Date.now();
  const load = [loadavg()[0]!];
  const sql = connect(db.url, { max: 2, applicationName: 'lease-partition-checker' });
  await recordLeaseHistory(sql);
  await recordDecisionCommits(sql);
  const rollups = rollupsFor(sink);

  const cut = kind === 'postgres' ? aPg : aRedis;
  const config = (pg: BlackholeProxy, r: BlackholeProxy) =>
    daemonConfig({
      databaseUrl: pg.proxiedUrl(db.url),
      redisUrl: r.proxiedUrl(redis.url),
      prefix: PREFIX,
      scheduler: true,
      lease: LEASE,
      assets: ASSETS.map((name) => ({ name, domain: 'time' })),
      rollups,
    });

  const a = await procs.spawn({ name: `${kind}-a`, config: config(aPg, aRedis) });
  const aToken = (await a.waitForLog(ACQUIRED)).fencingToken as number;
  const b = await procs.spawn({ name: `${kind}-b`, config: config(bPg, bRedis) });

  const producer = new Producer(redis.url, 'asset-events', PREFIX);
  const stream = new SliceStream(ASSETS, START_MS);
  stream.start(producer, RATE);
  const delivered = async () =>
    (await sql<{ n: number }[]>`select count(*)::int as n from triggers where delivered_at is not null`)[0]!
      .n;
  // Warm: A decides and delivers for both rollups before the cut.
  await waitFor(async () => (await delivered()) >= 6, {
    timeout: 60_000,
    interval: 200,
    what: 'warm-up decisions',
  });

  // ---- the cut, at a decision's COMMIT (PostgreSQL) or a queue delivery (Redis) ----
  const aFrom = a.lines.length;
  const bFrom = b.lines.length;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    cut.cutAtWatched(),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('the watched moment did not come within 30 s')), 30_000);
    }),
  ]).finally(() => clearTimeout(timer));
  const cutAt = Date.now();
  load.push(loadavg()[0]!);
  // The decision in flight: a session of A, idle in its transaction, holding the lease row FOR
  // KEY SHARE (RowShareLock on the table), its COMMIT held by the proxy.
  const inFlight = await sql<{ pid: number }[]>`
    select l.pid from pg_locks l join pg_stat_activity s on s.pid = l.pid
    where l.relation = 'scheduler_leases'::regclass and l.mode = 'RowShareLock' and l.granted
      and s.datname = current_database()
      and s.state like 'idle in transaction%' and split_part(s.application_name, '@', 1) = 'coverage-rollup'`;

  // When the server ended that session: B ends it once the lease expired, or its idle limit does.
  const inFlightEnded =
    inFlight.length === 1
      ? waitFor(
          async () =>
            (await sql`select 1 from pg_stat_activity where pid = ${inFlight[0]!.pid}`).length === 0
              ? Date.now()
              : 0,
          { timeout: 2 * CUT_MS, interval: 50, what: 'the in-flight session to end' },
        ).catch(() => null)
      : Promise.resolve(null);
  let lostLine: LogLine | null = null;
  let takeoverLine: LogLine | null = null;
  if (kind === 'postgres') {
    lostLine = await a.waitForLog(LOST, { from: aFrom, timeout: 2 * TTL_MS });
    takeoverLine = await b.waitForLog((l) => l.msg === ACQUIRED && (l.fencingToken as number) > aToken, {
      from: bFrom,
      timeout: CUT_MS,
      what: 'B to take the lease',
    });
  }
  // Mid-cut, after A would have lost a lease it could not renew.
  const roleDuring = kind === 'redis' ? sleep(TTL_MS + 1000).then(() => leaseRole(a)) : null;
  const inFlightEndedAt = await inFlightEnded;
  const hold = cutAt + CUT_MS - Date.now();
  if (hold > 0) await sleep(hold); // the partition's length, not a wait for a condition
  const healAt = Date.now();
  cut.heal();

  // ---- after the heal: A's role, then a tail of decisions before the stream stops ----
  const rejoinedRole = kind === 'postgres' ? 'standby' : 'leader';
  await waitFor(async () => (await leaseRole(a)) === rejoinedRole, {
    timeout: 30_000,
    interval: 50,
    what: `A to answer role ${rejoinedRole}`,
  });
  const rejoinedAt = Date.now();
  const deliveredAtHeal = await delivered();
  await waitFor(async () => (await delivered()) >= deliveredAtHeal + 4, {
    timeout: 60_000,
    interval: 200,
    what: 'decisions after the heal',
  });
  await stream.stop();
  const events = new Queue('asset-events', { connection: producer.connection, prefix: PREFIX });
  await drainQueue(events, 120_000);
  await settleScheduler(sql, 120_000);
  load.push(loadavg()[0]!);

  // ---- the lease, by the database's history ----
  const history = await sql<
    { kind: string; token: number; holder: string; renewed_at: Date; expires_at: Date; recorded_at: Date }[]
  >`select kind, token, holder, renewed_at, expires_at, recorded_at from faults_lease_history order by recorded_at`;
  const aRenewals = history.filter((h) => h.token === aToken && h.kind !== 'released');
  const lastRenewal = aRenewals.at(-1)!;
  const takeovers = history.filter((h) => h.kind === 'acquired' && h.token > aToken);
  const takeover = takeovers[0];

  // ---- decisions, by the record made at each commit ----
  const commits = await sql<
    {
      key: string;
      lease_token: number;
      token_at_commit: number | null;
      lease_live_at_commit: boolean;
      committed_at: Date;
    }[]
  >`select idempotency_key as key, lease_token, token_at_commit, lease_live_at_commit, committed_at
    from faults_decision_commits order by committed_at`;
  const [outbox] = await sql<{ decisions: number; undelivered: number; unrecorded: number }[]>`
    select count(*)::int as decisions, count(*) filter (where delivered_at is null)::int as undelivered,
      (select count(*)::int from triggers t where not exists
        (select 1 from faults_decision_commits c where c.idempotency_key = t.idempotency_key)) as unrecorded
    from triggers`;
  const staleAtCommit = commits.filter((c) => c.token_at_commit !== c.lease_token);
  const afterTakeover = takeover
    ? commits.filter((c) => c.lease_token < takeover.token && c.committed_at > takeover.recorded_at)
    : [];
  const aCommitsAfterCut = commits.filter(
    (c) => c.lease_token === aToken && c.committed_at.getTime() > cutAt,
  );
  const aLastCommit = commits.filter((c) => c.lease_token === aToken).at(-1);
  const aTriggeredAfterCut = a.lines
    .slice(aFrom)
    .filter((l) => l.msg === 'triggered' && l.lease_token === aToken && logTime(l) > cutAt);

  // ---- deliveries ----
  const posts = countBy(sink.calls.map((c) => String(c.key)));
  const hookKeys = await sql<{ key: string }[]>`
    select idempotency_key as key from triggers where rollup_id = 'hourly-hook'`;
  const queueKeys = await sql<{ key: string }[]>`
    select idempotency_key as key from triggers where rollup_id = 'hourly-queue'`;
  const target = new Queue(TARGET_QUEUE, { connection: producer.connection, prefix: PREFIX });
  const targetJobs = (await queueCounts(target)).waiting;
  const missingAtQueue: string[] = [];
  for (const { key } of queueKeys) if (!(await target.getJob(key))) missingAtQueue.push(key);
  const postedTwice = [...posts].filter(([, n]) => n > 1);
  const hookNotPosted = hookKeys.filter(({ key }) => !posts.has(key));
  const deliveredTwice = [...countLogs([a, b], 'delivered', 'idempotency_key')].filter(([, n]) => n > 1);
  // While A's Redis was silent: its decisions, and when the webhook ones reached the receiver.
  const aDuringCut = commits.filter(
    (c) => c.lease_token === aToken && c.committed_at.getTime() > cutAt && c.committed_at.getTime() < healAt,
  );
  const firstPost = new Map<string, number>();
  for (const c of sink.calls) if (c.key && !firstPost.has(c.key)) firstPost.set(c.key, c.at);
  const hookDuringCut = aDuringCut.filter((c) => c.key.startsWith('hourly-hook@'));
  // Those decided early enough to be posted before the heal (a pass may wait out a queue delivery first).
  const hookPostedAfterHeal = hookDuringCut.filter(
    (c) => c.committed_at.getTime() < healAt - 2000 && (firstPost.get(c.key) ?? Infinity) >= healAt,
  );
  const retriedDeliveries = a.lines.slice(aFrom).filter((l) => l.msg === 'delivery failed; will retry');

  // ---- events, index and periods against the oracle ----
  await stream.loadOracle(sql);
  const logged = await sql<{ name: string; event_id: string }[]>`
    select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id from events e join assets a on a.id = e.asset_id`;
  const inLog = new Set(logged.map((r) => `${r.name}\u0000${r.event_id}`));
  const lost = [...stream.sent.keys()].filter((k) => !inLog.has(k));
  const mismatched = await stream.mismatchedAssets(sql);
  const periods = await stream.hourlyPeriods(sql, rollups);
  const covered = periods.filter((p) => p.covered);
  const notOnce = covered.filter((p) => p.triggers !== 1);
  const uncoveredTriggered = periods.filter((p) => !p.covered && p.triggers > 0);

  await target.close();
  await events.close();
  await producer.close();
  const exits = await procs.stopAll(30_000);
  await sql.end({ timeout: 5 });

  const ms = (t: Date | number | undefined | null, from: Date | number) =>
    t === undefined || t === null ? null : new Date(t).getTime() - new Date(from).getTime();
  const lostAt = lostLine ? logTime(lostLine) : null;
  const takeoverMs = ms(takeover?.recorded_at, cutAt);
  const endedLine = b.lines.slice(bFrom).find((l) => l.msg === ENDED);
  const common = {
    decisions_committed_under_a_stale_token: staleAtCommit.length,
    decisions_committed_after_a_newer_acquisition: afterTakeover.length,
    decisions_without_a_commit_record: outbox!.unrecorded,
    webhook_keys_posted_more_than_once: postedTwice.length,
    webhook_decisions_never_posted: hookNotPosted.length,
    queue_decisions_missing_at_target: missingAtQueue.length,
    target_jobs_vs_queue_decisions: Math.abs(targetJobs - queueKeys.length),
    keys_delivered_more_than_once: deliveredTwice.length,
    undelivered_decisions: outbox!.undelivered,
    covered_hours_not_triggered_exactly_once: notOnce.length,
    uncovered_hours_triggered: uncoveredTriggered.length,
    events_lost: lost.length,
    index_vs_oracle_mismatched_assets: mismatched.length,
    nonzero_exits: exits.filter((e) => e.code !== 0 || e.signal).length,
  };
  const specific: Record<string, number> =
    kind === 'postgres'
      ? {
          // The cut caught a decision in flight: fence passed, lease row locked, COMMIT held.
          no_decision_in_flight_at_the_cut: inFlight.length === 1 ? 0 : 1,
          // Ended by the server before the heal, so its COMMIT, delivered then, finds no transaction.
          in_flight_session_alive_at_heal: inFlightEndedAt !== null && inFlightEndedAt < healAt ? 0 : 1,
          // By A's own clock (its log line), before its lease ran out in the database.
          a_stopped_after_its_database_expiry:
            lostAt !== null && lostAt < lastRenewal.expires_at.getTime() ? 0 : 1,
          a_stopped_later_than_ttl_after_last_renewal:
            lostAt !== null && lostAt - lastRenewal.renewed_at.getTime() <= TTL_MS ? 0 : 1,
          a_decided_after_the_cut: aCommitsAfterCut.length + aTriggeredAfterCut.length,
          a_last_decision_later_than_ttl_after_last_renewal:
            !aLastCommit || aLastCommit.committed_at.getTime() - lastRenewal.renewed_at.getTime() <= TTL_MS
              ? 0
              : 1,
          takeover_later_than_ttl_plus_2s: takeoverMs !== null && takeoverMs <= TAKEOVER_LIMIT_MS ? 0 : 1,
          takeovers_other_than_one: Math.abs(takeovers.length - 1),
          takeover_by_other_than_b: takeover && Number(takeover.holder.split(':')[1]) === b.pid ? 0 : 1,
        }
      : {
          // The lease lives in PostgreSQL, which A still reaches: it keeps it, B never takes it.
          a_lost_the_lease: a.lines.slice(aFrom).filter((l) => l.msg === LOST).length,
          lease_acquired_after_a: takeovers.length,
          a_not_leader_during_the_cut: (await roleDuring) === 'leader' ? 0 : 1,
          // It keeps deciding, and the webhook, which needs no Redis, keeps receiving.
          a_decided_nothing_during_the_cut: aDuringCut.length > 0 ? 0 : 1,
          webhook_decisions_of_the_cut_posted_only_after_heal: hookPostedAfterHeal.length,
        };
  const checks = { ...common, ...specific };
  const figures = {
    seconds: round((Date.now() - started) / 1000, 1),
    load_average_1m: load.map((l) => round(l, 2)),
    cut_s: round((healAt - cutAt) / 1000, 2),
    lease: {
      a_token: aToken,
      ...(kind === 'postgres'
        ? {
            a_last_renewal_before_cut_ms: ms(cutAt, lastRenewal.renewed_at),
            a_stopped_after_last_renewal_ms: lostAt === null ? null : ms(lostAt, lastRenewal.renewed_at),
            a_stopped_before_database_expiry_ms: lostAt === null ? null : ms(lastRenewal.expires_at, lostAt),
            a_stopped_after_cut_ms: lostAt === null ? null : ms(lostAt, cutAt),
            a_stop_reason: lostLine?.reason,
            a_last_decision_after_last_renewal_ms: aLastCommit
              ? ms(aLastCommit.committed_at, lastRenewal.renewed_at)
              : null,
            b_token: takeover?.token ?? null,
            b_took_over_after_cut_ms: takeoverMs,
            b_took_over_after_last_renewal_ms: ms(takeover?.recorded_at, lastRenewal.renewed_at),
            b_took_over_after_database_expiry_ms: ms(takeover?.recorded_at, lastRenewal.expires_at),
            b_acquired_line_after_cut_ms: takeoverLine ? ms(logTime(takeoverLine), cutAt) : null,
            b_ended_a_sessions: endedLine?.sessions ?? 0,
            a_rejoined_as_standby_after_heal_ms: rejoinedAt - healAt,
          }
        : {
            a_role_during_cut: await roleDuring,
            a_leader_answering_after_heal_ms: rejoinedAt - healAt,
            queue_deliveries_retried_during_cut: retriedDeliveries.length,
          }),
    },
    in_flight_decision: {
      sessions_idle_in_transaction_holding_the_lease_row: inFlight.length,
      session_ended_after_cut_ms: inFlightEndedAt === null ? null : inFlightEndedAt - cutAt,
    },
    decisions: {
      total: outbox!.decisions,
      by_a_during_cut: commits.filter(
        (c) =>
          c.lease_token === aToken && c.committed_at.getTime() > cutAt && c.committed_at.getTime() < healAt,
      ).length,
      covered_hours: covered.length,
      webhook_posts: sink.calls.length,
      target_jobs: targetJobs,
    },
    events: { sent_unique: stream.sent.size, resent: stream.resent },
    details: {
      stale: staleAtCommit.slice(0, 5),
      after_takeover: afterTakeover.slice(0, 5),
      posted_twice: postedTwice.slice(0, 5),
      delivered_twice: deliveredTwice.slice(0, 5),
      not_once: notOnce.slice(0, 5),
      mismatched: mismatched.slice(0, 3),
      lease_acquisitions: history
        .filter((h) => h.kind === 'acquired')
        .map((h) => ({ token: h.token, pid: Number(h.holder.split(':')[1]), at: h.recorded_at })),
      exits,
      error_log_lines: errorLines([a, b])
        .slice(0, 10)
        .map(({ process, line }) => ({ process, msg: line.msg })),
    },
  };
  return { checks, figures };
}

function countBy(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

describe('the scheduler lease holder silently partitioned', () => {
  it('from PostgreSQL, mid-decision: it stops by its own clock, B takes over, the decision never commits', async () => {
    const { checks, figures } = await runCase('postgres', pgCase);
    const ok = Object.values(checks).every((v) => v === 0);
    report('lease-partition-postgres', {
      suite: 'test:lease-partition',
      case: 'postgres',
      ok,
      checks,
      ...figures,
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });

  it('from Redis, mid-delivery: it keeps the lease, and every decision is delivered once', async () => {
    const { checks, figures } = await runCase('redis', redisCase);
    const ok = Object.values(checks).every((v) => v === 0);
    report('lease-partition-redis', { suite: 'test:lease-partition', case: 'redis', ok, checks, ...figures });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});
