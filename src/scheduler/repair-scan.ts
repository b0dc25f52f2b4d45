/**
 * The scan phase of the repair step (SPEC §15), lease holder only: the rollups with `repair:` whose
 * scan is due (a period of theirs passed `after`, their upstreams have new events, a new lease, or
 * ten minutes since the last: nothing else makes a range owed) look at their newest periods past `after` (and one older chunk of their backlog,
 * walking back to `begin` one scan at a time), read what their upstreams hold there, and make
 * requests for the not-complete ranges of the periods that owe them (core/repair.ts planRepairs),
 * newest first, at most the budget per pass, in a transaction fenced by the lease token.
 */
import type { RollupRuntime } from '../config/rollups.js';
import type { Period } from '../core/calendar.js';
import { piecesOf } from '../core/coverage.js';
import { normalize } from '../core/intervals.js';
import { derivedState, nextPassAt, passedBefore } from '../core/periods.js';
import type { PeriodState } from '../core/policy.js';
import {
  type CandidatePeriod,
  planRepairs,
  type RepairRange,
  rangesOfPieces,
  repairOwed,
} from '../core/repair.js';
import { attemptPayload } from '../core/repair-payload.js';
import type { Rollup } from '../core/rollup.js';
import type { Interval } from '../core/types.js';
import type { Fence } from '../lease/fence.js';
import { loadUpstreams } from '../store/assets/upstreams.js';
import { storedPeriodStates } from '../store/periods/reads.js';
import type { Sql } from '../store/pg/db.js';
import {
  addWaiters,
  heldRequests,
  lockRepairAssets,
  type MadeRequest,
  makeRequests,
} from '../store/repairs/repairs.js';
import type { Logger } from '../support/log.js';
import { redactTarget } from '../targets/secrets.js';

/** Periods per scanned chunk (the newest one, and one of the backlog). */
const CHUNK = 200;
/** Rollups scanned per pass at most; the others on the next passes. */
const SCANS_PER_PASS = 20;
/** A rollup nothing woke is scanned again this often, in case a notification was lost. */
const RESCAN_MS = 10 * 60_000;

export interface ScanOptions {
  readonly sql: Sql;
  readonly fence: Fence;
  readonly log: Logger;
  /** Every configured rollup (requests are made for those with `repair:`). */
  readonly byId: ReadonlyMap<string, RollupRuntime>;
  /** How soon after its last scan a rollup whose upstreams have new events scans again. */
  readonly scanMs: number;
  /** New requests per pass, all rollups together. */
  readonly budget: number;
}

interface Scan {
  nextAt: number;
  /** When it last scanned (scheduler clock, ms). */
  lastAt: number;
  /** Where the backlog walk continues (a period boundary); null: start again from the newest. */
  backlog: number | null;
}

export class RepairScan {
  private readonly repairing: readonly RollupRuntime[];
  /** The repairing rollups reading each asset. */
  private readonly byUpstream = new Map<string, string[]>();
  private scans = new Map<string, Scan>();
  private cursor = 0;

  constructor(private readonly options: ScanOptions) {
    this.repairing = [...options.byId.values()].filter((r) => r.config.repair && r.rollup.domain === 'time');
    for (const r of this.repairing)
      for (const asset of r.rollup.upstream)
        this.byUpstream.set(asset, [...(this.byUpstream.get(asset) ?? []), r.rollup.id]);
  }

  /** A new lease: every rollup scans at once, from its newest periods. */
  reset(): void {
    this.scans = new Map(this.repairing.map((r) => [r.rollup.id, { nextAt: 0, lastAt: 0, backlog: null }]));
  }

  /**
   * A commit notification (store/assets/commit.ts eventsPayload): the rollups reading its assets scan
   * again, at most every scanMs (a replay requirement may have made ranges owed in a triggered
   * period); a notification that names no assets wakes them all.
   */
  note(payload: string): void {
    let assets: unknown;
    try {
      assets = JSON.parse(payload);
    } catch {
      assets = null;
    }
    this.wake(
      Array.isArray(assets) ? assets.flatMap((a) => this.byUpstream.get(String(a)) ?? []) : undefined,
    );
  }

  /** These rollups (all: undefined) scan again as soon as scanMs after their last scan allows. */
  wake(ids: readonly string[] | undefined = undefined): void {
    for (const id of ids ?? [...this.scans.keys()]) {
      const scan = this.scans.get(id);
      if (scan) scan.nextAt = Math.min(scan.nextAt, scan.lastAt + this.options.scanMs);
    }
  }

  /** When the next scan is due (epoch ms). */
  wakeAt(): number {
    let at = Number.POSITIVE_INFINITY;
    for (const s of this.scans.values()) at = Math.min(at, s.nextAt);
    return at;
  }

