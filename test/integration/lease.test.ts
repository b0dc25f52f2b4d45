import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/lease/fence.js';
import { SchedulerLease } from '../../src/lease/lease.js';
import { postgresLeaseStore } from '../../src/lease/store.js';
import type { SchedulerLeaseOptions } from '../../src/lease/types.js';
import { connect } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import { createTestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const log = createLogger('silent');
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A lease on a pool of its own, told apart in pg_stat_activity by `app`. */
function makeLease(name: string, app: string, options: Partial<SchedulerLeaseOptions> = {}) {
  const sql = connect(db.url, { max: 2, applicationName: app });
  const lease = new SchedulerLease({
    store: postgresLeaseStore(sql),
    name,
    ttlMs: 1000,
    renewEveryMs: 300,
    retryEveryMs: 200,
    log,
    ...options,
  });
  const lost: string[] = [];
  lease.onLost((reason) => lost.push(reason));
  cleanups.push(async () => {
    await lease.stop();
    await sql.end({ timeout: 1 });
  });
  return { lease, lost };
}

async function row(name: string) {
  const [r] = await db.sql<{ holder: string; token: number; live: boolean }[]>`
    select holder, token, expires_at > clock_timestamp() as live from scheduler_leases where name = ${name}`;
  return r;
}

/** Holds a row lock on the lease, as a stuck or slow database would, until the returned function is called. */
async function lockLeaseRow(name: string): Promise<() => Promise<void>> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const tx = db.sql.begin(async (tx) => {
    await tx`select 1 from scheduler_leases where name = ${name} for update`;
    locked();
    await gate;
  });
  await isLocked;
  return async () => {
    release();
    await tx;
  };
}

async function waitingPid(app: string): Promise<number | undefined> {
  const [r] = await db.sql<{ pid: number }[]>`
    select pid from pg_stat_activity
    where datname = current_database() and application_name = ${app} and wait_event_type = 'Lock'`;
  return r?.pid;
}

