/**
 * bench:repairs: repair requests at platform scale, with the daemon in its own process
 * (bench/common.ts, as bench:scheduler). 1,000 hourly rollups since 2023-01-01, each over 10 of
 * 10,000 assets, with `repair:` sent to a queue target. Every asset is covered over the last 100
 * hours except a one-hour hole in 1 % of them (one hole each; the window is BENCH_HOLE_HOURS),
 * which makes 10,000 owed ranges. Older periods are decided by a deadline at the window's start
 * (`on_deadline: miss`: derived, no rows), and a long `settle` keeps the covered periods from
 * triggering during the run: this benchmark measures repairs, bench:scheduler triggers.
 *
 * 1. An ingest-only daemon takes the coverage from a producer (BullMQ events queue) and stops.
 * 2. First start of the daemon with the rollups: repair requests arrive on the queue target; it
 *    records them per minute and the most made in one pass (the budget is 100).
 * 3. Once every request is made and delivered and the scheduler is quiet: its idle passes with
 *    10,000 open requests over BENCH_IDLE_SECONDS (an idle scheduler passes every few seconds, so
 *    the statement a pass runs for repairs is also timed 500 times from here, and the look at
 *    every open request a follow makes every 5 minutes 20 times), the status page and
 *    GET /v1/repairs.
 * 4. BENCH_FILLS holes filled one at a time by a producer's event: from the event enqueued to the
 *    request seen `repaired` (polled every 5 ms).
 * 5. The rest filled at once; once none is open and the scheduler is quiet: the same again.
 *
 * Prints one JSON object, with the load average before and after; on stderr, when each idle phase
 * starts and ends on the monotonic clock of CPU profiles (bench/profile/top.ts --from/--to). Goals: idle pass with 10,000
 * open within 10 % of none open, fill to repaired p99 ≤ 1 s, requests per pass ≤ the budget.
 *
 *   npm run bench:repairs
 *   BENCH_ROLLUPS=100 BENCH_ASSETS=1000 npm run bench:repairs   # a smaller platform
 */
import { loadavg } from 'node:os';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { repairWork } from '../src/store/repairs/attempts.js';
import { requestsToFollow } from '../src/store/repairs/follow.js';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  passesBetween,
  quantile,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const ROLLUPS = Number(process.env.BENCH_ROLLUPS ?? 1000);
const ASSETS = Number(process.env.BENCH_ASSETS ?? 10_000);
const HOLE_HOURS = Number(process.env.BENCH_HOLE_HOURS ?? 100);
const HOLE_RATE = Number(process.env.BENCH_HOLE_RATE ?? 0.01);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 180);
const FILLS = Number(process.env.BENCH_FILLS ?? 200);
const BEGIN = process.env.BENCH_BEGIN ?? '2023-01-01';
const PER_ROLLUP = Math.max(1, Math.floor(ASSETS / ROLLUPS));
const HOLES_PER_ASSET = Math.max(1, Math.round(HOLE_HOURS * HOLE_RATE));
/** Coverage runs this far past now, so no hour ends uncovered while the benchmark runs. */
const AHEAD_HOURS = 6;
/**
 * Covered, without holes, this long before the holes' window: the deadline decides the periods
 * before the coverage (missed, derived), and the benchmark never sees a holed period reach it.
 */
const MARGIN_HOURS = 24;
const HOUR = 3_600_000;
const TARGET = 'repairs-bench';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const asset = (i: number) => `rep.a${String(i).padStart(5, '0')}`;
const iso = (ms: number) => new Date(ms).toISOString();
const load = () => loadavg().map((x) => round(x, 2));
/** A phase's start or end on stderr, in the monotonic microseconds of a daemon's CPU profile. */
const mark = (phase: string) =>
  process.stderr.write(`phase ${phase} at ${process.hrtime.bigint() / 1000n} us, load ${load().join(' ')}\n`);
const stats = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const r = (x: number | undefined) => (x === undefined ? null : round(x, 1));
  return {
    n: sorted.length,
    p50: r(quantile(sorted, 0.5)),
    p90: r(quantile(sorted, 0.9)),
    p99: r(quantile(sorted, 0.99)),
    max: r(sorted.at(-1)),
  };
};

