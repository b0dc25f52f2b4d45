/**
 * Coverage query latency: one asset with a year of 1-minute events (525,600 minus scattered
 * holes). Median latency of the HTTP coverage query for the whole year, against (a) fetching the
 * raw events and merging them in the client and (b) range_agg over the raw events in PostgreSQL,
 * in the same run. Goal: HTTP ≥ 200× faster than (a). The daemon runs in its own process, as in
 * production; "in_process_coverage" is the same answer computed in this process without HTTP.
 * Prints JSON.
 *
 *   npm run bench:query
 *   BENCH_HOLES=2000 BENCH_REPS=31 npm run bench:query
 */
import { Agent, get } from 'node:http';
import { normalizeEvent } from '../src/core/events/events.js';
import { toCoverageAnswer } from '../src/core/intervals/coverage-answer.js';
import { normalize } from '../src/core/intervals/intervals.js';
import { findAsset } from '../src/store/assets/assets.js';
import { commitEvents } from '../src/store/assets/commit.js';
import { queryCoverage } from '../src/store/assets/coverage-query.js';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  median,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const MINUTES = 365 * 24 * 60;
const HOLES = Number(process.env.BENCH_HOLES ?? 500);
const REPS = Number(process.env.BENCH_REPS ?? 21);
const FAST_PER_ROUND = 10;
const ASSET = 'bench.year';
const T0 = Date.UTC(2024, 0, 1);
const options = { maxPayloadBytes: 65_536 };

