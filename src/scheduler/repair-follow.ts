/**
 * The follow phase of the repair step, lease holder only: active requests are moved by
 * core/repair.ts followRequest (repaired, cancelled, a new attempt with what is still missing, or
 * abandoned) in a transaction fenced by the lease token.
 *
 * Which requests are looked at is bounded by what a pass learnt (FollowWatch), never a scan of
 * every open request each pass: those whose next attempt is due, those on assets that commit
 * notifications named since the last follow, those waited on by periods an evaluation decided.
 * Every active request is looked at on a new lease, after a reconnect of the notification
 * listener, when a notification named no assets, and every FULL_FOLLOW_MS (5 minutes) in case one
 * was lost.
 */
import type { RollupRuntime } from '../config/rollups.js';
import { piecesOf } from '../core/coverage.js';
import { derivedState } from '../core/periods.js';
import { followRequest, rangesOfPieces } from '../core/repair.js';
import { attemptPayload } from '../core/repair-payload.js';
import type { Fence } from '../lease/fence.js';
import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import {
  applyFollow,
  type FollowChange,
  type FollowedRequest,
  type FollowFocus,
  requestsToFollow,
} from '../store/repairs/follow.js';
import type { Logger } from '../support/log.js';

/** Requests followed per pass at most; the rest on the next pass. */
const FOLLOW_BATCH = 200;
/**
 * Every active request is looked at this often, whatever the notifications said: a safety net (a
 * lost notification, a waiting period missed without a row), whose one statement reads every open
 * request, so not every minute.
 */
const FULL_FOLLOW_MS = 5 * 60_000;
/** Past this many assets noted (a standby notes without following), a full look replaces them. */
const MAX_TOUCHED = 5000;

type SomeFocus = Extract<FollowFocus, { kind: 'some' }>;

/** What the passes learnt since the last follow: which requests are worth a look. */
export class FollowWatch {
  private touched = new Set<string>();
  private decided: Array<{ rollupId: string; lo: number }> = [];
  /** When every active request was last looked at (scheduler clock, ms); 0: at the next pass. */
  private fullAt = 0;
  /** Whether any request was active at the last look: only then is a periodic look worth a wake. */
  private active = false;

  /** A commit notification (store/assets/commit.ts eventsPayload): its assets, or '' for any. */
  note(payload: string): void {
    let assets: unknown;
    try {
      assets = JSON.parse(payload);
    } catch {
      assets = null;
    }
    if (!Array.isArray(assets)) this.fullAt = 0;
    else for (const a of assets) this.touched.add(String(a));
    if (this.touched.size > MAX_TOUCHED) {
      this.touched = new Set();
      this.fullAt = 0;
    }
  }

  /** A period an evaluation committed: one decided otherwise no longer waits on its requests. */
  noteDecided(rollupId: string, lo: number, state: string): void {
    if (state === 'triggered' || state === 'missed') this.decided.push({ rollupId, lo });
  }

  /** Look at every active request at the next pass (a new lease, a reconnect). */
  all(): void {
    this.fullAt = 0;
  }

  /** When the next full look is due (scheduler clock, ms). */
  nextFullAt(): number {
    return this.active && this.fullAt > 0 ? this.fullAt + FULL_FOLLOW_MS : Number.POSITIVE_INFINITY;
  }

  /**
   * What to look at now, and forget it (`putBack` when a full batch leaves some for later); null
   * when nothing is worth a look. `active`: whether any request is open or partial at all.
   */
  take(nowMs: number, active: boolean, nextAt: Date | null): FollowFocus | null {
    const some: SomeFocus = {
      kind: 'some',
      due: nextAt !== null && nextAt.getTime() <= nowMs,
      assets: [...this.touched],
      periods: this.decided,
    };
    this.touched = new Set();
    this.decided = [];
    this.active = active;
    if (nowMs - this.fullAt >= FULL_FOLLOW_MS) {
      this.fullAt = nowMs;
      return active ? { kind: 'all' } : null;
    }
    if (!active) return null;
    return some.due || some.assets.length > 0 || some.periods.length > 0 ? some : null;
  }

