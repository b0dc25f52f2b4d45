/**
 * Shared by the ingest-*.test.ts files (not a test file itself): a real worker on a real queue
 * over this file's own database and prefix, and readers for the index and the events log.
 */
import type { Queue } from 'bullmq';
import { afterAll } from 'vitest';
import { type Config, parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import type { Interval, Segment } from '../../src/core/types.js';
import { type IngestWorker, startIngestWorker } from '../../src/ingest/worker.js';
import { createMetrics, type Metrics } from '../../src/metrics/registry.js';
import { queueConnection } from '../../src/queue/backend.js';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import type { TestDatabase } from '../helpers/db.js';
import { REDIS_URL, withTestBackend } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

export const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

export function ingestConfig(
  db: TestDatabase,
  prefix: string,
  overrides: Record<string, unknown> = {},
): Config {
  const { queue, ...rest } = overrides as { queue?: Record<string, unknown> };
  return parseConfig(
    withTestBackend({
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'silent',
      queue: { prefix, batch_wait: 'PT0.002S', concurrency: 200, batch_size: 200, ...queue },
      ...rest,
    }),
  );
}

export interface RunningWorker {
  readonly ingest: IngestWorker;
  readonly sql: Sql;
  readonly metrics: Metrics;
  stop(): Promise<void>;
}

/**
 * A worker with its own connection pool, as a separate process would have; stopped after the file.
 * It applies the bound on the periods of the config's rollups one event may touch.
 */
export function startWorker(config: Config, poolSize = 5): RunningWorker {
  const sql = connect(config.database_url, { max: poolSize, applicationName: 'ingest-test-worker' });
  const metrics = createMetrics();
  const rollups = defineRollups(config);
  const ingest = startIngestWorker(config, sql, log, metrics, () => rollups);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await ingest.close(10_000);
    await sql.end({ timeout: 5 });
  };
  afterAll(stop);
  return { ingest, sql, metrics, stop };
}

export interface Queues {
  readonly events: Queue;
  readonly dead: Queue;
}

export function queuesOf(config: Config): Queues {
  const connection = queueConnection(config);
  const events = connection.queue(config.queue.name, config.queue.prefix);
  const dead = connection.queue(config.queue.dead_letter, config.queue.prefix);
  afterAll(async () => {
    await events.close();
    await dead.close();
    await connection.close();
  });
  return { events, dead };
}

/** Adds events in order, one job each, in chunks. */
export async function enqueue(queue: Queue, events: readonly unknown[], chunk = 500): Promise<void> {
  for (let i = 0; i < events.length; i += chunk) {
    await queue.addBulk(events.slice(i, i + chunk).map((data) => ({ name: 'event', data })));
  }
}

/** Waits until no job is waiting, delayed or active: every job was committed or dead-lettered. */
export async function drained(queue: Queue, timeout = 30_000): Promise<void> {
  await waitFor(
    async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
      return Object.values(c).every((n) => n === 0);
    },
    { timeout, what: `queue ${queue.name} to drain` },
  );
}

export interface StoredPiece extends Segment {}

/** The stored index of an asset, ascending. */
export async function indexOf(sql: Sql, asset: string): Promise<StoredPiece[]> {
  const rows = await sql<
    {
      lo: number;
      hi: number;
      version: string | null;
      state: Segment['state'];
      required_version: string | null;
    }[]
  >`
    select lower(s.span) as lo, upper(s.span) as hi, s.version, s.state, s.required_version
    from segments s join assets a on a.id = s.asset_id
    where a.name = ${asset} order by lower(s.span)`;
  return rows.map((r) => ({
    start: r.lo,
    end: r.hi,
    version: r.version,
    state: r.state,
    requiredVersion: r.required_version,
  }));
}

/** PostgreSQL's own merge of the logged completions: range_agg over the events log. */
export async function logCoverage(sql: Sql, asset: string): Promise<Interval[]> {
  const rows = await sql<{ lo: number; hi: number }[]>`
    select lower(r) as lo, upper(r) as hi
    from (
      select unnest(range_agg(int8range(e.lo, e.hi))) as r
      from events e join assets a on a.id = e.asset_id
      where a.name = ${asset} and not e.replay
    ) t order by lo`;
  return rows.map((r) => ({ start: r.lo, end: r.hi }));
}

/** The index's own coverage, merged the same way (segments of different versions may abut). */
export async function indexCoverage(sql: Sql, asset: string): Promise<Interval[]> {
  const rows = await sql<{ lo: number; hi: number }[]>`
    select lower(r) as lo, upper(r) as hi
    from (
      select unnest(range_agg(s.span)) as r
      from segments s join assets a on a.id = s.asset_id where a.name = ${asset}
    ) t order by lo`;
  return rows.map((r) => ({ start: r.lo, end: r.hi }));
}

export const micros = (iso: string): number => Date.parse(iso) * 1000;
export const iso = (us: number): string => new Date(us / 1000).toISOString();
export const MINUTE = 60 * 1_000_000;
