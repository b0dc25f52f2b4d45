/**
 * The repair step of a scheduler pass (SPEC §15), lease holder only:
 * - scan: the rollups with `repair:` whose scan is due look at their newest periods past `after`
 *   (and one older chunk of their backlog, walking back to `begin` one scan at a time), read what
 *   their upstreams hold there, and make requests for the not-complete ranges of the periods that
 *   owe them (core/repair.ts planRepairs), newest first, at most REPAIR_BUDGET per pass, in a
 *   transaction fenced by the lease token;
 * - follow: active requests that are due, whose asset has newer events, or whose periods were
 *   decided, are moved by core/repair.ts followRequest (fenced too): repaired, cancelled, a new
 *   attempt with what is still missing, or abandoned;
 * - deliver: attempts not yet delivered go to their target, at least once under their own key.
 */
import type { RollupRuntime } from '../config/rollups.js';
import { formatPoint } from '../core/bounds.js';
import type { Period } from '../core/calendar.js';
import { piecesOf } from '../core/coverage.js';
import { normalize } from '../core/intervals.js';
import { derivedState, nextPassAt, passedBefore } from '../core/periods.js';
import type { PeriodState } from '../core/policy.js';
import {
  type CandidatePeriod,
  followRequest,
  planRepairs,
  type RepairRange,
  rangesOfPieces,
  repairOwed,
} from '../core/repair.js';
import { type RepairPayload, repairPayload } from '../core/repair-payload.js';
import type { Rollup } from '../core/rollup.js';
import type { Interval } from '../core/types.js';
import type { Sql } from '../index/db.js';
import {
  addWaiters,
  applyFollow,
  dueAttempts,
  type FollowChange,
  type FollowedRequest,
  heldRequests,
  lockRepairAssets,
  type MadeRequest,
  makeRequests,
  recordAttemptDelivery,
  repairWork,
  requestsToFollow,
  storedPeriodStates,
} from '../index/repairs.js';
import { backoffMs } from '../index/transient.js';
import { loadUpstreams } from '../index/upstreams.js';
import type { QueueConnection } from '../ingest/queue-backend.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Fence } from './fence.js';
import { RepairTargets } from './repair-targets.js';
import { redactTarget, type StoredTarget } from './targets/secrets.js';

/** New requests per pass, all rollups together, newest period first. */
export const REPAIR_BUDGET = 100;
/** Periods per scanned chunk (the newest one, and one of the backlog). */
const CHUNK = 200;
/** Rollups scanned per pass at most; the others on the next passes. */
const SCANS_PER_PASS = 20;
const FOLLOW_BATCH = 200;
const DELIVERY_BATCH = 100;
const DELIVERY_CONCURRENCY = 8;

export interface RepairOptions {
  readonly sql: Sql;
  readonly queues: QueueConnection;
  readonly queuePrefix: string;
  readonly rollups: readonly RollupRuntime[];
  readonly fence: Fence;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** How often each rollup looks for owed periods (default 15 s). */
  readonly scanMs?: number;
  /** New requests per pass (default REPAIR_BUDGET). */
  readonly budget?: number;
}

interface Scan {
  nextAt: number;
  /** Where the backlog walk continues (a period boundary); null: start again from the newest. */
  backlog: number | null;
}

export class Repairs {
  private readonly targets: RepairTargets;
  private readonly repairing: readonly RollupRuntime[];
  private readonly byId: ReadonlyMap<string, RollupRuntime>;
  private scans = new Map<string, Scan>();
  private cursor = 0;
  /** When an attempt or a delivery is next due, from the last step (epoch ms). */
  private dueAt = 0;

  constructor(private readonly options: RepairOptions) {
    const live = options.rollups.flatMap((r) => [
      r.config.target,
      ...(r.config.repair ? [r.config.repair.target] : []),
    ]);
    this.targets = new RepairTargets(options.queues, options.queuePrefix, live);
    this.repairing = options.rollups.filter((r) => r.config.repair && r.rollup.domain === 'time');
    this.byId = new Map(options.rollups.map((r) => [r.rollup.id, r]));
  }

  /** A new lease: every rollup scans at once, from its newest periods. */
  reset(): void {
    this.scans = new Map(this.repairing.map((r) => [r.rollup.id, { nextAt: 0, backlog: null }]));
  }

