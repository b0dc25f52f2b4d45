/**
 * The scan phase of the repair step, lease holder only: the rollups with `repair:` whose
 * scan is due (a period of theirs passed `after`, their upstreams have new events, a new lease, or
 * ten minutes since the last: nothing else makes a range owed) look at their newest periods past
 * `after` (and one older chunk of their backlog, walking back to `begin` one scan at a time), read
 * what their upstreams hold there, and make requests for the not-complete ranges of the periods
 * that owe them (core/repairs/repair.ts planRepairs), newest first, at most the budget per pass, in a
 * transaction fenced by the lease token.
 *
 * A rollup whose periods were all planned (its walk done, none left out by the budget) is settled
 * at its upstreams' last_seq: while they hold no newer event, what it owed is requested or waits
 * on a request already, and only the periods passing `after` since can owe anything new. Its next
 * due scan first compares last_seq (one statement for every due rollup): unchanged, it looks at
 * those new periods alone, or at nothing. Planning again what is already held made every rescan
 * with open requests cost a fenced transaction per rollup (bench:repairs, 10,000 open).
 */
import type { RollupRuntime } from '../config/rollups.js';
import { piecesOf } from '../core/intervals/coverage.js';
import { normalize } from '../core/intervals/intervals.js';
import type { Period } from '../core/periods/calendar.js';
import { derivedState, nextPassAt, passedBefore } from '../core/periods/periods.js';
import type { PeriodState } from '../core/periods/policy.js';
import {
  type CandidatePeriod,
  planRepairs,
  type RepairRange,
  rangesOfPieces,
  repairOwed,
} from '../core/repairs/repair.js';
import { attemptPayload } from '../core/repairs/repair-payload.js';
import type { Rollup } from '../core/rollups/rollup.js';
import type { Interval } from '../core/types.js';
import type { Fence } from '../lease/fence.js';
import { lastSeqs } from '../store/assets/assets.js';
import { loadUpstreams } from '../store/assets/upstreams.js';
import { storedPeriodStates } from '../store/periods/reads.js';
import type { Sql } from '../store/pg/db.js';
import {
  addWaiters,
  heldRequests,
  lockRepairAssets,
  type MadeRequest,
  makeRequests,
} from '../store/repairs/requests.js';
import type { Logger } from '../support/log.js';
import { redactTarget } from '../targets/secrets.js';

/** Periods per scanned chunk (the newest one, and one of the backlog). */
const CHUNK = 200;
/** Rollups scanned per pass at most; the others on the next passes. */
const SCANS_PER_PASS = 20;
/**
 * A rollup nothing woke is looked at again this often, in case a notification was lost: settled,
 * it is scanned only if its upstreams' last_seq moved meanwhile.
 */
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
  /** The sum of its upstreams' last_seq as the first scan of the current walk read them. */
  walkSeqs: number | null;
  /**
   * Every period before `end` planned whole, its upstreams at `seqs` (the sum of their last_seq):
   * while the sum is unchanged, only periods from `end` on can owe a new request. Null: the next
   * scan looks at everything, from the newest chunk back.
   */
  settled: { seqs: number; end: number } | null;
}

const fresh_ = (): Scan => ({ nextAt: 0, lastAt: 0, backlog: null, walkSeqs: null, settled: null });

export class RepairScan {
  private repairing: readonly RollupRuntime[] = [];
  /** The repairing rollups reading each asset. */
  private byUpstream = new Map<string, string[]>();
  private scans = new Map<string, Scan>();
  private cursor = 0;

  constructor(private readonly options: ScanOptions) {
    this.use();
  }

  /**
   * The catalog changed (options.byId holds the new one): `fresh` rollups (added or changed) scan
   * from scratch at once, removed ones no more, the others keep where they were.
   */
  replace(fresh: readonly string[]): void {
    this.use();
    const changed = new Set(fresh);
    this.scans = new Map(
      this.repairing.map((r) => {
        const kept = changed.has(r.rollup.id) ? undefined : this.scans.get(r.rollup.id);
        return [r.rollup.id, kept ?? fresh_()];
      }),
    );
  }

