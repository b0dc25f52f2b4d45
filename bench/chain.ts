/**
 * bench:chain: BENCH_CHAINS (default 100) independent chains raw -> hourly -> daily -> monthly
 * (`rerun: on_replay`, outputs chained), one daemon in its own process, a downstream worker that
 * completes every job at once. Prints JSON:
 *
 * - `day_trigger_ms`: from sending the last 5-minute raw slice of a day (2026-12-01, every other
 *   slice already done) to that day's daily trigger, per chain (goal p99 ≤ 2 s + settle);
 * - `replay_to_monthly_trigger_ms`: from sending a replay requirement (and the rebuilt slice) for
 *   one raw hour of November to the monthly rerun's trigger, per chain (goal p99 ≤ 5 s + settles);
 * - `storm`: a replay requirement over the whole of November's raw data of every chain at once:
 *   reruns per level per chain (exactly 720 hourly, 30 daily, 1 monthly; none duplicated), the
 *   time until every monthly rerun succeeded, and the peak depth of the downstream queue.
 *
 * Every phase's decisions are counted per chain and level (`decisions_per_chain`): any count that
 * is not exact, or a (rollup, period, generation) decided twice, ends the run with exit code 1 and
 * the wrong counts on stderr. Progress goes to stderr every 10 s.
 *
 *   npm run bench:chain            (BENCH_CHAINS=10 for a quick run)
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { chainLevel, chainSettled } from '../test/helpers/chain.js';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  quantile,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const CHAINS = Number(process.env.BENCH_CHAINS ?? 100);
/** How often the scheduler asks the queue about open runs (scheduler.run_check_every). */
const RUN_CHECK = process.env.BENCH_RUN_CHECK ?? 'PT0.2S';
const STAGGER_MS = Number(process.env.BENCH_STAGGER_MS ?? 100);
const PROGRESS_MS = 10_000;
const HOUR = 3_600_000;
const SLICE = 5 * 60_000;
const NOVEMBER = Date.parse('2026-11-01T00:00:00Z');
const DECEMBER = Date.parse('2026-12-01T00:00:00Z');
const iso = (t: number) => new Date(t).toISOString();
const compact = (t: number) => `${iso(t).slice(0, 19).replace(/[-:]/g, '')}Z`;

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const level = (id: string, upstream: string, every: string) =>
    chainLevel(id, upstream, every, { backoff: 'PT1S', queue: 'chain-runs' });

  const rollups = Array.from({ length: CHAINS }, (_, c) => [
    level(`h${c}`, `raw.${c}`, 'hour'),
    level(`d${c}`, `agg.h${c}`, 'day'),
    level(`m${c}`, `agg.d${c}`, 'month'),
  ]).flat();
  const daemon = await spawnDaemon({
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
    scheduler: { run_check_every: RUN_CHECK },
    assets: Array.from({ length: CHAINS }, (_, c) => ({ name: `raw.${c}`, domain: 'time' })),
    rollups,
  });
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const producer = new Queue('asset-events', { connection, prefix });
  const runs = new Queue('chain-runs', { connection, prefix });
  const workerConnection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker('chain-runs', async () => {}, {
    connection: workerConnection,
    prefix,
    concurrency: 500,
  });
  let ids = 0;
  const event = (c: number, start: number, end: number, version: string) => ({
    name: 'e',
    data: { asset: `raw.${c}`, start: iso(start), end: iso(end), version, id: `b${++ids}` },
  });
  const send = async (jobs: ReturnType<typeof event>[]) => {
    for (let i = 0; i < jobs.length; i += 1000) await producer.addBulk(jobs.slice(i, i + 1000));
  };
  const poll = async <T>(
    what: string,
    check: () => Promise<T | undefined | false>,
    timeoutMs = 3_600_000,
  ) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await check();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`bench:chain: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const count = async (where: string) => {
    const [row] = await db.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from runs where ${where}`);
    return row!.n;
  };
  const quiet = () => poll('the chains to settle', () => chainSettled(db.sql));

  // Progress on stderr every PROGRESS_MS: the phase, runs per level and state, the queue's depth.
  const benchStarted = performance.now();
  let phase = 'start';
  const progress = setInterval(() => {
    void (async () => {
      const [levels, queue] = await Promise.all([
        db.sql<{ level: string; succeeded: number; open: number }[]>`
          select left(rollup_id, 1) as level, count(*) filter (where state = 'succeeded')::int as succeeded,
            count(*) filter (where state in ('pending', 'started', 'running'))::int as open
          from runs group by 1 order by 1`,
        runs.getJobCounts('waiting', 'active', 'delayed', 'prioritized'),
      ]);
      const byLevel = levels.map((l) => `${l.level} ${l.succeeded} ok/${l.open} open`).join(', ');
      const depth = queue.waiting! + queue.active! + queue.delayed! + queue.prioritized!;
      const elapsed = round((performance.now() - benchStarted) / 1000, 0);
      process.stderr.write(`bench:chain ${elapsed}s ${phase}: runs ${byLevel || 'none'}; queue ${depth}\n`);
    })().catch((error: Error) => process.stderr.write(`bench:chain progress: ${error.message}\n`));
  }, PROGRESS_MS);

  const decidedAt = async (keys: readonly string[]) => {
    const rows = await db.sql<{ k: string; at: Date }[]>`
      select idempotency_key as k, decided_at as at from triggers where idempotency_key = any(${keys as string[]}::text[])`;
    return new Map(rows.map((r) => [r.k, r.at.getTime()]));
  };
  const stats = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return {
      n: sorted.length,
      p50: round(quantile(sorted, 0.5)!, 0),
      p99: round(quantile(sorted, 0.99)!, 0),
      max: round(sorted.at(-1)!, 0),
    };
  };
  const timings: Record<string, number> = {};
  const t = async <T>(name: string, fn: () => Promise<T>) => {
    const started = performance.now();
    const value = await fn();
    timings[name] = round((performance.now() - started) / 1000, 1);
    return value;
  };

  // Decisions per phase, per level: each phase must decide exactly what it expects, per chain.
  const latestDecision = async () => {
    const [row] = await db.sql<{ at: Date | null }[]>`select max(decided_at) as at from triggers`;
    return row!.at;
  };
  const problems: string[] = [];
  const levels = { h: 'hourly', d: 'daily', m: 'monthly' } as const;
  type Level = (typeof levels)[keyof typeof levels];
  const decisionsPerChain = async (
    name: string,
    from: Date | null,
    to: Date | null,
    expected: Record<Level, number>,
    allReplay: boolean,
  ) => {
    const rows = await db.sql<{ rollup_id: string; n: number; periods: number; replay: number }[]>`
      select rollup_id, count(*)::int as n, count(distinct period_lo)::int as periods,
        count(*) filter (where reason = 'replay')::int as replay
      from triggers where (${from}::timestamptz is null or decided_at > ${from})
        and (${to}::timestamptz is null or decided_at <= ${to})
      group by 1`;
    return Object.fromEntries(
      Object.entries(levels).map(([letter, level]) => {
        const of = rows.filter((r) => r.rollup_id.startsWith(letter));
        const ns = of.map((r) => r.n);
        const counts = {
          chains: of.length,
          min: ns.length === 0 ? 0 : Math.min(...ns),
          max: ns.length === 0 ? 0 : Math.max(...ns),
          periods_decided_twice: of.reduce((sum, r) => sum + r.n - r.periods, 0),
          not_replay: of.reduce((sum, r) => sum + r.n - r.replay, 0),
        };
        const want = expected[level];
        const chains = want === 0 ? 0 : CHAINS;
        if (counts.chains !== chains || counts.min !== want || counts.max !== want)
          problems.push(
            `${name}: ${level} decisions per chain ${counts.min}..${counts.max} in ${counts.chains} chains, expected exactly ${want} in ${chains}`,
          );
        if (counts.periods_decided_twice > 0)
          problems.push(`${name}: ${counts.periods_decided_twice} ${level} periods decided twice`);
        if (allReplay && counts.not_replay > 0)
          problems.push(`${name}: ${counts.not_replay} ${level} decisions not for the replay`);
        return [level, counts];
      }),
    );
  };

  // ---- November, built bottom up: one raw event per chain covering the month ----
  phase = 'building November';
  await t('build_november_s', async () => {
    await send(Array.from({ length: CHAINS }, (_, c) => event(c, NOVEMBER, DECEMBER, 'v1')));
    await poll(
      'every monthly run to succeed',
      async () => (await count(`rollup_id like 'm%' and state = 'succeeded'`)) >= CHAINS,
    );
    await quiet();
  });
  const built = await latestDecision();

  // ---- the last slice of a day -> the daily trigger ----
  const dayKeys = Array.from({ length: CHAINS }, (_, c) => `d${c}@${compact(DECEMBER)}#1`);
  phase = 'streaming 2026-12-01';
  await t('stream_december_1_s', async () => {
    const slices = [];
    for (let s = 0; s < 287; s++)
      for (let c = 0; c < CHAINS; c++)
        slices.push(event(c, DECEMBER + s * SLICE, DECEMBER + (s + 1) * SLICE, 'v1'));
    await send(slices);
    await poll(
      '23 hours per chain',
      async () =>
        (await count(`rollup_id like 'h%' and period_lo >= ${DECEMBER * 1000} and state = 'succeeded'`)) >=
        23 * CHAINS,
    );
    await quiet();
  });
  phase = 'last slices of 2026-12-01';
  const lastSent: number[] = [];
  for (let c = 0; c < CHAINS; c++) {
    lastSent.push(Date.now());
    await send([event(c, DECEMBER + 287 * SLICE, DECEMBER + 288 * SLICE, 'v1')]);
    await new Promise((r) => setTimeout(r, STAGGER_MS));
  }
  const days = await poll('every daily trigger of 2026-12-01', async () => {
    const m = await decidedAt(dayKeys);
    return m.size === CHAINS && m;
  });
  const dayLatency = dayKeys.map((k, c) => days.get(k)! - lastSent[c]!);
  await quiet();
  const december = await latestDecision();

  // ---- a replay requirement on one raw hour -> the monthly rerun's trigger ----
  const monthKey = (c: number, g: number) => `m${c}@${compact(NOVEMBER)}#${g}`;
  phase = 'one raw hour replayed per chain';
  const replaySent: number[] = [];
  for (let c = 0; c < CHAINS; c++) {
    const hour = NOVEMBER + (c % 720) * HOUR;
    replaySent.push(Date.now());
    await producer.add('r', {
      type: 'replay_requirement',
      asset: `raw.${c}`,
      start: iso(hour),
      end: iso(hour + HOUR),
      version: 'v2',
    });
    await send([event(c, hour, hour + HOUR, 'v2')]);
    await new Promise((r) => setTimeout(r, STAGGER_MS));
  }
  const reruns = await poll('every monthly rerun', async () => {
    const m = await decidedAt(Array.from({ length: CHAINS }, (_, c) => monthKey(c, 2)));
    return m.size === CHAINS && m;
  });
  const replayLatency = Array.from(
    { length: CHAINS },
    (_, c) => reruns.get(monthKey(c, 2))! - replaySent[c]!,
  );
  await quiet();

  // ---- the storm: all of November reprocessed under every chain at once ----
  const replayed = await latestDecision();
  let peakQueue = 0;
  let peakOpenRuns = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const c = await runs.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      peakQueue = Math.max(peakQueue, c.waiting! + c.active! + c.delayed! + c.prioritized!);
      peakOpenRuns = Math.max(peakOpenRuns, await count(`state in ('pending', 'started', 'running')`));
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  phase = 'storm';
  await t('storm_s', async () => {
    await Promise.all(
      Array.from({ length: CHAINS }, (_, c) =>
        producer.add('r', {
          type: 'replay_requirement',
          asset: `raw.${c}`,
          start: iso(NOVEMBER),
          end: iso(DECEMBER),
          version: 'v3',
        }),
      ),
    );
    await send(Array.from({ length: CHAINS }, (_, c) => event(c, NOVEMBER, DECEMBER, 'v3')));
    await poll('every monthly storm rerun to succeed', async () => {
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from runs r join triggers t using (rollup_id, period_lo, generation)
        where t.idempotency_key = any(${Array.from({ length: CHAINS }, (_, c) => monthKey(c, 3))}::text[]) and r.state = 'succeeded'`;
      return row!.n >= CHAINS;
    });
    await quiet();
  });
  sampling = false;
  await sampler;
  const phases = {
    build_november: await decisionsPerChain(
      'build',
      null,
      built,
      { hourly: 720, daily: 30, monthly: 1 },
      false,
    ),
    december_1: await decisionsPerChain(
      '2026-12-01',
      built,
      december,
      { hourly: 24, daily: 1, monthly: 0 },
      false,
    ),
    one_hour_replayed: await decisionsPerChain(
      'replay',
      december,
      replayed,
      { hourly: 1, daily: 1, monthly: 1 },
      true,
    ),
    storm: await decisionsPerChain('storm', replayed, null, { hourly: 720, daily: 30, monthly: 1 }, true),
  };
  const duplicates = await db.sql<{ n: number }[]>`
    select count(*)::int as n from (select rollup_id, period_lo, generation from triggers group by 1, 2, 3 having count(*) > 1) d`;
  if (duplicates[0]!.n > 0) problems.push(`${duplicates[0]!.n} (rollup, period, generation) decided twice`);
  clearInterval(progress);

  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'chain',
      database_connection: DATABASE_CONNECTION,
      chains: CHAINS,
      rollups: rollups.length,
      settle: 'PT0S',
      run_check_every: RUN_CHECK,
      stagger_ms: STAGGER_MS,
      day_trigger_ms: { ...stats(dayLatency), goal_p99_ms: 2000 },
      replay_to_monthly_trigger_ms: { ...stats(replayLatency), goal_p99_ms: 5000 },
      storm: {
        reruns_per_chain: phases.storm,
        expected_per_chain: { hourly: 720, daily: 30, monthly: 1 },
        duplicated_decisions: duplicates[0]!.n,
        seconds: timings.storm_s,
        peak_queue_depth: peakQueue,
        peak_open_runs: peakOpenRuns,
      },
      decisions_per_chain: phases,
      exact: problems.length === 0 && duplicates[0]!.n === 0,
      phases_s: timings,
    })}\n`,
  );
  await worker.close();
  // A connection the worker was given is not closed with it: left open, it keeps the process alive.
  workerConnection.disconnect();
  await runs.close();
  await producer.close();
  connection.disconnect();
  await daemon.stop();
  await db.drop();
  await dropPrefix(prefix);
  if (problems.length > 0) {
    process.stderr.write(`bench:chain: COUNTS NOT EXACT\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
    process.exitCode = 1;
  }
}

await main();