  /** One pass's repair work; busy when more is owed now than this pass did. */
  async step(token: number, signal: AbortSignal, now: Date): Promise<{ work: boolean; busy: boolean }> {
    const scanned = signal.aborted ? { made: 0, busy: false } : await this.scan(token, now);
    if (signal.aborted) return { work: scanned.made > 0, busy: scanned.busy };
    // Nothing open and nothing to deliver (the common case without repair:): one probe, no more.
    const pending = await repairWork(this.options.sql);
    this.dueAt = pending.wakeAt?.getTime() ?? Number.POSITIVE_INFINITY;
    if (!pending.active && pending.wakeAt === null) return { work: scanned.made > 0, busy: scanned.busy };
    const followed = await this.follow(token, now);
    const delivered = signal.aborted
      ? { delivered: 0, tried: 0, more: false }
      : await this.deliver(signal, now);
    if (followed.changed > 0 || delivered.delivered > 0 || delivered.tried > 0) {
      const after = await repairWork(this.options.sql);
      this.dueAt = after.wakeAt?.getTime() ?? Number.POSITIVE_INFINITY;
    }
    return {
      work: scanned.made > 0 || followed.changed > 0 || delivered.delivered > 0,
      busy: scanned.busy || followed.more || delivered.more,
    };
  }

  /** When repair work is next due (epoch ms), as the last step left it. */
  wakeAt(): number {
    let at = this.dueAt;
    for (const s of this.scans.values()) at = Math.min(at, s.nextAt);
    return at;
  }

  async close(): Promise<void> {
    await this.targets.close();
  }

  private async scan(token: number, now: Date): Promise<{ made: number; busy: boolean }> {
    const nowMs = now.getTime();
    const due = this.repairing.filter((r) => (this.scans.get(r.rollup.id)?.nextAt ?? 0) <= nowMs);
    if (due.length === 0) return { made: 0, busy: false };
    // Round robin over the due rollups, SCANS_PER_PASS at a time.
    const start = this.cursor % due.length;
    const picked = [...due.slice(start), ...due.slice(0, start)].slice(0, SCANS_PER_PASS);
    this.cursor += picked.length;
    const candidates: CandidatePeriod[] = [];
    const walked: Array<{ id: string; backlog: number | null }> = [];
    for (const runtime of picked) {
      const found = await this.candidatesOf(runtime, nowMs);
      candidates.push(...found.candidates);
      walked.push({ id: runtime.rollup.id, backlog: found.backlog });
    }
    const budget = this.options.budget ?? REPAIR_BUDGET;
    const made =
      candidates.length === 0 ? { made: 0, deferred: 0 } : await this.make(token, candidates, now, budget);
    const scanMs = this.options.scanMs ?? 15_000;
    for (const w of walked) {
      const scan = this.scans.get(w.id)!;
      // Cut by the budget: the same chunks again on the next pass, before anything older.
      if (made.deferred > 0) scan.nextAt = 0;
      else {
        scan.backlog = w.backlog;
        // Again when the next period passes `after`, and every scanMs at least (holes of older
        // periods: a replay requirement turns a triggered period rerun_pending at any time).
        const { rollup, config } = this.byId.get(w.id)!;
        const nextOwed = nextPassAt(rollup, nowMs, config.repair!.after);
        scan.nextAt = w.backlog === null ? Math.min(nowMs + scanMs, nextOwed) : 0;
      }
    }
    return { made: made.made, busy: made.deferred > 0 || walked.some((w) => w.backlog !== null) };
  }

  /**
   * The owed periods of one rollup in its newest chunk and its next backlog chunk, with each
   * upstream's not-complete ranges; and where its backlog walk goes on (null: done, from the top).
   */
  private async candidatesOf(
    { rollup, config }: RollupRuntime,
    nowMs: number,
  ): Promise<{ candidates: CandidatePeriod[]; backlog: number | null }> {
    const repair = config.repair!;
    const deadline = rollup.policy.deadlineMs;
    // Periods starting before `end` ended `after` ago; those before `floor` passed their deadline.
    const end = passedBefore(rollup, nowMs, repair.after);
    const floor =
      deadline === undefined ? rollup.begin : Math.max(rollup.begin, passedBefore(rollup, nowMs, deadline));
    if (end <= floor) return { candidates: [], backlog: null };
    const newest = chunkBefore(rollup, end, floor);
    const scan = this.scans.get(rollup.id)!;
    const from = scan.backlog === null ? newest.start : Math.min(scan.backlog, newest.start);
    const older = from > floor ? chunkBefore(rollup, from, floor) : null;
    const windows = older ? [older, newest] : [newest];
    const periods = windows.flatMap((w) => rollup.calendar.periodsOverlapping(w, CHUNK + 1));
    const upstreams = await loadUpstreams(this.options.sql, rollup, windows);
    const withRanges: Array<{ period: Period; ranges: Map<string, RepairRange[]> }> = [];
    for (const period of periods) {
      const ranges = new Map<string, RepairRange[]>();
      for (const asset of rollup.upstream) {
        const segments =
          upstreams.get(asset)?.segments.filter((s) => s.end > period.start && s.start < period.end) ?? [];
        const owed = rangesOfPieces(piecesOf(period, segments));
        if (owed.length > 0) ranges.set(asset, owed);
      }
      if (ranges.size > 0) withRanges.push({ period, ranges });
    }
    const stored = await storedPeriodStates(
      this.options.sql,
      rollup.id,
      withRanges.map((w) => w.period.start),
    );
    const candidates: CandidatePeriod[] = [];
    for (const { period, ranges } of withRanges) {
      const state =
        (stored.get(period.start) as PeriodState | undefined) ?? derivedState(rollup, period, nowMs);
      const endMs = Math.floor(period.end / 1000);
      if (!repairOwed({ afterMs: repair.after }, deadline, { endMs, state }, nowMs)) continue;
      candidates.push({ rollupId: rollup.id, lo: period.start, hi: period.end, key: period.key, ranges });
    }
    return { candidates, backlog: older && older.start > floor ? older.start : null };
  }

