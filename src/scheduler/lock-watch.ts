import type { Sql } from '../index/db.js';
import { SESSION_PREFIX } from '../index/instance.js';
import type { Logger } from '../log.js';
import type { LeaseSessionMetrics, LockBlocker } from '../metrics-lease.js';
import { describeSession, type EndedSessions, type SessionInfo, terminate } from './former-holder.js';
import { bounded } from './lease-sql.js';

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

interface WaitRow extends SessionInfo {
  readonly waiting_pid: number;
  readonly waiting_query: string;
  readonly waiting_since: Date;
  readonly waiting_ms: number;
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

  constructor(private readonly o: LockWatchOptions) {}

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

  private async look(): Promise<void> {
    const { sql, application, timeoutMs, log, metrics } = this.o;
    const rows = await bounded(
      timeoutMs,
      sql<WaitRow[]>`
        select w.pid as waiting_pid, left(w.query, 200) as waiting_query,
          w.query_start as waiting_since,
          (extract(epoch from clock_timestamp() - w.state_change) * 1000)::float8 as waiting_ms,
          b.pid, b.application_name, b.state, b.wait_event_type, b.wait_event, b.xact_start,
          b.query_start, left(b.query, 200) as query
        from pg_stat_activity w
        cross join lateral unnest(pg_blocking_pids(w.pid)) as blocker(pid)
        join pg_stat_activity b on b.pid = blocker.pid
        where w.datname = current_database() and w.application_name = ${application}
          and w.wait_event_type = 'Lock'
        order by w.pid, b.pid`,
    );
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
      for (const b of blockers) metrics.schedulerLockWaits.inc({ blocker: b.blocker });
      log.warn(
        {
          waiting: { pid, query: first.waiting_query, waiting_ms: Math.round(first.waiting_ms) },
          blockers,
        },
        'scheduler pass waits on a lock',
      );
    }
    if (former === null) return;
    const theirs = uniqueByPid(rows.filter((r) => this.kind(r, former) === 'former_holder'));
    if (theirs.length === 0) return;
    const result = await terminate(sql, theirs, timeoutMs);
    if (result.ended.length > 0)
      log.warn(
        { former_instance: former, sessions: result.ended.map((s) => describeSession(s)) },
        'ended sessions of the former lease holder that blocked a scheduler pass',
      );
    if (result.refused.length > 0)
      log.error(
        { former_instance: former, sessions: result.refused.map((s) => describeSession(s)) },
        "permission denied to end the former lease holder's sessions that block a scheduler pass: run every instance as the same role, or grant pg_signal_backend to this one",
      );
    if (result.ended.length > 0 || result.refused.length > 0) this.o.onSessionsEnded?.(result);
  }

  private kind(s: SessionInfo, former: string | null): LockBlocker {
    const instance = s.application_name.split('@')[1];
    if (instance !== undefined && instance === former) return 'former_holder';
    if (instance === this.o.instance) return 'this_instance';
    if (instance !== undefined && s.application_name.startsWith(SESSION_PREFIX)) return 'other_instance';
    return 'other_client';
  }
}

const key = (r: WaitRow) => `${r.waiting_pid}:${r.waiting_since?.getTime()}:${r.pid}`;

function groupByWaiting(rows: readonly WaitRow[]): Map<number, WaitRow[]> {
  const by = new Map<number, WaitRow[]>();
  for (const r of rows) by.set(r.waiting_pid, [...(by.get(r.waiting_pid) ?? []), r]);
  return by;
}

function uniqueByPid(rows: readonly WaitRow[]): WaitRow[] {
  return [...new Map(rows.map((r) => [r.pid, r])).values()];
}
