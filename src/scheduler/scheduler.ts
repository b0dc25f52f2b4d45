import { EventEmitter } from 'node:events';
import type { RollupRuntime } from '../config/rollups.js';
import type { Fence } from '../lease/fence.js';
import type { Metrics } from '../metrics/registry.js';
import type { QueueConnection } from '../queue/backend.js';
import { EVENTS_CHANNEL } from '../store/assets/commit.js';
import { schedulerWake } from '../store/periods/reads.js';
import { databaseNow, type Sql } from '../store/pg/db.js';
import { syncRollups } from '../store/rollups.js';
import type { Logger } from '../support/log.js';
import { Targets } from '../targets/index.js';
import { redactTarget } from '../targets/secrets.js';
import { catchUpDeadlines, DeadlineSweep } from './deadline-sweep.js';
import { type DispatchContext, deliverDue, policyLookup } from './dispatch.js';
import { evaluatePending } from './evaluate.js';
import { type CheckIntervals, DEFAULT_CHECKS } from './follow-runs.js';
import { MarkQueue } from './mark-queue.js';
import { Repairs } from './repairs.js';
import { RunPacing } from './run-pacing.js';
import { emitSafely, type SchedulerEvents } from './scheduler-events.js';

export interface SchedulerOptions {
  readonly sql: Sql;
  /** Where queue targets add their jobs. */
  readonly queues: QueueConnection;
  readonly queuePrefix: string;
  readonly rollups: readonly RollupRuntime[];
  readonly fence: Fence;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly dispatchConcurrency: number;
  /** The lease TTL: no scheduler transaction may sit idle longer than this. */
  readonly leaseTtlMs: number;
  /** Longest sleep between passes when nothing wakes the scheduler earlier. */
  readonly pollMs?: number;
  /**
   * The scheduler's "now", read once per pass: settle, deadlines and due times are compared with
   * it. Default: the database clock (`clock_timestamp()`), the clock `ingested_at` is written by.
   */
  readonly clock?: () => Promise<Date>;
  /** How often targets are asked about open and recently finished runs. */
  readonly runChecks?: CheckIntervals;
  /** Repair requests: how often each rollup looks for owed periods, and the budget per pass. */
  readonly repairScanMs?: number;
  readonly repairBudget?: number;
  /**
   * Looks at what a pass that runs long waits on (lock-watch.ts): watch() as it starts;
   * skipped() when due periods were skipped, locked by another session.
   */
  readonly lockWatch?: { watch(): () => void; skipped(): void };
}

/** Small enough that a fresh period never waits long behind the transaction in flight. */
const EVALUATE_BATCH = 200;
const FRESH_BATCH = 20;
/** Bounded work per pass so a backlog never starves the lease's view of the event loop. */
const MAX_ROUNDS = 20;
const SKIPPED_RETRY_MS = 1000;

/**
 * The lease holder's loop: woken by committed events (LISTEN), by its own timers (settle,
 * deadline, retries) and on acquiring the lease, it marks touched periods, evaluates them newest
 * first across every rollup, commits decisions and delivers them. It does nothing while not
 * leading. Periods are sparse: nothing is done for a period nothing happened to, so an
 * idle pass costs a handful of rows however many rollups and periods there are. It emits `pass`
 * and `decided` (scheduler-events.ts).
 */
export class Scheduler extends EventEmitter<SchedulerEvents> {
  private readonly targets: Targets;
  private readonly byId: ReadonlyMap<string, RollupRuntime>;
  private running = false;
  private wake: (() => void) | undefined;
  private woken = false;
  private loop: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private syncedToken: number | undefined;
  private readonly marks: MarkQueue;
  private sweeps = new Map<string, DeadlineSweep>();
  private readonly dispatch: DispatchContext;
  private readonly clock: () => Promise<Date>;
  private readonly pacing: RunPacing;
  private readonly repairs: Repairs;

  constructor(private readonly options: SchedulerOptions) {
    super();
    this.clock = options.clock ?? (() => databaseNow(options.sql));
    this.pacing = new RunPacing(options.sql, () => this.kick());
    this.targets = new Targets(
      options.queues,
      options.queuePrefix,
      options.rollups.map((r) => r.config.target),
      process.env,
      (runId) => this.pacing.finishedJob(runId),
    );
    this.byId = new Map(options.rollups.map((r) => [r.rollup.id, r]));
    this.dispatch = {
      sql: options.sql,
      targets: this.targets,
      concurrency: options.dispatchConcurrency,
      log: options.log,
      metrics: options.metrics,
      policyOf: policyLookup(new Map(options.rollups.map((r) => [r.rollup.id, r.rollup.run]))),
      targetTypeOf: (id) => this.byId.get(id)?.config.target.type,
    };
    this.marks = new MarkQueue(options.rollups);
    this.repairs = new Repairs({
      ...options,
      ...(options.repairScanMs === undefined ? {} : { scanMs: options.repairScanMs }),
      ...(options.repairBudget === undefined ? {} : { budget: options.repairBudget }),
    });
  }

