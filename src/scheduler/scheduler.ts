import { EventEmitter } from 'node:events';
import { type Catalog, type CatalogChange, catalogChange, type RollupCatalog } from '../config/catalog.js';
import type { RollupRuntime } from '../config/rollups.js';
import { DEFAULT_RUN_POLICY } from '../core/runs/runs.js';
import { type Fence, LeaseLostError } from '../lease/fence.js';
import type { Metrics, SchedulerStep } from '../metrics/registry.js';
import type { QueueConnection } from '../queue/backend.js';
import { listenForCommits } from '../store/assets/commit-listen.js';
import { schedulerWake } from '../store/periods/reads.js';
import { databaseNow, type Sql } from '../store/pg/db.js';
import { Alarm } from '../support/alarm.js';
import type { Logger } from '../support/log.js';
import { Targets } from '../targets/targets.js';
import { applyCatalogChange, liveTargets, recordRollups } from './apply-catalog.js';
import { catchUpDeadlines, DeadlineSweep } from './deadline-sweep.js';
import { type DispatchContext, deliverDue } from './dispatch.js';
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
  /** The rollups: read at each pass, a change applied before the pass's work (apply-catalog.ts). */
  readonly catalog: RollupCatalog;
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

/** What a step of a pass did (work) and whether it left work for now (busy: the next pass at once). */
interface Step {
  readonly work: boolean;
  readonly busy: boolean;
}
const IDLE: Step = { work: false, busy: false };

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
  /** The catalog's rollups by id, as this scheduler applied it (kept current by applyCatalog). */
  private readonly byId = new Map<string, RollupRuntime>();
  private applied: Catalog;
  private ids: readonly string[];
  private running = false;
  /** Ends the sleep between passes; remembers a wake-up during a pass (fresh work came meanwhile). */
  private readonly alarm = new Alarm(true);
  /** Steps that failed, with their failures in a row and when they are tried again (performance.now). */
  private readonly failing = new Map<SchedulerStep, { failures: number; retryAt: number }>();
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
    this.applied = options.catalog.current();
    const { rollups } = this.applied;
    this.targets = new Targets(
      options.queues,
      options.queuePrefix,
      liveTargets(rollups),
      process.env,
      (runId) => this.pacing.finishedJob(runId),
    );
    for (const r of rollups) this.byId.set(r.rollup.id, r);
    this.dispatch = {
      sql: options.sql,
      targets: this.targets,
      concurrency: options.dispatchConcurrency,
      log: options.log,
      metrics: options.metrics,
      policyOf: (id) => this.byId.get(id)?.rollup.run ?? DEFAULT_RUN_POLICY,
      targetTypeOf: (id) => this.byId.get(id)?.config.target.type,
      rollupOf: (id) => this.byId.get(id)?.rollup,
      rollupIds: () => this.ids,
    };
    this.ids = [...this.byId.keys()];
    this.marks = new MarkQueue(rollups);
    this.repairs = new Repairs({
      ...options,
      byId: this.byId,
      targets: this.targets,
      ...(options.repairScanMs === undefined ? {} : { scanMs: options.repairScanMs }),
      ...(options.repairBudget === undefined ? {} : { budget: options.repairBudget }),
    });
  }

  async start(): Promise<void> {
    this.running = true;
    // A changed catalog is applied by the next pass, at once.
    this.options.catalog.onChange(() => this.kick());
    this.unlisten = await listenForCommits(this.options.sql, {
      onCommit: (assets) => {
        this.repairs.note(assets);
        if (this.marks.note(assets)) this.kick();
      },
      // (Re)connected: notifications may have been missed in between.
      onConnect: () => {
        this.marks.checkAll();
        this.repairs.checkAll();
        this.kick();
      },
    });
    this.loop = this.run();
  }

  /** Run a pass as soon as possible (new events, lease acquired, manual trigger). */
  kick(): void {
    this.alarm.wake();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.kick();
    await this.loop;
    await this.unlisten?.().catch(() => {});
    await this.targets.close();
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

  /**
   * The steps of one pass, freshest work first; returns how long it may sleep before the next. A
   * step that fails is logged and counted (coverage_rollup_scheduler_step_failures_total), the
   * others still run (a failing statement of the repair step does not stop triggers), and it is
   * left out of the passes until its backoff passes, as pg-boss runs each of its phases on its own.
   * Only a lost lease ends a pass (its signal, or LeaseLostError from the fence); so does a failure
   * of what every step needs first: a new lease's rollups recorded, and the pass's clock.
   */
  private async passWork(token: number, signal: AbortSignal, work: { done: boolean }): Promise<number> {
    const { sql, log, metrics, leaseTtlMs } = this.options;
    await this.syncOnNewLease(token);
    await this.applyCatalog();
    const now = await this.clock();
    const step = async <T extends Step>(name: SchedulerStep, none: T, run: () => Promise<T>): Promise<T> => {
      const backoff = this.failing.get(name);
      // The lease is gone (the rest of the pass is not run), or the step waits out its backoff.
      if (signal.aborted || (backoff && performance.now() < backoff.retryAt)) return none;
      let result = none;
      try {
        result = await run();
        this.failing.delete(name);
      } catch (error) {
        if (signal.aborted || error instanceof LeaseLostError) throw error;
        const failures = (backoff?.failures ?? 0) + 1;
        const retryInMs = 100 * 2 ** Math.min(failures, 6);
        this.failing.set(name, { failures, retryAt: performance.now() + retryInMs });
        metrics.schedulerStepFailures.inc({ step: name });
        log.warn(
          { err: error, step: name, retry_in_ms: retryInMs },
          'scheduler pass step failed; the other steps run',
        );
      }
      // As each step ends, so a pass that ends half-way is still timed as busy.
      work.done ||= result.work;
      return result;
    };
    const marking = await step('mark', IDLE, async () => {
      const m = await this.marks.mark(sql, signal, now, leaseTtlMs);
      return { work: m.marked, busy: m.more };
    });
    const fresh = await step('evaluate', { ...IDLE, evaluated: 0, triggered: 0 }, async () => {
      const f = await this.evaluateFresh(token, signal, now);
      return { ...f, work: f.evaluated > 0 };
    });
    const owed = await step('deadlines', { ...IDLE, inserted: 0 }, async () => {
      const o = await catchUpDeadlines(sql, this.sweeps, now, signal, log, metrics);
      return o === null ? { ...IDLE, inserted: 0 } : { ...o, work: o.inserted > 0 }; // null: lease lost
    });
    const delivery = await step('deliver', IDLE, async () => ({
      ...(await this.deliverBacklog(token, signal)),
      work: false,
    }));
    const repairs = await step('repairs', IDLE, () => this.repairs.step(token, signal, now));
    const behind = [marking, fresh, owed, delivery, repairs].some((s) => s.busy);
    const runs = await step('runs', IDLE, async () => {
      const r = await this.followRuns(token, signal, behind);
      return { work: r.work, busy: r.more };
    });
    const busy = behind || runs.busy;
    // Not asked while busy (the next pass comes at once); a failed look sleeps to a step's retry or the poll.
    const next = busy
      ? { sleepMs: 0 }
      : await step('wake', { ...IDLE, sleepMs: Number.POSITIVE_INFINITY }, async () => ({
          ...IDLE,
          sleepMs: await this.untilNextWork(now),
        }));
    const retryAt = Math.min(...[...this.failing.values()].map((f) => f.retryAt));
    const sleepMs = Math.max(0, Math.min(next.sleepMs, retryAt - performance.now()));
    if (signal.aborted) return 0;
    this.announce('pass', {
      token,
      now,
      marked: marking.work,
      evaluated: fresh.evaluated,
      triggered: fresh.triggered,
      owed: owed.inserted,
      busy,
      sleepMs,
    });
    return sleepMs;
  }

  /**
   * On a new lease: records every rollup's definition, ends the runs a rollup now ending runs on
   * delivery left waiting (delivered-runs.ts), and starts the deadline sweeps afresh.
   */
  private async syncOnNewLease(token: number): Promise<void> {
    if (this.syncedToken === token) return;
    const { log } = this.options;
    // The catalog as it is now, whole: nothing is left for applyCatalog.
    const catalog = this.options.catalog.current();
    this.use(catalog, catalogChange(this.applied, catalog));
    const { rollups } = catalog;
    await recordRollups(this.dispatch, rollups);
    this.syncedToken = token;
    // Only rollups with a deadline have anything to sweep; the pass runs and sleeps by these.
    this.sweeps = new Map(
      rollups
        .filter((r) => r.rollup.policy.deadlineMs !== undefined)
        .map((r) => [r.rollup.id, new DeadlineSweep(r.rollup)]),
    );
    this.repairs.reset();
    this.failing.clear(); // a new lease tries every step at once
    this.marks.checkAll();
    this.applied = catalog;
    log.info({ lease_token: token, rollups: rollups.length }, 'leading: evaluating everything pending');
  }

  /** A catalog changed since the last pass: what changed is applied (apply-catalog.ts). */
  private async applyCatalog(): Promise<void> {
    const next = this.options.catalog.current();
    if (next === this.applied) return;
    await applyCatalogChange(this.dispatch, this.applied, next, (catalog, change) =>
      this.use(catalog, change),
    );
    this.applied = next;
  }

  /** The scheduler's view of the rollups becomes `catalog`'s; `change` says which ones are new to it. */
  private use(catalog: Catalog, change: CatalogChange): void {
    const { rollups } = catalog;
    this.byId.clear();
    for (const r of rollups) this.byId.set(r.rollup.id, r);
    this.ids = [...this.byId.keys()];
    this.targets.setLive(liveTargets(rollups));
    const fresh = [...change.added, ...change.changed];
    this.marks.replace(rollups, fresh);
    this.repairs.replace(fresh);
    for (const id of [...fresh, ...change.removed]) this.sweeps.delete(id);
    for (const id of fresh) {
      const r = this.byId.get(id)!;
      if (r.rollup.policy.deadlineMs !== undefined) this.sweeps.set(id, new DeadlineSweep(r.rollup));
    }
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
      if (this.alarm.woken || round === MAX_ROUNDS - 1) return { evaluated, triggered, busy: true };
    }
    return { evaluated, triggered, busy: false };
  }

  /** Delivers what is due (retries, checks, a backlog), yielding to fresh events. */
  private async deliverBacklog(token: number, signal: AbortSignal): Promise<{ busy: boolean }> {
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      const { more } = await deliverDue(this.dispatch, signal);
      if (!more) break;
      await this.followRuns(token, signal, true);
      if (this.alarm.woken) return { busy: true }; // fresh events first; the rest on the next pass
    }
    return { busy: false };
  }

  private followRuns(token: number, signal: AbortSignal, behind: boolean) {
    const { fence, runChecks: checks = DEFAULT_CHECKS } = this.options;
    // A decision waits for the run step of the pass it arrives in: checks stop early for it.
    const yieldTo = () => this.alarm.woken;
    return this.pacing.follow({ ...this.dispatch, fence, token, checks, yieldTo }, signal, behind);
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
    return this.running ? this.alarm.sleep(ms) : Promise.resolve();
  }
}
