import { performance } from 'node:perf_hooks';
import { describeSession, type EndedSessions, terminate } from '../lease/former-holder.js';
import { type LeaseStore, postgresLeaseStore } from '../lease/store.js';
import type { LeaseSessionMetrics, LockBlocker } from '../metrics/lease.js';
import type { Sql } from '../store/pg/db.js';
import { SESSION_PREFIX } from '../store/pg/instance.js';
import { type LockWait, lockWaits, periodLockHolders, type SessionInfo } from '../store/pg/sessions.js';
import type { Logger } from '../support/log.js';

export interface LockWatchOptions {
  /** A pool the pass does not use (the lease's), so the look is not queued behind the wait. */
  readonly sql: Sql;
  /** application_name of the pool the passes run on (tagged with this instance's id). */
  readonly application: string;
  readonly instance: string;
  /** The instance the held lease was taken from, if any (SchedulerLease.formerInstance). */
  readonly formerInstance: () => string | null;
  /** A pass still running after this long is looked at, and again as often while it runs. */
  readonly everyMs: number;
  readonly timeoutMs: number;
  readonly log: Logger;
  readonly metrics: LeaseSessionMetrics;
  /** Told of former-holder sessions ended (or refused) because they blocked a pass. */
  readonly onSessionsEnded?: (result: EndedSessions) => void;
}

/**
 * Says what a lease holder's pass waits on when it cannot finish: each statement of its pool
 * waiting on a lock, with the sessions pg_blocking_pids names (pid, application_name, state,
 * query start), logged once per waiting statement and blocker, and counted by who blocks
 * (coverage_rollup_scheduler_lock_waits_total); coverage_rollup_scheduler_lock_wait_seconds is
 * the longest current wait. A blocker of the former lease holder's instance is ended at once: a
 * fenced holder's transaction cannot be left to hold the new holder's passes up to lock_timeout
 * and beyond (former-holder.ts).
 */
export class LockWatch {
  /** waiting pid, its statement's start and blocking pid, of waits already logged. */
  private readonly seen = new Set<string>();
  /** pid and transaction start of sessions already logged as holding skipped periods. */
  private readonly holders = new Set<string>();
  private lastSkippedLook = Number.NEGATIVE_INFINITY;
  /** Former-holder sessions PostgreSQL refused to end. */
  private readonly refused = new Set<number>();

  /** Ends sessions on the watch's own pool. */
  private readonly sessions: Pick<LeaseStore, 'terminateSession'>;

  constructor(private readonly o: LockWatchOptions) {
    this.sessions = postgresLeaseStore(o.sql);
  }