  /** Plans and makes the requests of these candidates in one fenced transaction. */
  private async make(
    token: number,
    candidates: readonly CandidatePeriod[],
    now: Date,
    budget: number,
  ): Promise<{ made: number; deferred: number }> {
    const { sql, fence, log } = this.options;
    const assets = [...new Set(candidates.flatMap((c) => [...c.ranges.keys()]))];
    const within = normalize(candidates.flatMap((c) => [...c.ranges.values()].flat()));
    const result = await sql.begin(async (tx) => {
      await fence.verify(tx, token);
      await lockRepairAssets(tx, assets);
      const held = await heldRequests(tx, assets, within);
      const plan = planRepairs(
        candidates,
        held,
        (id) => this.byId.get(id)?.config.repair?.limit ?? 100,
        budget,
      );
      const made: MadeRequest[] = plan.made.map((m) => {
        const { rollup, config } = this.byId.get(m.rollupId)!;
        const repair = config.repair!;
        return {
          asset: m.asset,
          domain: rollup.domain,
          rollupId: m.rollupId,
          periodLo: m.lo,
          period: {
            start: rollup.calendar.formatPoint(m.lo),
            end: rollup.calendar.formatPoint(m.hi),
            key: m.key,
          },
          ranges: m.ranges,
          rangesTotal: m.rangesTotal,
          missingTotal: m.missingTotal,
          attempts: repair.attempts,
          everyMs: repair.every,
          target: redactTarget(repair.target),
          leaseToken: token,
        };
      });
      const ids = await makeRequests(tx, made, now, (m, id) => payloadOf(m, id, 1, m.ranges, now));
      await addWaiters(
        tx,
        plan.waiters.map((w) => ({
          id: 'id' in w.request ? w.request.id : ids[w.request.made]!,
          rollupId: w.rollupId,
          lo: w.lo,
          key: w.key,
        })),
      );
      return { made, ids, deferred: plan.deferred };
    });
    for (const [i, m] of result.made.entries()) {
      log.info(
        {
          repair_id: result.ids[i],
          asset: m.asset,
          rollup: m.rollupId,
          period: m.period?.key,
          ranges: m.ranges.length,
          ranges_total: m.rangesTotal,
          lease_token: token,
        },
        'repair requested',
      );
    }
    return { made: result.made.length, deferred: result.deferred };
  }