/** A deterministic spread of each asset's holes over the window (no two in one hour). */
function holesOf(i: number, hours: readonly number[]): number[] {
  const picked = new Set<number>();
  for (let k = 0; picked.size < HOLES_PER_ASSET; k++)
    picked.add(hours[(i * 7919 + k * 104_729) % hours.length]!);
  return [...picked].sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const loadBefore = load();
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const producer = new Queue('asset-events', { connection, prefix });
  const windowEnd = Math.floor(Date.now() / HOUR) * HOUR; // the end of the last complete hour
  const windowStart = windowEnd - HOLE_HOURS * HOUR;
  const coveredFrom = windowStart - MARGIN_HOURS * HOUR;
  const hours = Array.from({ length: HOLE_HOURS }, (_, h) => windowStart + h * HOUR);
  const holes = Array.from({ length: ASSETS }, (_, i) => holesOf(i, hours));
  const base = {
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
    assets: Array.from({ length: ASSETS }, (_, i) => ({ name: asset(i), domain: 'time' })),
  };

  // 1. The coverage, through an ingest-only daemon: each asset's window in the slices between its holes.
  const ingest = await spawnDaemon(base);
  const events = holes.flatMap((hs, i) => {
    const cuts = [coveredFrom, ...hs.flatMap((h) => [h, h + HOUR]), windowEnd + AHEAD_HOURS * HOUR];
    const out = [];
    for (let k = 0; k < cuts.length; k += 2)
      if (cuts[k]! < cuts[k + 1]!)
        out.push({
          name: 'e',
          data: { asset: asset(i), start: iso(cuts[k]!), end: iso(cuts[k + 1]!), id: `seed-${i}-${k}` },
        });
    return out;
  });
  const ingestStart = performance.now();
  for (let k = 0; k < events.length; k += 1000) await producer.addBulk(events.slice(k, k + 1000));
  for (;;) {
    const [row] = await db.sql<{ n: number }[]>`select coalesce(sum(event_count), 0)::int as n from assets`;
    if (row!.n >= events.length) break;
    await sleep(200);
  }
  const ingest_s = round((performance.now() - ingestStart) / 1000, 1);
  await ingest.stop();

  // 2. First start with the rollups: requests on the queue target, timed as they arrive.
  const arrivals: number[] = [];
  const eventsConnection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const target = new QueueEvents(TARGET, { connection: eventsConnection, prefix });
  await target.waitUntilReady();
  target.on('waiting', () => arrivals.push(performance.now()));
  const rollups = Array.from({ length: ROLLUPS }, (_, r) => ({
    id: `rep${r}`,
    upstream: Array.from({ length: PER_ROLLUP }, (_, k) => asset(r * PER_ROLLUP + k)),
    every: 'hour',
    begin: BEGIN,
    policy: { settle: 'P30D', deadline: `PT${HOLE_HOURS + MARGIN_HOURS}H`, on_deadline: 'miss' },
    target: { type: 'queue', queue: 'repairs-bench-runs' },
    repair: { after: 'PT1S', every: 'PT6H', attempts: 5, target: { type: 'queue', queue: TARGET } },
  }));
  const owed = ROLLUPS * PER_ROLLUP * HOLES_PER_ASSET;
  const started = performance.now();
  const daemon = await spawnDaemon({ ...base, rollups });
  const metrics = async () => (await fetch(`${daemon.url}/metrics`)).text();
  const timed = async (path: string, times = 5) => {
    const ms: number[] = [];
    let bytes = 0;
    for (let i = 0; i < times; i++) {
      const t0 = performance.now();
      const response = await fetch(`${daemon.url}${path}`);
      const body = await response.text();
      if (!response.ok) throw new Error(`${path}: ${response.status} ${body.slice(0, 200)}`);
      ms.push(performance.now() - t0);
      bytes = Buffer.byteLength(body);
    }
    return { ...stats(ms.slice(1)), bytes };
  };
  /**
   * The one statement an idle pass runs for repairs (store/repairs/attempts.ts repairWork), timed from here
   * over the same socket: what open requests add to a pass, apart from the pass histogram's buckets.
   */
  const probe = async (times = 500) => {
    const ms: number[] = [];
    for (let i = 0; i < times; i++) {
      const t0 = performance.now();
      await repairWork(db.sql);
      ms.push(performance.now() - t0);
    }
    return stats(ms.slice(10));
  };
  /** The follow's look at every open request (a new lease, and every 5 minutes), timed likewise. */
  const fullLook = async (times = 20) => {
    const ms: number[] = [];
    for (let i = 0; i < times; i++) {
      const t0 = performance.now();
      await requestsToFollow(db.sql, new Date(), 200, { kind: 'all' });
      ms.push(performance.now() - t0);
    }
    return stats(ms.slice(2));
  };
  /**
   * Until the scheduler is at rest: at most 3 passes (busy or idle) in 10 s, as an idle scheduler
   * that wakes every 5 s makes; nothing left of a backlog, no scan or follow still going.
   */
  const quiet = async () => {
    const total = async () => {
      const body = await metrics();
      return passesBetween('', body, 'busy').passes + passesBetween('', body, 'idle').passes;
    };
    for (let last = await total(); ; ) {
      await sleep(10_000);
      const now = await total();
      if (now - last <= 3) return;
      last = now;
    }
  };
  /**
   * An idle phase of IDLE_SECONDS, scraped every 30 s: the passes (idle and busy) in each 30 s, so
   * a burst of passes shows apart from the steady poll.
   */
  const idleTimeline = async (start: string) => {
    const passes = (body: string) =>
      passesBetween('', body, 'idle').passes + passesBetween('', body, 'busy').passes;
    const out: number[] = [];
    let last = passes(start);
    for (let left = IDLE_SECONDS * 1000; left > 0; left -= 30_000) {
      await sleep(Math.min(30_000, left));
      const now = passes(await metrics());
      out.push(now - last);
      last = now;
    }
    return out;
  };
  const counts = async () => {
    const [row] = await db.sql<{ made: number; open: number; undelivered: number }[]>`
      select (select count(*) from repair_requests)::int as made,
        (select count(*) from repair_requests where state in ('open', 'partial'))::int as open,
        (select count(*) from repair_attempts where delivered_at is null)::int as undelivered`;
    return row!;
  };
  for (;;) {
    const c = await counts();
    if (c.made >= owed && c.undelivered === 0 && arrivals.length >= owed) break;
    if (performance.now() - started > 30 * 60_000) throw new Error(`first start: ${JSON.stringify(c)}`);
    await sleep(500);
  }
  const allRequestedS = round((performance.now() - started) / 1000, 1);
  const perMinute: number[] = [];
  for (const t of arrivals) {
    const m = Math.floor((t - started) / 60_000);
    while (perMinute.length <= m) perMinute.push(0);
    perMinute[m]!++;
  }
  const [pass] = await db.sql<{ max: number; passes: number }[]>`
    select max(n)::int as max, count(*)::int as passes
    from (select count(*) as n from repair_requests group by requested_at, lease_token) x`;
  const made = await counts();
  await quiet();

  // 3. Idle with every request open.
  const before = await metrics();
  mark('idle-open start');
  const timelineOpen = await idleTimeline(before);
  mark('idle-open end');
  const idleOpen = passesBetween(before, await metrics(), 'idle');
  const busyOpen = passesBetween(before, await metrics(), 'busy');
  const probeOpen = await probe();
  const fullOpen = await fullLook();
  const pagesOpen = {
    status_page: await timed('/'),
    repairs_open_page: await timed('/v1/repairs?state=open'),
  };

  // 4. Holes filled one at a time: from the producer's event to `repaired`.
  const sample = await db.sql<{ id: number; asset: string; ranges: Array<{ lo: number; hi: number }> }[]>`
    select id, asset, ranges from repair_requests where state = 'open' order by random() limit ${FILLS}`;
  const fills: number[] = [];
  const notRepaired: number[] = [];
  for (const r of sample) {
    const t0 = performance.now();
    await producer.addBulk(
      r.ranges.map((g, k) => ({
        name: 'e',
        data: { asset: r.asset, start: iso(g.lo / 1000), end: iso(g.hi / 1000), id: `fill-${r.id}-${k}` },
      })),
    );
    for (;;) {
      const [row] = await db.sql<{ state: string }[]>`select state from repair_requests where id = ${r.id}`;
      if (row!.state === 'repaired') {
        fills.push(performance.now() - t0);
        break;
      }
      if (performance.now() - t0 > 10_000) {
        notRepaired.push(r.id);
        break;
      }
      await sleep(5);
    }
  }

  // 5. The rest filled at once; then idle with none open.
  const rest = await db.sql<{ id: number; asset: string; ranges: Array<{ lo: number; hi: number }> }[]>`
    select id, asset, ranges from repair_requests where state in ('open', 'partial')`;
  const fillAll = rest.flatMap((r) =>
    r.ranges.map((g, k) => ({
      name: 'e',
      data: { asset: r.asset, start: iso(g.lo / 1000), end: iso(g.hi / 1000), id: `fill-${r.id}-${k}` },
    })),
  );
  const burstStart = performance.now();
  for (let k = 0; k < fillAll.length; k += 1000) await producer.addBulk(fillAll.slice(k, k + 1000));
  for (;;) {
    if ((await counts()).open === 0) break;
    if (performance.now() - burstStart > 10 * 60_000) throw new Error('burst: requests still open');
    await sleep(250);
  }
  const burstS = round((performance.now() - burstStart) / 1000, 1);
  await quiet();
  const beforeNone = await metrics();
  mark('idle-none start');
  const timelineNone = await idleTimeline(beforeNone);
  mark('idle-none end');
  const idleNone = passesBetween(beforeNone, await metrics(), 'idle');
  const busyNone = passesBetween(beforeNone, await metrics(), 'busy');
  const probeNone = await probe();
  const fullNone = await fullLook();
  const pagesNone = { status_page: await timed('/') };
  const [states] = await db.sql<{ repaired: number; other: number; triggers: number }[]>`
    select count(*) filter (where state = 'repaired')::int as repaired,
      count(*) filter (where state <> 'repaired')::int as other,
      (select count(*) from triggers)::int as triggers from repair_requests`;

  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'repairs',
      database_connection: DATABASE_CONNECTION,
      load_average: { before: loadBefore, after: load() },
      scale: {
        rollups: ROLLUPS,
        assets: ASSETS,
        upstreams_per_rollup: PER_ROLLUP,
        begin: BEGIN,
        hole_hours: HOLE_HOURS,
        hole_rate: HOLE_RATE,
        holes_per_asset: HOLES_PER_ASSET,
        seed_events: events.length,
        seed_ingest_s: ingest_s,
      },
      first_start: {
        owed,
        requests_made: made.made,
        all_requested_and_delivered_s: allRequestedS,
        delivered_per_minute: perMinute,
        most_made_in_one_pass: pass!.max,
        passes_that_made_requests: pass!.passes,
        budget_per_pass: 100,
      },
      idle_pass: {
        open: { requests: made.open, ...idleOpen },
        none_open: { requests: 0, ...idleNone },
        p50_ratio: round(idleOpen.p50_ms / idleNone.p50_ms, 3),
        p99_ratio: round(idleOpen.p99_ms / idleNone.p99_ms, 3),
        busy_passes_meanwhile: { open: busyOpen.passes, none_open: busyNone.passes },
        passes_per_30s: { open: timelineOpen, none_open: timelineNone },
        seconds: IDLE_SECONDS,
      },
      repair_probe_ms: { open: probeOpen, none_open: probeNone },
      full_follow_look_ms: { open: fullOpen, none_open: fullNone },
      pages: { open: pagesOpen, none_open: pagesNone },
      fill_to_repaired_ms: { ...stats(fills), not_repaired_within_10s: notRepaired },
      burst: { requests: rest.length, events: fillAll.length, all_repaired_s: burstS },
      final: states,
      goals: { idle_pass_ratio_max: 1.1, fill_to_repaired_p99_ms: 1000, made_per_pass_max: 100 },
    })}\n`,
  );
  await target.close();
  eventsConnection.disconnect();
  await producer.close();
  connection.disconnect();
  await daemon.stop();
  await db.drop();
  await dropPrefix(prefix);
}

await main();