  /** Called as a pass starts; the returned function as it ends. */
  watch(): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const look = async () => {
      if (stopped) return;
      await this.look().catch((error) =>
        this.o.log.debug({ err: error }, 'could not look at what the scheduler pass waits on'),
      );
      if (!stopped) timer = setTimeout(look, this.o.everyMs);
    };
    timer = setTimeout(look, this.o.everyMs);
    return () => {
      stopped = true;
      clearTimeout(timer);
      this.o.metrics.schedulerLockWaitSeconds.set(0);
    };
  }

  /**
   * A pass found periods due that its claims skipped (FOR UPDATE SKIP LOCKED: nothing waits, so
   * look() sees nothing): names the other sessions holding locks on periods for longer than
   * everyMs, the likely holders (pg_locks shows the table, not the row), as often as everyMs.
   */
  skipped(): void {
    const now = performance.now();
    if (now - this.lastSkippedLook < this.o.everyMs) return;
    this.lastSkippedLook = now;
    void this.lookAtSkipped().catch((error) =>
      this.o.log.debug({ err: error }, 'could not look at who holds the skipped periods'),
    );
  }

  private async lookAtSkipped(): Promise<void> {
    const { sql, application, timeoutMs, everyMs, log, metrics } = this.o;
    const rows = await periodLockHolders(sql, application, everyMs, timeoutMs);
    const former = this.o.formerInstance();
    const fresh = rows.filter((r) => !this.holders.has(holderKey(r)));
    this.holders.clear();
    for (const r of rows) this.holders.add(holderKey(r));
    if (fresh.length > 0) {
      const sessions = fresh.map((r) => ({ ...describeSession(r), blocker: this.kind(r, former) }));
      for (const x of sessions) metrics.schedulerLockWaits.inc({ blocker: x.blocker, wait: 'skipped' });
      log.warn({ sessions }, 'scheduler pass skipped periods locked by another session');
    }
    await this.endFormer(rows, former, 'that held periods a scheduler pass skipped');
  }

  /** Ends the former holder's sessions among `sessions`: they hold what the leader needs. */
  private async endFormer(sessions: readonly SessionInfo[], former: string | null, why: string) {
    if (former === null) return;
    const { timeoutMs, log } = this.o;
    const theirs = [...new Map(sessions.map((r) => [r.pid, r])).values()].filter(
      (r) => this.kind(r, former) === 'former_holder' && !this.refused.has(r.pid),
    );
    if (theirs.length === 0) return;
    const result = await terminate(this.sessions, theirs, timeoutMs);
    for (const x of result.refused) this.refused.add(x.pid); // not asked (nor logged) again
    if (result.ended.length > 0)
      log.warn(
        { former_instance: former, sessions: result.ended.map((x) => describeSession(x)) },
        `ended sessions of the former lease holder ${why}`,
      );
    if (result.refused.length > 0)
      log.error(
        { former_instance: former, sessions: result.refused.map((x) => describeSession(x)) },
        `permission denied to end the former lease holder's sessions ${why}: run every instance as the same role, or grant pg_signal_backend to this one`,
      );
    if (result.ended.length > 0 || result.refused.length > 0) this.o.onSessionsEnded?.(result);
  }

  private async look(): Promise<void> {
    const { sql, application, timeoutMs, log, metrics } = this.o;
    const rows = await lockWaits(sql, application, timeoutMs);
    metrics.schedulerLockWaitSeconds.set(Math.max(0, ...rows.map((r) => r.waiting_ms)) / 1000);
    if (rows.length === 0) {
      this.seen.clear();
      return;
    }
    const former = this.o.formerInstance();
    const fresh = rows.filter((r) => !this.seen.has(key(r)));
    this.seen.clear();
    for (const r of rows) this.seen.add(key(r));
    for (const [pid, waits] of groupByWaiting(fresh)) {
      const first = waits[0]!;
      const blockers = waits.map((w) => ({ ...describeSession(w), blocker: this.kind(w, former) }));
      for (const b of blockers) metrics.schedulerLockWaits.inc({ blocker: b.blocker, wait: 'blocked' });
      log.warn(
        {
          waiting: { pid, query: first.waiting_query, waiting_ms: Math.round(first.waiting_ms) },
          blockers,
        },
        'scheduler pass waits on a lock',
      );
    }
    await this.endFormer(rows, former, 'that blocked a scheduler pass');
  }

  private kind(s: SessionInfo, former: string | null): LockBlocker {
    const instance = s.application_name.split('@')[1];
    if (instance !== undefined && instance === former) return 'former_holder';
    if (instance === this.o.instance) return 'this_instance';
    if (instance !== undefined && s.application_name.startsWith(SESSION_PREFIX)) return 'other_instance';
    return 'other_client';
  }
}

const key = (r: LockWait) => `${r.waiting_pid}:${r.waiting_since?.getTime()}:${r.pid}`;
const holderKey = (r: SessionInfo) => `${r.pid}:${r.xact_start?.getTime()}`;

function groupByWaiting(rows: readonly LockWait[]): Map<number, LockWait[]> {
  const by = new Map<number, LockWait[]>();
  for (const r of rows) by.set(r.waiting_pid, [...(by.get(r.waiting_pid) ?? []), r]);
  return by;
}
