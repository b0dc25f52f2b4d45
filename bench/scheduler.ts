/**
 * bench:scheduler: the platform-scale setup from a fresh database, with the daemon in
 * its own process. 1,000 hourly rollups since 2023-01-01, each over two of 10,000 declared assets
 * (a tenth of them with a 2-hour deadline that triggers, a tenth with one that misses), a daily
 * rollup over 100 upstreams and a minute rollup over the last 90 days.
 *
 * While it runs, it feeds the last complete hour of one hourly rollup every few seconds (from the
 * first seconds after start on) and, at intervals, a past day of the fan-in rollup's 100
 * upstreams, and measures from the last completing event enqueued to the downstream job being on
 * the target queue. It samples the periods table (rows and bytes) at half time and at the end,
 * the daemon's RSS, its idle-pass summary, and the latency and size of the listings and the page.
 * Prints one JSON object.
 *
 *   npm run bench:scheduler                 # 10 minutes
 *   BENCH_MINUTES=2 npm run bench:scheduler  # a shorter look
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  quantile,
  REDIS_URL,
  round,
  schedulerPasses,
  spawnDaemon,
  uniqueName,
} from './common.js';

const MINUTES = Number(process.env.BENCH_MINUTES ?? 10);
const ROLLUPS = Number(process.env.BENCH_ROLLUPS ?? 1000);
const ASSETS = 10_000;
const FEED_EVERY_MS = Number(process.env.BENCH_FEED_MS ?? 2500);
const FAN_IN = 100;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const stats = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const r = (x: number | null) => (x === null ? null : round(x, 1));
  return {
    n: sorted.length,
    p50: r(quantile(sorted, 0.5) ?? null),
    p99: r(quantile(sorted, 0.99) ?? null),
    max: r(sorted.at(-1) ?? null),
  };
};
const asset = (i: number) => `plat.a${String(i % ASSETS).padStart(5, '0')}`;
const compact = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace(/[-:]/g, '')}Z`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rollups() {
  const target = { type: 'queue', queue: 'plat-runs' };
  const hourly = Array.from({ length: ROLLUPS }, (_, i) => ({
    id: `h${i}`,
    upstream: [asset(2 * i), asset(2 * i + 1)],
    every: 'hour',
    begin: '2023-01-01',
    ...(i % 10 === 1 ? { policy: { deadline: 'PT2H', on_deadline: 'trigger' } } : {}),
    ...(i % 10 === 2 ? { policy: { deadline: 'PT2H', on_deadline: 'miss' } } : {}),
    target,
  }));
  const fanIn = {
    id: 'fan_in_daily',
    upstream: Array.from({ length: FAN_IN }, (_, i) => asset(5000 + i)),
    every: 'day',
    begin: '2023-01-01',
    target,
  };
  const minute = {
    id: 'minutely',
    upstream: [asset(7000)],
    every: 'minute',
    begin: new Date(Date.now() - 90 * DAY).toISOString(),
    target,
  };
  return [...hourly, fanIn, minute];
}

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const producer = new Queue('asset-events', { connection, prefix });
  const eventsConnection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const events = new QueueEvents('plat-runs', { connection: eventsConnection, prefix });
  await events.waitUntilReady();
  const seen = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  events.on('waiting', ({ jobId }) => {
    if (!seen.has(jobId)) seen.set(jobId, performance.now());
    waiters.get(jobId)?.();
  });
  const arrival = (key: string, timeoutMs: number) =>
    seen.has(key)
      ? Promise.resolve(seen.get(key)!)
      : new Promise<number | null>((resolve) => {
          const timer = setTimeout(() => resolve(null), timeoutMs);
          waiters.set(key, () => {
            clearTimeout(timer);
            resolve(seen.get(key)!);
          });
        });

  const startedAt = performance.now();
  const daemon = await spawnDaemon({
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
    assets: Array.from({ length: ASSETS }, (_, i) => ({ name: asset(i), domain: 'time' })),
    rollups: rollups(),
  });
  const listening_after_ms = round(performance.now() - startedAt, 0);
  const get = async (path: string) => {
    const t0 = performance.now();
    const response = await fetch(`${daemon.url}${path}`);
    const body = await response.text();
    if (!response.ok) throw new Error(`${path}: ${response.status} ${body.slice(0, 200)}`);
    return { ms: performance.now() - t0, bytes: Buffer.byteLength(body), body };
  };

  let rssMax = 0;
  let rssMaxAt = 0;
  let heapMax = 0;
  const rssSamples: number[] = [];
  const sampleRss = async () => {
    const { body } = await get('/metrics');
    const rss = Number(/^process_resident_memory_bytes (\S+)$/m.exec(body)?.[1]);
    const heap = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(body)?.[1]);
    rssSamples.push(rss);
    if (rss > rssMax) [rssMax, rssMaxAt] = [rss, (performance.now() - startedAt) / 1000];
    heapMax = Math.max(heapMax, heap);
  };
  // The daemon's RSS from /proc every second as well (Linux): finer than the scrapes, and reading
  // it allocates nothing in the daemon.
  const proc = { max: 0, maxAt: 0 };
  const procTimer = setInterval(() => {
    try {
      const kb = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${daemon.pid}/status`, 'utf8'))?.[1]);
      if (kb * 1024 > proc.max) [proc.max, proc.maxAt] = [kb * 1024, (performance.now() - startedAt) / 1000];
    } catch {
      // not Linux, or the daemon is gone
    }
  }, 1000);
  const tableSample = async () => {
    const [row] = await db.sql<{ rows: number; bytes: number }[]>`
      select (select count(*) from periods)::int8 as rows, pg_total_relation_size('periods')::int8 as bytes`;
    return {
      rows: row!.rows,
      mb: round(row!.bytes / 1e6, 2),
      at_s: round((performance.now() - startedAt) / 1000, 0),
    };
  };

  // Fresh hours: one rollup at a time, both upstreams covering the last complete hour.
  const fresh: Array<{
    ms: number;
    sent_s: number;
    key: string;
    sentAt: number;
    assets: string[];
    hour: number;
  }> = [];
  const fanIn: number[] = [];
  const missing: string[] = [];
  const endAt = startedAt + MINUTES * 60_000;
  let feeds = 0;
  const feedHour = async (i: number) => {
    const hour = Math.floor(Date.now() / HOUR) * HOUR - HOUR;
    const slice = (a: string) => ({
      name: 'e',
      data: { asset: a, start: new Date(hour).toISOString(), end: new Date(hour + HOUR).toISOString() },
    });
    const key = `h${i}@${compact(hour)}#1`;
    await producer.add('e', slice(asset(2 * i)).data);
    const sent = performance.now();
    const sentAt = Date.now();
    await producer.add('e', slice(asset(2 * i + 1)).data);
    const at = await arrival(key, 30_000);
    if (at === null) missing.push(key);
    else
      fresh.push({
        ms: at - sent,
        sent_s: round((sent - startedAt) / 1000, 1),
        key,
        sentAt,
        assets: [asset(2 * i), asset(2 * i + 1)],
        hour,
      });
  };
  const feedDay = async (daysBack: number) => {
    const day = Math.floor(Date.now() / DAY) * DAY - daysBack * DAY;
    const data = Array.from({ length: FAN_IN }, (_, i) => ({
      name: 'e',
      data: {
        asset: asset(5000 + i),
        start: new Date(day).toISOString(),
        end: new Date(day + DAY).toISOString(),
      },
    }));
    await producer.addBulk(data.slice(0, -1));
    const sent = performance.now();
    await producer.add('e', data.at(-1)!.data);
    const key = `fan_in_daily@${compact(day)}#1`;
    const at = await arrival(key, 30_000);
    if (at === null) missing.push(key);
    else fanIn.push(at - sent);
  };

  const samples: Record<string, unknown> = {};
  const feeder = (async () => {
    let next = performance.now();
    let day = 1;
    while (performance.now() < endAt - 5000) {
      // Hourly rollups 3..: avoid the ones whose deadline policy could have triggered the hour.
      await feedHour(10 * (feeds % Math.floor(ROLLUPS / 10)) + 3 + (feeds % 7));
      feeds++;
      if (feeds % 40 === 10 && day <= 6) await feedDay(day++);
      next += FEED_EVERY_MS;
      await sleep(Math.max(0, next - performance.now()));
    }
  })();
  const sampler = (async () => {
    while (performance.now() < endAt) {
      await sampleRss().catch(() => {});
      if (samples.half === undefined && performance.now() >= startedAt + (MINUTES * 60_000) / 2)
        samples.half = await tableSample();
      await sleep(5000);
    }
  })();
  await Promise.all([feeder, sampler]);
  clearInterval(procTimer);
  // The daemon's CPU time so far (user + system, /proc/<pid>/stat fields 14 and 15, in clock ticks
  // of 10 ms): what the run cost it, whatever else the machine ran meanwhile.
  let cpuSeconds: number | null = null;
  try {
    const fields = readFileSync(`/proc/${daemon.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    cpuSeconds = round((Number(fields[11]) + Number(fields[12])) / 100, 1);
  } catch {
    // not Linux
  }
  const end = await tableSample();

  // Listings and the page, each asked a few times; the first answer warms the calendar memo.
  const timed = async (path: string, times = 5) => {
    const runs = [];
    for (let i = 0; i < times; i++) runs.push(await get(path));
    const ms = runs.slice(1).map((r) => r.ms);
    return { ...stats(ms), bytes: runs.at(-1)!.bytes };
  };
  const listings = {
    rollups_page: await timed('/v1/rollups'),
    rollups_1000: await timed('/v1/rollups?limit=1000'),
    periods_page: await timed('/v1/rollups/h3/periods'),
    periods_summary_34k: await timed(
      '/v1/rollups/h3/periods?start=2023-01-01T00:00:00Z&end=2027-01-01T00:00:00Z&limit=1&summary=true',
    ),
    minute_summary_90d: await timed('/v1/rollups/minutely/periods?limit=1&summary=true'),
    status_page: await timed('/'),
    status_page_filtered: await timed('/?q=h99'),
  };
  const summaryAnswer = JSON.parse(
    (
      await get(
        '/v1/rollups/h3/periods?start=2023-01-01T00:00:00Z&end=2027-01-01T00:00:00Z&limit=1&summary=true',
      )
    ).body,
  );
  const metricsBody = (await get('/metrics')).body;
  if (process.env.BENCH_METRICS_FILE) writeFileSync(process.env.BENCH_METRICS_FILE, metricsBody);
  const idle = schedulerPasses(metricsBody, 'idle');
  const busy = schedulerPasses(metricsBody, 'busy');
  const [decisions] = await db.sql<{ triggers: number; deadline: number; missed_rows: number }[]>`
    select (select count(*) from triggers)::int as triggers,
      (select count(*) from triggers where reason = 'deadline')::int as deadline,
      (select count(*) from periods where state = 'missed')::int as missed_rows`;
  const firstMinute = fresh.filter((f) => f.sent_s <= 60).map((f) => f.ms);
  // Where the slowest fresh triggers spent their time: to the commit, to the decision, to the queue.
  const slowest = [...fresh].sort((a, b) => b.ms - a.ms).slice(0, 5);
  const stages = [];
  for (const f of slowest) {
    const [row] = await db.sql<{ ingested: Date; decided: Date }[]>`
      select (select max(e.ingested_at) from events e join assets a on a.id = e.asset_id
              where a.name = any(${f.assets}::text[]) and e.lo = ${f.hour * 1000}) as ingested,
             (select decided_at from triggers where idempotency_key = ${f.key}) as decided`;
    stages.push({
      sent_s: f.sent_s,
      total_ms: round(f.ms, 0),
      to_committed_ms: row!.ingested.getTime() - f.sentAt,
      to_decided_ms: row!.decided.getTime() - row!.ingested.getTime(),
    });
  }
  const running = fresh.filter((f) => f.sent_s > 60).map((f) => f.ms);
  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'scheduler',
      database_connection: DATABASE_CONNECTION,
      minutes: MINUTES,
      rollups: ROLLUPS + 2,
      assets: ASSETS,
      listening_after_ms,
      periods_table: { half: samples.half, end },
      trigger_latency_ms: {
        fresh_first_minute: stats(firstMinute),
        slowest_stages: stages,
        fresh_running: stats(running),
        fresh_all: stats(fresh.map((f) => f.ms)),
        fan_in_100: stats(fanIn),
        not_triggered_within_30s: missing,
      },
      decisions,
      idle_pass: idle,
      busy_pass: busy,
      daemon_cpu_seconds: cpuSeconds,
      metrics_scrape: {
        bytes: Buffer.byteLength(metricsBody),
        series: metricsBody.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length,
      },
      listings,
      summary_runs_34k: (summaryAnswer.summary as unknown[]).length,
      rss_mb: {
        max: round(rssMax / 1e6, 1),
        max_at_s: round(rssMaxAt, 0),
        last: round((rssSamples.at(-1) ?? 0) / 1e6, 1),
        first: round((rssSamples[0] ?? 0) / 1e6, 1),
        heap_used_max: round(heapMax / 1e6, 1),
        proc_1s: { max: round(proc.max / 1e6, 1), max_at_s: round(proc.maxAt, 0) },
      },
      goals: {
        periods_mb_at_10_min: 20,
        fresh_p99_ms_first_minute: 1000,
        fresh_p99_ms_running: 100,
        fan_in_ms: 1000,
        idle_pass_p50_ms: 20,
        rollups_listing_ms: 100,
        status_page_ms: 300,
        status_page_kb: 300,
        summary_34k_ms: 200,
        rss_mb: 250,
      },
    })}\n`,
  );
  await events.close();
  eventsConnection.disconnect();
  await producer.close();
  connection.disconnect();
  await daemon.stop();
  await db.drop();
  await dropPrefix(prefix);
}

await main();
