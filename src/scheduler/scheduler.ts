import type { RollupRuntime } from '../config/rollups.js';
import type { Period } from '../core/calendar.js';
import { groupBy } from '../core/group-by.js';
import { concernsAny, EVENTS_CHANNEL } from '../index/commit.js';
import { rollupsWithNewEvents } from '../index/cursors.js';
import type { Sql } from '../index/db.js';
import { schedulerWake } from '../index/periods/reads.js';
import { insertOwed } from '../index/periods/writes.js';
import type { RedisClient } from '../ingest/redis.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { DeadlineSweep } from './deadline-sweep.js';
import { type DispatchContext, deliverDue, policyLookup } from './dispatch.js';
import { evaluatePending } from './evaluate.js';
import type { Fence } from './fence.js';
import { type CheckIntervals, DEFAULT_CHECKS, followRuns } from './follow-runs.js';
import { syncRollups } from './rollup-store.js';
import { Targets } from './targets/index.js';
import { redactTarget } from './targets/secrets.js';
import { markTouchedPeriods } from './touch.js';

export interface SchedulerOptions {
  readonly sql: Sql;
  readonly redis: RedisClient;
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
  /** How often targets are asked about open and recently finished runs. */
  readonly runChecks?: CheckIntervals;
}

const TOUCH_BATCH = 5000;
/** Small enough that a fresh period never waits long behind the transaction in flight. */
const EVALUATE_BATCH = 200;
const FRESH_BATCH = 20;
/** Owed deadline triggers given a row per pass (all rollups together), each rollup's newest first. */
const CATCH_UP_BATCH = 1000;
/** Bounded work per pass so a backlog never starves the lease's view of the event loop. */
const MAX_ROUNDS = 20;
const SKIPPED_RETRY_MS = 1000;
/** Every upstream cursor is compared with its log this often, in case a notification was lost. */
const FULL_CHECK_MS = 60_000;

/**
 * The lease holder's loop: woken by committed events (LISTEN), by its own timers (settle,
 * deadline, retries) and on acquiring the lease, it marks touched periods, evaluates them newest
 * first across every rollup, commits decisions and delivers them. It does nothing while not
 * leading. Periods are sparse (SPEC §10): nothing is done for a period nothing happened to, so an
 * idle pass costs a handful of rows however many rollups and periods there are.
 */
export class Scheduler {
  private readonly targets: Targets;
  private readonly byId: ReadonlyMap<string, RollupRuntime>;
  private readonly byUpstream: ReadonlyMap<string, RollupRuntime[]>;
  private running = false;
  private wake: (() => void) | undefined;
  private woken = false;
  private loop: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private syncedToken: number | undefined;
  /** Rollups whose upstreams have notified new events since they were last marked. */
  private readonly toMark = new Set<string>();
  private fullCheckAt = 0;
  private sweeps = new Map<string, DeadlineSweep>();
  private readonly dispatch: DispatchContext;

  constructor(private readonly options: SchedulerOptions) {
    this.targets = new Targets(
      options.redis,
      options.queuePrefix,
      options.rollups.map((r) => r.config.target),
    );
    this.byId = new Map(options.rollups.map((r) => [r.rollup.id, r]));
    this.dispatch = {
      sql: options.sql,
      targets: this.targets,
      concurrency: options.dispatchConcurrency,
      log: options.log,
      metrics: options.metrics,
      policyOf: policyLookup(new Map(options.rollups.map((r) => [r.rollup.id, r.rollup.run]))),
    };
    const pairs = options.rollups.flatMap((r) => r.rollup.upstream.map((asset) => ({ asset, r })));
    this.byUpstream = new Map(
      [...groupBy(pairs, (p) => p.asset)].map(([asset, ps]) => [asset, ps.map((p) => p.r)]),
    );
  }

