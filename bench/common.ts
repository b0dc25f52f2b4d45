/** Shared by the benchmarks: a throwaway database and Redis prefix, created and dropped per run. */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { CONFIG_ENV_VARS } from '../src/config/index.js';
import { connect, connectOnce, type Sql } from '../src/store/pg/db.js';
import { migrate } from '../src/store/upkeep/migrate.js';
import { createLogger } from '../src/support/log.js';
import { packageRoot } from '../src/support/paths.js';

export const ADMIN_URL =
  process.env.BENCH_ADMIN_URL ?? process.env.TEST_ADMIN_URL ?? 'postgres://127.0.0.1:5432/postgres';
export const REDIS_URL =
  process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * The daemon reaches PostgreSQL through its Unix socket when it is on this machine, as docs/operations.md
 * recommends for a co-located database; BENCH_PG_SOCKET_DIR='' measures over TCP instead.
 */
const SOCKET_DIR = process.env.BENCH_PG_SOCKET_DIR ?? '/var/run/postgresql';
const useSocket =
  SOCKET_DIR !== '' && existsSync(`${SOCKET_DIR}/.s.PGSQL.${new URL(ADMIN_URL).port || '5432'}`);
export const DATABASE_CONNECTION = useSocket ? `unix socket ${SOCKET_DIR}` : 'tcp';

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
  const admin = connectOnce(ADMIN_URL);
  await admin`create database ${admin(name)}`;
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  if (useSocket) url.searchParams.set('host', SOCKET_DIR);
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

/**
 * CPU seconds used so far: this process, the Redis server, and the whole machine (/proc/stat);
 * and Redis's script calls (EVAL/EVALSHA: one per BullMQ job step) with the seconds spent in them.
 */
export interface CpuSnapshot {
  readonly node: number;
  readonly redis: number;
  readonly machine: number;
  readonly redisScriptCalls: number;
  readonly redisInScripts: number;
}

export async function cpuSnapshot(redis: Redis): Promise<CpuSnapshot> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  // Time inside scripts is the work a batched claim or completion could not save; the rest of
  // Redis's CPU (reading, parsing, replying, the event loop) is per call and could shrink.
  const stats = await redis.info('commandstats');
  let redisScriptCalls = 0;
  let redisInScripts = 0;
  for (const m of stats.matchAll(/^cmdstat_(?:eval|evalsha|eval_ro|evalsha_ro):calls=(\d+),usec=(\d+)/gm)) {
    redisScriptCalls += Number(m[1]);
    redisInScripts += Number(m[2]) / 1e6;
  }
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = readFileSync(
    '/proc/stat',
    'utf8',
  )
    .split('\n', 1)[0]!
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const node = process.cpuUsage();
  return {
    node: (node.user + node.system) / 1e6,
    redis: field('used_cpu_user') + field('used_cpu_sys'),
    machine: (user + nice + system + irq + softirq + steal) / 100, // USER_HZ is 100 on Linux
    redisScriptCalls,
    redisInScripts,
  };
}

/** Microseconds of CPU per item between two snapshots; `other` is PostgreSQL, the kernel and the rest. */
export function cpuPerItem(before: CpuSnapshot, after: CpuSnapshot, items: number) {
  const us = (s: number) => round((s * 1e6) / items, 1);
  const node = after.node - before.node;
  const redis = after.redis - before.redis;
  const machine = after.machine - before.machine;
  return {
    node: us(node),
    redis: us(redis),
    other: us(machine - node - redis),
    total: us(machine),
    redis_in_scripts: us(after.redisInScripts - before.redisInScripts),
    redis_script_calls: round((after.redisScriptCalls - before.redisScriptCalls) / items, 2),
  };
}

