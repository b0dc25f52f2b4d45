import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import type { Sql, Tx } from '../../src/store/pg/db.js';
import { testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { REDIS_URL, withTestBackend } from '../helpers/env.js';
import { type DaemonProcess, type LogLine, logTime, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The scheduler lease (docs/operations.md "High availability") with real daemon processes: the built
 * `coverage-rollup start`, real PostgreSQL and Redis, real signals. Each test has its own database
 * and BullMQ prefix. Rollups are integer buckets of 10 over integer assets, so periods exist only
 * where events land and nothing depends on the wall clock.
 */

const procs = processHarness();

const ACQUIRED = 'acquired the scheduler lease';
const LOST = 'lost the scheduler lease; stopped triggering';
const RELEASED = 'released the scheduler lease';
/** ttl 1 s, renew 0.3 s, retry 0.2 s unless a test says otherwise. */
const FAST_LEASE = { ttl: 'PT1S', renew_every: 'PT0.3S', retry_every: 'PT0.2S' };
const TTL_MS = 1000;

interface Scenario {
  readonly db: TestDatabase;
  readonly prefix: string;
  readonly producer: Queue;
  readonly downstream: Queue;
}

/** A database and prefix of its own, a producer on its events queue and a reader of the target queue. */
async function scenario(): Promise<Scenario> {
  const db = await createTestDatabase();
  const prefix = createTestPrefix();
  const queues = parseConfig(
    withTestBackend({ database_url: db.url, redis_url: REDIS_URL, queue: { prefix } }),
  );
  const producer = testProducer(queues);
  const downstream = testQueue('downstream', prefix, queues);
  return { db, prefix, producer, downstream };
}

// Sequential: concurrent clones of one template contend for its lock.
const slow = await scenario();
const crash = await scenario();
const paused = await scenario();
const clean = await scenario();
const renewal = await scenario();
const outbox = await scenario();
const early = await scenario();

const bucket = (id: string, upstream: string, target: Record<string, unknown>) => ({
  id,
  upstream,
  every: 10,
  begin: 0,
  target,
});
const QUEUE_TARGET = { type: 'queue', queue: 'downstream' };

function daemonConfig(s: Scenario, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    database_url: s.db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix: s.prefix, batch_wait: 'PT0.002S' },
    lease: FAST_LEASE,
    shutdown_timeout: 'PT10S',
    assets: [
      { name: 'a', domain: 'integer' },
      { name: 'f', domain: 'integer' },
      { name: 's', domain: 'integer' },
    ],
    rollups: [bucket('r', 'a', QUEUE_TARGET)],
    ...overrides,
  };
}

/** Completion events through the BullMQ events queue, as a producer sends them. */
async function send(s: Scenario, asset: string, ...ranges: [number, number][]): Promise<void> {
  await s.producer.addBulk(
    ranges.map(([start, end]) => ({ name: 'e', data: { asset, start, end, version: 'v1' } })),
  );
}

interface TriggerRow {
  rollup_id: string;
  period_lo: number;
  generation: number;
  idempotency_key: string;
  lease_token: number;
  decided_at: Date;
  delivered_at: Date | null;
  attempts: number;
  last_error: string | null;
}

async function triggerRows(sql: Sql): Promise<TriggerRow[]> {
  return sql<TriggerRow[]>`
    select rollup_id, period_lo, generation, idempotency_key, lease_token, decided_at, delivered_at,
      attempts, last_error
    from triggers order by rollup_id, period_lo, generation`;
}

/** The trigger rows once `keys` are all decided (and delivered, when asked). */
async function waitForTriggers(
  sql: Sql,
  keys: readonly string[],
  { delivered = false, timeout = 15_000 } = {},
): Promise<Map<string, TriggerRow>> {
  return waitFor(
    async () => {
      const rows = new Map((await triggerRows(sql)).map((r) => [r.idempotency_key, r]));
      const ready = keys.every((k) => rows.get(k) && (!delivered || rows.get(k)!.delivered_at));
      return ready ? rows : undefined;
    },
    { timeout, what: `triggers ${keys.join(', ')}${delivered ? ' delivered' : ''}` },
  );
}

