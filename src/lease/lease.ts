import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import {
  acquireLease,
  bounded,
  checkLease,
  endExpiredHolderSessions,
  releaseLease,
  renewLease,
} from '../store/lease.js';
import type { Sql, Tx } from '../store/pg/db.js';
import { INSTANCE_ID, instanceOfHolder } from '../store/pg/instance.js';
import type { Logger } from '../support/log.js';
import { type Fence, LeaseLostError } from './fence.js';
import { describeSession, type EndedSessions, endFormerHolderSessions } from './former-holder.js';
import type { LeaseStatus, SchedulerLeaseOptions } from './types.js';

interface Held {
  readonly token: number;
  readonly controller: AbortController;
  readonly view: { readonly token: number; readonly signal: AbortSignal };
  /** Monotonic time the last successful acquire or renew statement was sent. */
  sentAt: number;
  /** sentAt + ttl - margin: the database expiry is later, since the statement ran after it was sent. */
  deadline: number;
}

/**
 * The scheduler lease: one leader per name, renewed in the background, fenced by a token.
 * Lost on a failed, empty or late renewal; a clean stop() releases it so a standby takes over.
 */
export class SchedulerLease implements Fence {
  readonly holder: string;
  /** The instance id in this holder id and in this process's session names (store/pg/instance.ts). */
  readonly instance: string;
  private readonly sql: Sql;
  private readonly name: string;
  private readonly ttlMs: number;
  private readonly renewEveryMs: number;
  private readonly retryEveryMs: number;
  private readonly timeoutMs: number;
  private readonly marginMs: number;
  private readonly log: Logger;
  private readonly now: () => number;
  private running = false;
  private held: Held | null = null;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private acquireFailing = false;
  private lastError: string | null = null;
  private readonly counts = { acquisitions: 0, renewals: 0, renewalFailures: 0, losses: 0 };
  private readonly acquiredListeners = new Set<(token: number) => void>();
  private readonly lostListeners = new Set<(reason: string) => void>();
  private readonly onSessionsEnded: ((result: EndedSessions) => void) | undefined;
  /** The instance the held lease was taken from, while its sessions are watched (former-holder.ts). */
  private former: string | null = null;
  /** Sessions whose termination was refused, logged once each. */
  private readonly refusedPids = new Set<number>();
  private sweeping: Promise<void> | undefined;
  private hiddenLogged = false;

