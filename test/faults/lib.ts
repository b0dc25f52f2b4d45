import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { connectOnce, type Sql } from '../../src/store/pg/db.js';
import { packageRoot } from '../../src/support/paths.js';
import { ADMIN_URL } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import type { DaemonProcess, LogLine } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Shared by the fault, fuzz, soak and scale suites (test/faults/*.faults.ts, run with
 * vitest.faults.config.ts): a Redis server of their own, a paced producer, queue and process
 * probes, and the JSON report every suite prints.
 */

export { freePort };

export const TOKEN = 'faults-token-0123456789abcdef';

const liveRedis = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of liveRedis) child.kill('SIGKILL');
});

/**
 * A redis-server child of this test process on its own port and data directory. With `aof`,
 * every write is appended and fsynced before Redis answers (appendfsync always), so a SIGKILL
 * loses nothing that a client saw acknowledged, and a restart on the same directory replays it.
 */
export class RedisServer {
  readonly dir: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private log = '';

  private constructor(
    readonly port: number,
    readonly aof: boolean,
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-redis-'));
  }

  static async start({ aof = false, port }: { aof?: boolean; port?: number } = {}): Promise<RedisServer> {
    const server = new RedisServer(port ?? (await freePort()), aof);
    await server.launch();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts redis-server (again) on the same port and directory; resolves when it answers PING. */
  async launch(): Promise<void> {
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--daemonize',
      'no',
      '--save',
      '',
      '--protected-mode',
      'yes',
      ...(this.aof ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']),
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    liveRedis.add(child);
    child.stdout?.on('data', (d: Buffer) => {
      this.log = (this.log + d.toString()).slice(-4000);
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.log = (this.log + d.toString()).slice(-4000);
    });
    this.exited = new Promise((resolve) =>
      child.once('exit', () => {
        liveRedis.delete(child);
        resolve();
      }),
    );
    const probe = new Redis(this.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      const outcome = await waitFor(
        async () => {
          if (child.exitCode !== null) return 'exited';
          try {
            if (probe.status !== 'ready') await probe.connect();
            // While the AOF loads Redis answers LOADING: wait for a real PONG.
            return (await probe.ping()) === 'PONG' && 'ready';
          } catch {
            probe.disconnect();
            return false;
          }
        },
        { timeout: 10_000, interval: 50, what: `redis-server on ${this.port} to answer PING` },
      );
      if (outcome === 'exited') throw new Error(`redis-server exited at start:\n${this.log}`);
    } finally {
      probe.disconnect();
    }
  }

  /** SIGKILL, and wait until the process is gone. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  /** SIGKILL and remove the data directory. */
  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A deterministic PRNG (mulberry32): the same seed gives the same stream. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function seedFromEnv(name: string): number {
  const raw = process.env[name];
  return raw && /^\d+$/.test(raw) ? Number(raw) : Math.floor(Math.random() * 2 ** 31);
}

export function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.replaceAll('_', ''));
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return value;
}

export function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** One job for the events queue. */
export interface EventJob {
  readonly jobId: string;
  readonly data: Record<string, unknown>;
}

/** A BullMQ producer that waits out Redis restarts (ioredis queues commands while reconnecting). */
export class Producer {
  readonly connection: Redis;
  readonly queue: Queue;
  /** Jobs whose addBulk Redis acknowledged. */
  acked = 0;
  /** addBulk calls that failed and were retried with the same job ids. */
  retries = 0;

  constructor(redisUrl: string, queueName: string, prefix: string) {
    this.connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    this.connection.on('error', () => {});
    this.queue = new Queue(queueName, { connection: this.connection, prefix });
    this.queue.on('error', () => {});
  }

  /** Adds the jobs; retried with the same job ids until Redis acknowledges them. */
  async add(jobs: readonly EventJob[], timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.queue.addBulk(jobs.map((j) => ({ name: 'e', data: j.data, opts: { jobId: j.jobId } })));
        this.acked += jobs.length;
        return;
      } catch (error) {
        this.retries++;
        if (Date.now() > deadline) throw error;
        await sleep(200); // a retry delay while Redis is down, not a wait for a condition
      }
    }
  }

  async close(): Promise<void> {
    await this.queue.close().catch(() => {});
    this.connection.disconnect();
  }
}

