import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { queueConnection } from '../../src/queue/backend.js';
import { queueSchema } from '../../src/queue/schema.js';
import type { Sql } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { type DaemonProcess, processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { indexCoverage, logCoverage } from '../integration/ingest-harness.js';
import {
  errorLines,
  intFromEnv,
  pending,
  prng,
  queueCounts,
  report,
  round,
  seedFromEnv,
  sleep,
  TOKEN,
} from './lib.js';
import { sessionsInTransaction } from './pg-sessions.js';
import { buildStream } from './stream.js';

/**
 * Crash recovery on BullMQ's PostgreSQL queue backend (npm run test:pg-ingest-crash):
 * two daemon processes on one database, no Redis anywhere, consume one events queue through the
 * batch consumer (src/ingest/pg-batch-consumer.ts). A producer adds ~20,000 events over six
 * assets (3 % of ids sent again as jobs of their own) at a steady rate; daemon A is SIGKILLed in
 * the middle of an ingest commit after a random moment of the stream (docs/decisions.md) and
 * restarted, several times; B runs throughout. A's jobs in hand come back through BullMQ's
 * stalled check once their 30 s locks lapse, and are taken again.
 *
 * Checks, printed as JSON: every distinct event id in the log exactly once, every job completed
 * exactly once (as committed or duplicate), none failed, nothing dead-lettered, each asset's index
 * coverage equal to the union of its logged intervals, and the kills left jobs to recover.
 *
 * PG_CRASH_SEED (replays the stream and the kill moments), PG_CRASH_RATE (events/s offered,
 * default 250), PG_CRASH_KILLS (default 3).
 */

const procs = processHarness();
const SEED = seedFromEnv('PG_CRASH_SEED');
const RATE = intFromEnv('PG_CRASH_RATE', 250);
const KILLS = intFromEnv('PG_CRASH_KILLS', 3);
const PREFIX = 'pgcrash';
const QUEUE = 'asset-events';
const DRAIN_DEADLINE_MS = 240_000;
const STALLED = 'stalled jobs returned to the queue';
const LOST_LOCK = 'jobs lost their lock before completing';

const db = await createTestDatabase();
const connection = queueConnection(
  parseConfig({ database_url: db.url, queue: { backend: 'postgres', prefix: PREFIX } }),
);
const events = connection.queue(QUEUE, PREFIX);
const dead = connection.queue('asset-events-dead', PREFIX);
afterAll(async () => {
  await Promise.all([events.close(), dead.close()]);
  await connection.close();
});

const DAY = 86_400_000;
const stream = buildStream({
  seed: SEED,
  intAssets: 4,
  intSlices: 4000,
  intWidth: 100,
  timeAssets: 2,
  timeSlices: 2000,
  timeStartMs: Math.floor(Date.now() / DAY) * DAY - 3 * DAY,
  holesPerAsset: 2,
  lateFillRate: 0.005,
  duplicateRate: 0.03,
  reprocess: false,
});
const assets = [
  ...stream.intAssets.map((name) => ({ name, domain: 'integer' })),
  ...stream.timeAssets.map((name) => ({ name, domain: 'time' })),
];

/** Ingest only, on the PostgreSQL backend: no redis_url, so nothing can fall back to Redis. */
const config = {
  database_url: db.url,
  log_level: 'info',
  http: { host: '127.0.0.1', port: 0 },
  api_tokens: [TOKEN],
  queue: { backend: 'postgres', prefix: PREFIX },
  scheduler: { enabled: false },
  shutdown_timeout: 'PT15S',
  assets,
};

/**
 * Every claim, completion (with the handler's status), stalled return and failure of an events
 * job, as BullMQ's functions publish them: a trigger on the queue schema's `event` table copies
 * them, in the publishing transaction, to a table BullMQ never trims.
 */
async function recordJobTransitions(sql: Sql): Promise<void> {
  await events.waitUntilReady(); // BullMQ makes the queue's schema on first use
  const schema = queueSchema(PREFIX);
  await sql.unsafe(`
    create table crash_job_events (job_id text not null, event text not null, status text);
    create function crash_record_job_event() returns trigger language plpgsql as $$
    begin
      if new.queue = '${QUEUE}' and new.event in ('active', 'completed', 'stalled', 'failed') then
        insert into public.crash_job_events values (
          new.data->>'jobId', new.event, (new.data->>'returnvalue')::jsonb->>'status');
      end if;
      return null;
    end $$;
    create trigger crash_record_job_event after insert on ${schema}.event
      for each row execute function public.crash_record_job_event();`);
}

/** What crash_job_events counts after the run (see the query in the test). */
type Tally = 'completions' | 'jobs' | 'committed' | 'duplicate' | 'stalled' | 'failed' | 'again';

describe('SIGKILL on the PostgreSQL queue backend', () => {
  it('loses no event and commits none twice', async () => {
    const started = Date.now();
    const elapsed = () => round((Date.now() - started) / 1000, 1);
    const random = prng(SEED ^ 0xc0ffee);
    const sql = db.sql;
    await recordJobTransitions(sql);

    let starts = 0;
    const spawnA = () => procs.spawn({ name: `a-${++starts}`, config, readyTimeout: 90_000 });
    let a = await spawnA();
    await procs.spawn({ name: 'b', config, readyTimeout: 90_000 });

    // ---- the producer: small batches at a steady rate, so both daemons always hold jobs ----
    const total = stream.jobs.length;
    let sent = 0;
    const produce = (async () => {
      const batch = Math.max(1, Math.round(RATE / 10));
      const t0 = Date.now();
      for (let i = 0; i < total; i += batch) {
        const jobs = stream.jobs.slice(i, i + batch);
        await events.addBulk(jobs.map((j) => ({ name: 'e', data: j.data, opts: { jobId: j.jobId } })));
        sent = i + jobs.length;
        const due = t0 + (sent / RATE) * 1000;
        if (Date.now() < due) await sleep(due - Date.now()); // pacing, not a wait for a condition
      }
    })();

    // ---- one kill in each of KILLS equal stretches of the stream: from a random point of it, the
    // first moment A is inside an ingest commit (a few ms later at this rate), so it holds jobs ----
    const kills: Array<Record<string, unknown>> = [];
    const killed: DaemonProcess[] = [];
    let lastKillAt = 0;
    for (let k = 0; k < KILLS; k++) {
      const at = 0.05 + ((k + 0.1 + 0.8 * random()) / KILLS) * 0.85;
      await waitFor(() => sent / total >= at, { timeout: 600_000, interval: 50, what: `${at} sent` });
      const aimedFrom = Date.now();
      const midCommit = await waitFor(() => sessionsInTransaction(sql, a.pid, 'coverage-rollup-ingest'), {
        timeout: 10_000,
        interval: 2,
      }).then(
        () => true,
        () => false, // no commit seen: killed all the same, and reported
      );
      const victim = a;
      await victim.kill();
      lastKillAt = Date.now();
      const { active } = await queueCounts(events); // A's jobs among them, until the stalled check
      killed.push(victim);
      a = await spawnA();
      kills.push({
        process: victim.name,
        pid: victim.pid,
        at_s: elapsed(),
        stream_progress: round(sent / total, 3),
        mid_commit: midCommit,
        aimed_ms: lastKillAt - aimedFrom,
        queue_active_after_kill: active,
        restarted_as: a.name,
        restart_ms: Date.now() - lastKillAt,
      });
    }
    await produce;
    const streamSeconds = elapsed();

    // ---- drain: A's jobs return once their locks lapse (30 s) and a stalled check sees them ----
    let calmSince = 0;
    await waitFor(
      async () => {
        if (pending(await queueCounts(events)) > 0) calmSince = 0;
        else calmSince ||= Date.now();
        return calmSince > 0 && Date.now() - calmSince >= 1500;
      },
      { timeout: DRAIN_DEADLINE_MS, interval: 250, what: 'the events queue to drain' },
    );
    const drainAfterLastKill = round((calmSince - lastKillAt) / 1000, 1);
    const drainAfterStream = round((calmSince - started) / 1000 - streamSeconds, 1);
    // Stopped before the checks: what the survivors hold commits, so a loss can only be a kill's.
    await procs.stopAll(30_000);
    const unexpectedExits = procs.all
      .filter((p) => !killed.includes(p) && (p.exit?.code !== 0 || p.exit?.signal))
      .map((p) => ({ process: p.name, exit: p.exit }));

    // ---- 1. the event log: each distinct (asset, id) once, nothing else ----
    const expected = new Set(stream.jobs.map((j) => `${j.data.asset}\u0000${j.data.id}`));
    const logged = await sql<{ name: string; event_id: string; n: number }[]>`
      select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id, count(*)::int as n
      from events e join assets a on a.id = e.asset_id group by a.name, 2`;
    const inLog = new Set(logged.map((r) => `${r.name}\u0000${r.event_id}`));
    const missing = [...expected].filter((key) => !inLog.has(key));
    const twice = logged.filter((r) => r.n > 1);
    const unexpected = [...inLog].filter((key) => !expected.has(key));

    // ---- 2. the jobs: each completed once, as committed or duplicate, none failed ----
    const [t] = await sql<Record<Tally, number>[]>`
      select count(*) filter (where event = 'completed')::int as completions,
        count(distinct job_id) filter (where event = 'completed')::int as jobs,
        count(*) filter (where event = 'completed' and status = 'committed')::int as committed,
        count(*) filter (where event = 'completed' and status = 'duplicate')::int as duplicate,
        count(*) filter (where event = 'stalled')::int as stalled,
        count(*) filter (where event = 'failed')::int as failed,
        (select count(*)::int from (select 1 from crash_job_events where event = 'active'
          group by job_id having count(*) > 1) r) as again
      from crash_job_events`;
    const queueFinal = await queueCounts(events);
    const deadCounts = await dead.getJobCounts();
    const deadTotal = Object.values(deadCounts).reduce((n, c) => n + c, 0);

    // ---- 3. the index: per asset, its coverage is the union of the logged intervals ----
    const mismatched: string[] = [];
    for (const { name } of assets) {
      const [index, log] = [await indexCoverage(sql, name), await logCoverage(sql, name)];
      if (log.length === 0 || JSON.stringify(index) !== JSON.stringify(log)) mismatched.push(name);
    }
    const [size] = await sql<{ segments: number }[]>`select count(*)::int as segments from segments`;

    // ---- what the daemons said ----
    const sum = (msg: string) =>
      procs.all
        .flatMap((p) => p.logs((l) => l.msg.startsWith(msg)))
        .reduce((n, l) => n + Number(l.jobs ?? 0), 0);
    const errors = errorLines(procs.all);
    const jobFailedLines = errors.filter((e) => e.line.msg === 'event job failed').length;

    const checks = {
      event_ids_missing_from_log: missing.length,
      event_ids_logged_twice: twice.length,
      event_ids_never_sent: unexpected.length,
      jobs_not_completed_once: Math.abs(t!.jobs - total) + (t!.completions - t!.jobs),
      results_neither_committed_nor_duplicate: t!.completions - t!.committed - t!.duplicate,
      results_committed_beyond_distinct_ids: Math.max(0, t!.committed - stream.uniqueIds),
      jobs_failed: t!.failed + queueFinal.failed + jobFailedLines,
      dead_lettered: deadTotal,
      jobs_left_in_queue: pending(queueFinal),
      index_vs_log_mismatched_assets: mismatched.length,
      unexpected_process_exits: unexpectedExits.length,
      kills_without_a_job_to_recover: t!.stalled > 0 ? 0 : 1,
    };
    report('pg-ingest-crash', {
      suite: 'test:pg-ingest-crash',
      ok: Object.values(checks).every((v) => v === 0),
      seed: SEED,
      offered_rate_per_s: RATE,
      events: {
        jobs: total,
        distinct_ids: stream.uniqueIds,
        ids_sent_twice: stream.duplicates,
        assets: assets.length,
        holes: stream.holes,
      },
      kills,
      seconds: {
        stream: streamSeconds,
        drain_after_last_kill: drainAfterLastKill,
        drain_after_stream: drainAfterStream,
        total: elapsed(),
      },
      recovery: {
        stalled_returns_published: t!.stalled,
        stalled_returns_logged: sum(STALLED),
        jobs_claimed_more_than_once: t!.again,
        // Committed by a process killed before it completed the job: redelivered, found a duplicate.
        committed_then_redelivered: stream.uniqueIds - t!.committed,
        lost_lock_before_completing_logged: sum(LOST_LOCK),
      },
      results: { committed: t!.committed, duplicate: t!.duplicate },
      checks,
      details: {
        missing: missing.slice(0, 20),
        logged_twice: twice.slice(0, 20),
        mismatched,
        segments: size!.segments,
        final_queue_counts: queueFinal,
        dead_letter_counts: deadCounts,
        processes: procs.all.map((p) => ({ name: p.name, exit: p.exit })),
        error_log_lines: errors.map((e) => `${e.process}: ${e.line.msg}`).slice(0, 20),
      },
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});