  private use(): void {
    this.repairing = [...this.options.byId.values()].filter(
      (r) => r.config.repair && r.rollup.domain === 'time',
    );
    this.byUpstream = new Map();
    for (const r of this.repairing)
      for (const asset of r.rollup.upstream)
        this.byUpstream.set(asset, [...(this.byUpstream.get(asset) ?? []), r.rollup.id]);
  }

  /** A new lease: every rollup scans at once, from its newest periods. */
  reset(): void {
    this.scans = new Map(this.repairing.map((r) => [r.rollup.id, fresh_()]));
  }

  /**
   * A commit notification's assets (store/assets/commit-listen.ts committedAssets): the rollups
   * reading them scan again, at most every scanMs (a replay requirement may have made ranges owed
   * in a triggered period); a notification that names no assets ('any') wakes them all.
   */
  note(assets: readonly string[] | 'any'): void {
    this.wake(assets === 'any' ? undefined : assets.flatMap((a) => this.byUpstream.get(a) ?? []));
  }

  /**
   * These rollups (all: undefined) scan again, everything, as soon as scanMs after their last scan
   * allows.
   */
  wake(ids: readonly string[] | undefined = undefined): void {
    for (const id of ids ?? [...this.scans.keys()]) {
      const scan = this.scans.get(id);
      if (!scan) continue;
      scan.nextAt = Math.min(scan.nextAt, scan.lastAt + this.options.scanMs);
      scan.settled = null;
    }
  }

  /** When the next scan is due (epoch ms). */
  wakeAt(): number {
    let at = Number.POSITIVE_INFINITY;
    for (const s of this.scans.values()) at = Math.min(at, s.nextAt);
    return at;
  }