  /** A follow cut short by its batch: what it was given is looked at again on the next pass. */
  putBack(focus: FollowFocus): void {
    if (focus.kind === 'all') {
      this.fullAt = 0;
      return;
    }
    for (const a of focus.assets) this.touched.add(a);
    this.decided.push(...focus.periods);
  }
}

export interface FollowContext {
  readonly sql: Sql;
  readonly fence: Fence;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly byId: ReadonlyMap<string, RollupRuntime>;
}

/** Follows the requests `focus` names; `more` when the batch was full (the rest next pass). */
export async function followRequests(
  ctx: FollowContext,
  token: number,
  now: Date,
  focus: FollowFocus,
): Promise<{ changed: number; resent: number; more: boolean }> {
  const { sql, fence, log, metrics } = ctx;
  const rows = await requestsToFollow(sql, now, FOLLOW_BATCH, focus);
  if (rows.length === 0) return { changed: 0, resent: 0, more: false };
  const nowMs = now.getTime();
  const changes: Array<FollowChange & { row: FollowedRequest }> = rows.map((row) => {
    const remaining = row.ranges.flatMap((r) => {
      const inside = row.segments.filter((s) => s.end > r.start && s.start < r.end);
      return rangesOfPieces(piecesOf(r, inside));
    });
    const left = row.waiters.filter((w) => decided(ctx.byId, w, nowMs));
    const unwaited = row.rollupId !== null && left.length === row.waiters.length;
    const step = followRequest(
      {
        state: row.state,
        ranges: row.ranges,
        attempt: row.attempt,
        attempts: row.attempts,
        everyMs: row.everyMs,
        nextAt: row.nextAt.getTime(),
        unwaited,
      },
      remaining,
      nowMs,
    );
    const base = { row, id: row.id, seenSeq: row.lastSeq, leftWaiters: left, leaseToken: token };
    if (step.kind === 'final') return { ...base, state: step.state, resend: null, nextAt: null };
    const resend = step.resend
      ? {
          attempt: row.attempt + 1,
          ranges: step.ranges,
          payload: attemptPayload(row, row.id, row.attempt + 1, step.ranges, now),
        }
      : null;
    return { ...base, state: step.state, resend, nextAt: new Date(step.nextAt) };
  });
  await sql.begin(async (tx) => {
    await fence.verify(tx, token);
    await applyFollow(tx, changes, now);
  });
  let changed = 0;
  for (const c of changes) {
    if (c.state === c.row.state && c.resend === null) continue;
    changed++;
    const at = {
      repair_id: c.id,
      asset: c.row.asset,
      rollup: c.row.rollupId,
      state: c.state,
      lease_token: token,
    };
    if (c.resend)
      log.info(
        { ...at, attempt: c.resend.attempt, ranges: c.resend.ranges.length },
        'repair requested again',
      );
    else if (c.state === 'repaired') {
      metrics.repairSeconds.observe((nowMs - c.row.requestedAt.getTime()) / 1000);
      log.info(at, 'repaired');
    } else if (c.state === 'abandoned') log.warn({ ...at, attempts: c.row.attempts }, 'repair abandoned');
    else if (c.state === 'cancelled') log.info(at, 'repair cancelled: its periods were decided otherwise');
    else log.info(at, 'repair partly covered');
  }
  const resent = changes.filter((c) => c.resend !== null).length;
  return { changed, resent, more: rows.length === FOLLOW_BATCH };
}

/** A waiting period decided otherwise (triggered or missed), or of a rollup no longer configured. */
function decided(
  byId: ReadonlyMap<string, RollupRuntime>,
  w: { rollupId: string; lo: number; state: string | null },
  nowMs: number,
): boolean {
  const runtime = byId.get(w.rollupId);
  if (!runtime) return true;
  const state =
    w.state ?? derivedState(runtime.rollup, runtime.rollup.calendar.periodContaining(w.lo), nowMs);
  return state === 'triggered' || state === 'missed';
}