async function leaseRow(sql: Sql) {
  const [row] = await sql<{ holder: string; token: number; live: boolean; renewed_at: Date }[]>`
    select holder, token, expires_at > clock_timestamp() as live, renewed_at
    from scheduler_leases where name = 'scheduler'`;
  return row;
}

/** Runs `lock` in a transaction on a connection of the test's own and holds it until release(). */
async function holdLock(sql: Sql, lock: (tx: Tx) => Promise<unknown>): Promise<() => Promise<void>> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  let failed!: (error: unknown) => void;
  const isLocked = new Promise<void>((resolve, reject) => {
    locked = resolve;
    failed = reject;
  });
  const tx = sql
    .begin(async (tx) => {
      await lock(tx);
      locked();
      await gate;
    })
    .catch(failed);
  await isLocked;
  return async () => {
    release();
    await tx;
  };
}

interface Backend {
  pid: number;
  state: string;
  wait_event_type: string | null;
  query_start: Date;
}

/**
 * The test's own transaction holding `LOCK TABLE triggers IN SHARE MODE`: it conflicts with the
 * ROW EXCLUSIVE lock of the evaluation's INSERT into triggers, the last statement before commit,
 * so an evaluation that triggers blocks there with its periods locked FOR UPDATE and the lease row
 * FOR KEY SHARE (the fence already verified). Reads of triggers, and the renewals, pass. (A row
 * lock on the period no longer blocks anything: evaluation takes periods SKIP LOCKED.)
 */
const holdTriggersTable = (sql: Sql) => holdLock(sql, (tx) => tx`lock table triggers in share mode`);

/** Daemon backends waiting on a lock in the evaluation's `insert into triggers`. */
async function blockedEvaluations(sql: Sql): Promise<Backend[]> {
  return sql<Backend[]>`
    select pid, state, wait_event_type, query_start from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'
      and ltrim(query, E' \t\r\n') ilike 'insert into triggers%'
    order by query_start`;
}

async function backend(sql: Sql, pid: number): Promise<Backend | undefined> {
  const [row] = await sql<Backend[]>`
    select pid, state, wait_event_type, query_start from pg_stat_activity where pid = ${pid}`;
  return row;
}

async function readyz(p: DaemonProcess): Promise<{ scheduler: Record<string, unknown> }> {
  const response = await fetch(`${p.url}/readyz`);
  return (await response.json()) as { scheduler: Record<string, unknown> };
}

/** Keys of log lines with `msg` across processes, each with how often it was logged. */
function countByKey(processes: readonly DaemonProcess[], msg: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const p of processes)
    for (const line of p.logs(msg)) {
      const key = String(line.idempotency_key);
      counts[key] = (counts[key] ?? 0) + 1;
    }
  return counts;
}

/**
 * countByKey once every key has been logged: a process logs after the commit the test waited for,
 * so its line may still be in the pipe when the test reads the database.
 */
async function countWhenLogged(
  processes: readonly DaemonProcess[],
  msg: string,
  keys: readonly string[],
): Promise<Record<string, number>> {
  await waitFor(() => keys.every((k) => countByKey(processes, msg)[k] !== undefined), {
    what: `"${msg}" logged for ${keys.join(', ')}`,
  });
  return countByKey(processes, msg);
}

const once = (keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, 1]));
const tokenOf = (line: LogLine) => line.fencingToken as number;

const measured: string[] = [];
function report(line: string): void {
  measured.push(line);
  console.warn(`[lease-processes] ${line}`);
}
afterAll(() => {
  if (measured.length > 0) console.warn(`[lease-processes] summary:\n  ${measured.join('\n  ')}`);
});

/** Starts a daemon and waits until it leads; returns it with its fencing token. */
async function leader(name: string, config: Record<string, unknown>) {
  const p = await procs.spawn({ name, config });
  const token = tokenOf(await p.waitForLog(ACQUIRED, { what: `${name} to acquire the lease` }));
  await p.waitForLog('leading: evaluating everything pending');
  return { p, token };
}