  async start(): Promise<void> {
    this.running = true;
    const listener = await this.options.sql.listen(
      EVENTS_CHANNEL,
      (payload) => {
        this.repairs.note(payload);
        if (this.marks.note(payload)) this.kick();
      },
      // (Re)connected: notifications may have been missed in between.
      () => {
        this.marks.checkAll();
        this.repairs.checkAll();
        this.kick();
      },
    );
    this.unlisten = () => listener.unlisten();
    this.loop = this.run();
  }

  /** Run a pass as soon as possible (new events, lease acquired, manual trigger). */
  kick(): void {
    this.woken = true;
    this.wake?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.kick();
    await this.loop;
    await this.unlisten?.().catch(() => {});
    await this.targets.close();
    await this.repairs.close();
  }

  private async run(): Promise<void> {
    const { log } = this.options;
    let failures = 0;
    while (this.running) {
      let sleepMs = this.options.pollMs ?? 5000;
      const lead = this.options.fence.current();
      if (lead) {
        try {
          sleepMs = Math.min(sleepMs, await this.pass(lead.token, lead.signal));
          failures = 0;
        } catch (error) {
          failures++;
          sleepMs = Math.min(sleepMs, 100 * 2 ** Math.min(failures, 6));
          if (!lead.signal.aborted) log.warn({ err: error, retry_in_ms: sleepMs }, 'scheduler pass failed');
        }
      }
      await this.sleep(sleepMs);
    }
  }

  /** One pass, timed; returns how long it may sleep before the next. */
  private async pass(token: number, signal: AbortSignal): Promise<number> {
    const started = performance.now();
    const work = { done: false };
    const unwatch = this.options.lockWatch?.watch();
    try {
      return await this.passWork(token, signal, work);
    } finally {
      unwatch?.();
      const seconds = (performance.now() - started) / 1000;
      this.options.metrics.schedulerPassSeconds.observe({ work: work.done ? 'busy' : 'idle' }, seconds);
    }
  }

  /** The steps of one pass, freshest work first; returns how long it may sleep before the next. */
  private async passWork(token: number, signal: AbortSignal, work: { done: boolean }): Promise<number> {
    const { sql, log, metrics, leaseTtlMs } = this.options;
    await this.syncOnNewLease(token);
    const now = await this.clock();
    // `work.done` as each step ends, so a pass that fails half-way is still timed as busy.
    const marking = await this.marks.mark(sql, signal, now, leaseTtlMs);
    work.done ||= marking.marked;
    const fresh = await this.evaluateFresh(token, signal, now);
    work.done ||= fresh.evaluated > 0;
    const owed = await catchUpDeadlines(sql, this.sweeps, now, signal, log, metrics);
    if (owed === null) return 0; // lease lost mid-sweep
    work.done ||= owed.inserted > 0;
    const delivery = await this.deliverBacklog(token, signal);
    const repairs = await this.repairs.step(token, signal, now);
    work.done ||= repairs.work;
    const behind = marking.more || fresh.busy || owed.busy || delivery.busy || repairs.busy;
    const runs = await this.followRuns(token, signal, behind);
    work.done = marking.marked || fresh.evaluated > 0 || owed.inserted > 0 || runs.work || repairs.work;
    const busy = marking.more || fresh.busy || owed.busy || delivery.busy || repairs.busy || runs.more;
    const sleepMs = busy ? 0 : await this.untilNextWork(now);
    this.announce('pass', {
      token,
      now,
      marked: marking.marked,
      evaluated: fresh.evaluated,
      triggered: fresh.triggered,
      owed: owed.inserted,
      busy,
      sleepMs,
    });
    return sleepMs;
  }

