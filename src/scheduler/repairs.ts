/**
 * The repair step of a scheduler pass, lease holder only, in three phases:
 * - scan (repair-scan.ts): owed periods of the rollups with `repair:` get requests, newest first,
 *   at most REPAIR_BUDGET per pass, fenced by the lease token; a rollup scans when a period of it
 *   passes `after`, when its upstreams have new events, on a new lease and every 10 minutes (once
 *   all its periods were planned, only if its upstreams' last_seq moved, and then from scratch, or
 *   else only the periods newly past `after`);
 * - follow (repair-follow.ts): the active requests a pass learnt something about (due, new events
 *   on their asset, a waiting period decided) are repaired, cancelled, re-sent or abandoned;
 * - deliver (repair-deliver.ts): attempts not yet delivered go to their target.
 * A pass with nothing due pays one probe (store/repairs/attempts.ts repairWork), however many are open.
 */
import type { RollupRuntime } from '../config/rollups.js';
import type { Fence } from '../lease/fence.js';
import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import { repairWork } from '../store/repairs/attempts.js';
import type { Logger } from '../support/log.js';
import type { Targets } from '../targets/targets.js';
import { deliverAttempts } from './repair-deliver.js';
import { FollowWatch, followRequests } from './repair-follow.js';
import { RepairScan } from './repair-scan.js';

/** New requests per pass, all rollups together, newest period first. */
export const REPAIR_BUDGET = 100;

export interface RepairOptions {
  readonly sql: Sql;
  /** Where attempts are delivered (the scheduler's targets, which it closes). */
  readonly targets: Targets;
  /** The rollups in the catalog by id: the scheduler's map, which it keeps current. */
  readonly byId: ReadonlyMap<string, RollupRuntime>;
  readonly fence: Fence;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** How soon a rollup whose upstreams have new events looks for owed periods again (default 15 s). */
  readonly scanMs?: number;
  /** New requests per pass (default REPAIR_BUDGET). */
  readonly budget?: number;
}

const never = { delivered: 0, tried: 0, more: false };

export class Repairs {
  private readonly byId: ReadonlyMap<string, RollupRuntime>;
  private readonly scans: RepairScan;
  private readonly watch = new FollowWatch();
  /** When an attempt or a delivery is next due, from the last step (epoch ms). */
  private dueAt = 0;

  constructor(private readonly options: RepairOptions) {
    this.byId = options.byId;
    this.scans = new RepairScan({
      ...options,
      byId: this.byId,
      scanMs: options.scanMs ?? 15_000,
      budget: options.budget ?? REPAIR_BUDGET,
    });
  }

  /** The catalog changed (the byId map given holds it now): `fresh` rollups scan again from scratch. */
  replace(fresh: readonly string[]): void {
    this.scans.replace(fresh);
  }

  /** A new lease: every rollup scans at once, from its newest periods; every request is looked at. */
  reset(): void {
    this.scans.reset();
    this.watch.all();
  }

  /** A commit notification's assets ('any': all): the requests on them get a look, their rollups a scan. */
  note(assets: readonly string[] | 'any'): void {
    this.watch.note(assets);
    this.scans.note(assets);
  }

  /** Notifications may have been missed (the listener reconnected): look at every request and rollup. */
  checkAll(): void {
    this.watch.all();
    this.scans.wake();
  }

  /** A period the evaluation committed: decided otherwise, it no longer waits on its requests. */
  decided(rollupId: string, lo: number, state: string): void {
    this.watch.noteDecided(rollupId, lo, state);
  }

  /** One pass's repair work; busy when more is owed now than this pass did. */
  async step(token: number, signal: AbortSignal, now: Date): Promise<{ work: boolean; busy: boolean }> {
    const { sql, fence, log, metrics } = this.options;
    const scanned = signal.aborted ? { made: 0, busy: false } : await this.scans.scan(token, now);
    if (signal.aborted) return { work: scanned.made > 0, busy: scanned.busy };
    const nowMs = now.getTime();
    // One probe: is anything open, and when are a delivery and a next attempt due.
    let pending = await repairWork(sql);
    const focus = this.watch.take(nowMs, pending.active, pending.nextAt);
    let followed = { changed: 0, resent: 0, more: false };
    if (focus !== null) {
      followed = await followRequests({ sql, fence, log, metrics, byId: this.byId }, token, now, focus);
      if (followed.more) this.watch.putBack(focus);
    }
    const due = (pending.deliveryAt !== null && pending.deliveryAt.getTime() <= nowMs) || followed.resent > 0;
    const delivered = due && !signal.aborted ? await deliverAttempts(this.options, signal, now) : never;
    if (followed.changed > 0 || delivered.tried > 0) pending = await repairWork(sql);
    this.dueAt = Math.min(
      pending.deliveryAt?.getTime() ?? Number.POSITIVE_INFINITY,
      pending.nextAt?.getTime() ?? Number.POSITIVE_INFINITY,
    );
    return {
      work: scanned.made > 0 || followed.changed > 0 || delivered.delivered > 0,
      busy: scanned.busy || followed.more || delivered.more,
    };
  }

  /** When repair work is next due (epoch ms), as the last step left it. */
  wakeAt(): number {
    return Math.min(this.dueAt, this.scans.wakeAt(), this.watch.nextFullAt());
  }
}