export interface QueueCounts {
  readonly waiting: number;
  readonly active: number;
  readonly delayed: number;
  readonly failed: number;
  readonly completed: number;
  readonly prioritized: number;
}

export async function queueCounts(queue: Queue): Promise<QueueCounts> {
  const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized');
  return {
    waiting: c.waiting ?? 0,
    active: c.active ?? 0,
    delayed: c.delayed ?? 0,
    failed: c.failed ?? 0,
    completed: c.completed ?? 0,
    prioritized: c.prioritized ?? 0,
  };
}

export const pending = (c: QueueCounts) => c.waiting + c.active + c.delayed + c.prioritized;

/** Resident set size of a process in bytes (Linux /proc), or null once it is gone. */
export function rssBytes(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Counts how often each value of `field` occurs on lines with `msg`, across processes. */
export function countLogs(
  processes: readonly DaemonProcess[],
  msg: string,
  field: string,
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const p of processes)
    for (const line of p.logs(msg)) {
      const key = String(line[field]);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  return counts;
}

/** Lines at level error (50) or fatal (60), with their process. */
export function errorLines(processes: readonly DaemonProcess[]): Array<{ process: string; line: LogLine }> {
  return processes.flatMap((p) =>
    p.lines.filter((l) => l.level >= 50).map((line) => ({ process: p.name, line })),
  );
}

/** Terminates every client connection of `database` (from the admin database). */
export async function terminateConnections(database: string): Promise<number> {
  const admin = connectOnce(ADMIN_URL);
  try {
    const rows = await admin<{ ok: boolean }[]>`
      select pg_terminate_backend(pid) as ok from pg_stat_activity
      where datname = ${database} and pid <> pg_backend_pid()`;
    return rows.filter((r) => r.ok).length;
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/**
 * Prints the suite's result as one JSON document on stdout (between marker lines, so it stands
 * out in the runner's output) and writes it to test-artifacts/faults/<suite>.json.
 */
export function report(suite: string, result: Record<string, unknown>): void {
  const text = JSON.stringify(result, null, 2);
  const dir = join(packageRoot(), 'test-artifacts', 'faults');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${suite}.json`), `${text}\n`);
  process.stdout.write(`\n===== ${suite} result (JSON) =====\n${text}\n===== end ${suite} =====\n`);
}

export const round = (x: number, digits = 2): number => Number(x.toFixed(digits));

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A config for a daemon process of these suites (JSON, which the YAML loader reads). */
export function daemonConfig(options: {
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  scheduler?: boolean;
  logLevel?: string;
  queue?: Record<string, unknown>;
  lease?: Record<string, unknown>;
  assets?: ReadonlyArray<Record<string, unknown>>;
  rollups?: ReadonlyArray<Record<string, unknown>>;
}): Record<string, unknown> {
  return {
    database_url: options.databaseUrl,
    redis_url: options.redisUrl,
    log_level: options.logLevel ?? 'info',
    http: { host: '127.0.0.1', port: 0 },
    api_tokens: [TOKEN],
    queue: { prefix: options.prefix, ...(options.queue ?? {}) },
    lease: options.lease ?? { ttl: 'PT4S', renew_every: 'PT1S', retry_every: 'PT0.5S' },
    scheduler: { enabled: options.scheduler ?? false },
    shutdown_timeout: 'PT15S',
    assets: options.assets ?? [],
    rollups: options.rollups ?? [],
  };
}

/** Digest of the whole index: every segment of every asset, in order. */
export const SEGMENTS_DIGEST_SQL = `
  select md5(coalesce(string_agg(
    format('%s|%s|%s|%s|%s|%s', a.name, lower(s.span), upper(s.span), coalesce(s.version, '-'), s.state,
      coalesce(s.required_version, '-')),
    E'\\n' order by a.name, lower(s.span)), '')) as digest,
    count(*)::int as segments
  from segments s join assets a on a.id = s.asset_id`;

/** Waits until the queue has had no waiting, active or delayed job for three polls in a row. */
export async function drainQueue(queue: Queue, timeoutMs: number): Promise<void> {
  const started = Date.now();
  for (let calm = 0; calm < 3; ) {
    const counts = await queueCounts(queue);
    calm = pending(counts) === 0 ? calm + 1 : 0;
    if (Date.now() - started > timeoutMs) throw new Error(`queue did not drain: ${JSON.stringify(counts)}`);
    await sleep(500);
  }
}

/**
 * Waits until the scheduler has caught up for three polls in a row: no period dirty, every
 * trigger delivered (or failed), every rollup cursor at its upstream's last event.
 */
export async function settleScheduler(sql: Sql, timeoutMs: number): Promise<void> {
  const started = Date.now();
  for (let calm = 0; calm < 3; ) {
    const [s] = await sql<{ dirty: number; undelivered: number; behind: number }[]>`
      select
        (select count(*)::int from periods where dirty or manual_requested) as dirty,
        (select count(*)::int from triggers where delivered_at is null and failed_at is null) as undelivered,
        (select count(*)::int from rollup_cursors c join assets a on a.name = c.asset_name where c.seq < a.last_seq) as behind`;
    calm = s!.dirty === 0 && s!.undelivered === 0 && s!.behind === 0 ? calm + 1 : 0;
    if (Date.now() - started > timeoutMs) throw new Error(`scheduler did not settle: ${JSON.stringify(s)}`);
    await sleep(1000);
  }
}

/** One value of a daemon's /metrics (the whole series name, labels included), or null. */
export async function scrape(url: string | undefined, metric: string): Promise<number | null> {
  if (!url) return null;
  try {
    const text = await (
      await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).text();
    const line = text.split('\n').find((l) => l.startsWith(`${metric} `));
    return line ? Number(line.split(' ')[1]) : null;
  } catch {
    return null;
  }
}

/**
 * The lease's history as PostgreSQL saw it, in a table of the test database: a trigger on
 * `scheduler_leases` records each acquisition (a new token), renewal and release with the
 * database time it happened.
 */
export async function recordLeaseHistory(sql: Sql): Promise<void> {
  await sql.unsafe(`
    create table faults_lease_history (
      kind text not null, token bigint not null, holder text, acquired_at timestamptz not null,
      renewed_at timestamptz, expires_at timestamptz,
      recorded_at timestamptz not null default clock_timestamp());
    create function faults_record_lease() returns trigger language plpgsql as $$
    begin
      insert into faults_lease_history (kind, token, holder, acquired_at, renewed_at, expires_at)
      values (case when tg_op = 'INSERT' or new.token is distinct from old.token then 'acquired'
                   when new.renewed_at is distinct from old.renewed_at then 'renewed' else 'released' end,
              new.token, new.holder, new.acquired_at, new.renewed_at, new.expires_at);
      return new;
    end $$;
    create trigger faults_record_lease after insert or update on scheduler_leases
      for each row execute function faults_record_lease();`);
}

/**
 * Each trigger decision as it commits, in a table of the test database: a deferred constraint
 * trigger runs in the deciding transaction just before its commit, so a row exists only for a
 * decision that committed, and it holds the lease row as it was then (the transaction's FOR KEY
 * SHARE lock keeps its token from changing until the commit). The lease is the default `scheduler`.
 */
export async function recordDecisionCommits(sql: Sql): Promise<void> {
  await sql.unsafe(`
    create table faults_decision_commits (
      idempotency_key text not null, lease_token bigint not null, token_at_commit bigint,
      lease_live_at_commit boolean, committed_at timestamptz not null default clock_timestamp());
    create function faults_record_decision() returns trigger language plpgsql as $$
    begin
      insert into faults_decision_commits (idempotency_key, lease_token, token_at_commit, lease_live_at_commit)
      select new.idempotency_key, new.lease_token, l.token, l.expires_at > clock_timestamp()
      from (select 1) one left join scheduler_leases l on l.name = 'scheduler';
      return null;
    end $$;
    create constraint trigger faults_record_decision after insert on triggers
      deferrable initially deferred for each row execute function faults_record_decision();`);
}