  /** The due rollups' scans, round robin, SCANS_PER_PASS at a time; busy when more is owed now. */
  async scan(token: number, now: Date): Promise<{ made: number; busy: boolean }> {
    const nowMs = now.getTime();
    const due = this.repairing.filter((r) => (this.scans.get(r.rollup.id)?.nextAt ?? 0) <= nowMs);
    if (due.length === 0) return { made: 0, busy: false };
    const start = this.cursor % due.length;
    const picked = [...due.slice(start), ...due.slice(0, start)].slice(0, SCANS_PER_PASS);
    this.cursor += picked.length;
    const candidates: CandidatePeriod[] = [];
    const walked: Array<{ id: string; backlog: number | null }> = [];
    // Each asset's last_seq as the coverage was read (the lowest, if read more than once).
    const seqs = new Map<string, number>();
    for (const runtime of picked) {
      const found = await this.candidatesOf(runtime, nowMs);
      candidates.push(...found.candidates);
      walked.push({ id: runtime.rollup.id, backlog: found.backlog });
      for (const [asset, seq] of found.seqs) seqs.set(asset, Math.min(seq, seqs.get(asset) ?? seq));
    }
    const made =
      candidates.length === 0
        ? { made: 0, deferred: new Set<string>() }
        : await this.make(token, candidates, seqs, now, this.options.budget);
    for (const w of walked) {
      const scan = this.scans.get(w.id)!;
      scan.lastAt = nowMs;
      // Cut by the budget: the same chunks again on the next pass, before anything older (only
      // for the rollups whose periods were left out; the others were planned whole).
      if (made.deferred.has(w.id)) scan.nextAt = 0;
      else {
        scan.backlog = w.backlog;
        // Again when the next period passes `after`, when its upstreams have new events (note),
        // and every RESCAN_MS at least: nothing else makes a range owed.
        const { rollup, config } = this.options.byId.get(w.id)!;
        const nextOwed = nextPassAt(rollup, nowMs, config.repair!.after);
        scan.nextAt = w.backlog === null ? Math.min(nowMs + RESCAN_MS, nextOwed) : 0;
      }
    }
    return { made: made.made, busy: made.deferred.size > 0 || walked.some((w) => w.backlog !== null) };
  }

  /**
   * The owed periods of one rollup in its newest chunk and its next backlog chunk, with each
   * upstream's not-complete ranges; where its backlog walk goes on (null: done, from the top); and
   * each upstream's last_seq in the snapshot those ranges were read from.
   */
  private async candidatesOf(
    { rollup, config }: RollupRuntime,
    nowMs: number,
  ): Promise<{ candidates: CandidatePeriod[]; backlog: number | null; seqs: Map<string, number> }> {
    const repair = config.repair!;
    const deadline = rollup.policy.deadlineMs;
    // Periods starting before `end` ended `after` ago; those before `floor` passed their deadline.
    const end = passedBefore(rollup, nowMs, repair.after);
    const floor =
      deadline === undefined ? rollup.begin : Math.max(rollup.begin, passedBefore(rollup, nowMs, deadline));
    if (end <= floor) return { candidates: [], backlog: null, seqs: new Map() };
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
    const seqs = new Map([...upstreams].map(([asset, u]) => [asset, u.lastSeq]));
    return { candidates, backlog: older && older.start > floor ? older.start : null, seqs };
  }

  /**
   * Plans and makes the requests of these candidates in one fenced transaction. Each request has
   * seen its asset's events up to `seqs` (the coverage its ranges were read from), so the follow
   * leaves it alone until newer ones commit: a request made from what the index holds has nothing
   * to learn from it yet.
   */
  private async make(
    token: number,
    candidates: readonly CandidatePeriod[],
    seqs: ReadonlyMap<string, number>,
    now: Date,
    budget: number,
  ): Promise<{ made: number; deferred: ReadonlySet<string> }> {
    const { sql, fence, log, byId } = this.options;
    const assets = [...new Set(candidates.flatMap((c) => [...c.ranges.keys()]))];
    const within = normalize(candidates.flatMap((c) => [...c.ranges.values()].flat()));
    const result = await sql.begin(async (tx) => {
      await fence.verify(tx, token);
      await lockRepairAssets(tx, assets);
      const held = await heldRequests(tx, assets, within);
      const plan = planRepairs(candidates, held, (id) => byId.get(id)?.config.repair?.limit ?? 100, budget);
      const made: MadeRequest[] = plan.made.map((m) => {
        const { rollup, config } = byId.get(m.rollupId)!;
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
          seenSeq: seqs.get(m.asset) ?? 0,
        };
      });
      const ids = await makeRequests(tx, made, now, (m, id) => attemptPayload(m, id, 1, m.ranges, now));
      await addWaiters(
        tx,
        plan.waiters.map((w) => ({
          id: 'id' in w.request ? w.request.id : ids[w.request.made]!,
          rollupId: w.rollupId,
          lo: w.lo,
          key: w.key,
        })),
      );
      return { made, ids, deferred: plan.deferredRollups };
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
}

/** Up to CHUNK periods ending at `end` (a period boundary), not before `floor`. */
function chunkBefore(rollup: Rollup, end: number, floor: number): Interval {
  let start = end;
  for (let i = 0; i < CHUNK && start > floor; i++) start = rollup.calendar.periodContaining(start - 1).start;
  return { start: Math.max(start, floor), end };
}