  async start(): Promise<void> {
    this.running = true;
    const upstreams = new Set(this.byUpstream.keys());
    const listener = await this.options.sql.listen(
      EVENTS_CHANNEL,
      (payload) => {
        if (!concernsAny(payload, upstreams)) return;
        this.noteAssets(payload);
        this.kick();
      },
      // (Re)connected: notifications may have been missed in between.
      () => {
        this.fullCheckAt = 0;
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
  }

  private noteAssets(payload: string): void {
    let assets: unknown;
    try {
      assets = JSON.parse(payload);
    } catch {
      assets = null;
    }
    if (!Array.isArray(assets)) {
      this.fullCheckAt = 0; // a manual request or a payload too long to name its assets
      return;
    }
    for (const a of assets)
      for (const r of this.byUpstream.get(String(a)) ?? []) this.toMark.add(r.rollup.id);
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
    try {
      return await this.passWork(token, signal, work);
    } finally {
      const seconds = (performance.now() - started) / 1000;
      this.options.metrics.schedulerPassSeconds.observe({ work: work.done ? 'busy' : 'idle' }, seconds);
    }
  }

  private async passWork(token: number, signal: AbortSignal, work: { done: boolean }): Promise<number> {
    const { sql, rollups, log, metrics } = this.options;
    if (this.syncedToken !== token) {
      const specs = rollups.map((r) => ({
        rollup: r.rollup,
        spec: { ...r.config, target: redactTarget(r.config.target) },
      }));
      await syncRollups(sql, specs, log);
      this.syncedToken = token;
      this.sweeps = new Map(rollups.map((r) => [r.rollup.id, new DeadlineSweep(r.rollup)]));
      this.fullCheckAt = 0;
      log.info({ lease_token: token, rollups: rollups.length }, 'leading: evaluating everything pending');
    }
    const [clock] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
    const now = clock!.now;
    let busy = false;
    const marking = await this.markNewEvents(signal);
    if (marking.marked) work.done = true;
    if (marking.more) busy = true;
    const ctx = {
      sql,
      rollups: this.byId,
      fence: this.options.fence,
      token,
      log,
      metrics,
      idleMs: this.options.leaseTtlMs,
    };
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      // A small first batch: the newest pending periods (a fresh one among them) are decided and
      // delivered before the transactions of a backlog.
      const result = await evaluatePending(ctx, now, round === 0 ? FRESH_BATCH : EVALUATE_BATCH);
      if (result.evaluated > 0) work.done = true;
      // Deliver what was just decided before looking at more.
      if (result.triggered > 0) await deliverDue(this.dispatch, signal);
      if (!result.more) break;
      // Fresh events go before the rest of a backlog: mark them and start again from the newest.
      if (this.woken || round === MAX_ROUNDS - 1) {
        busy = true;
        break;
      }
    }
    // Deadline catch-up after the fresh work: its rows are decided on the next pass.
    const owed: Array<{ rollupId: string; period: Period }> = [];
    for (const [rollupId, sweep] of this.sweeps) {
      if (signal.aborted) return 0;
      if (sweep.wakeAt > now.getTime()) continue;
      if (owed.length >= CATCH_UP_BATCH) {
        busy = true; // the rest on the next pass, after fresher work
        break;
      }
      const swept = await sweep.run(sql, now.getTime(), CATCH_UP_BATCH - owed.length, log, metrics);
      for (const period of swept.owed) owed.push({ rollupId, period });
      if (swept.more) busy = true;
    }
    if (owed.length > 0) {
      await insertOwed(sql, owed);
      work.done = true;
      busy = true;
    }
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      const { more } = await deliverDue(this.dispatch, signal);
      if (!more) break;
      if (this.woken) {
        busy = true; // fresh events first; the rest is delivered on the next pass
        break;
      }
    }
    // Runs: timeouts, due retries and outcomes, each bounded (a retry is delivered on the next pass).
    if (!signal.aborted) {
      const runs = await followRuns(
        {
          ...this.dispatch,
          fence: this.options.fence,
          token,
          checks: this.options.runChecks ?? DEFAULT_CHECKS,
        },
        signal,
      );
      if (runs.work) work.done = true;
      if (runs.more) busy = true;
    }
    if (busy) return 0;
    let wakeAt = Number.POSITIVE_INFINITY;
    for (const sweep of this.sweeps.values()) wakeAt = Math.min(wakeAt, sweep.wakeAt);
    // Periods still pending here were locked by someone else (skipped): look again shortly.
    const due = await schedulerWake(sql, [...this.byId.keys()]);
    if (due?.skipped) wakeAt = Math.min(wakeAt, now.getTime() + SKIPPED_RETRY_MS);
    for (const at of [due?.at, due?.delivery]) if (at) wakeAt = Math.min(wakeAt, at.getTime());
    if (this.fullCheckAt > 0) wakeAt = Math.min(wakeAt, this.fullCheckAt + FULL_CHECK_MS);
    return Math.max(0, wakeAt - now.getTime());
  }

  /**
   * Marks the periods new events touched, for the rollups notified since the last pass (every
   * rollup on a full check). Says whether it marked any and whether a backlog is left.
   */
  private async markNewEvents(signal: AbortSignal): Promise<{ marked: boolean; more: boolean }> {
    const { sql, leaseTtlMs } = this.options;
    if (Date.now() - this.fullCheckAt >= FULL_CHECK_MS) {
      this.fullCheckAt = Date.now();
      for (const id of await rollupsWithNewEvents(sql, this.options.rollups)) this.toMark.add(id);
    }
    const ids = [...this.toMark];
    this.toMark.clear();
    let busy = false;
    for (const id of ids) {
      const { rollup } = this.byId.get(id)!;
      for (let round = 0; ; round++) {
        if (signal.aborted) {
          this.toMark.add(id);
          return { marked: true, more: true };
        }
        // Short reads caught up with the log as it was; anything newer has notified us again.
        if (!(await markTouchedPeriods(sql, rollup, TOUCH_BATCH, leaseTtlMs))) break;
        if (round === MAX_ROUNDS - 1) {
          this.toMark.add(id);
          busy = true;
          break;
        }
      }
    }
    return { marked: ids.length > 0, more: busy };
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
