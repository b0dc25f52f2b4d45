/**
 * The lease's state machine against a model of its store (what the statements of store/lease.ts
 * do, in the test's clock): no PostgreSQL. test/integration/lease*.test.ts run the same lease on
 * the real statements, with real sessions, locks and a terminated connection.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LeaseLostError } from '../../../src/lease/fence.js';
import type { EndedSessions } from '../../../src/lease/former-holder.js';
import { SchedulerLease } from '../../../src/lease/lease.js';
import type { LeaseStore } from '../../../src/lease/store.js';
import type { SchedulerLeaseOptions } from '../../../src/lease/types.js';
import type { Tx } from '../../../src/store/pg/db.js';
import type { SessionInfo } from '../../../src/store/pg/sessions.js';
import { createLogger } from '../../../src/support/log.js';

type Session = SessionInfo & { hidden: boolean };

/** The lease table and the database's sessions, as the statements see them. */
class ModelStore implements LeaseStore {
  readonly rows = new Map<string, { holder: string; token: number; expiresAt: number }>();
  /** Every statement fails while set: the database cannot be reached. */
  failing = false;
  sessions: Session[] = [];
  readonly refuse = new Set<number>();
  readonly terminated: number[] = [];

  constructor(private readonly clock: () => number) {}

  private live(name: string) {
    const row = this.rows.get(name);
    return row && row.expiresAt > this.clock() ? row : undefined;
  }

  private reach(): void {
    if (this.failing) throw new Error('connection refused');
  }

  async acquire(name: string, holder: string, ttlMs: number) {
    this.reach();
    const row = this.rows.get(name);
    if (this.live(name) && row!.holder !== holder) return null;
    const token = (row?.token ?? 0) + 1;
    this.rows.set(name, { holder, token, expiresAt: this.clock() + ttlMs });
    return { token, previous: row?.holder ?? null };
  }

  async renew(name: string, holder: string, token: number, ttlMs: number) {
    this.reach();
    const row = this.live(name);
    if (row?.holder !== holder || row.token !== token) return false;
    row.expiresAt = this.clock() + ttlMs;
    return true;
  }

  async release(name: string, holder: string, token: number) {
    this.reach();
    const row = this.live(name);
    if (row?.holder !== holder || row.token !== token) return false;
    row.expiresAt = this.clock();
    return true;
  }

  async check(_tx: Tx, name: string, token: number) {
    this.reach();
    return this.live(name)?.token === token;
  }

  async endExpiredHolderSessions() {
    return 0;
  }

  async stuckSessionsOf(instance: string) {
    this.reach();
    return this.sessions.filter((s) => s.application_name.split('@')[1] === instance);
  }

  async terminateSession(pid: number) {
    this.reach();
    if (this.refuse.has(pid)) throw Object.assign(new Error('permission denied'), { code: '42501' });
    this.terminated.push(pid);
    this.sessions = this.sessions.filter((s) => s.pid !== pid);
    return true;
  }
}

const session = (pid: number, instance: string): Session => ({
  pid,
  application_name: `coverage-rollup@${instance}`,
  state: 'idle in transaction',
  wait_event_type: 'Client',
  wait_event: 'ClientRead',
  xact_start: new Date(0),
  query_start: new Date(0),
  query: 'update periods set ...',
  hidden: false,
});

const TX = {} as Tx;
const log = createLogger('silent');
/** How far this process's clock jumped ahead of the timers (a paused process wakes to a later time). */
let skew = 0;
let store: ModelStore;
const leases: SchedulerLease[] = [];

beforeEach(() => {
  vi.useFakeTimers();
  skew = 0;
  store = new ModelStore(() => Date.now());
});

afterEach(async () => {
  store.failing = false;
  const stopping = Promise.all(leases.splice(0).map((l) => l.stop()));
  await vi.runAllTimersAsync();
  await stopping;
  vi.useRealTimers();
});

