/**
 * Which rollups have new events to mark, and the marking itself: rollups are queued when a commit
 * notification names one of their upstreams, and all of them are checked against their logs on a
 * new lease, after a reconnect, and every FULL_CHECK_MS in case a notification was lost.
 */
import type { RollupRuntime } from '../config/rollups.js';
import { groupBy } from '../core/group-by.js';
import { concernsAny } from '../store/assets/commit.js';
import { rollupsWithNewEvents } from '../store/periods/cursors.js';
import type { Sql } from '../store/pg/db.js';
import { markTouchedPeriods } from './touch.js';

const TOUCH_BATCH = 5000;
/** Rollups marked in one transaction at most. */
const MARK_GROUP = 50;
/** Bounded work per pass so a backlog never starves the lease's view of the event loop. */
const MAX_ROUNDS = 20;
/** Every upstream cursor is compared with its log this often, in case a notification was lost. */
const FULL_CHECK_MS = 60_000;

export class MarkQueue {
  private byId: ReadonlyMap<string, RollupRuntime> = new Map();
  private byUpstream: ReadonlyMap<string, RollupRuntime[]> = new Map();
  private upstreams: ReadonlySet<string> = new Set();
  /** Rollups whose upstreams have notified new events since they were last marked. */
  private readonly toMark = new Set<string>();
  /** When every rollup was last compared with its logs (scheduler clock, ms); 0: at the next pass. */
  private fullCheckAt = 0;

  constructor(private rollups: readonly RollupRuntime[]) {
    this.use(rollups);
  }

  /**
   * The catalog changed: these rollups from now on. `fresh` (added or changed ones) are marked at
   * the next pass, from their cursors (none yet for a new one, so from the start of its logs);
   * removed ones are forgotten.
   */
  replace(rollups: readonly RollupRuntime[], fresh: readonly string[]): void {
    this.use(rollups);
    for (const id of [...this.toMark]) if (!this.byId.has(id)) this.toMark.delete(id);
    for (const id of fresh) if (this.byId.has(id)) this.toMark.add(id);
  }

  private use(rollups: readonly RollupRuntime[]): void {
    this.rollups = rollups;
    this.byId = new Map(rollups.map((r) => [r.rollup.id, r]));
    const pairs = rollups.flatMap((r) => r.rollup.upstream.map((asset) => ({ asset, r })));
    this.byUpstream = new Map(
      [...groupBy(pairs, (p) => p.asset)].map(([asset, ps]) => [asset, ps.map((p) => p.r)]),
    );
    this.upstreams = new Set(this.byUpstream.keys());
  }

  /**
   * Notes a commit notification's assets ('any': all); says whether it concerns these rollups (a
   * pass is worth it).
   */
  note(assets: readonly string[] | 'any'): boolean {
    if (!concernsAny(assets, this.upstreams)) return false;
    if (assets === 'any') {
      this.fullCheckAt = 0; // a manual request or a payload too long to name its assets
      return true;
    }
    for (const a of assets) for (const r of this.byUpstream.get(a) ?? []) this.toMark.add(r.rollup.id);
    return true;
  }

  /** Compare every rollup with its logs at the next pass (new lease, reconnect). */
  checkAll(): void {
    this.fullCheckAt = 0;
  }

  /** When the next periodic full check is due (scheduler clock, ms); never before the first. */
  nextFullCheckAt(): number {
    return this.fullCheckAt > 0 ? this.fullCheckAt + FULL_CHECK_MS : Number.POSITIVE_INFINITY;
  }

  /**
   * Marks the periods new events touched, for the rollups notified since the last pass (every
   * rollup on a full check). Says whether it marked any and whether a backlog is left.
   */
  async mark(
    sql: Sql,
    signal: AbortSignal,
    now: Date,
    leaseTtlMs: number,
  ): Promise<{ marked: boolean; more: boolean }> {
    if (now.getTime() - this.fullCheckAt >= FULL_CHECK_MS) {
      this.fullCheckAt = now.getTime();
      for (const id of await rollupsWithNewEvents(sql, this.rollups)) this.toMark.add(id);
    }
    const ids = [...this.toMark];
    this.toMark.clear();
    let busy = false;
    // Rollups marked together, MARK_GROUP per transaction (see markTouchedPeriods); those that
    // read a full batch go again, up to MAX_ROUNDS times, then wait for the next pass.
    let left = ids;
    for (let round = 0; left.length > 0; round++) {
      if (signal.aborted || round === MAX_ROUNDS) {
        for (const id of left) this.toMark.add(id);
        busy = true;
        break;
      }
      const more: string[] = [];
      for (let i = 0; i < left.length; i += MARK_GROUP) {
        const group = left.slice(i, i + MARK_GROUP);
        try {
          const marked = await markTouchedPeriods(
            sql,
            group.map((id) => this.byId.get(id)!.rollup),
            TOUCH_BATCH,
            leaseTtlMs,
          );
          more.push(...marked.more);
          // A rollup that spent its budget on a wide span goes on at the next pass: this one
          // evaluates what the others marked first.
          for (const id of marked.later) this.toMark.add(id);
          if (marked.later.length > 0) busy = true;
        } catch (error) {
          // Not marked (or not known to be): marked again on the next pass.
          for (const id of [...more, ...left.slice(i)]) this.toMark.add(id);
          throw error;
        }
      }
      // Short reads caught up with the log as it was; anything newer has notified us again.
      left = more;
    }
    return { marked: ids.length > 0, more: busy };
  }
}
