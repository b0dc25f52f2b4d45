/**
 * Coverage answers over many holes (issue #20): one asset with 50,000 one-minute slices every
 * other minute (50,000 holes over 70 days), asked over HTTP for a one-year window. Prints latency
 * (p50, p99) and answer size for the default limit, for order=newest and for limit=1000.
 * Goal: default limit ≤ 50 ms and ≤ 100 KB, on a database never analyzed (autovacuum off, the
 * daemon's own maintenance held off by holding its lock) and again after ANALYZE. The
 * daemon runs in its own process. Prints JSON.
 *
 *   npm run bench:holes-query
 *   BENCH_SLICES=20000 BENCH_REPS=200 npm run bench:holes-query
 */
import { Agent, get } from 'node:http';
import { normalizeEvent } from '../src/core/events.js';
import { commitEvents } from '../src/store/assets/commit.js';
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

const SLICES = Number(process.env.BENCH_SLICES ?? 50_000);
const REPS = Number(process.env.BENCH_REPS ?? 100);
const ASSET = 'bench.holey';
const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;

async function main(): Promise<void> {
  const db = await createBenchDatabase(10);
  const prefix = uniqueName('crbench');
  let result: Record<string, unknown> = {};
  try {
    let batch = [];
    for (let k = 0; k < SLICES; k++) {
      const start = T0 + 2 * k * MINUTE;
      batch.push(
        normalizeEvent(
          {
            asset: ASSET,
            start: new Date(start).toISOString(),
            end: new Date(start + MINUTE).toISOString(),
            id: `s${k}`,
          },
          { maxPayloadBytes: 65_536 },
        ),
      );
      if (batch.length === 5000) {
        await commitEvents(db.sql, batch);
        batch = [];
      }
    }
    await commitEvents(db.sql, batch);
    // The daemon analyzes its own tables after large changes: its maintenance lock, held here,
    // keeps it from doing so until the never-analyzed figures are taken.
    const maintenanceLock = await db.sql.reserve();
    await maintenanceLock`select pg_advisory_lock(hashtext('coverage-rollup.prune'))`;
    const [asset] = await db.sql<{ segment_count: number }[]>`
      select segment_count from assets where name = ${ASSET}`;

    const daemon = await spawnDaemon({
      database_url: db.url,
      redis_url: REDIS_URL,
      http: { host: '127.0.0.1', port: 0 },
      queue: { prefix },
    });
    try {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const fetchOnce = (query: string) =>
        new Promise<{ ms: number; bytes: number; body: string }>((resolve, reject) => {
          const t = performance.now();
          get(`${daemon.url}/v1/assets/${ASSET}/coverage?${query}`, { agent }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const body = Buffer.concat(chunks);
              resolve({ ms: performance.now() - t, bytes: body.length, body: body.toString('utf8') });
            });
            res.on('error', reject);
          }).on('error', reject);
        });
      const window = 'start=2026-01-01T00:00:00Z&end=2027-01-01T00:00:00Z';
      const cases: Record<string, string> = {
        default_limit: window,
        order_newest: `${window}&order=newest`,
        limit_1000: `${window}&limit=1000`,
      };
      const measure = async () => {
        const measured: Record<string, unknown> = {};
        for (const [name, query] of Object.entries(cases)) {
          for (let i = 0; i < 5; i++) await fetchOnce(query); // warm-up
          const samples: number[] = [];
          let last = { ms: 0, bytes: 0, body: '{}' };
          for (let i = 0; i < REPS; i++) {
            last = await fetchOnce(query);
            samples.push(last.ms);
          }
          const answer = JSON.parse(last.body) as {
            missing: unknown[];
            missing_count: number;
            truncated: boolean;
          };
          const sortedSamples = samples.sort((a, b) => a - b);
          measured[name] = {
            p50_ms: round(quantile(sortedSamples, 0.5)!, 1),
            p99_ms: round(quantile(sortedSamples, 0.99)!, 1),
            bytes: last.bytes,
            missing_in_answer: answer.missing.length,
            missing_count: answer.missing_count,
            truncated: answer.truncated,
          };
        }
        return measured;
      };
      const [{ analyzed: analyzedBefore }] = await db.sql<[{ analyzed: number }]>`
        select count(*)::int as analyzed from pg_stat_user_tables where last_analyze is not null or last_autoanalyze is not null`;
      const neverAnalyzed = await measure();
      await maintenanceLock`select pg_advisory_unlock(hashtext('coverage-rollup.prune'))`;
      maintenanceLock.release();
      await db.sql`analyze`;
      const analyzed = await measure();
      agent.destroy();
      result = {
        benchmark: 'holes-query',
        database_connection: DATABASE_CONNECTION,
        slices: SLICES,
        segments: asset?.segment_count,
        window: '2026-01-01/2027-01-01',
        reps: REPS,
        tables_analyzed_before_first_phase: analyzedBefore,
        never_analyzed: neverAnalyzed,
        analyzed,
        goal: { p50_ms: 50, bytes: 100_000 },
      };
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