function makeLease(holderId: string, options: Partial<SchedulerLeaseOptions> = {}) {
  const lease = new SchedulerLease({
    store,
    name: 'scheduler',
    ttlMs: 1000,
    renewEveryMs: 300,
    retryEveryMs: 200,
    holderId,
    instanceId: holderId.split('@')[1] ?? 'i0',
    log,
    now: () => Date.now() + skew,
    ...options,
  });
  const lost: string[] = [];
  lease.onLost((reason) => lost.push(reason));
  leases.push(lease);
  return { lease, lost };
}

describe('scheduler lease, on a model of its store', () => {
  it('lets one of two lead, and the other take over with a higher token once it is released', async () => {
    const a = makeLease('a@aaaa0001');
    const b = makeLease('b@bbbb0002');
    a.lease.start();
    await vi.advanceTimersByTimeAsync(0);
    b.lease.start();
    await vi.advanceTimersByTimeAsync(2000); // renewals keep a's lease; b stays standby
    expect(a.lease.current()?.token).toBe(1);
    expect(b.lease.current()).toBeNull();
    expect(b.lease.status().role).toBe('standby');
    await a.lease.stop();
    await vi.advanceTimersByTimeAsync(200); // b's next attempt
    expect(b.lease.current()?.token).toBe(2);
    expect(a.lost).toEqual(['released']);
    expect(a.lease.status().losses).toBe(0); // a clean release is not a loss
  });

  it('steps down when a renewal fails, and takes the lease back once the store answers again', async () => {
    const a = makeLease('a@aaaa0001');
    a.lease.start();
    await vi.advanceTimersByTimeAsync(0);
    const { token, signal } = a.lease.current()!;
    store.failing = true;
    await vi.advanceTimersByTimeAsync(300);
    expect(a.lease.current()).toBeNull();
    expect(signal.aborted).toBe(true);
    expect(a.lost).toEqual(['renewal failed: connection refused']);
    store.failing = false;
    await vi.advanceTimersByTimeAsync(200);
    expect(a.lease.current()?.token).toBe(token + 1);
  });

  it('stops at its own deadline after a pause, though the store still holds its lease', async () => {
    const a = makeLease('a@aaaa0001');
    a.lease.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.lease.current()).not.toBeNull();
    skew += 900; // paused 0.9 s: past ttl - margin (800 ms) by its clock, no renewal sent
    expect(a.lease.current()).toBeNull();
    expect(store.rows.get('scheduler')!.expiresAt).toBeGreaterThan(Date.now());
    expect(a.lost).toEqual(['no renewal succeeded within 800 ms of sending the last one']);
  });

  it('verifies only the current token, and only while the store still holds it', async () => {
    const a = makeLease('a@aaaa0001');
    a.lease.start();
    await vi.advanceTimersByTimeAsync(0);
    const { token } = a.lease.current()!;
    await expect(a.lease.verify(TX, token)).resolves.toBeUndefined();
    await expect(a.lease.verify(TX, token - 1)).rejects.toThrow(LeaseLostError);
    store.rows.get('scheduler')!.token = token + 1; // taken over in the database meanwhile
    await expect(a.lease.verify(TX, token)).rejects.toThrow(/stale or expired in the database/);
  });

  it("after taking an expired lease over, ends the former instance's stuck sessions, a refused one reported once", async () => {
    store.rows.set('scheduler', { holder: 'old@f0f0f0f0', token: 4, expiresAt: Date.now() - 1 });
    store.sessions = [session(11, 'f0f0f0f0'), session(12, 'f0f0f0f0'), session(13, 'another1')];
    store.refuse.add(12);
    const reports: EndedSessions[] = [];
    const a = makeLease('a@aaaa0001', { onSessionsEnded: (r) => reports.push(r) });
    a.lease.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.lease.current()?.token).toBe(5);
    expect(a.lease.formerInstance()).toBe('f0f0f0f0');
    expect(store.terminated).toEqual([11]);
    await vi.advanceTimersByTimeAsync(1000); // renewals look again
    expect(store.terminated).toEqual([11]);
    expect(reports.map((r) => [r.ended.map((s) => s.pid), r.refused.map((s) => s.pid)])).toEqual([
      [[11], [12]],
    ]);
  });
});
