/** Shared by the benchmarks: a throwaway database and Redis prefix, created and dropped per run. */
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { connect, type Sql } from '../src/index/db.js';
import { migrate } from '../src/index/migrate.js';
import { createLogger } from '../src/log.js';

export const ADMIN_URL =
  process.env.BENCH_ADMIN_URL ?? process.env.TEST_ADMIN_URL ?? 'postgres://127.0.0.1:5432/postgres';
export const REDIS_URL =
  process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export const log = createLogger(process.env.BENCH_LOG_LEVEL ?? 'silent');

export interface BenchDatabase {
  readonly url: string;
  readonly sql: Sql;
  drop(): Promise<void>;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
}

export async function createBenchDatabase(poolSize = 10): Promise<BenchDatabase> {
  const name = uniqueName('cr_bench');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin`create database ${admin(name)}`;
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const sql = connect(url.toString(), { max: poolSize, applicationName: 'coverage-rollup-bench' });
  await migrate(sql, log);
  return {
    url: url.toString(),
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      await admin`drop database if exists ${admin(name)} with (force)`;
      await admin.end();
    },
  };
}

/** Deletes every key under a BullMQ prefix. */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const round = (x: number, digits = 2): number => Number(x.toFixed(digits));