/** Starts a daemon that must stay standby (another process leads). */
async function standby(name: string, config: Record<string, unknown>) {
  const p = await procs.spawn({ name, config });
  await waitFor(async () => (await readyz(p)).scheduler.role === 'standby', { what: `${name} standby` });
  expect(p.logs(ACQUIRED)).toEqual([]);
  return p;
}

describe('scheduler lease across real processes', () => {
  it('keeps the lease through a 5 s evaluation at ttl 1 s / renew 0.3 s and commits with its token', async () => {
    const s = slow;
    const { p: a, token } = await leader('slow-a', daemonConfig(s));
    await send(s, 'a', [0, 5]);
    await waitFor(
      async () => {
        const [row] = await s.db.sql`select state, dirty from periods where rollup_id = 'r' and lo = 0`;
        return row?.state === 'waiting' && row.dirty === false;
      },
      { what: 'period 0 evaluated once (waiting)' },
    );

    // The evaluation that triggers r@0 blocks on its INSERT into triggers until released: mid-
    // transaction, after locking the period and verifying the fence (see holdTriggersTable).
    const release = await holdTriggersTable(s.db.sql);
    let released = false;
    try {
      await send(s, 'a', [5, 10]);
      const [blocked] = await waitFor(
        () => blockedEvaluations(s.db.sql).then((r) => (r.length > 0 ? r : undefined)),
        {
          what: 'the evaluation to block on its trigger insert',
        },
      );
      const since = blocked!.query_start.getTime();
      const tokens = new Set<number>();
      let notLive = 0;
      // Hold until the lease has been renewed 5 s past the moment evaluation blocked.
      await waitFor(
        async () => {
          const row = (await leaseRow(s.db.sql))!;
          tokens.add(row.token);
          if (!row.live) notLive++;
          return row.renewed_at.getTime() - since >= 5000;
        },
        { timeout: 10_000, interval: 50, what: 'renewals 5 s into the blocked evaluation' },
      );
      const still = await backend(s.db.sql, blocked!.pid);
      expect(still, 'the evaluation is still blocked').toMatchObject({
        wait_event_type: 'Lock',
        query_start: blocked!.query_start,
      });
      expect([...tokens]).toEqual([token]);
      expect(notLive).toBe(0);
      expect(await s.db.sql`select * from triggers`).toHaveLength(0);
      await release();
      released = true;
      const blockedMs = Date.now() - since;

      const rows = await waitForTriggers(s.db.sql, ['r@0#1'], { delivered: true });
      expect(rows.get('r@0#1')!.lease_token).toBe(token);
      expect((await leaseRow(s.db.sql))!.token).toBe(token);
      expect(a.logs(LOST)).toEqual([]);
      expect(a.logs(ACQUIRED)).toHaveLength(1);
      expect(a.logs('triggered')).toMatchObject([{ idempotency_key: 'r@0#1', lease_token: token }]);
      expect(a.logs('scheduler pass failed')).toEqual([]);
      const { scheduler } = await readyz(a);
      expect(scheduler).toMatchObject({ role: 'leader', token, losses: 0, renewalFailures: 0 });
      expect(scheduler.renewals).toBeGreaterThanOrEqual(15);
      expect(await s.downstream.getJob('r@0#1')).toBeDefined();
      report(
        `slow evaluation: blocked ${blockedMs} ms, ${String(scheduler.renewals)} renewals, token ${token} throughout`,
      );
    } finally {
      if (!released) await release();
    }
    expect(await a.stop()).toEqual({ code: 0, signal: null });
  });

  it('kill -9 of the holder: the standby triggers the pending periods within ttl + 2 s', async () => {
    const s = crash;
    const config = daemonConfig(s);
    const { p: a, token } = await leader('kill-a', config);
    const b = await standby('kill-b', config);
    await send(s, 'a', [0, 10]);
    const before = await waitForTriggers(s.db.sql, ['r@0#1'], { delivered: true });
    expect(before.get('r@0#1')!.lease_token).toBe(token);

    const killedAt = Date.now();
    a.signal('SIGKILL');
    await send(s, 'a', [10, 20], [20, 30]); // pending for the standby
    expect(await a.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });

    const acquired = await b.waitForLog(ACQUIRED, { timeout: 10_000 });
    const rows = await waitForTriggers(s.db.sql, ['r@10#1', 'r@20#1'], { delivered: true });
    const takeoverMs = rows.get('r@10#1')!.decided_at.getTime() - killedAt;
    const acquireMs = logTime(acquired) - killedAt;
    report(
      `kill -9: lease acquired ${acquireMs} ms, first pending period decided ${takeoverMs} ms after the kill`,
    );
    expect(takeoverMs).toBeLessThan(TTL_MS + 2000);
    expect(tokenOf(acquired)).toBeGreaterThan(token);
    for (const key of ['r@10#1', 'r@20#1']) expect(rows.get(key)!.lease_token).toBe(tokenOf(acquired));
    expect(await triggerRows(s.db.sql)).toHaveLength(3);
    const all = ['r@0#1', 'r@10#1', 'r@20#1'];
    expect(await countWhenLogged([a, b], 'triggered', all)).toEqual(once(all));
    expect((await s.downstream.getJobs(['waiting'])).map((j) => j.id).sort()).toEqual([
      'r@0#1',
      'r@10#1',
      'r@20#1',
    ]);
    expect(await b.stop()).toEqual({ code: 0, signal: null });
  });

  it('SIGSTOP past the ttl: the standby takes over; after SIGCONT the old holder commits nothing', async () => {
    const s = paused;
    // `free` first: a pass evaluates rollups in order, so the holder blocked in `stuck` has not
    // evaluated `free`, and the new holder triggers `free` (and `stuck`) once it leads.
    const config = daemonConfig(s, {
      rollups: [bucket('free', 'f', QUEUE_TARGET), bucket('stuck', 's', QUEUE_TARGET)],
    });
    const { p: a, token: tokenA } = await leader('stop-a', config);
    const b = await standby('stop-b', config);
    await send(s, 's', [0, 10], [10, 15]);
    await waitForTriggers(s.db.sql, ['stuck@0#1'], { delivered: true });
    await waitFor(
      async () => {
        const [row] = await s.db.sql`select state, dirty from periods where rollup_id = 'stuck' and lo = 10`;
        return row?.state === 'waiting' && row.dirty === false;
      },
      { what: 'period stuck/10 evaluated once (waiting)' },
    );

    // The holder blocks mid-evaluation of stuck/10 (see the first test), then `free` events arrive.
    const release = await holdTriggersTable(s.db.sql);
    let released = false;
    try {
      await send(s, 's', [15, 20]);
      const [blockedA] = await waitFor(
        () => blockedEvaluations(s.db.sql).then((r) => (r.length > 0 ? r : undefined)),
        {
          what: "the holder's evaluation to block",
        },
      );
      await send(s, 'f', [0, 10], [10, 20]);
      await waitFor(
        async () => {
          // Both committed (not only the extent): a job still in the holder would stall when stopped.
          const [row] = await s.db.sql`select event_count from assets where name = 'f'`;
          return row?.event_count === 2;
        },
        { what: 'the free events ingested' },
      );
      expect(await triggerRows(s.db.sql)).toHaveLength(1);

      const stoppedAt = Date.now();
      a.signal('SIGSTOP');
      // Let the stopped holder's insert through: its transaction then sits idle, its client
      // stopped, holding stuck/10 FOR UPDATE and the lease row FOR KEY SHARE, until PostgreSQL
      // ends the session after idle_in_transaction_session_timeout (the lease ttl).
      await release();
      released = true;
      const seen: string[] = []; // the old backend's states, in order, for the report
      let fencedUntil = 0; // the last moment the old session was seen holding the lease row
      await waitFor(
        async () => {
          const askedAt = Date.now();
          const [row] = await s.db.sql<{ state: string | null; fence: boolean }[]>`
            select (select concat_ws('/', state, wait_event) from pg_stat_activity where pid = ${blockedA!.pid})
                as state,
              exists (select 1 from pg_locks where pid = ${blockedA!.pid} and granted
                and relation = 'scheduler_leases'::regclass) as fence`;
          if (row!.state && seen.at(-1) !== row!.state) seen.push(row!.state);
          if (row!.fence) fencedUntil = askedAt;
          return row!.state === null;
        },
        { timeout: 10_000, interval: 10, what: "PostgreSQL to end the stopped holder's session" },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; its backend was seen ${seen.join(' -> ')}`);
      });
      const endedMs = Date.now() - stoppedAt;

      const acquired = await b.waitForLog(ACQUIRED, { timeout: 10_000 });
      const tokenB = tokenOf(acquired);
      expect(tokenB).toBeGreaterThan(tokenA);
      // No new holder while the old one's fenced transaction was open.
      expect(logTime(acquired)).toBeGreaterThanOrEqual(fencedUntil);
      const taken = await waitForTriggers(s.db.sql, ['free@0#1', 'free@10#1', 'stuck@10#1']);
      const decidedMs = taken.get('free@0#1')!.decided_at.getTime() - stoppedAt;
      const stuckMs = taken.get('stuck@10#1')!.decided_at.getTime() - stoppedAt;
      report(
        `SIGSTOP: old session (${seen.join(' -> ')}) ended ${endedMs} ms, lease acquired ${logTime(acquired) - stoppedAt} ms, pending period decided ${decidedMs} ms (the formerly locked one ${stuckMs} ms) after the stop`,
      );
      expect(decidedMs).toBeLessThan(TTL_MS + 2000);
      for (const key of ['free@0#1', 'free@10#1', 'stuck@10#1'])
        expect(taken.get(key)!.lease_token).toBe(tokenB);

      const resumedAt = Date.now();
      a.signal('SIGCONT');
      const lost = await a.waitForLog(LOST, { what: 'the old holder to step down' });
      expect(lost.fencingToken).toBe(tokenA);
      const keys = ['free@0#1', 'free@10#1', 'stuck@0#1', 'stuck@10#1'];
      const rows = await waitForTriggers(s.db.sql, keys, { delivered: true });
      report(`SIGSTOP: old holder suspended ${resumedAt - stoppedAt} ms`);

      // Nothing with the old token after the stop; everything after it with the new one.
      const all = await triggerRows(s.db.sql);
      expect(all).toHaveLength(4);
      expect(all.filter((r) => r.lease_token === tokenA).map((r) => r.idempotency_key)).toEqual([
        'stuck@0#1',
      ]);
      expect(rows.get('stuck@0#1')!.decided_at.getTime()).toBeLessThan(stoppedAt);
      for (const key of ['free@0#1', 'free@10#1', 'stuck@10#1'])
        expect(rows.get(key)!.lease_token).toBe(tokenB);
      expect(a.logs((l) => l.msg === 'triggered' && logTime(l) >= stoppedAt)).toEqual([]);
      expect(await countWhenLogged([a, b], 'triggered', keys)).toEqual(once(keys));
      expect(await countWhenLogged([a, b], 'delivered', keys)).toEqual(once(keys));
      expect((await s.downstream.getJobs(['waiting'])).map((j) => j.id).sort()).toEqual(keys);
      expect((await readyz(a)).scheduler).toMatchObject({ role: 'standby', token: null });
      expect((await readyz(b)).scheduler).toMatchObject({ role: 'leader', token: tokenB, losses: 0 });
    } finally {
      if (a.suspended) a.signal('SIGCONT');
      if (!released) await release();
    }
    expect(await a.stop()).toEqual({ code: 0, signal: null });
    expect(await b.stop()).toEqual({ code: 0, signal: null });
  });

  it('SIGTERM: the holder exits 0, the standby takes over within about one retry period, nothing twice', async () => {
    const s = clean;
    // A long ttl: a takeover well under it can only come from the release.
    const config = daemonConfig(s, { lease: { ttl: 'PT5S', renew_every: 'PT1S', retry_every: 'PT0.2S' } });
    const { p: a, token: tokenA } = await leader('term-a', config);
    const b = await standby('term-b', config);
    const first = Array.from({ length: 10 }, (_, i): [number, number] => [i * 10, i * 10 + 10]);
    const second = Array.from({ length: 10 }, (_, i): [number, number] => [100 + i * 10, 110 + i * 10]);
    await send(s, 'a', ...first);
    await waitFor(async () => (await triggerRows(s.db.sql)).length > 0, { what: 'a first trigger' });

    const termAt = Date.now();
    a.signal('SIGTERM');
    await send(s, 'a', ...second);
    expect(await a.waitForExit()).toEqual({ code: 0, signal: null });
    const [release] = a.logs(RELEASED);
    expect(release).toMatchObject({ fencingToken: tokenA, released: true });
    const acquired = await b.waitForLog(ACQUIRED, { timeout: 10_000 });
    expect(tokenOf(acquired)).toBeGreaterThan(tokenA);
    const handoverMs = logTime(acquired) - logTime(release!);
    report(
      `SIGTERM: released ${logTime(release!) - termAt} ms after the signal, standby acquired ${handoverMs} ms after the release (${logTime(acquired) - termAt} ms after the signal; retry_every 200 ms, ttl 5 s)`,
    );
    expect(handoverMs).toBeLessThan(200 + 800);

    const keys = [...first, ...second].map(([lo]) => `r@${lo}#1`);
    const rows = await waitForTriggers(s.db.sql, keys, { delivered: true });
    const all = await triggerRows(s.db.sql);
    expect(all).toHaveLength(20);
    expect(all.every((r) => r.generation === 1)).toBe(true);
    for (const r of rows.values()) expect([tokenA, tokenOf(acquired)]).toContain(r.lease_token);
    for (const r of all.filter((r) => r.lease_token !== tokenA))
      expect(r.decided_at.getTime()).toBeGreaterThanOrEqual(logTime(release!) - 5);
    const byA = all.filter((r) => r.lease_token === tokenA).length;
    report(`SIGTERM: ${byA} periods triggered by the old holder, ${20 - byA} by the new one`);
    expect(await countWhenLogged([a, b], 'triggered', keys)).toEqual(once(keys));
    expect(await countWhenLogged([a, b], 'delivered', keys)).toEqual(once(keys));
    expect((await s.downstream.getJobs(['waiting'])).map((j) => j.id).sort()).toEqual([...keys].sort());
    expect(a.logs(LOST)).toEqual([]);
    expect(await b.stop()).toEqual({ code: 0, signal: null });
  });

  it('SIGTERM while starting: once up, it shuts down cleanly, exits 0 and leaves no live lease', async () => {
    const s = early;
    const a = await procs.spawn({ name: 'early-a', config: daemonConfig(s), waitReady: false });
    await a.waitForLog('starting coverage-rollup');
    a.signal('SIGTERM'); // before migrations, the ingest worker and the lease have started
    expect(await a.waitForExit()).toEqual({ code: 0, signal: null });
    expect(a.logs((l) => l.level >= 50)).toEqual([]);
    expect(a.lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(['signal while starting: shutting down once started', 'listening', 'stopped']),
    );
    const row = await leaseRow(s.db.sql);
    expect(row === undefined || !row.live).toBe(true);
  });

  it('renewal failures (lease connections terminated): the holder steps down, recovers and triggers again', async () => {
    const s = renewal;
    const { p: a, token } = await leader('renew-a', daemonConfig(s));
    await send(s, 'a', [0, 10]);
    await waitForTriggers(s.db.sql, ['r@0#1'], { delivered: true });

    // Terminate the lease pool's backends until a renewal fails; idle ones just reconnect.
    const from = a.lines.length;
    let terminated = 0;
    await waitFor(
      async () => {
        const [row] = await s.db.sql<{ n: number }[]>`
          select count(*) filter (where pg_terminate_backend(pid))::int as n from pg_stat_activity
          where datname = current_database() and split_part(application_name, '@', 1) = 'coverage-rollup-lease'`;
        terminated += row!.n;
        return a.logs(LOST).length > 0;
      },
      { timeout: 15_000, interval: 2, what: 'a failed renewal' },
    );
    const lost = await a.waitForLog(LOST, { from });
    expect(lost).toMatchObject({ fencingToken: token });
    expect(lost.reason).toMatch(/^renewal failed: /); // terminated, ECONNRESET or CONNECTION_CLOSED
    const back = await a.waitForLog((l) => l.msg === ACQUIRED && tokenOf(l) > token, {
      from,
      what: 'reacquisition',
    });
    report(
      `renewal failure: ${terminated} backends terminated; lost (${String(lost.reason)}), reacquired ${logTime(back) - logTime(lost)} ms later`,
    );
    await waitFor(async () => (await readyz(a)).scheduler.role === 'leader', { what: 'leading again' });

    await send(s, 'a', [10, 20]);
    const rows = await waitForTriggers(s.db.sql, ['r@10#1'], { delivered: true });
    const current = (await leaseRow(s.db.sql))!.token;
    expect(current).toBeGreaterThan(token);
    expect(rows.get('r@0#1')!.lease_token).toBe(token);
    expect(rows.get('r@10#1')!.lease_token).toBe(current);
    expect(tokenOf(a.logs(ACQUIRED).at(-1)!)).toBe(current);
    expect(a.logs((l) => l.level >= 50)).toEqual([]);
    const stopping = Date.now();
    expect(await a.stop()).toEqual({ code: 0, signal: null });
    report(`renewal failure: shutdown afterwards took ${Date.now() - stopping} ms`);
  });

  it('killed between decision and delivery: the restarted daemon delivers with the same key, one decision', async () => {
    const s = outbox;
    const hook = await receiver();
    try {
      const config = daemonConfig(s, {
        rollups: [bucket('r', 'a', { type: 'webhook', url: hook.url, timeout: 'PT30S' })],
      });
      // The first attempt gets a 503 (recorded, retried), the second hangs until the kill.
      hook.respond = (n) => (n === 1 ? 503 : 'hang');
      const { p: a, token } = await leader('outbox-a', config);
      await send(s, 'a', [0, 10]);
      await waitFor(() => hook.requests.length >= 2, { what: 'a retried delivery in flight' });
      const [decided] = await triggerRows(s.db.sql);
      expect(decided).toMatchObject({ idempotency_key: 'r@0#1', lease_token: token, attempts: 1 });
      expect(decided!.delivered_at).toBeNull();
      expect(decided!.last_error).toMatch(/HTTP 503/);

      a.signal('SIGKILL');
      expect(await a.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });
      hook.respond = () => 200;
      const restarted = await procs.spawn({ name: 'outbox-a2', config });
      const acquired = await restarted.waitForLog(ACQUIRED);
      expect(tokenOf(acquired)).toBeGreaterThan(token);
      const delivered = await restarted.waitForLog(
        (l) => l.msg === 'delivered' && l.idempotency_key === 'r@0#1',
      );
      // The delivery line carries the decision's ids: its lease token, not the new holder's.
      expect(delivered).toMatchObject({ rollup: 'r', period: '0', generation: 1, lease_token: token });

      const rows = await triggerRows(s.db.sql);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        idempotency_key: 'r@0#1',
        lease_token: token,
        attempts: 2,
        last_error: null,
      });
      expect(rows[0]!.delivered_at).not.toBeNull();
      expect(restarted.logs('triggered')).toEqual([]);
      expect(hook.requests).toHaveLength(3);
      expect(hook.requests.map((r) => r.headers['idempotency-key'])).toEqual(['r@0#1', 'r@0#1', 'r@0#1']);
      expect(hook.requests.map((r) => r.answer)).toEqual([503, 'hang', 200]);
      for (const r of hook.requests) expect(r.body).toEqual(hook.requests[0]!.body);
      expect(hook.requests[0]!.body).toMatchObject({ idempotency_key: 'r@0#1', generation: 1 });
      expect(await restarted.stop()).toEqual({ code: 0, signal: null });
    } finally {
      await hook.close();
    }
  });
});

interface Received {
  headers: IncomingHttpHeaders;
  body: unknown;
  answer: number | 'hang';
}

/** A webhook receiver whose answer to the n-th request (from 1) the test decides; 'hang' never answers. */
async function receiver() {
  const requests: Received[] = [];
  const hanging = new Set<ServerResponse>();
  const state = {
    requests,
    url: '',
    respond: (_n: number): number | 'hang' => 200,
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = state.respond(requests.length + 1);
      requests.push({
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        answer,
      });
      if (answer === 'hang') {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'ok' : 'unavailable');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/runs`;
  return state;
}