  /**
   * The due rollups' scans, round robin, SCANS_PER_PASS at a time (a settled rollup with nothing
   * new is not scanned); busy when more is owed now; `scanned`: the rollups whose coverage was read.
   */
  async scan(token: number, now: Date): Promise<{ made: number; busy: boolean; scanned: number }> {
    const nowMs = now.getTime();
    const due = await this.toScan(
      this.repairing.filter((r) => (this.scans.get(r.rollup.id)?.nextAt ?? 0) <= nowMs),
      nowMs,
    );
    if (due.length === 0) return { made: 0, busy: false, scanned: 0 };
    const start = this.cursor % due.length;
    const picked = [...due.slice(start), ...due.slice(0, start)].slice(0, SCANS_PER_PASS);
    this.cursor += picked.length;
    const candidates: CandidatePeriod[] = [];
    const walked: Array<{
      id: string;
      /** Only the periods past its settled end were looked at. */
      narrow: boolean;
      backlog: number | null;
      end: number;
      seqs: number | null;
    }> = [];
    // Each asset's last_seq as the coverage was read (the lowest, if read more than once).
    const seqs = new Map<string, number>();
    for (const runtime of picked) {
      const narrow = this.scans.get(runtime.rollup.id)!.settled !== null;
      const found = await this.candidatesOf(runtime, nowMs);
      candidates.push(...found.candidates);
      const { backlog, end } = found;
      walked.push({ id: runtime.rollup.id, narrow, backlog, end, seqs: found.seqs && sumOf(found.seqs) });
      for (const [asset, seq] of found.seqs ?? []) seqs.set(asset, Math.min(seq, seqs.get(asset) ?? seq));
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
        if (w.narrow) {
          // Settled up to this end now (unless a notification woke it meanwhile: everything next).
          if (scan.settled) scan.settled = { seqs: scan.settled.seqs, end: w.end };
        } else {
          if (scan.backlog === null) scan.walkSeqs = w.seqs; // this scan began a walk
          scan.settled =
            w.backlog === null && scan.walkSeqs !== null ? { seqs: scan.walkSeqs, end: w.end } : null;
        }
        scan.backlog = w.backlog;
        scan.nextAt = w.backlog === null ? this.nextLookAt(w.id, nowMs) : 0;
      }
    }
    const busy = made.deferred.size > 0 || walked.some((w) => w.backlog !== null);
    return { made: made.made, busy, scanned: picked.length };
  }

  /**
   * Which of the due rollups to scan: a settled one only if its upstreams' last_seq moved (then
   * everything again) or a period of it passed `after` since (then those periods alone); the
   * others are looked at again later, as after a scan.
   */
  private async toScan(due: readonly RollupRuntime[], nowMs: number): Promise<RollupRuntime[]> {
    const settled = due.filter((r) => this.scans.get(r.rollup.id)?.settled);
    if (settled.length === 0) return [...due];
    const current = await lastSeqs(this.options.sql, [...new Set(settled.flatMap((r) => r.rollup.upstream))]);
    return due.filter(({ rollup, config }) => {
      const scan = this.scans.get(rollup.id)!;
      if (!scan.settled) return true;
      if (sumOf(new Map(rollup.upstream.map((a) => [a, current.get(a) ?? 0]))) !== scan.settled.seqs) {
        scan.settled = null; // new events: any period may owe, or owe something else
        return true;
      }
      const end = passedBefore(rollup, nowMs, config.repair!.after);
      if (end <= scan.settled.end) {
        scan.nextAt = this.nextLookAt(rollup.id, nowMs);
        return false;
      }
      // More new periods than a chunk (a long pause): everything again.
      if (rollup.calendar.periodsOverlapping({ start: scan.settled.end, end }, CHUNK + 1).length > CHUNK)
        scan.settled = null;
      return true;
    });
  }

  /** Again when its next period passes `after`, when its upstreams have new events (note), and every RESCAN_MS at least. */
  private nextLookAt(id: string, nowMs: number): number {
    const { rollup, config } = this.options.byId.get(id)!;
    return Math.min(nowMs + RESCAN_MS, nextPassAt(rollup, nowMs, config.repair!.after));
  }

  /**
   * The owed periods of one rollup in its newest chunk and its next backlog chunk (settled: in the
   * periods past its settled end alone), with each upstream's not-complete ranges; where its
   * backlog walk goes on (null: done, from the top); the end of the periods looked at; and each
   * upstream's last_seq in the snapshot those ranges were read from.
   */
  private async candidatesOf(
    { rollup, config }: RollupRuntime,
    nowMs: number,
  ): Promise<{
    candidates: CandidatePeriod[];
    backlog: number | null;
    end: number;
    /** Null: nothing was read. */
    seqs: Map<string, number> | null;
  }> {
    const repair = config.repair!;
    const deadline = rollup.policy.deadlineMs;
    // Periods starting before `end` ended `after` ago; those before `floor` passed their deadline.
    const end = passedBefore(rollup, nowMs, repair.after);
    const floor =
      deadline === undefined ? rollup.begin : Math.max(rollup.begin, passedBefore(rollup, nowMs, deadline));
    const scan = this.scans.get(rollup.id)!;
    const since = scan.settled ? Math.max(scan.settled.end, floor) : floor;
    if (end <= since) return { candidates: [], backlog: null, end, seqs: null };
    let windows: Interval[];
    let older: Interval | null = null;
    if (scan.settled) windows = [{ start: since, end }];
    else {
      const newest = chunkBefore(rollup, end, floor);
      const from = scan.backlog === null ? newest.start : Math.min(scan.backlog, newest.start);
      older = from > floor ? chunkBefore(rollup, from, floor) : null;
      windows = older ? [older, newest] : [newest];
    }
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
    const seqs = new Map(rollup.upstream.map((asset) => [asset, upstreams.get(asset)?.lastSeq ?? 0]));
    return { candidates, backlog: older && older.start > floor ? older.start : null, end, seqs };
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

/** The sum of last_seq over a rollup's upstreams: each only grows, so any new event changes it. */
function sumOf(seqs: ReadonlyMap<string, number>): number {
  let sum = 0;
  for (const seq of seqs.values()) sum += seq;
  return sum;
}

/** Up to CHUNK periods ending at `end` (a period boundary), not before `floor`. */
function chunkBefore(rollup: Rollup, end: number, floor: number): Interval {
  let start = end;
  for (let i = 0; i < CHUNK && start > floor; i++) start = rollup.calendar.periodContaining(start - 1).start;
  return { start: Math.max(start, floor), end };
}