  /** On a new lease: records every rollup's definition and starts the deadline sweeps afresh. */
  private async syncOnNewLease(token: number): Promise<void> {
    if (this.syncedToken === token) return;
    const { sql, rollups, log } = this.options;
    const specs = rollups.map((r) => ({
      rollup: r.rollup,
      spec: {
        ...r.config,
        target: redactTarget(r.config.target),
        ...(r.config.repair
          ? { repair: { ...r.config.repair, target: redactTarget(r.config.repair.target) } }
          : {}),
      },
    }));
    await syncRollups(sql, specs, log);
    this.syncedToken = token;
    // Only rollups with a deadline have anything to sweep; the pass runs and sleeps by these.
    this.sweeps = new Map(
      rollups
        .filter((r) => r.rollup.policy.deadlineMs !== undefined)
        .map((r) => [r.rollup.id, new DeadlineSweep(r.rollup)]),
    );
    this.repairs.reset();
    this.marks.checkAll();
    log.info({ lease_token: token, rollups: rollups.length }, 'leading: evaluating everything pending');
  }

  /**
   * Evaluates pending periods newest first, delivering what each round decided before the next.
   * Busy when a backlog is left or fresh events arrived meanwhile (they go first, next pass).
   */
  private async evaluateFresh(
    token: number,
    signal: AbortSignal,
    now: Date,
  ): Promise<{ evaluated: number; triggered: number; busy: boolean }> {
    const { sql, log, metrics } = this.options;
    const ctx = {
      sql,
      rollups: this.byId,
      fence: this.options.fence,
      token,
      log,
      metrics,
      idleMs: this.options.leaseTtlMs,
      onDecided: (event: SchedulerEvents['decided'][0]) => {
        this.repairs.decided(event.rollup, event.lo, event.state);
        this.announce('decided', event);
      },
    };
    let evaluated = 0;
    let triggered = 0;
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      // A small first batch: the newest pending periods (a fresh one among them) are decided and
      // delivered before the transactions of a backlog.
      const result = await evaluatePending(ctx, now, round === 0 ? FRESH_BATCH : EVALUATE_BATCH);
      evaluated += result.evaluated;
      triggered += result.triggered;
      // Deliver what was just decided before looking at more.
      if (result.triggered > 0) await deliverDue(this.dispatch, signal);
      if (!result.more) break;
      await this.followRuns(token, signal, true);
      // Fresh events go before the rest of a backlog: mark them and start again from the newest.
      if (this.woken || round === MAX_ROUNDS - 1) return { evaluated, triggered, busy: true };
    }
    return { evaluated, triggered, busy: false };
  }

  /** Delivers what is due (retries, checks, a backlog), yielding to fresh events. */
  private async deliverBacklog(token: number, signal: AbortSignal): Promise<{ busy: boolean }> {
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      const { more } = await deliverDue(this.dispatch, signal);
      if (!more) break;
      await this.followRuns(token, signal, true);
      if (this.woken) return { busy: true }; // fresh events first; the rest on the next pass
    }
    return { busy: false };
  }

  private followRuns(token: number, signal: AbortSignal, behind: boolean) {
    const { fence, runChecks: checks = DEFAULT_CHECKS } = this.options;
    const rollupOf = (id: string) => this.byId.get(id)?.rollup;
    // A decision waits for the run step of the pass it arrives in: checks stop early for it.
    const yieldTo = () => this.woken;
    return this.pacing.follow({ ...this.dispatch, fence, token, rollupOf, checks, yieldTo }, signal, behind);
  }

  /** How long nothing is due: the sweeps, due periods, run work and the next full check. */
  private async untilNextWork(now: Date): Promise<number> {
    let wakeAt = Number.POSITIVE_INFINITY;
    for (const sweep of this.sweeps.values()) wakeAt = Math.min(wakeAt, sweep.wakeAt);
    // Periods still pending here were locked by someone else (skipped): look again shortly.
    const due = await schedulerWake(this.options.sql, [...this.byId.keys()]);
    if (due?.skipped) {
      wakeAt = Math.min(wakeAt, now.getTime() + SKIPPED_RETRY_MS);
      this.options.lockWatch?.skipped();
    }
    for (const at of [due?.at, due?.delivery]) if (at) wakeAt = Math.min(wakeAt, at.getTime());
    wakeAt = Math.min(wakeAt, this.marks.nextFullCheckAt(), this.repairs.wakeAt());
    return Math.max(0, wakeAt - now.getTime());
  }

  private announce<K extends keyof SchedulerEvents>(name: K, ...args: SchedulerEvents[K]): void {
    emitSafely(this, this.options.log, name, ...args);
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || !this.running) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wake = undefined;
        self.woken = false;
        resolve();
      }
      this.wake = done;
    });
  }
}