  constructor(o: SchedulerLeaseOptions) {
    this.sql = o.sql;
    this.name = o.name;
    this.ttlMs = o.ttlMs;
    this.renewEveryMs = o.renewEveryMs;
    this.retryEveryMs = o.retryEveryMs;
    this.timeoutMs = o.statementTimeoutMs ?? Math.min(o.renewEveryMs, o.ttlMs / 3);
    this.marginMs = o.safetyMarginMs ?? o.ttlMs / 5;
    this.instance = o.instanceId ?? INSTANCE_ID;
    // Random per lease: two leases of one process (tests) are two holders of one instance.
    this.holder =
      o.holderId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}@${this.instance}`;
    this.onSessionsEnded = o.onSessionsEnded;
    this.log = o.log.child({ lease: o.name });
    this.now = o.now ?? (() => performance.now());
    if (!(this.renewEveryMs > 0 && this.retryEveryMs > 0 && this.timeoutMs > 0 && this.marginMs >= 0))
      throw new RangeError('lease intervals must be positive');
    if (this.renewEveryMs >= this.ttlMs - this.marginMs)
      throw new RangeError(`lease renew_every must be well below ttl (${this.ttlMs} ms)`);
  }

  /** Starts competing for the lease: the first attempt is immediate. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops renewing and retrying; releases a held lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.inflight;
    await this.sweeping;
    const held = this.held;
    if (!held) return;
    this.stepDown(held, 'released', false);
    try {
      const rows = await bounded(this.timeoutMs, releaseLease(this.sql, this.name, this.holder, held.token));
      this.log.info({ fencingToken: held.token, released: rows.length > 0 }, 'released the scheduler lease');
    } catch (error) {
      this.log.warn({ err: error }, 'could not release the scheduler lease; it lapses at its expiry');
    }
  }

  current(): { readonly token: number; readonly signal: AbortSignal } | null {
    const held = this.held;
    if (!held) return null;
    if (this.now() >= held.deadline) {
      this.expireLocally(held);
      return null;
    }
    return held.view;
  }

  async verify(tx: Tx, token: number): Promise<void> {
    const local = this.current();
    if (local?.token !== token)
      throw new LeaseLostError(
        `scheduler lease ${this.name}: token ${token} is not this process's current lease`,
      );
    if (!(await checkLease(tx, this.name, token)))
      throw new LeaseLostError(
        `scheduler lease ${this.name}: token ${token} is stale or expired in the database`,
      );
  }

  status(): LeaseStatus {
    this.current(); // notices a passed deadline
    const held = this.held;
    return {
      name: this.name,
      instance: this.holder,
      role: held ? 'leader' : this.running ? 'standby' : 'stopped',
      token: held?.token ?? null,
      expiresInMs: held ? Math.max(0, Math.round(held.deadline - this.now())) : null,
      ...this.counts,
      lastError: this.lastError,
    };
  }

  /**
   * The instance id of the holder this process took the held lease from (another instance's),
   * else null: its sessions are the ones that may hold what this holder's passes wait on.
   */
  formerInstance(): string | null {
    return this.held ? this.former : null;
  }

  /** Called with the new token after each acquisition. Returns an unsubscribe function. */
  onAcquired(listener: (token: number) => void): () => void {
    this.acquiredListeners.add(listener);
    return () => this.acquiredListeners.delete(listener);
  }

  /** Called after each step-down (current() is already null, its signal aborted), also on stop(). */
  onLost(listener: (reason: string) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Deferred a microtask so `inflight` is set before step() runs (expireLocally() reads it).
      const run: Promise<void> = Promise.resolve()
        .then(() => this.step())
        .catch((error) => this.log.error({ err: error }, 'scheduler lease step failed'))
        .finally(() => {
          if (this.inflight === run) this.inflight = undefined;
        });
      this.inflight = run;
    }, delayMs);
  }

  private async step(): Promise<void> {
    const held = this.held && this.current() ? this.held : null;
    if (held) await this.renew(held);
    else await this.acquire();
    if (!this.running) return;
    if (this.held) this.schedule(Math.max(0, this.held.sentAt + this.renewEveryMs - this.now()));
    else this.schedule(held ? 0 : this.retryEveryMs); // just lost: try to reacquire at once
  }

  private async acquire(): Promise<void> {
    const sentAt = this.now();
    let token: number | undefined;
    let previous: string | null = null;
    try {
      [{ token, previous } = { token: undefined, previous: null }] = await bounded(
        this.timeoutMs,
        acquireLease(this.sql, this.name, this.holder, this.ttlMs),
      );
    } catch (error) {
      this.lastError = (error as Error).message;
      if (this.acquireFailing) this.log.debug({ err: error }, 'scheduler lease acquisition failed again');
      else this.log.warn({ err: error }, 'scheduler lease acquisition failed; retrying');
      this.acquireFailing = true;
      const ended = await endExpiredHolderSessions(this.sql, this.name).catch(() => 0);
      if (ended > 0)
        this.log.warn(
          { sessions: ended },
          'ended sessions of an expired former holder that blocked takeover',
        );
      return;
    }
    this.acquireFailing = false;
    if (token === undefined) return; // another holder's lease is live: stay standby
    if (!this.running) {
      await bounded(this.timeoutMs, releaseLease(this.sql, this.name, this.holder, token)).catch(() => {});
      return;
    }
    const deadline = sentAt + this.ttlMs - this.marginMs;
    if (this.now() >= deadline) {
      this.log.warn({ fencingToken: token }, 'scheduler lease acquired too late to use; retrying');
      return;
    }
    const controller = new AbortController();
    const view = Object.freeze({ token, signal: controller.signal });
    const held: Held = { token, controller, view, sentAt, deadline };
    this.held = held;
    this.counts.acquisitions++;
    this.armDeadline(held);
    const formerInstance = previous === null ? null : instanceOfHolder(previous);
    const takeover = previous !== null && previous !== this.holder && formerInstance !== this.instance;
    this.former = takeover ? formerInstance : null;
    this.refusedPids.clear();
    this.hiddenLogged = false;
    this.log.info(
      { fencingToken: token, holder: this.holder, ...(takeover ? { previous_holder: previous } : {}) },
      'acquired the scheduler lease',
    );
    // Before the first pass: it would otherwise start by waiting on what those sessions hold.
    if (takeover) await this.endFormerSessions(held);
    if (this.held !== held) return;
    this.emit(this.acquiredListeners, token);
  }

  /**
   * After a takeover, and after each renewal while the lease is held: ends the former holder's
   * sessions stuck in a transaction (former-holder.ts). A session that only gets stuck later (it
   * was still running a statement at the takeover) is found at a later renewal. Half the time the
   * former holder had no renewal: at a takeover its stuck sessions have waited at least
   * ttl - renew_every (its last renewal, then a whole ttl), while a working instance's state
   * changes within milliseconds.
   */
  private async endFormerSessions(held: Held): Promise<void> {
    const former = this.former;
    if (former === null || this.held !== held) return;
    const stuckMs = Math.max(0, (this.ttlMs - this.renewEveryMs) / 2);
    let result: EndedSessions;
    try {
      result = await endFormerHolderSessions(this.sql, former, stuckMs, this.timeoutMs);
    } catch (error) {
      this.log.warn(
        { err: error, former_instance: former },
        "could not look for the former lease holder's sessions",
      );
      return;
    }
    if (result.ended.length > 0)
      this.log.warn(
        { former_instance: former, sessions: result.ended.map((s) => describeSession(s)) },
        'ended sessions of the former lease holder stuck in a transaction',
      );
    const refused = result.refused.filter((s) => !this.refusedPids.has(s.pid));
    for (const s of refused) this.refusedPids.add(s.pid);
    if (refused.length > 0)
      this.log.error(
        { former_instance: former, sessions: refused.map((s) => describeSession(s)) },
        "permission denied to end the former lease holder's sessions stuck in a transaction: run every instance as the same role, or grant pg_signal_backend to this one (superusers' sessions only a superuser may end); until they end, passes may wait on what they hold",
      );
    if (result.hidden && !this.hiddenLogged) {
      this.hiddenLogged = true;
      this.log.error(
        { former_instance: former, sessions: result.hidden },
        "cannot see the state of the former lease holder's sessions (another role's): run every instance as the same role, or grant pg_read_all_stats and pg_signal_backend to this one; sessions it left stuck in a transaction are not ended",
      );
    }
    // Counted once each: a refused session is found again at every renewal.
    if (result.ended.length > 0 || refused.length > 0) this.onSessionsEnded?.({ ...result, refused });
  }

  private async renew(held: Held): Promise<void> {
    const sentAt = this.now();
    let ok: boolean;
    try {
      const rows = await bounded(
        this.timeoutMs,
        renewLease(this.sql, this.name, this.holder, held.token, this.ttlMs),
      );
      ok = rows.length === 1;
    } catch (error) {
      this.counts.renewalFailures++;
      this.lastError = (error as Error).message;
      this.stepDown(held, `renewal failed: ${this.lastError}`, true);
      return;
    }
    const deadline = sentAt + this.ttlMs - this.marginMs;
    if (this.held !== held || !ok || this.now() >= deadline) {
      this.counts.renewalFailures++;
      this.stepDown(
        held,
        ok ? 'renewal answered too late' : 'renewal found the lease expired or taken',
        true,
      );
      return;
    }
    this.counts.renewals++;
    held.sentAt = sentAt;
    held.deadline = deadline;
    this.armDeadline(held);
    // In the background: a slow pg_stat_activity must not delay the next renewal.
    if (this.former !== null && !this.sweeping)
      this.sweeping = this.endFormerSessions(held).finally(() => {
        this.sweeping = undefined;
      });
  }

  /** Fires at the local deadline, however busy the rest of the process is with evaluation. */
  private armDeadline(held: Held): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(
      () => {
        if (this.held !== held) return;
        if (this.now() >= held.deadline) this.expireLocally(held);
        else this.armDeadline(held);
      },
      Math.max(1, Math.ceil(held.deadline - this.now())),
    );
  }

  private expireLocally(held: Held): void {
    const limit = Math.round(this.ttlMs - this.marginMs);
    this.stepDown(held, `no renewal succeeded within ${limit} ms of sending the last one`, true);
    if (!this.inflight) this.schedule(0);
  }

  private stepDown(held: Held, reason: string, lost: boolean): void {
    if (this.held !== held) return;
    this.held = null;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    held.controller.abort(new LeaseLostError(`scheduler lease ${this.name}: ${reason}`));
    if (lost) {
      this.counts.losses++;
      this.log.warn({ fencingToken: held.token, reason }, 'lost the scheduler lease; stopped triggering');
    }
    this.emit(this.lostListeners, reason);
  }

  private emit<T>(listeners: Set<(value: T) => void>, value: T): void {
    for (const listener of listeners) {
      try {
        listener(value);
      } catch (error) {
        this.log.error({ err: error }, 'scheduler lease listener threw');
      }
    }
  }
}