/** A full collection between timed blocks (the npm script runs node with --expose-gc). */
function settleHeap(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function timeMs(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function main(): Promise<void> {
  const db = await createBenchDatabase(10);
  const prefix = uniqueName('crbench');
  let result: Record<string, unknown> = {};
  try {
    // Scattered holes: HOLES runs of 1-30 missing minutes at pseudo-random places.
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const missing = new Uint8Array(MINUTES);
    for (let h = 0; h < HOLES; h++) {
      const at = Math.floor(rand() * MINUTES);
      const len = 1 + Math.floor(rand() * 30);
      missing.fill(1, at, Math.min(MINUTES, at + len));
    }
    let holeRuns = 0;
    for (let m = 0; m < MINUTES; m++) if (missing[m] && (m === 0 || !missing[m - 1])) holeRuns++;

    // Ingest directly through commitEvents in large batches (the queue is measured by bench:ingest).
    const ingestStarted = performance.now();
    let batch = [];
    let count = 0;
    for (let m = 0; m < MINUTES; m++) {
      if (missing[m]) continue;
      const start = T0 + m * 60_000;
      batch.push(
        normalizeEvent(
          {
            asset: ASSET,
            start: new Date(start).toISOString(),
            end: new Date(start + 60_000).toISOString(),
            version: 'v1',
            id: `m${m}`,
          },
          options,
        ),
      );
      count++;
      if (batch.length === 5000) {
        await commitEvents(db.sql, batch);
        batch = [];
      }
    }
    await commitEvents(db.sql, batch);
    const ingestSeconds = (performance.now() - ingestStarted) / 1000;
    await db.sql`vacuum analyze events`;
    await db.sql`vacuum analyze segments`;

    const daemon = await spawnDaemon({
      database_url: db.url,
      redis_url: REDIS_URL,
      http: { host: '127.0.0.1', port: 0 },
      queue: { prefix },
    });
    try {
      const start = new Date(T0).toISOString();
      const end = new Date(T0 + MINUTES * 60_000).toISOString();
      const url = `${daemon.url}/v1/assets/${ASSET}/coverage?start=${start}&end=${end}`;
      const lo = T0 * 1000;
      const hi = (T0 + MINUTES * 60_000) * 1000;
      let answer: { missing: unknown[]; ratio: number; batches: unknown[] } | undefined;
      let clientMissing = 0;
      let aggRanges = 0;

      // A lean keep-alive client, so the figure is the server's work rather than fetch()'s.
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const http = () =>
        new Promise<void>((resolve, reject) => {
          get(url, { agent }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof answer;
              resolve();
            });
            res.on('error', reject);
          }).on('error', reject);
        });
      // The same answer computed in-process, without HTTP: what the index itself costs.
      const facts = (await findAsset(db.sql, ASSET))!;
      const direct = async () => {
        const window = { start: lo, end: hi };
        const coverage = await queryCoverage(db.sql, facts, { window, limit: 200 });
        JSON.stringify(
          toCoverageAnswer({ asset: ASSET, domain: 'time', window, coverage, ...coverage }, Date.now()),
        );
      };
      // (a) what a client without the index does: fetch every event in the window, merge them.
      const client = async () => {
        const rows = await db.sql<{ lo: number; hi: number }[]>`
          select e.lo, e.hi from events e join assets a on a.id = e.asset_id
          where a.name = ${ASSET} and not e.replay and e.hi > ${lo} and e.lo < ${hi}`;
        const merged = normalize(rows.map((r) => ({ start: r.lo, end: r.hi })));
        clientMissing = Math.max(0, merged.length - 1);
      };
      // (b) PostgreSQL merges the raw events itself.
      const rangeAgg = async () => {
        const [row] = await db.sql<{ n: number }[]>`
          select cardinality(array_agg(r))::int as n from (
            select unnest(range_agg(int8range(e.lo, e.hi))) as r
            from events e join assets a on a.id = e.asset_id
            where a.name = ${ASSET} and not e.replay and e.hi > ${lo} and e.lo < ${hi}
          ) t`;
        aggRanges = row?.n ?? 0;
      };

      for (const warm of [http, direct, client, rangeAgg]) await warm();
      const samples = {
        http: [] as number[],
        direct: [] as number[],
        client: [] as number[],
        range_agg: [] as number[],
      };
      // Rounds interleave the methods, so load from elsewhere on the machine hits all alike. The
      // fast ones run FAST_PER_ROUND times a round, so their median is not only the first call
      // after a 500k-row merge has evicted every cache.
      for (let i = 0; i < REPS; i++) {
        // The client merge leaves ~100 MB of garbage here: collect it before timing anything, or
        // its incremental marking is what the next samples measure.
        settleHeap();
        for (let k = 0; k < FAST_PER_ROUND; k++) samples.http.push(await timeMs(http));
        for (let k = 0; k < FAST_PER_ROUND; k++) samples.direct.push(await timeMs(direct));
        settleHeap();
        samples.client.push(await timeMs(client));
        settleHeap();
        samples.range_agg.push(await timeMs(rangeAgg));
      }
      const [asset] = await db.sql<{ segment_count: number; event_count: number }[]>`
        select segment_count, event_count from assets where name = ${ASSET}`;
      const med = {
        http: median(samples.http),
        direct: median(samples.direct),
        client: median(samples.client),
        range_agg: median(samples.range_agg),
      };
      result = {
        benchmark: 'query',
        database_connection: DATABASE_CONNECTION,
        events: count,
        hole_runs: holeRuns,
        segments: asset?.segment_count,
        missing_ranges_in_answer: answer?.missing.length,
        client_merged_ranges: clientMissing + 1,
        range_agg_ranges: aggRanges,
        ratio_covered: answer?.ratio,
        ingest_seconds_commitEvents: round(ingestSeconds, 1),
        reps: REPS,
        fast_reps_per_round: FAST_PER_ROUND,
        median_ms: {
          http_coverage: round(med.http, 2),
          in_process_coverage: round(med.direct, 2),
          client_merge: round(med.client, 1),
          range_agg: round(med.range_agg, 1),
        },
        speedup_vs_client_merge: round(med.client / med.http, 0),
        speedup_vs_range_agg: round(med.range_agg / med.http, 0),
        goal_speedup_vs_client_merge: 200,
      };
      agent.destroy();
    } finally {
      await daemon.stop();
    }
  } finally {
    await dropPrefix(prefix);
    await db.drop();
  }
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
