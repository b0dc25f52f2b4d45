import type { Redis } from 'ioredis';
import type { RollupConfig } from '../config.js';
import type { Rollup } from '../core/rollup.js';
import { EVENTS_CHANNEL } from '../index/commit.js';
import type { Sql } from '../index/db.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { deliverDue, nextDeliveryAt } from './dispatch.js';
import { evaluatePeriods } from './evaluate.js';
import type { Fence } from './fence.js';
import { materializePeriods, syncRollup } from './rollup-store.js';
import { Targets } from './targets/index.js';
import { markTouchedPeriods } from './touch.js';

export interface RollupRuntime {
  readonly rollup: Rollup;
  readonly config: RollupConfig;
}

export interface SchedulerOptions {
  readonly sql: Sql;
  readonly redis: Redis;
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
}

const MATERIALIZE_BATCH = 5000;
const TOUCH_BATCH = 5000;
const EVALUATE_BATCH = 500;
/** Bounded work per pass so a backlog never starves the lease's view of the event loop. */
const MAX_ROUNDS = 20;
const SKIPPED_RETRY_MS = 1000;

/**
 * The lease holder's loop: woken by committed events (LISTEN), by its own timers (settle,
 * deadline, the next period boundary, retries) and on acquiring the lease, it marks touched
 * periods, evaluates them, commits decisions and delivers them. It does nothing while not leading.
 */
export class Scheduler {
  private readonly targets: Targets;
  private running = false;
  private wake: (() => void) | undefined;
  private woken = false;
  private loop: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private syncedToken: number | undefined;
  private lastGauge = 0;

  constructor(private readonly options: SchedulerOptions) {
    this.targets = new Targets(options.redis, options.queuePrefix);
  }

  async start(): Promise<void> {
    this.running = true;
    const listener = await this.options.sql.listen(EVENTS_CHANNEL, () => this.kick());
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

  /** One pass over every rollup; returns how long it may sleep before the next. */
  private async pass(token: number, signal: AbortSignal): Promise<number> {
    const { sql, rollups, log, metrics } = this.options;
    if (this.syncedToken !== token) {
      for (const r of rollups) await syncRollup(sql, r.rollup, { ...r.config, target: r.config.target }, log);
      this.syncedToken = token;
      log.info({ lease_token: token, rollups: rollups.length }, 'leading: evaluating everything pending');
    }
    const [clock] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
    const now = clock!.now;
    const nowMicros = now.getTime() * 1000;
    let busy = false;
    let wakeAt = Number.POSITIVE_INFINITY;
    for (const { rollup, config } of rollups) {
      if (signal.aborted) return 0;
      const until =
        rollup.domain === 'time'
          ? rollup.calendar.periodContaining(nowMicros).end
          : await coveredUntil(sql, rollup);
      if (rollup.domain === 'time')
        wakeAt = Math.min(wakeAt, rollup.calendar.periodContaining(nowMicros).end / 1000);
      busy ||= (await materializePeriods(sql, rollup, until, MATERIALIZE_BATCH)) === MATERIALIZE_BATCH;
      for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
        if ((await markTouchedPeriods(sql, rollup, TOUCH_BATCH, this.options.leaseTtlMs)) === 0) break;
        if (round === MAX_ROUNDS - 1) busy = true;
      }
      const idleMs = this.options.leaseTtlMs;
      const ctx = {
        sql,
        rollup,
        target: config.target,
        fence: this.options.fence,
        token,
        log,
        metrics,
        idleMs,
      };
      for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
        const result = await evaluatePeriods(ctx, now, EVALUATE_BATCH);
        if (!result.more) break;
        if (round === MAX_ROUNDS - 1) busy = true;
      }
    }
    for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
      const { more } = await deliverDue(
        sql,
        this.targets,
        this.options.dispatchConcurrency,
        log,
        metrics,
        signal,
      );
      if (!more) break;
    }
    await this.refreshGauges();
    if (busy) return 0;
    // Periods still dirty here were locked by someone else (skipped): look again shortly.
    const [due] = await sql<{ at: Date | null; skipped: boolean }[]>`
      select (select min(due_at) from periods where due_at is not null) as at,
        exists (select 1 from periods where rollup_id = any(${rollups.map((r) => r.rollup.id)}::text[])
          and (dirty or manual_requested)) as skipped`;
    if (due?.skipped) wakeAt = Math.min(wakeAt, now.getTime() + SKIPPED_RETRY_MS);
    const delivery = await nextDeliveryAt(sql);
    for (const at of [due?.at, delivery]) if (at) wakeAt = Math.min(wakeAt, at.getTime());
    const clockNow = now.getTime();
    return Math.max(0, wakeAt - clockNow);
  }

  private async refreshGauges(): Promise<void> {
    if (Date.now() - this.lastGauge < 5000) return;
    this.lastGauge = Date.now();
    const rows = await this.options.sql<{ rollup_id: string; state: string; n: number }[]>`
      select rollup_id, state, count(*)::int as n from periods group by 1, 2`;
    this.options.metrics.periods.reset();
    for (const r of rows) this.options.metrics.periods.set({ rollup: r.rollup_id, state: r.state }, r.n);
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

/** Integer rollups have no "now": their periods run up to what the upstreams cover. */
async function coveredUntil(sql: Sql, rollup: Rollup): Promise<number> {
  const [row] = await sql<{ hi: number | null }[]>`
    select max(covered_hi) as hi from assets where name = any(${rollup.upstream as string[]}::text[])`;
  return row?.hi ?? rollup.begin;
}