describe('scheduler lease', () => {
  it('exactly one of two leads; stop() hands over within about one retry period, tokens increasing', async ({
    annotate,
  }) => {
    const a = makeLease('handover', 'lease-a1');
    const b = makeLease('handover', 'lease-b1');
    const both = [a.lease, b.lease];
    for (const [i, l] of both.entries())
      l.onAcquired(() => expect(both[1 - i]!.current(), 'two leaders at once').toBeNull());
    a.lease.start();
    b.lease.start();
    const first = await waitFor(() => a.lease.current() ?? b.lease.current(), { what: 'a leader' });
    const [leader, standby] = a.lease.current() ? [a.lease, b.lease] : [b.lease, a.lease];
    expect(standby.current()).toBeNull();
    expect(standby.status()).toMatchObject({ role: 'standby', token: null, instance: standby.holder });
    expect(leader.status()).toMatchObject({ role: 'leader', token: first.token, losses: 0 });
    expect(await row('handover')).toMatchObject({ holder: leader.holder, token: first.token, live: true });

    const acquired = new Promise<number>((resolve) => standby.onAcquired(() => resolve(performance.now())));
    const stoppedAt = performance.now();
    await leader.stop();
    expect(first.signal.aborted).toBe(true);
    expect(leader.status()).toMatchObject({ role: 'stopped', token: null, losses: 0 });
    const takeoverMs = (await acquired) - stoppedAt;
    await annotate(`takeover after stop(): ${takeoverMs.toFixed(0)} ms (retry_every 200 ms)`);
    expect(takeoverMs).toBeLessThan(200 + 300);
    const second = standby.current()!;
    expect(second.token).toBeGreaterThan(first.token);

    leader.start(); // back as a standby; it takes over when the other stops
    await standby.stop();
    const third = await waitFor(() => leader.current(), { what: 'the first leader back' });
    expect(third.token).toBeGreaterThan(second.token);
    expect(await row('handover')).toMatchObject({ holder: leader.holder, token: third.token, live: true });
  });

  it('keeps the lease for 5 s at ttl 1000 ms / renew 300 ms while the process does async work', async () => {
    const a = makeLease('steady', 'lease-a2');
    const b = makeLease('steady', 'lease-b2');
    a.lease.start();
    const held = await waitFor(() => a.lease.current(), { what: 'a leader' });
    b.lease.start();
    const until = performance.now() + 5000;
    let rounds = 0;
    while (performance.now() < until) {
      await db.sql`select pg_sleep(0.02)`;
      JSON.parse(JSON.stringify(Array.from({ length: 2000 }, (_, i) => ({ i }))));
      expect(a.lease.current()).toBe(held);
      expect(b.lease.current()).toBeNull();
      rounds++;
    }
    expect(rounds).toBeGreaterThan(20);
    expect(held.signal.aborted).toBe(false);
    expect(a.lost).toEqual([]);
    const status = a.lease.status();
    expect(status).toMatchObject({ role: 'leader', token: held.token, losses: 0, renewalFailures: 0 });
    expect(status.renewals).toBeGreaterThanOrEqual(12);
    expect(status.expiresInMs).toBeGreaterThan(0);
    expect(await row('steady')).toMatchObject({ holder: a.lease.holder, token: held.token, live: true });
  });

  it('steps down before the database expiry when renewals time out, then reacquires', async () => {
    const a = makeLease('stuck', 'lease-a3');
    a.lease.start();
    const held = await waitFor(() => a.lease.current(), { what: 'a leader' });
    let liveAtLoss: Promise<boolean | undefined> | undefined;
    a.lease.onLost(() => {
      liveAtLoss ??= row('stuck').then((r) => r?.live);
    });
    const unlock = await lockLeaseRow('stuck');
    await waitFor(() => a.lease.current() === null, { timeout: 2000, what: 'step-down' });
    expect(held.signal.aborted).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(a.lost[0]).toMatch(/renewal failed: lease statement timed out after 300 ms/);
    expect(await liveAtLoss).toBe(true); // stopped while the database still counted it as held
    expect(a.lease.status()).toMatchObject({ role: 'standby', losses: 1 });
    await unlock();
    const again = await waitFor(() => a.lease.current(), { timeout: 3000, what: 'reacquisition' });
    expect(again.token).toBeGreaterThan(held.token);
  });

  it('steps down at the local deadline when the process was paused, though the database still holds it', async () => {
    let pausedMs = 0;
    const a = makeLease('paused', 'lease-a4', { now: () => performance.now() + pausedMs });
    a.lease.start();
    const held = await waitFor(() => a.lease.current(), { what: 'a leader' });
    pausedMs += 1000; // as if the event loop had stood still for a whole ttl
    expect(a.lease.current()).toBeNull();
    expect(held.signal.aborted).toBe(true);
    expect(a.lost).toEqual([expect.stringMatching(/no renewal succeeded within 800 ms/)]);
    expect((await row('paused'))?.live).toBe(true);
    const again = await waitFor(() => a.lease.current(), { timeout: 3000, what: 'reacquisition' });
    expect(again.token).toBeGreaterThan(held.token);
  });

  it('steps down when its connection is terminated mid-renewal, then reacquires', async () => {
    const a = makeLease('terminated', 'lease-a5', {
      ttlMs: 4000,
      renewEveryMs: 1000,
      statementTimeoutMs: 3000,
    });
    a.lease.start();
    const held = await waitFor(() => a.lease.current(), { what: 'a leader' });
    const unlock = await lockLeaseRow('terminated');
    const pid = await waitFor(() => waitingPid('lease-a5'), { timeout: 3000, what: 'a blocked renewal' });
    await db.sql`select pg_terminate_backend(${pid})`;
    await waitFor(() => a.lease.current() === null, { timeout: 2000, what: 'step-down' });
    expect(a.lost[0]).toMatch(/renewal failed: .*(terminat|CONNECTION_CLOSED)/);
    await unlock();
    const again = await waitFor(() => a.lease.current(), { timeout: 5000, what: 'reacquisition' });
    expect(again.token).toBeGreaterThan(held.token);
  });

  it('verify() passes for the current token and throws LeaseLostError for an expired or superseded one', async () => {
    const options = { ttlMs: 10_000, renewEveryMs: 4000, retryEveryMs: 100 };
    const a = makeLease('verify', 'lease-a6', options);
    const b = makeLease('verify', 'lease-b6', options);
    a.lease.start();
    const { token } = await waitFor(() => a.lease.current(), { what: 'a leader' });
    await db.sql.begin((tx) => a.lease.verify(tx, token));

    // A paused holder: the database expired its lease, but its own deadline has not passed yet.
    await db.sql`update scheduler_leases set expires_at = clock_timestamp() where name = 'verify'`;
    expect(a.lease.current()?.token).toBe(token);
    const expired = db.sql.begin((tx) => a.lease.verify(tx, token));
    await expect(expired).rejects.toBeInstanceOf(LeaseLostError);
    await expect(expired).rejects.toThrow(/stale or expired in the database/);

    b.lease.start();
    const newer = await waitFor(() => b.lease.current(), { what: 'the standby taking over' });
    expect(newer.token).toBeGreaterThan(token);
    expect(a.lease.current()?.token).toBe(token); // still believes it leads: only the database can tell
    await expect(db.sql.begin((tx) => a.lease.verify(tx, token))).rejects.toThrow(
      /stale or expired in the database/,
    );
    await db.sql.begin((tx) => b.lease.verify(tx, newer.token));
    await expect(db.sql.begin((tx) => b.lease.verify(tx, token))).rejects.toThrow(
      /not this process's current/,
    );
  });

  it("a verified trigger transaction blocks a takeover until it commits, but not the holder's renewals", async () => {
    const a = makeLease('fence', 'lease-a7');
    const b = makeLease('fence', 'lease-b7', { retryEveryMs: 50, statementTimeoutMs: 5000 });
    a.lease.start();
    const { token } = await waitFor(() => a.lease.current(), { what: 'a leader' });
    b.lease.start();
    let commit!: () => void;
    const gate = new Promise<void>((resolve) => {
      commit = resolve;
    });
    let verified!: () => void;
    const isVerified = new Promise<void>((resolve) => {
      verified = resolve;
    });
    const trigger = db.sql.begin(async (tx) => {
      await a.lease.verify(tx, token);
      verified();
      await gate;
      return 'committed';
    });
    await isVerified;
    const renewals = a.lease.status().renewals;
    await waitFor(() => a.lease.status().renewals >= renewals + 3, { timeout: 3000, what: 'renewals' });

    await a.lease.stop(); // its release is not blocked either
    await waitFor(() => waitingPid('lease-b7'), { timeout: 3000, what: 'the standby waiting on the fence' });
    expect(b.lease.current()).toBeNull();
    expect((await row('fence'))?.token).toBe(token);
    commit();
    expect(await trigger).toBe('committed');
    const next = await waitFor(() => b.lease.current(), { timeout: 3000, what: 'the takeover' });
    // B's first acquisition waited longer than ttl - margin, so B had to assume it expired and took
    // it again: the local deadline counts from when a statement was sent.
    expect(next.token).toBeGreaterThan(token);
  });
});
