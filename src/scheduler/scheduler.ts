import type { Redis } from 'ioredis';
import type { RollupConfig } from '../config.js';
import type { Rollup } from '../core/rollup.js';
import { concernsAny, EVENTS_CHANNEL } from '../index/commit.js';
import type { Sql } from '../index/db.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { deliverDue, nextDeliverySql } from './dispatch.js';
import { evaluatePeriods } from './evaluate.js';
import type { Fence } from './fence.js';
import { materializePeriods, syncRollup } from './rollup-store.js';
import { Targets } from './targets/index.js';
import { redactTarget } from './targets/secrets.js';
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
  /** Per rollup, how far periods are known to exist; forgotten on every new lease token. */
  private readonly materializedUntil = new Map<string, number>();
  private lastGauge = 0;

  constructor(private readonly options: SchedulerOptions) {
    this.targets = new Targets(
      options.redis,
      options.queuePrefix,
      options.rollups.map((r) => r.config.target),
    );
  }

  async start(): Promise<void> {
    this.running = true;
    const upstreams = new Set(this.options.rollups.flatMap((r) => r.rollup.upstream));
    const listener = await this.options.sql.listen(EVENTS_CHANNEL, (payload) => {
      if (concernsAny(payload, upstreams)) this.kick();
    });
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
      for (const r of rollups)
        await syncRollup(sql, r.rollup, { ...r.config, target: redactTarget(r.config.target) }, log);
      this.syncedToken = token;
      this.materializedUntil.clear();
      log.info({ lease_token: token, rollups: rollups.length }, 'leading: evaluating everything pending');
    }
    const [clock] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
    const now = clock!.now;
    const nowMicros = now.getTime() * 1000;
    let busy = false;
    let wakeAt = Number.POSITIVE_INFINITY;
    // An idle pass must stay cheap however many rollups there are: only rollups whose upstreams
    // have new events are marked, and only those with periods that need it are evaluated.
    const touched = await rollupsWithNewEvents(sql, rollups);
    for (const { rollup } of rollups) {
      if (signal.aborted) return 0;
      if (rollup.domain === 'time')
        wakeAt = Math.min(wakeAt, rollup.calendar.periodContaining(nowMicros).end / 1000);
      const until =
        rollup.domain === 'time'
          ? rollup.calendar.periodContaining(nowMicros).end
          : await coveredUntil(sql, rollup);
      if ((this.materializedUntil.get(rollup.id) ?? Number.NEGATIVE_INFINITY) < until) {
        const made = await materializePeriods(sql, rollup, until, MATERIALIZE_BATCH);
        if (made === MATERIALIZE_BATCH) busy = true;
        else this.materializedUntil.set(rollup.id, until);
      }
      if (!touched.has(rollup.id)) continue;
      for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
        // Short reads caught up with the log as it was; anything newer has woken us again.
        if (!(await markTouchedPeriods(sql, rollup, TOUCH_BATCH, this.options.leaseTtlMs))) break;
        if (round === MAX_ROUNDS - 1) busy = true;
      }
    }
    const pending = await rollupsToEvaluate(sql, rollups, now);
    for (const { rollup, config } of rollups) {
      if (signal.aborted) return 0;
      if (!pending.has(rollup.id)) continue;
      const ctx = {
        sql,
        rollup,
        target: redactTarget(config.target),
        fence: this.options.fence,
        token,
        log,
        metrics,
        idleMs: this.options.leaseTtlMs,
      };
      let triggered = 0;
      for (let round = 0; round < MAX_ROUNDS && !signal.aborted; round++) {
        const result = await evaluatePeriods(ctx, now, EVALUATE_BATCH);
        triggered += result.triggered;
        if (!result.more) break;
        if (round === MAX_ROUNDS - 1) busy = true;
      }
      // Deliver what was just decided before evaluating the next rollup.
      if (triggered > 0)
        await deliverDue(sql, this.targets, this.options.dispatchConcurrency, log, metrics, signal);
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
    const [due] = await sql<{ at: Date | null; delivery: Date | null; skipped: boolean }[]>`
      select (select min(due_at) from periods where due_at is not null) as at,
        (${nextDeliverySql(sql)}) as delivery,
        exists (select 1 from periods where rollup_id = any(${rollups.map((r) => r.rollup.id)}::text[])
          and (dirty or manual_requested)) as skipped`;
    if (due?.skipped) wakeAt = Math.min(wakeAt, now.getTime() + SKIPPED_RETRY_MS);
    for (const at of [due?.at, due?.delivery]) if (at) wakeAt = Math.min(wakeAt, at.getTime());
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

/** Rollups with an upstream whose event log has moved past the rollup's cursor. */
async function rollupsWithNewEvents(sql: Sql, rollups: readonly RollupRuntime[]): Promise<Set<string>> {
  const pairs = rollups.flatMap(({ rollup }) => rollup.upstream.map((asset) => [rollup.id, asset] as const));
  const rows = await sql<{ rollup_id: string }[]>`
    select distinct u.rollup_id
    from unnest(${pairs.map((p) => p[0])}::text[], ${pairs.map((p) => p[1])}::text[]) as u(rollup_id, asset)
    join assets a on a.name = u.asset
    left join rollup_cursors c on c.rollup_id = u.rollup_id and c.asset_name = u.asset
    where a.last_seq > coalesce(c.seq, 0)`;
  return new Set(rows.map((r) => r.rollup_id));
}

/** Rollups with periods that are dirty, due or manually requested. */
async function rollupsToEvaluate(
  sql: Sql,
  rollups: readonly RollupRuntime[],
  now: Date,
): Promise<Set<string>> {
  const rows = await sql<{ rollup_id: string }[]>`
    select distinct rollup_id from periods
    where rollup_id = any(${rollups.map((r) => r.rollup.id)}::text[])
      and (dirty or manual_requested or due_at <= ${now})`;
  return new Set(rows.map((r) => r.rollup_id));
}