/** The nearest-rank q-quantile (0 < q ≤ 1) of ascending `sorted`; undefined when it is empty. */
export function quantile(sorted: readonly number[], q: number): number | undefined {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

/** The cumulative buckets of the scheduler's pass histogram for one kind of pass in a /metrics body. */
export function passBuckets(
  metricsBody: string,
  work: 'idle' | 'busy',
): Array<{ le: number; count: number }> {
  return [
    ...metricsBody.matchAll(
      new RegExp(
        `^coverage_rollup_scheduler_pass_seconds_bucket\\{le="([^"]+)",work="${work}"\\} (\\S+)$`,
        'gm',
      ),
    ),
  ].map((m) => ({ le: m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]), count: Number(m[2]) }));
}

/** p50 and p99 of cumulative buckets (as histogram_quantile), and how many passes they hold. */
export function passStats(buckets: ReadonlyArray<{ le: number; count: number }>) {
  return {
    p50_ms: round(histogramQuantile(buckets, 0.5) * 1000, 2),
    p99_ms: round(histogramQuantile(buckets, 0.99) * 1000, 2),
    passes: buckets.at(-1)?.count ?? 0,
  };
}

/** The passes between two scrapes (`after` minus `before`, bucket by bucket). */
export function passesBetween(before: string, after: string, work: 'idle' | 'busy') {
  const b = passBuckets(before, work);
  return passStats(
    passBuckets(after, work).map((x, i) => ({ le: x.le, count: x.count - (b[i]?.count ?? 0) })),
  );
}

/**
 * The scheduler's pass histogram for one kind of pass (`idle` or `busy`) in a /metrics body:
 * p50 and p99 estimated from the buckets as Prometheus' histogram_quantile does (linear within the
 * bucket), and the number of passes.
 */
export function schedulerPasses(metricsBody: string, work: 'idle' | 'busy') {
  return passStats(passBuckets(metricsBody, work));
}

/** The q-quantile of cumulative histogram buckets (ascending `le`, +Inf last), as histogram_quantile. */
function histogramQuantile(buckets: readonly { le: number; count: number }[], q: number): number {
  const total = buckets.at(-1)?.count ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const { le, count } of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(le)) return lower; // in +Inf: the highest finite bound
      return lower + ((le - lower) * (rank - below)) / Math.max(count - below, 1);
    }
    [lower, below] = [le, count];
  }
  return lower;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const round = (x: number, digits = 2): number => Number(x.toFixed(digits));

export interface DaemonProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * The daemon as it runs in production, in a process of its own, so the benchmark's client and
 * producers do not share its event loop. Runs the TypeScript source through tsx's loader.
 */
export async function spawnDaemon(
  config: Record<string, unknown>,
  options: { readonly compiled?: boolean } = {},
): Promise<DaemonProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'crbench-'));
  const path = join(dir, 'config.json');
  // Its own data directory: its record (daemon.json) stays out of the repository.
  writeFileSync(path, JSON.stringify({ data_dir: join(dir, 'data'), ...config, log_level: 'info' }));
  const env = { ...process.env };
  for (const key of CONFIG_ENV_VARS) delete env[key]; // the config file decides, never the caller's shell
  // BENCH_COMPILED=1 runs the built daemon (npm run build), as `npm start` does: without tsx's
  // loader, whose transpiler adds to the process's memory.
  const compiled = options.compiled ?? process.env.BENCH_COMPILED === '1';
  const entry = compiled ? ['dist/src/cli/main.js'] : ['--import', 'tsx', 'src/cli/main.ts'];
  // Flags for the daemon's node alone, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" or the
  // allocation sampler (bench/profile/alloc-sampling.mjs); the benchmark's own process keeps none.
  const nodeArgs = (process.env.BENCH_DAEMON_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
  const child = spawn(process.execPath, [...nodeArgs, ...entry, 'start', '--config', path], {
    cwd: packageRoot(),
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  // Read every line (an unread pipe would block the daemon) and keep the tail for a failure.
  const tail: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'listening' && entry.url) resolve(entry.url);
      } catch {
        // not a log line
      }
    });
    void exited.then(([code]) =>
      reject(new Error(`daemon exited (${code}) before listening:\n${tail.join('\n')}`)),
    );
  });
  return {
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
