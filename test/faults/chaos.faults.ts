import { readFileSync, writeFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { type DaemonProcess, logTime, processHarness } from '../helpers/process.js';
import {
  countLogs,
  daemonConfig,
  errorLines,
  intFromEnv,
  Producer,
  pending,
  prng,
  queueCounts,
  RedisServer,
  recordLeaseHistory,
  report,
  round,
  seedFromEnv,
  shuffle,
  sleep,
  TOKEN,
  terminateConnections,
} from './lib.js';
import { checkRuns, startDownstreamWorker, unfinishedRuns } from './run-checks.js';
import { buildStream, intAsset, timeAsset } from './stream.js';

/**
 * Proof under faults (npm run test:faults): real daemon processes (the built `coverage-rollup
 * start`) on a Redis of this file's own with AOF and on a PostgreSQL database of its own. While
 * ≥ 100,000 events stream in (holes, late fills, duplicates, reprocessed spans), it SIGKILLs
 * ingesting processes at 10 random moments and restarts them, SIGKILLs Redis once and restarts it
 * on the same AOF directory, terminates every PostgreSQL connection of the database once, and
 * SIGSTOPs the scheduler lease holder past its TTL before SIGCONT; mid-stream, every process's
 * config file gains a rollup and changes another's rerun rule, and one scheduling process is asked
 * to reload (the others follow its notification). Then it checks, and prints as
 * JSON: no acknowledged event lost, the index equal to range_agg over the event log, one decision
 * per (rollup, period, generation) and none missing, every decision delivered, no trigger by a
 * fenced holder. A downstream worker that always succeeds consumes the target queue throughout:
 * every run attempt is exactly one job at the target (and every job a run), and every triggered
 * period's run ends succeeded.
 *
 * FAULTS_SEED (reproduce a run), FAULTS_RATE (events/s offered, default 1000), FAULTS_SCALE
 * (default 1: 24 integer assets of 3,000 slices and 6 time assets of 5,760 one-minute slices,
 * ~110,000 events; 0.1 for a quick run).
 */

const procs = processHarness();
const SEED = seedFromEnv('FAULTS_SEED');
const RATE = intFromEnv('FAULTS_RATE', 1000);
const SCALE = intFromEnv('FAULTS_SCALE', 1);
const TTL_MS = 4000;
const LEASE = { ttl: 'PT4S', renew_every: 'PT1S', retry_every: 'PT0.5S' };
const ACQUIRED = 'acquired the scheduler lease';
const LOST = 'lost the scheduler lease; stopped triggering';
const PREFIX = 'faults';
const TARGET_QUEUE = 'downstream';

const db = await createTestDatabase();
const redis = await RedisServer.start({ aof: true });
afterAll(() => redis.destroy());

/** Data days: the four whole UTC days that ended one day ago, so every time period is in the past. */
const DAY = 86_400_000;
const today = Math.floor(Date.now() / DAY) * DAY;
const timeStartMs = today - 5 * DAY;
const stream = buildStream({
  seed: SEED,
  intAssets: 24,
  intSlices: Math.round(3000 * SCALE),
  intWidth: 100,
  timeAssets: 6,
  timeSlices: Math.round(4 * 24 * 60 * SCALE),
  timeStartMs,
  holesPerAsset: 2,
  lateFillRate: 0.005,
  duplicateRate: 0.03,
  reprocess: true,
});

const queueTarget = { type: 'queue', queue: TARGET_QUEUE };
// Quick retries and a short timeout: a run the faults made fail or lose is retried within the
// settle wait, so the check below sees where it ended.
const run = { retries: 3, backoff: 'PT1S', timeout: 'PT2M' };
/** Eight integer rollups over three upstreams each, two time rollups (hourly UTC, daily Berlin). */
const rollups: Array<{ id: string; upstream: string[] } & Record<string, unknown>> = [
  ...Array.from({ length: 8 }, (_, k) => ({
    id: `ints-${k}`,
    upstream: [intAsset(3 * k), intAsset(3 * k + 1), intAsset(3 * k + 2)],
    every: 10_000,
    begin: 0,
    rerun: k % 2 === 0 ? 'on_update' : 'on_replay',
    run,
    target: queueTarget,
  })),
  {
    id: 'time-hourly',
    upstream: [timeAsset(0), timeAsset(1), timeAsset(2)],
    every: 'hour',
    begin: new Date(timeStartMs).toISOString(),
    rerun: 'on_update',
    run,
    target: queueTarget,
  },
  {
    id: 'time-daily',
    upstream: [timeAsset(3), timeAsset(4), timeAsset(5)],
    every: 'day',
    timezone: 'Europe/Berlin',
    begin: new Date(timeStartMs).toISOString().slice(0, 10),
    rerun: 'on_replay',
    run,
    target: queueTarget,
  },
];

/** The rollup the mid-run reload adds (over upstreams other rollups read too), and the one it changes. */
const LATE_ROLLUP = {
  id: 'ints-late',
  upstream: [intAsset(0), intAsset(4), intAsset(8)],
  every: 5_000,
  begin: 0,
  rerun: 'on_update',
  run,
  target: queueTarget,
};
const reloaded = { ok: false };

/**
 * Every process's config file gets the new rollups (each reads its own file); one scheduling
 * process is asked to reload, the others follow its notification.
 */
async function reloadMidRun(slots: readonly Slot[]): Promise<Record<string, unknown>> {
  rollups.push(LATE_ROLLUP);
  const changed = rollups.find((r) => r.id === 'ints-1')!;
  changed.rerun = 'on_update';
  for (const slot of slots) {
    const own = JSON.parse(readFileSync(slot.proc.configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(slot.proc.configPath, `${JSON.stringify({ ...own, rollups }, null, 2)}\n`);
  }
  const asked = slots.find((s) => s.scheduler && !s.proc.suspended && s.proc.url !== undefined)!;
  const response = await fetch(`${asked.proc.url}/v1/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const answer = (await response.json()) as { rollups?: { added: string[]; changed: string[] } };
  reloaded.ok =
    response.status === 200 &&
    JSON.stringify(answer.rollups?.added) === '["ints-late"]' &&
    JSON.stringify(answer.rollups?.changed) === '["ints-1"]';
  return { process: asked.proc.name, status: response.status, answer };
}

const config = (scheduler: boolean) =>
  daemonConfig({
    databaseUrl: db.url,
    redisUrl: redis.url,
    prefix: PREFIX,
    scheduler,
    lease: LEASE,
    assets: [
      ...stream.intAssets.map((name) => ({ name, domain: 'integer' })),
      ...stream.timeAssets.map((name) => ({ name, domain: 'time' })),
    ],
    rollups,
  });

interface Slot {
  readonly role: string;
  readonly scheduler: boolean;
  proc: DaemonProcess;
  starts: number;
}

describe('the daemon under faults and load', () => {
  it('loses nothing, decides once, delivers, and never triggers fenced', async () => {
    const started = Date.now();
    const elapsed = () => round((Date.now() - started) / 1000, 1);
    const random = prng(SEED ^ 0x5eed);
    const sql = connect(db.url, { max: 4, applicationName: 'faults-checker' });
    await recordLeaseHistory(sql);

    const slots: Slot[] = [];
    const spawnSlot = async (slot: Omit<Slot, 'proc'> & { proc?: DaemonProcess }) => {
      slot.starts++;
      const proc = await procs.spawn({
        name: `${slot.role}-${slot.starts}`,
        config: config(slot.scheduler),
        readyTimeout: 90_000,
      });
      slot.proc = proc;
      return proc;
    };
    for (const [role, scheduler] of [
      ['sched-a', true],
      ['sched-b', true],
      ['ingest-1', false],
      ['ingest-2', false],
    ] as const) {
      const slot = { role, scheduler, starts: 0 } as Slot;
      await spawnSlot(slot);
      slots.push(slot);
    }
    const killed = new Set<DaemonProcess>();
    const downstream = startDownstreamWorker(redis.url, TARGET_QUEUE, PREFIX);
    onTestFinished(() => downstream.close());

    // ---- the producer: paced, acknowledged ids recorded ----
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    const acked = new Set<string>();
    const total = stream.jobs.length;
    let sent = 0;
    const produce = (async () => {
      const batch = 250;
      const t0 = Date.now();
      for (let i = 0; i < total; i += batch) {
        const jobs = stream.jobs.slice(i, i + batch);
        await producer.add(jobs);
        for (const j of jobs) acked.add(`${j.data.asset}\u0000${j.data.id}`);
        sent = i + jobs.length;
        const due = t0 + (sent / RATE) * 1000;
        if (Date.now() < due) await sleep(due - Date.now());
      }
    })();
    const progress = () => sent / total;
    const until = async (fraction: number) => {
      while (progress() < fraction) await sleep(100);
    };

    // ---- the faults, in order of stream progress ----
    const faults: Array<Record<string, unknown>> = [];
    type Fault = { at: number; kind: 'sigkill' | 'redis' | 'pg' | 'sigstop' | 'reload' };
    const plan: Fault[] = [
      ...Array.from({ length: 10 }, () => ({ at: 0.04 + random() * 0.92, kind: 'sigkill' as const })),
      { at: 0.3, kind: 'redis' },
      { at: 0.45, kind: 'reload' },
      { at: 0.5, kind: 'pg' },
      { at: 0.65, kind: 'sigstop' },
    ];
    plan.sort((a, b) => a.at - b.at);
    const sigstop: Record<string, unknown> = {};

    for (const fault of plan) {
      await until(fault.at);
      const at = { at_s: elapsed(), progress: round(progress(), 3) };
      if (fault.kind === 'sigkill') {
        const slot = shuffle([...slots], random)[0]!;
        const victim = slot.proc;
        killed.add(victim);
        await victim.kill();
        await sleep(random() * 1500);
        const next = await spawnSlot(slot);
        faults.push({
          fault: 'SIGKILL',
          process: victim.name,
          pid: victim.pid,
          restarted_as: next.name,
          ...at,
        });
      } else if (fault.kind === 'redis') {
        const down = Date.now();
        await redis.kill();
        await sleep(1500);
        await redis.launch();
        faults.push({ fault: 'redis SIGKILL + restart on the same AOF', down_ms: Date.now() - down, ...at });
      } else if (fault.kind === 'reload') {
        faults.push({
          fault: 'reload: a rollup added, another changed',
          ...(await reloadMidRun(slots)),
          ...at,
        });
      } else if (fault.kind === 'pg') {
        const terminated = await terminateConnections(db.name);
        faults.push({ fault: 'pg_terminate_backend on every connection of the database', terminated, ...at });
      } else {
        Object.assign(sigstop, await pauseLeaseHolder(sql, slots), at);
        faults.push({ fault: 'SIGSTOP lease holder past its TTL, then SIGCONT', ...sigstop });
      }
    }
    await produce;
    const streamSeconds = elapsed();

    // ---- drain: every job done (jobs of killed workers come back once their locks lapse) ----
    const events = new Queue('asset-events', { connection: producer.connection, prefix: PREFIX });
    const drainStarted = Date.now();
    for (let calm = 0; calm < 3; ) {
      const counts = await queueCounts(events);
      calm = pending(counts) === 0 ? calm + 1 : 0;
      if (Date.now() - drainStarted > 300_000)
        throw new Error(`queue did not drain: ${JSON.stringify(counts)}`);
      await sleep(500);
    }
    const drainSeconds = round((Date.now() - drainStarted) / 1000, 1);
    const finalCounts = await queueCounts(events);
    const dlq = new Queue('asset-events-dead', { connection: producer.connection, prefix: PREFIX });
    const deadLettered = (await queueCounts(dlq)).waiting;

    // ---- the scheduler catches up: cursors at the log's end, nothing dirty, everything delivered ----
    const settleStarted = Date.now();
    for (let calm = 0; calm < 3; ) {
      const unfinished = await unfinishedRuns(sql);
      const [s] = await sql<{ dirty: number; undelivered: number; behind: number; cursors: number }[]>`
        select
          (select count(*)::int from periods where dirty or manual_requested) as dirty,
          (select count(*)::int from triggers where delivered_at is null and failed_at is null) as undelivered,
          (select count(*)::int from rollup_cursors c join assets a on a.name = c.asset_name where c.seq < a.last_seq) as behind,
          (select count(*)::int from rollup_cursors) as cursors`;
      const upstreams = rollups.reduce((n, r) => n + r.upstream.length, 0);
      calm =
        s!.dirty === 0 &&
        s!.undelivered === 0 &&
        s!.behind === 0 &&
        s!.cursors === upstreams &&
        unfinished === 0
          ? calm + 1
          : 0;
      if (Date.now() - settleStarted > 180_000)
        throw new Error(`scheduler did not settle: ${JSON.stringify({ ...s, unfinished_runs: unfinished })}`);
      await sleep(1000);
    }
    const settleSeconds = round((Date.now() - settleStarted) / 1000, 1);

    // ---- checks ----
    // 1. Every acknowledged event is in the event log (by asset and id).
    const logged = await sql<{ name: string; event_id: string }[]>`
      select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id from events e join assets a on a.id = e.asset_id`;
    const inLog = new Set(logged.map((r) => `${r.name}\u0000${r.event_id}`));
    const lost = [...acked].filter((k) => !inLog.has(k));
    const unexpected = [...inLog].filter((k) => !acked.has(k));

    // 2. The index covers exactly what range_agg over the completions covers.
    const mismatched = await sql<{ name: string; events: string | null; segments: string | null }[]>`
      with ev as (
        select asset_id, range_agg(int8range(lo, hi)) as m from events
        where not replay and hi > lo group by asset_id),
      sg as (select asset_id, range_agg(span) as m from segments group by asset_id)
      select a.name, ev.m::text as events, sg.m::text as segments
      from assets a left join ev on ev.asset_id = a.id left join sg on sg.asset_id = a.id
      where ev.m is distinct from sg.m`;
    const [index] = await sql<{ segments: number; ranges: number; events: number; assets: number }[]>`
      select (select count(*)::int from segments) as segments,
        (select count(*)::int from (select unnest(range_agg(span)) from segments group by asset_id) r) as ranges,
        (select count(*)::int from events) as events,
        (select count(*)::int from assets) as assets`;

    // 3. Decisions: one per (rollup, period, generation), generations 1..n without gaps, and every
    //    period whose upstreams are all complete has been triggered.
    const duplicateDecisions = await sql`
      select rollup_id, period_lo, generation from triggers group by 1, 2, 3 having count(*) <> 1`;
    const generationGaps = await sql<{ rollup_id: string; key: string }[]>`
      select p.rollup_id, p.key from periods p
      left join triggers t on t.rollup_id = p.rollup_id and t.period_lo = p.lo
      group by p.rollup_id, p.key, p.generation
      having p.generation <> count(t.generation) or p.generation <> coalesce(max(t.generation), 0)`;
    const uncovered: Array<{ rollup: string; key: string }> = [];
    let coveredPeriods = 0;
    for (const r of rollups) {
      const rows = await sql<{ key: string; generation: number; covered: boolean }[]>`
        with up as (
          select a.name, range_agg(s.span) filter (where s.state = 'complete') as m
          from assets a left join segments s on s.asset_id = a.id
          where a.name = any(${r.upstream}::text[]) group by a.name)
        select p.key, p.generation,
          (select count(*) from up where up.m @> int8range(p.lo, p.hi)) = ${r.upstream.length} as covered
        from periods p where p.rollup_id = ${r.id}`;
      for (const row of rows) {
        if (!row.covered) continue;
        coveredPeriods++;
        if (row.generation < 1) uncovered.push({ rollup: r.id, key: row.key });
      }
    }
    const decisions = await sql<{ key: string; token: number; decided_at: Date; generation: number }[]>`
      select idempotency_key as key, lease_token as token, decided_at, generation from triggers`;
    const triggeredLines = countLogs(procs.all, 'triggered', 'idempotency_key');
    const triggeredTwice = [...triggeredLines]
      .filter(([, n]) => n > 1)
      .map(([k, n]) => ({ key: k, lines: n }));

    // 4. Deliveries: every decision is a job at the target queue, under its key; repeats counted.
    const target = new Queue(TARGET_QUEUE, { connection: producer.connection, prefix: PREFIX });
    const missingAtTarget: string[] = [];
    for (const d of decisions) {
      const job = await target.getJob(d.key);
      if (!job || (job.data as { idempotency_key?: string }).idempotency_key !== d.key)
        missingAtTarget.push(d.key);
    }
    const targetJobs = (await queueCounts(target)).waiting;
    const deliveredLines = countLogs(procs.all, 'delivered', 'idempotency_key');
    const deliveredTwice = [...deliveredLines]
      .filter(([, n]) => n > 1)
      .map(([k, n]) => ({ key: k, deliveries: n }));
    const [outbox] = await sql<{ undelivered: number; failed: number; max_attempts: number }[]>`
      select count(*) filter (where delivered_at is null)::int as undelivered,
        count(*) filter (where failed_at is not null)::int as failed, coalesce(max(attempts), 0)::int as max_attempts
      from triggers`;

    // 5. Fencing: each trigger's token is the one current at its decided_at, by the database's own
    //    history of acquisitions, and by the daemons' 'acquired the scheduler lease' lines.
    const fencedByDb = await sql<{ key: string; token: number; current: number | null }[]>`
      select t.idempotency_key as key, t.lease_token as token,
        (select h.token from faults_lease_history h where h.kind = 'acquired' and h.acquired_at <= t.decided_at
         order by h.acquired_at desc limit 1) as current
      from triggers t`;
    const badByDb = fencedByDb.filter((r) => r.current !== r.token);
    const acquisitions = procs.all
      .flatMap((p) =>
        p.logs(ACQUIRED).map((l) => ({ token: l.fencingToken as number, at: logTime(l), process: p.name })),
      )
      .sort((a, b) => a.at - b.at);
    const badByLogs = decisions.filter((d) => {
      const at = d.decided_at.getTime();
      const current = acquisitions.filter((a) => a.at <= at).at(-1);
      return current?.token !== d.token;
    });
    // 6. Runs: one job per attempt at the target, and every triggered period's run succeeded.
    const runs = await checkRuns(sql, target, downstream);
    const leaseHistory = await sql<{ token: number; holder: string; acquired_at: Date }[]>`
      select token, holder, acquired_at from faults_lease_history where kind = 'acquired' order by acquired_at`;

    // ---- stop everything cleanly; every process but the SIGKILLed ones must exit 0 ----
    await producer.close();
    const exits = await procs.stopAll(30_000);
    const unexpectedExits = procs.all
      .filter((p) => !killed.has(p) && (p.exit?.code !== 0 || p.exit?.signal))
      .map((p) => ({ process: p.name, exit: p.exit }));
    const errors = errorLines(procs.all);
    const errorMessages = new Map<string, number>();
    for (const { line } of errors) errorMessages.set(line.msg, (errorMessages.get(line.msg) ?? 0) + 1);
    await sql.end({ timeout: 5 });

    const checks = {
      events_lost: lost.length,
      index_vs_range_agg_mismatched_assets: mismatched.length,
      duplicate_decisions: duplicateDecisions.length,
      generation_gaps: generationGaps.length,
      covered_periods_without_trigger: uncovered.length,
      decisions_missing_at_target: missingAtTarget.length,
      undelivered_or_failed_decisions: outbox!.undelivered + outbox!.failed,
      triggers_by_fenced_holder_db_history: badByDb.length,
      triggers_by_fenced_holder_log_history: badByLogs.length,
      ...runs.checks,
      jobs_failed_in_events_queue: finalCounts.failed,
      // The reload was taken: the added rollup is in the checks above like the others.
      reload_refused: reloaded.ok ? 0 : 1,
      dead_lettered: deadLettered,
      unexpected_process_exits: unexpectedExits.length,
      // The pause happened and the standby took the lease over while the holder was stopped.
      sigstop_without_takeover: sigstop.takeover ? 0 : 1,
    };
    const ok = Object.values(checks).every((v) => v === 0);
    report('faults', {
      suite: 'test:faults',
      ok,
      seed: SEED,
      offered_rate_per_s: RATE,
      seconds: {
        stream: streamSeconds,
        drain: drainSeconds,
        scheduler_settle: settleSeconds,
        total: elapsed(),
      },
      stream: {
        jobs_added: producer.acked,
        producer_retries: producer.retries,
        unique_event_ids: stream.uniqueIds,
        acknowledged_ids: acked.size,
        assets: stream.intAssets.length + stream.timeAssets.length,
        holes: stream.holes,
        late_fills: stream.lateFills,
        duplicates: stream.duplicates,
        reprocessed: stream.reprocessed,
      },
      processes: {
        started: procs.all.length,
        sigkilled: killed.size,
        exits_after_sigterm: exits.map((e) => e.code),
      },
      faults,
      checks,
      details: {
        lost: lost.slice(0, 20),
        ids_in_log_never_acknowledged: unexpected.length,
        mismatched: mismatched.slice(0, 5),
        index,
        decisions: decisions.length,
        decisions_by_generation: countBy(decisions.map((d) => `gen${d.generation}`)),
        covered_periods: coveredPeriods,
        uncovered: uncovered.slice(0, 20),
        generation_gaps: generationGaps.slice(0, 20),
        triggered_log_lines_repeated: triggeredTwice.slice(0, 20),
        target_jobs: targetJobs,
        delivery_log_lines: [...deliveredLines.values()].reduce((a, b) => a + b, 0),
        keys_delivered_more_than_once: deliveredTwice.length,
        delivered_more_than_once: deliveredTwice.slice(0, 10),
        outbox_max_attempts: outbox!.max_attempts,
        fenced_db: badByDb.slice(0, 10),
        fenced_logs: badByLogs
          .slice(0, 10)
          .map((d) => ({ key: d.key, token: d.token, decided_at: d.decided_at })),
        lease_acquisitions: leaseHistory.map((h) => ({
          token: h.token,
          holder_pid: Number(h.holder.split(':')[1]),
          at: h.acquired_at.toISOString(),
        })),
        unexpected_exits: unexpectedExits,
        error_log_lines: Object.fromEntries(errorMessages),
        final_queue_counts: finalCounts,
        runs: runs.details,
      },
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});

/**
 * SIGSTOPs the process whose pid is in the lease row, waits until the other scheduler acquires a
 * newer token (or 3 TTLs pass), keeps it stopped for at least 2 TTLs in all, SIGCONTs it and waits
 * for it to notice it lost the lease.
 */
async function pauseLeaseHolder(sql: Sql, slots: readonly Slot[]): Promise<Record<string, unknown>> {
  let holder: { slot: Slot; token: number } | undefined;
  for (let i = 0; i < 100 && !holder; i++) {
    // The pg fault just before may have terminated this pool's idle connection: a query written
    // before the pool saw the close fails with CONNECTION_CLOSED, and the next one reconnects.
    const [row] = await sql<{ holder: string; token: number; live: boolean }[]>`
      select holder, token, expires_at > clock_timestamp() as live from scheduler_leases where name = 'scheduler'`.catch(
      (error: { code?: string }) => {
        if (error.code === 'CONNECTION_CLOSED' || error.code === '57P01') return [];
        throw error;
      },
    );
    const pid = row?.live ? Number(row.holder.split(':')[1]) : undefined;
    const slot = slots.find((s) => s.proc.pid === pid && s.proc.running);
    if (slot) holder = { slot, token: row!.token };
    else await sleep(200);
  }
  if (!holder) return { error: 'no live lease holder found' };
  const { slot, token } = holder;
  const proc = slot.proc;
  const stoppedAt = Date.now();
  const from = proc.lines.length;
  proc.signal('SIGSTOP');
  let takeover: { process: string; token: number; after_ms: number } | null = null;
  const others = slots.filter((s) => s !== slot && s.scheduler);
  while (!takeover && Date.now() - stoppedAt < 3 * TTL_MS + 5000) {
    for (const s of others) {
      const line = s.proc.logs((l) => l.msg === ACQUIRED && (l.fencingToken as number) > token).at(-1);
      if (line)
        takeover = {
          process: s.proc.name,
          token: line.fencingToken as number,
          after_ms: logTime(line) - stoppedAt,
        };
    }
    if (!takeover) await sleep(100);
  }
  const hold = stoppedAt + 2 * TTL_MS - Date.now();
  if (hold > 0) await sleep(hold);
  const stoppedMs = Date.now() - stoppedAt;
  proc.signal('SIGCONT');
  const noticed = await proc
    .waitForLog(LOST, { from, timeout: 15_000 })
    .then((l) => ({ reason: l.reason, after_cont_ms: logTime(l) - (stoppedAt + stoppedMs) }))
    .catch((e: Error) => ({ error: e.message.split('\n')[0] }));
  return {
    paused: proc.name,
    paused_token: token,
    stopped_ms: stoppedMs,
    takeover,
    resumed_holder_stepped_down: noticed,
  };
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