  private async follow(token: number, now: Date): Promise<{ changed: number; more: boolean }> {
    const { sql, fence, log, metrics } = this.options;
    const rows = await requestsToFollow(sql, now, FOLLOW_BATCH);
    if (rows.length === 0) return { changed: 0, more: false };
    const nowMs = now.getTime();
    const changes: Array<FollowChange & { row: FollowedRequest }> = rows.map((row) => {
      const remaining = row.ranges.flatMap((r) => {
        const inside = row.segments.filter((s) => s.end > r.start && s.start < r.end);
        return rangesOfPieces(piecesOf(r, inside));
      });
      const left = row.waiters.filter((w) => this.decided(w, nowMs));
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
      if (step.kind === 'final')
        return {
          row,
          id: row.id,
          state: step.state,
          seenSeq: row.lastSeq,
          leftWaiters: left,
          resend: null,
          nextAt: null,
          leaseToken: token,
        };
      const resend = step.resend
        ? {
            attempt: row.attempt + 1,
            ranges: step.ranges,
            payload: payloadOf(row, row.id, row.attempt + 1, step.ranges, now),
          }
        : null;
      return {
        row,
        id: row.id,
        state: step.state,
        seenSeq: row.lastSeq,
        leftWaiters: left,
        resend,
        nextAt: new Date(step.nextAt),
        leaseToken: token,
      };
    });
    await sql.begin(async (tx) => {
      await fence.verify(tx, token);
      await applyFollow(tx, changes, now);
    });
    let changed = 0;
    for (const c of changes) {
      if (c.state === c.row.state && c.resend === null) continue;
      changed++;
      const ctx = {
        repair_id: c.id,
        asset: c.row.asset,
        rollup: c.row.rollupId,
        state: c.state,
        lease_token: token,
      };
      if (c.resend)
        log.info(
          { ...ctx, attempt: c.resend.attempt, ranges: c.resend.ranges.length },
          'repair requested again',
        );
      else if (c.state === 'repaired') {
        metrics.repairSeconds.observe((nowMs - c.row.requestedAt.getTime()) / 1000);
        log.info(ctx, 'repaired');
      } else if (c.state === 'abandoned') log.warn({ ...ctx, attempts: c.row.attempts }, 'repair abandoned');
      else if (c.state === 'cancelled') log.info(ctx, 'repair cancelled: its periods were decided otherwise');
      else log.info(ctx, 'repair partly covered');
    }
    return { changed, more: rows.length === FOLLOW_BATCH };
  }

  /** A waiting period decided otherwise (triggered or missed), or of a rollup no longer configured. */
  private decided(w: { rollupId: string; lo: number; state: string | null }, nowMs: number): boolean {
    const runtime = this.byId.get(w.rollupId);
    if (!runtime) return true;
    const state =
      w.state ?? derivedState(runtime.rollup, runtime.rollup.calendar.periodContaining(w.lo), nowMs);
    return state === 'triggered' || state === 'missed';
  }

  private async deliver(
    signal: AbortSignal,
    now: Date,
  ): Promise<{ delivered: number; tried: number; more: boolean }> {
    const { sql, log, metrics } = this.options;
    const rows = await dueAttempts(sql, now, DELIVERY_BATCH);
    let next = 0;
    let delivered = 0;
    const worker = async () => {
      while (next < rows.length && !signal.aborted) {
        const row = rows[next++]!;
        const target = row.target as StoredTarget;
        const result = await this.targets.deliver(target, row.payload);
        const ref = { requestId: row.requestId, attempt: row.attempt };
        const ctx = {
          repair_id: row.requestId,
          attempt: row.attempt,
          idempotency_key: row.payload.idempotency_key,
          asset: row.payload.asset,
          target: target.type,
        };
        if (result.ok) {
          await recordAttemptDelivery(sql, ref, { ok: true }, new Date());
          metrics.repairAttempts.inc({ target: target.type, result: 'delivered' });
          log.info(ctx, 'repair request delivered');
          delivered++;
        } else if (result.retry) {
          const retryMs = Math.round(backoffMs(row.deliveries, 500, 60_000)) + 100;
          await recordAttemptDelivery(sql, ref, { ok: false, error: result.error, retryMs }, new Date());
          log.warn(
            { ...ctx, error: result.error, retry_in_ms: retryMs },
            'repair request delivery failed; will retry',
          );
        } else {
          await recordAttemptDelivery(
            sql,
            ref,
            { ok: false, error: result.error, retryMs: null },
            new Date(),
          );
          metrics.repairAttempts.inc({ target: target.type, result: 'refused' });
          log.error({ ...ctx, error: result.error }, 'repair request refused by the target');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, rows.length) }, worker));
    return { delivered, tried: rows.length, more: rows.length === DELIVERY_BATCH };
  }
}

/** Up to CHUNK periods ending at `end` (a period boundary), not before `floor`. */
function chunkBefore(rollup: Rollup, end: number, floor: number): Interval {
  let start = end;
  for (let i = 0; i < CHUNK && start > floor; i++) start = rollup.calendar.periodContaining(start - 1).start;
  return { start: Math.max(start, floor), end };
}

function payloadOf(
  request: Pick<MadeRequest, 'asset' | 'domain' | 'rollupId' | 'period' | 'rangesTotal' | 'missingTotal'>,
  id: number,
  attempt: number,
  ranges: readonly RepairRange[],
  requestedAt: Date,
): RepairPayload {
  return repairPayload({
    id,
    attempt,
    asset: request.asset,
    ranges,
    rangesTotal: request.rangesTotal,
    missingTotal: request.missingTotal,
    rollup: request.rollupId,
    period: request.period,
    format: (p) => formatPoint(request.domain, p),
    unitSeconds: request.domain === 'time' ? 1e-6 : 1,
    requestedAt,
  });
}
